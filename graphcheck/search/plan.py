"""What one ``graphcheck run`` is: :class:`RunPlan`, plain frozen values, built and checked once.

The command line turns its options into a plan with :func:`make_plan` (bad values are
InputErrors, before anything runs); ``-j N`` sends the same plan to every worker as JSON
(:meth:`RunPlan.to_dict`), each job's narrowed to its suite and seed (:meth:`RunPlan.for_job`).
:meth:`RunPlan.resolve` gives what runs: the backend's device, the engine, the
:class:`~graphcheck.check.checker.Checker` and the suites.

A plan never holds the example database's credentials on disk: ``to_dict`` redacts the
location unless ``secret``, and a worker takes it from the environment (:meth:`with_database`).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from graphcheck.check.checker import Checker, checker_for
from graphcheck.check.engines import EngineChoice, resolve_engine
from graphcheck.check.setup import CheckSetup
from graphcheck.check.watchdog import DEFAULT_HANG_LIMIT_S
from graphcheck.display import redacted
from graphcheck.errors import InputError
from graphcheck.search import suite_registry
from graphcheck.search.database import DatabaseSpec
from graphcheck.search.suite_registry import Suite

#: examples per suite of ``graphcheck run --profile`` (the test suite's profiles are pytest_plugin.TEST_PROFILE_EXAMPLES)
RUN_PROFILE_EXAMPLES = {"ci": 8, "dev": 20, "thorough": 200}
#: steps of the built-in demo scenarios (``graphcheck run --steps``)
DEFAULT_DEMO_STEPS = 20
#: The run's database location (a URL with its credentials), from the parent to its ``-j N`` workers.
DATABASE_ENV = "GRAPHCHECK_JOB_DATABASE"


@dataclass(frozen=True)
class SkippedSuite:
    """A suite not run: the engine lacks a capability it needs (``Suite.requires``)."""

    suite: str
    reason: str


@dataclass(frozen=True)
class RunPlan:
    """One run: which suites, how many examples at which seed, on which backend and engine; see the module docstring."""

    suites: tuple[str, ...]  # fuzzed in this order (those the engine can run)
    examples: int  # per suite
    seed: int = 0
    backend: str = "cpu"
    emulate: bool = False  # --emulate as given (cpu is emulated without it)
    emulator: str = "kernel"
    engine: str = "builtin"  # --engine SPEC; each process resolves it again
    setup: CheckSetup = CheckSetup()  # --model, --contract, --oracle
    faults: tuple[str, ...] = ()
    demo_steps: int = DEFAULT_DEMO_STEPS
    demos: bool = True  # check the built-in demo scenarios after the suites
    localise_demos: bool = True  # where a diverging demo scenario began; detection does not depend on it
    keep_going: bool = False  # fuzz every suite even after a divergence
    database: DatabaseSpec = DatabaseSpec("none")
    hang_limit: float = DEFAULT_HANG_LIMIT_S  # seconds one call into the engine may take (inf: unbounded)
    workers: int = 1  # -j: each fuzzes every suite with its own seed, seed .. seed + workers - 1
    skipped: tuple[SkippedSuite, ...] = field(default=())  # suites left out, each with why

    def for_job(self, suite: str | None, seed: int) -> RunPlan:
        """The plan of one ``-j N`` job: ``suite`` fuzzed at ``seed`` alone, or (None) the demo scenarios alone."""
        if suite is None:
            return dataclasses.replace(self, suites=(), workers=1)
        return dataclasses.replace(self, suites=(suite,), seed=seed, demos=False, workers=1)

    def resolve(self) -> ResolvedPlan:
        """What runs: the backend's device (a BackendError when it is missing here), the engine, the checker, the suites."""
        engine = resolve_engine(self.engine)
        checker = checker_for(self.backend, self.emulate, self.emulator, engine, self.setup, self.faults)
        known = suite_registry.load_suites()
        return ResolvedPlan(self, checker, engine, tuple(known[name] for name in self.suites))

    def to_dict(self, *, secret: bool = False) -> dict[str, Any]:
        """As JSON types; the database URL's credentials redacted unless ``secret`` (never written to disk)."""
        location = self.database.location if secret else redacted(self.database.location)
        return {
            **{f.name: getattr(self, f.name) for f in dataclasses.fields(self)},
            "suites": list(self.suites),
            "faults": list(self.faults),
            "setup": self.setup.to_dict(),
            "database": {"kind": self.database.kind, "location": location},
            "hang_limit": None if math.isinf(self.hang_limit) else self.hang_limit,
            "skipped": [{"suite": s.suite, "reason": s.reason} for s in self.skipped],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunPlan:
        data = dict(data)
        data["suites"] = tuple(data["suites"])
        data["faults"] = tuple(data["faults"])
        data["setup"] = CheckSetup.from_dict(data["setup"])
        data["database"] = DatabaseSpec(**data["database"])
        data["hang_limit"] = math.inf if data["hang_limit"] is None else float(data["hang_limit"])
        data["skipped"] = tuple(SkippedSuite(**s) for s in data["skipped"])
        return cls(**data)

    def with_database(self, environ: Mapping[str, str]) -> RunPlan:
        """This plan with the database location the parent put in ``environ`` (:data:`DATABASE_ENV`)."""
        location = environ.get(DATABASE_ENV)
        if not location or self.database.kind == "none":
            return self
        return dataclasses.replace(self, database=DatabaseSpec(self.database.kind, location))


@dataclass(frozen=True)
class ResolvedPlan:
    """A plan made runnable in this process."""

    plan: RunPlan
    checker: Checker  # backend, engine, setup and faults; no pool (each search keeps its own)
    engine: EngineChoice
    suites: tuple[Suite, ...]

    @property
    def backend(self) -> Any:
        """The backend's device (``graphcheck.capture.devices.Device``)."""
        return self.checker.backend


def make_plan(
    *,
    suites: Sequence[str] | None,
    examples: int,
    engine: str | None = None,
    faults: Sequence[str] | None = None,
    setup: CheckSetup | None = None,
    demo_steps: int = DEFAULT_DEMO_STEPS,
    **values: Any,
) -> RunPlan:
    """A checked plan: every name known, every number in range, the suites the engine cannot run left out
    (``skipped``; none left is an InputError). ``values``: the other fields of :class:`RunPlan`, as given."""
    chosen = pick_suites(suites)
    if not 1 <= examples <= 100_000:
        raise InputError(f"--examples must be in [1, 100000], got {examples}")
    if not 1 <= demo_steps <= 10_000:
        raise InputError(f"--steps must be in [1, 10000], got {demo_steps}")
    choice = resolve_engine(engine)
    runnable, skipped = runnable_suites(choice, chosen)
    plan = RunPlan(
        tuple(s.name for s in runnable),
        examples,
        engine=choice.spec,
        faults=check_faults(faults, choice),
        setup=setup or CheckSetup(),
        demo_steps=demo_steps,
        skipped=tuple(skipped),
        **values,
    )
    if not runnable:
        reasons = "; ".join(f"{s.suite}: {s.reason}" for s in skipped)
        raise InputError(f"no suite can run on engine {choice.spec}: {reasons}")
    return plan


def check_faults(names: Sequence[str] | None, engine: EngineChoice) -> tuple[str, ...]:
    """``--inject`` names, sorted; each must be a fault ``engine`` declares (``graphcheck faults --engine``)."""
    chosen = sorted(set(names or ()))
    known = engine.capabilities.fault_names
    unknown = [n for n in chosen if n not in known]
    if unknown:
        where = "" if engine.builtin else f" of engine {engine.spec}"
        raise InputError(f"unknown fault(s){where} {', '.join(unknown)}; known: {', '.join(known) or 'none'}")
    return tuple(chosen)


def pick_suites(names: Sequence[str] | None) -> list[Suite]:
    """The suites ``names`` (in order, each once), or every suite; an unknown name is an InputError."""
    known = suite_registry.load_suites()  # looked up when called: a test may put its own suites there
    if not names:
        return list(known.values())
    unknown = [n for n in names if n not in known]
    if unknown:
        raise InputError(f"unknown suite {', '.join(unknown)}; known: {', '.join(known)}")
    return [known[n] for n in dict.fromkeys(names)]


def skip_reason(engine: EngineChoice, suite: Suite) -> SkippedSuite | None:
    """Why ``suite`` cannot run on ``engine``, or None when it can."""
    from graphcheck.capabilities import REQUIREMENTS

    missing = engine.capabilities.missing(suite.requires)
    if not missing:
        return None
    needs = "; ".join(f"{name} ({REQUIREMENTS[name]})" for name in missing)
    return SkippedSuite(suite.name, f"engine {engine.spec} does not declare {needs}")


def runnable_suites(engine: EngineChoice, suites: Sequence[Suite]) -> tuple[list[Suite], list[SkippedSuite]]:
    """``suites`` split into those ``engine`` can run and those it cannot (with the reason)."""
    run: list[Suite] = []
    skipped: list[SkippedSuite] = []
    for suite in suites:
        reason = skip_reason(engine, suite)
        if reason is None:
            run.append(suite)
        else:
            skipped.append(reason)
    return run, skipped


__all__ = [
    "DATABASE_ENV",
    "DEFAULT_DEMO_STEPS",
    "RUN_PROFILE_EXAMPLES",
    "ResolvedPlan",
    "RunPlan",
    "SkippedSuite",
    "check_faults",
    "make_plan",
    "pick_suites",
    "runnable_suites",
    "skip_reason",
]
