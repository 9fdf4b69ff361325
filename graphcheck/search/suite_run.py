"""The suite runner: one plan's suites at its seed, then its demo scenarios; ``-j 1`` and every ``-j N`` job.

Each suite is fuzzed in its order with the plan's examples and seed; the run stops
at the first suite that diverges (unless ``keep_going``, and always when the device
was lost). Then, when the plan has demos and no suite diverged (or with
``keep_going``), the built-in demo scenarios are checked once each. ``graphcheck
run -j 1`` runs its whole plan through one :class:`SuiteRunner`; ``-j N`` runs one
per job in its workers (the plan narrowed by ``RunPlan.for_job``); ``graphcheck
catalog --seeds`` runs one per fault and seed, so the catalog measures what a run
at that seed would catch. Each suite (and the demo scenarios) makes one
:class:`~graphcheck.search.result.SuiteResult`.

An error that is not a finding (an engine that breaks the adapter protocol, one that
aborts outside a lockstep run, the memory limit) ends the run as it is raised;
:func:`run_job` records it in the job's result instead, for the parent to raise again.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from hypothesis.database import ExampleDatabase

from graphcheck.check.checker import Checker
from graphcheck.check.memory_gate import MemoryLimitError
from graphcheck.check.records import CheckOutcome
from graphcheck.errors import GraphcheckError
from graphcheck.search.builtin import builtin_scenarios
from graphcheck.search.database import database_key
from graphcheck.search.fuzz import (
    ExampleHook,
    ProgressHook,
    SearchHooks,
    SearchInterrupted,
    SearchOptions,
    fuzz_suite,
    label_found,
    write_pending,
)
from graphcheck.search.plan import ResolvedPlan, RunPlan
from graphcheck.search.result import BUILTIN, Stop, SuiteResult
from graphcheck.search.suite_registry import Suite


@dataclass(frozen=True)
class RunHooks:
    """Callbacks of a run; each may be None."""

    start_suite: Callable[[str, int], None] | None = None  # (suite, examples)
    end_suite: Callable[[SuiteResult], None] | None = None
    on_example: ExampleHook | None = None  # every lockstep run of a search, shrink attempts included
    on_progress: ProgressHook | None = None
    on_demo: ExampleHook | None = None  # every demo scenario checked
    device_lost: Callable[[CheckOutcome], None] | None = None  # a search stopped there, unshrunk


@dataclass
class SuiteRunner:
    """A run over ``suites`` (the plan's, resolved); ``results`` holds what it found so far, even when it raised."""

    plan: RunPlan
    checker: Checker
    suites: Sequence[Suite]
    pending: Path  # the scenario about to run, on disk before the engine sees it
    hooks: RunHooks = RunHooks()
    database: ExampleDatabase | None = None
    results: list[SuiteResult] = field(default_factory=list)

    @classmethod
    def of(
        cls,
        resolved: ResolvedPlan,
        pending: Path,
        hooks: RunHooks | None = None,
        database: ExampleDatabase | None = None,
    ) -> SuiteRunner:
        return cls(resolved.plan, resolved.checker, resolved.suites, pending, hooks or RunHooks(), database)

    def run(self) -> list[SuiteResult]:
        """Suites first (a divergence comes back shrunk), then the demo scenarios; see the module docstring.

        A Ctrl-C inside a search raises ``SearchInterrupted``, its result (labelled ``interrupted``)
        already in ``results``; the memory gate's refusal names the file its scenario is kept in.
        """
        try:
            for suite in self.suites:
                if self._fuzz(suite):
                    break
            if self.plan.demos and (self.plan.keep_going or not any(r.outcomes for r in self.results)):
                self._demos()
        except SearchInterrupted as stop:
            if stop.result.outcome is not None:
                label_found(stop.result.outcome, stop.result.suite, interrupted=True)
            self.results.append(stop.result)
            raise
        except MemoryLimitError as refused:  # the gate's refusal is the run's end; its scenario stays on disk
            raise refused.kept(self.pending if self.pending.is_file() else None) from None
        return self.results

    def _fuzz(self, suite: Suite) -> bool:
        """Fuzz one suite; whether the run stops here."""
        plan, hooks, checker = self.plan, self.hooks, self.checker
        if hooks.start_suite is not None:
            hooks.start_suite(suite.name, plan.examples)
        result = fuzz_suite(
            suite.name,
            checker.strategy(suite.strategy()),
            checker,
            examples=plan.examples,
            seed=plan.seed,
            pending_path=self.pending,
            hooks=SearchHooks(hooks.on_example, hooks.on_progress),
            options=SearchOptions(database=self.database, database_key=database_key(suite.name, checker)),
        )
        self.results.append(result)
        if hooks.end_suite is not None:
            hooks.end_suite(result)
        if result.outcome is None:
            return False
        lost = label_found(result.outcome, suite.name)
        if lost and hooks.device_lost is not None:
            hooks.device_lost(result.outcome)
        return lost or not plan.keep_going

    def _demos(self) -> None:
        """The built-in demo scenarios: a fixed smoke check of every verify mode (one result, even when stopped)."""
        outcomes: list[CheckOutcome] = []
        started = time.perf_counter()
        try:
            for scenario in builtin_scenarios(self.plan.demo_steps):
                scenario = self.checker.prepare(scenario)
                write_pending(self.pending, scenario)
                outcome = self.checker.run(scenario, localise=self.plan.localise_demos)
                if self.hooks.on_demo is not None:
                    self.hooks.on_demo(scenario, outcome)
                outcomes.append(outcome)
                if outcome.engine_error is not None or outcome.hung is not None:  # nothing more runs on this engine
                    return
        finally:
            if outcomes:
                self.results.append(demo_result(outcomes, self.plan.seed, time.perf_counter() - started))


def demo_result(outcomes: Sequence[CheckOutcome], seed: int = 0, elapsed_s: float = 0.0) -> SuiteResult:
    """The demo scenarios' result: every one's outcome."""
    steps = sum(o.steps_run for o in outcomes)
    return SuiteResult(BUILTIN, seed, len(outcomes), steps, elapsed_s, tuple(outcomes))


def run_plan(
    resolved: ResolvedPlan, pending: Path, hooks: RunHooks | None = None, database: ExampleDatabase | None = None
) -> list[SuiteResult]:
    """Run a (job's) plan to its end; an error that is not a finding ends it as the last result's ``stop``
    (what a ``-j N`` worker sends back): the parent raises it again, so ``-j 1`` and ``-j N`` end alike."""
    runner = SuiteRunner.of(resolved, pending, hooks, database)
    try:
        runner.run()
    except GraphcheckError as err:
        suite = resolved.plan.suites[len(runner.results)] if len(runner.results) < len(resolved.suites) else BUILTIN
        runner.results.append(SuiteResult(suite, resolved.plan.seed, stop=Stop.of(err)))
    return runner.results


__all__ = ["RunHooks", "SuiteRunner", "demo_result", "run_plan"]
