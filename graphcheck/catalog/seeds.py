"""``graphcheck catalog --seeds N``: is each fault caught by ``graphcheck run --profile P`` at seed s?

For each fault and each seed s of ``first_seed .. first_seed + N - 1``, ``run_seed``
does what ``graphcheck run --profile P --seed s --inject FAULT --database none``
does (``graphcheck.search.suite_run.SuiteRunner``): every suite in its order with the
profile's examples, stopping at the first that diverges, then the demo scenarios
when none did. Detection is the first failing example: the run stops there, so
nothing is shrunk or localised, and the examples drawn up to it are the ones
``run`` would draw. The clean engine runs at every seed the same way; any
divergence there is a false positive.

The jobs are independent: on an emulated backend they spread over ``workers``
spawned processes; on a real device each runs in a process of its own, so a
device-side assert cannot outlive the job that raised it.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

from graphcheck.catalog.run import CLEAN_LABEL
from graphcheck.check.setup import CheckSetup

if TYPE_CHECKING:  # the search pulls in Hypothesis; the CLI parser reads this module's defaults
    from graphcheck.check.records import CheckOutcome
    from graphcheck.scenario import Scenario

DEFAULT_PROFILE = "ci"


@dataclass(frozen=True)
class SeedsSettings:
    """``--seeds N`` from ``--seed`` on, each seed a ``graphcheck run --profile`` with ``examples`` per suite."""

    seeds: int
    examples: int  # per suite: the profile's (``RUN_PROFILE_EXAMPLES``)
    first_seed: int = 0
    profile: str = DEFAULT_PROFILE
    setup: CheckSetup = CheckSetup()
    workers: int = 1
    engine: str = "builtin"  # --engine SPEC, resolved again in each worker process

    @property
    def seed_list(self) -> tuple[int, ...]:
        return tuple(range(self.first_seed, self.first_seed + self.seeds))


@dataclass(frozen=True)
class SeedRun:
    """One run at one seed, up to its first diverging example (or to its end)."""

    fault: str  # "" = the clean engine
    seed: int
    caught_by: str | None  # the suite (or demo scenario) whose example diverged first; None: the run was clean
    examples: int  # lockstep runs of the whole run, up to and including the diverging one
    seconds: float  # from the run's start to that divergence (or to the run's end)
    suite_example: int | None = None  # lockstep runs of its suite up to and including the diverging one
    kind: str | None = None  # of the first failing divergence
    headline: str | None = None

    @property
    def caught(self) -> bool:
        return self.caught_by is not None


def _median(values: Sequence[float]) -> float | None:
    return float(statistics.median(values)) if values else None


@dataclass(frozen=True)
class FaultSeeds:
    """One fault over every seed."""

    fault: str
    bug_class: int
    signal: str
    runs: tuple[SeedRun, ...]

    @property
    def caught(self) -> int:
        return sum(r.caught for r in self.runs)

    @property
    def detected(self) -> bool:
        """Caught at every seed."""
        return self.caught == len(self.runs)

    @property
    def missed_seeds(self) -> tuple[int, ...]:
        return tuple(r.seed for r in self.runs if not r.caught)

    @property
    def median_examples(self) -> float | None:
        return _median([r.examples for r in self.runs if r.caught])

    @property
    def median_seconds(self) -> float | None:
        return _median([r.seconds for r in self.runs if r.caught])


@dataclass(frozen=True)
class CleanSeeds:
    """The engine with no fault over every seed: no run may diverge."""

    runs: tuple[SeedRun, ...]

    @property
    def clean_runs(self) -> int:
        return sum(not r.caught for r in self.runs)

    @property
    def clean(self) -> bool:
        return self.clean_runs == len(self.runs)

    @property
    def false_positive_seeds(self) -> tuple[int, ...]:
        return tuple(r.seed for r in self.runs if r.caught)


@dataclass(frozen=True)
class SeedsSummary:
    """The totals of a ``--seeds`` catalog."""

    faults: int
    caught_everywhere: int  # faults caught at every seed
    pairs: int  # (fault, seed) pairs
    pairs_caught: int
    clean_runs: int
    clean_runs_clean: int
    median_examples: float | None  # to the first divergence, over the caught pairs
    median_seconds: float | None

    @property
    def pair_rate(self) -> float:
        return self.pairs_caught / self.pairs if self.pairs else 0.0


@dataclass(frozen=True)
class SeedsResult:
    backend: str
    description: str
    settings: SeedsSettings
    faults: tuple[FaultSeeds, ...]
    clean: CleanSeeds
    elapsed_s: float

    @property
    def summary(self) -> SeedsSummary:
        caught = [r for f in self.faults for r in f.runs if r.caught]
        return SeedsSummary(
            faults=len(self.faults),
            caught_everywhere=sum(f.detected for f in self.faults),
            pairs=sum(len(f.runs) for f in self.faults),
            pairs_caught=len(caught),
            clean_runs=len(self.clean.runs),
            clean_runs_clean=self.clean.clean_runs,
            median_examples=_median([r.examples for r in caught]),
            median_seconds=_median([r.seconds for r in caught]),
        )

    @property
    def passed(self) -> bool:
        """Every fault caught at every seed and every clean run clean: exit code 0."""
        return all(f.detected for f in self.faults) and self.clean.clean


class _Stop(BaseException):
    """Ends a run at its first diverging example; a BaseException, so Hypothesis neither catches nor shrinks it."""


class _FirstDivergence:
    """Counts a run's examples and stops it at the first that diverges."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.examples = self.in_suite = 0
        self.suite = ""
        self.found: tuple[str, CheckOutcome, float] | None = None

    def start_suite(self, suite: str, examples: int) -> None:
        self.suite, self.in_suite = suite, 0

    def example(self, scenario: Scenario, outcome: CheckOutcome) -> None:
        self.in_suite += 1
        self._count(self.suite, outcome)

    def demo(self, scenario: Scenario, outcome: CheckOutcome) -> None:
        self.in_suite = 1
        self._count(scenario.name, outcome)

    def _count(self, where: str, outcome: CheckOutcome) -> None:
        self.examples += 1
        if not outcome.clean:
            self.found = (where, outcome, time.perf_counter() - self.started)
            raise _Stop

    def result(self, fault: str, seed: int) -> SeedRun:
        if self.found is None:
            return SeedRun(fault, seed, None, self.examples, time.perf_counter() - self.started)
        where, outcome, seconds = self.found
        first = outcome.first
        kind = first.kind if first is not None else "error"
        headline = first.headline() if first is not None else str(outcome.device_error or "")
        return SeedRun(fault, seed, where, self.examples, seconds, self.in_suite, kind, headline)


def pending_path(work_dir: Path, fault: str, seed: int) -> Path:
    """Where the scenario a job is about to run is kept, named by fault and seed, so a crash says which."""
    return work_dir / f"pending-{fault or CLEAN_LABEL}-seed{seed}.json"


def run_seed(fault: str, seed: int, backend: Any, cfg: SeedsSettings, work_dir: Path) -> SeedRun:
    """``graphcheck run --profile P --seed SEED --inject FAULT --database none`` up to its first divergence."""
    from graphcheck.check.checker import Checker
    from graphcheck.check.engines import resolve_engine
    from graphcheck.search.plan import ResolvedPlan, RunPlan, runnable_suites
    from graphcheck.search.suite_registry import load_suites
    from graphcheck.search.suite_run import RunHooks, SuiteRunner

    pending = pending_path(work_dir, fault, seed)
    faults = (fault,) if fault else ()
    engine = resolve_engine(cfg.engine)
    suites, _ = runnable_suites(engine, list(load_suites().values()))
    names = tuple(s.name for s in suites)
    plan = RunPlan(names, cfg.examples, seed, engine=engine.spec, setup=cfg.setup, faults=faults, localise_demos=False)
    resolved = ResolvedPlan(plan, Checker(backend, engine, cfg.setup, faults), engine, tuple(suites))
    counter = _FirstDivergence()
    hooks = RunHooks(start_suite=counter.start_suite, on_example=counter.example, on_demo=counter.demo)
    try:
        SuiteRunner.of(resolved, pending, hooks).run()
    except _Stop:
        pass
    pending.unlink(missing_ok=True)  # the run came back: nothing crashed
    return counter.result(fault, seed)


Job = tuple[str, int]  # (fault, seed); "" = the clean engine
DoneHook = Callable[[SeedRun], None]


def _resolved_job(
    job: Job, backend_name: str, emulate: bool, cfg: SeedsSettings, work_dir: Path, emulator: str = "kernel"
) -> SeedRun:
    """One job in a worker process: the backend resolved there, torch on one thread."""
    from graphcheck.capture.devices import resolve
    from graphcheck.check.threads import single_threaded

    backend = resolve(backend_name, emulate=emulate, emulator=emulator)
    with single_threaded(backend):
        return run_seed(*job, backend, cfg, work_dir)


def _in_process(jobs: Sequence[Job], backend: Any, cfg: SeedsSettings, work_dir: Path) -> Iterator[SeedRun]:
    from graphcheck.check.threads import single_threaded  # the tiny model runs ~4x faster on one torch thread

    with single_threaded(backend):
        for fault, seed in jobs:
            yield run_seed(fault, seed, backend, cfg, work_dir)


def _in_pool(
    jobs: Sequence[Job], backend: Any, cfg: SeedsSettings, work_dir: Path, workers: int, per_job: bool
) -> Iterator[SeedRun]:
    """The jobs over ``workers`` spawned processes, as they finish; ``per_job``: a fresh process for each."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    context = multiprocessing.get_context("spawn")
    args = (backend.name, bool(backend.emulated), cfg, work_dir, getattr(backend, "emulator", "kernel"))
    if per_job:
        for job in jobs:
            with ProcessPoolExecutor(1, mp_context=context) as pool:
                yield pool.submit(_resolved_job, job, *args).result()
        return
    with ProcessPoolExecutor(workers, mp_context=context) as pool:
        futures = [pool.submit(_resolved_job, job, *args) for job in jobs]
        try:
            for future in as_completed(futures):
                yield future.result()
        finally:
            for future in futures:
                future.cancel()


def run_seeds(
    names: Sequence[str], backend: Any, cfg: SeedsSettings, work_dir: Path, *, on_done: DoneHook | None = None
) -> SeedsResult:
    """The clean engine, then every named fault, each at every seed; ``on_done(run)`` as each finishes."""
    from graphcheck.check.engines import resolve_engine

    declared = resolve_engine(cfg.engine).capabilities

    started = time.perf_counter()
    jobs = [(fault, seed) for fault in ("", *names) for seed in cfg.seed_list]
    emulated = getattr(backend, "emulated", True)
    if emulated and cfg.workers <= 1:
        finished = _in_process(jobs, backend, cfg, work_dir)
    else:
        finished = _in_pool(jobs, backend, cfg, work_dir, cfg.workers, per_job=not emulated)
    runs: dict[Job, SeedRun] = {}
    for run in finished:
        runs[(run.fault, run.seed)] = run
        if on_done is not None:
            on_done(run)

    def of(fault: str) -> tuple[SeedRun, ...]:
        return tuple(runs[(fault, seed)] for seed in cfg.seed_list)

    faults = tuple(FaultSeeds(n, declared.fault(n).bug_class, declared.fault(n).signal, of(n)) for n in names)
    elapsed = time.perf_counter() - started
    return SeedsResult(backend.name, backend.description, cfg, faults, CleanSeeds(of("")), elapsed)


__all__ = [
    "DEFAULT_PROFILE",
    "CleanSeeds",
    "FaultSeeds",
    "SeedRun",
    "SeedsResult",
    "SeedsSettings",
    "SeedsSummary",
    "pending_path",
    "run_seed",
    "run_seeds",
]
