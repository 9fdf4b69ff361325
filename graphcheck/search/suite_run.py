"""One seed's run over the suites, as ``graphcheck run -j 1`` makes it.

Each suite is fuzzed in its order with the same examples and seed; the run
stops at the first suite that diverges (unless ``keep_going``, and always when
the device was lost). Then, when no suite diverged (or with ``keep_going``),
the built-in demo scenarios are checked once each. ``graphcheck run`` and
``graphcheck catalog --seeds`` both run this, so the catalog measures what a
run at that seed would catch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from hypothesis.database import ExampleDatabase

from graphcheck.check.checker import Checker
from graphcheck.check.records import CheckOutcome
from graphcheck.search.builtin import builtin_scenarios
from graphcheck.search.database import database_key
from graphcheck.search.fuzz import ExampleHook, FuzzResult, ProgressHook, fuzz_suite, label_found, write_pending
from graphcheck.search.suite_registry import Suite

#: examples per suite of ``graphcheck run --profile`` (the test suite's profiles are pytest_plugin.TEST_PROFILE_EXAMPLES)
RUN_PROFILE_EXAMPLES = {"ci": 8, "dev": 20, "thorough": 200}
#: steps of the built-in demo scenarios (``graphcheck run --steps``)
DEFAULT_DEMO_STEPS = 20


@dataclass(frozen=True)
class SuiteRunSpec:
    """What one run over the suites checks, and how."""

    checker: Checker  # backend, engine, setup and faults
    suites: Sequence[Suite]
    examples: int  # per suite
    seed: int
    pending_path: Path  # the scenario about to run, on disk before the engine sees it
    database: ExampleDatabase | None = None
    keep_going: bool = False
    demo_steps: int = DEFAULT_DEMO_STEPS
    localise_demos: bool = True  # where a diverging demo scenario began; detection does not depend on it


@dataclass(frozen=True)
class SkippedSuite:
    """A suite not run: the engine lacks a capability it needs (``Suite.requires``)."""

    suite: str
    reason: str


def skip_reason(checker: Checker, suite: Suite) -> SkippedSuite | None:
    """Why ``suite`` cannot run on the checker's engine, or None when it can."""
    from graphcheck.capabilities import REQUIREMENTS

    missing = checker.missing_for(suite.requires)
    if not missing:
        return None
    needs = "; ".join(f"{name} ({REQUIREMENTS[name]})" for name in missing)
    return SkippedSuite(suite.name, f"engine {checker.engine.spec} does not declare {needs}")


def runnable_suites(checker: Checker, suites: Sequence[Suite]) -> tuple[list[Suite], list[SkippedSuite]]:
    """``suites`` split into those the checker's engine can run and those it cannot (with the reason)."""
    run: list[Suite] = []
    skipped: list[SkippedSuite] = []
    for suite in suites:
        reason = skip_reason(checker, suite)
        if reason is None:
            run.append(suite)
        else:
            skipped.append(reason)
    return run, skipped


@dataclass(frozen=True)
class SuiteRunHooks:
    """Callbacks of a run; each may be None."""

    start_suite: Callable[[str, int], None] | None = None  # (suite, examples)
    end_suite: Callable[[FuzzResult], None] | None = None
    on_example: ExampleHook | None = None  # every lockstep run of a search, shrink attempts included
    on_progress: ProgressHook | None = None
    on_demo: ExampleHook | None = None  # every demo scenario checked
    device_lost: Callable[[CheckOutcome], None] | None = None  # a search stopped there, unshrunk


@dataclass
class SuiteRun:
    """A run over the suites; ``outcomes`` and ``fuzzed`` hold what it found so far, even when it raised."""

    spec: SuiteRunSpec
    hooks: SuiteRunHooks = SuiteRunHooks()
    outcomes: list[CheckOutcome] = field(default_factory=list)
    fuzzed: list[FuzzResult] = field(default_factory=list)

    def run(self) -> None:
        """Suites first (a divergence comes back shrunk), then the demo scenarios; see the module docstring.

        A Ctrl-C inside a search raises ``graphcheck.search.fuzz.SearchInterrupted``, not yet in ``fuzzed``.
        """
        for suite in self.spec.suites:
            if self._fuzz(suite):
                break
        if self.spec.keep_going or not self.outcomes:
            self._demos()

    def _fuzz(self, suite: Suite) -> bool:
        """Fuzz one suite; whether the run stops here."""
        spec, hooks = self.spec, self.hooks
        if hooks.start_suite is not None:
            hooks.start_suite(suite.name, spec.examples)
        checker = spec.checker
        result = fuzz_suite(
            suite.name,
            checker.strategy(suite.strategy()),
            checker,
            examples=spec.examples,
            seed=spec.seed,
            pending_path=spec.pending_path,
            on_example=hooks.on_example,
            on_progress=hooks.on_progress,
            database=spec.database,
            database_key=database_key(suite.name, checker),
        )
        self.fuzzed.append(result)
        if hooks.end_suite is not None:
            hooks.end_suite(result)
        if result.outcome is None:
            return False
        lost = label_found(result.outcome, suite.name)
        self.outcomes.append(result.outcome)
        if lost and hooks.device_lost is not None:
            hooks.device_lost(result.outcome)
        return lost or not spec.keep_going

    def _demos(self) -> None:
        """The built-in demo scenarios: a fixed smoke check of every verify mode."""
        spec = self.spec
        for scenario in builtin_scenarios(spec.demo_steps):
            scenario = spec.checker.prepare(scenario)
            write_pending(spec.pending_path, scenario)
            outcome = spec.checker.run(scenario, localise=spec.localise_demos)
            if self.hooks.on_demo is not None:
                self.hooks.on_demo(scenario, outcome)
            self.outcomes.append(outcome)
            if outcome.engine_error is not None or outcome.hung is not None:  # nothing more runs on this engine
                return


__all__ = [
    "DEFAULT_DEMO_STEPS",
    "RUN_PROFILE_EXAMPLES",
    "SkippedSuite",
    "SuiteRun",
    "SuiteRunHooks",
    "SuiteRunSpec",
    "runnable_suites",
    "skip_reason",
]
