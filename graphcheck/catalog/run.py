"""The detection benchmark: does graphcheck catch every injectable fault, and does a peer test?

For each fault of ``graphcheck.backends.engine.faults.FAULTS`` (or the ones chosen),
``run_catalog`` fuzzes with the fault injected until the first divergence or
the per-fault budget (``graphcheck.search.timed_search``), shrinks what it found under
a shrink budget, and runs the peer-style baseline (``graphcheck.catalog.baseline``)
with the same fault. The clean engine, first, gets the same search budget over
every suite, and the baseline, and must show nothing.

Which suites a fault is fuzzed with (``suite_plan``): the suites whose
``bug_classes`` hold the fault's class, in registry order, then ``all``; the
search cycles through them in slices with fresh seeds until the budget ends.

The shrunk scenario's first divergence is localised (``graphcheck.check.localise``),
and ``localisation_matches`` checks the place against what the fault declares it
breaks (``Fault.breaks``). A miss is shown, never counted against the verdict:
detection alone decides ``CatalogResult.passed``.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from graphcheck.catalog.baseline import BaselineResult, run_baseline
from graphcheck.check.checker import Checker
from graphcheck.check.engines import resolve_engine
from graphcheck.check.setup import CheckSetup
from graphcheck.search.plan import runnable_suites
from graphcheck.search.suite_registry import load_suites

if TYPE_CHECKING:  # the search pulls in Hypothesis; the CLI parser reads this module's defaults
    from graphcheck.check.records import CheckOutcome, Localisation
    from graphcheck.search.timed_search import SearchResult

#: Seconds of fuzzing per fault, shrinking excluded; every fault is caught well within it on cpu.
DEFAULT_BUDGET_S = 60.0
#: Seconds of shrinking per detected fault; past it the smallest failing scenario seen is kept.
DEFAULT_SHRINK_S = 20.0
#: Hypothesis examples per suite before the search moves to the next suite of the plan.
SLICE_EXAMPLES = 25
#: The clean engine's plan is every suite: smaller slices (the ``ci`` profile's 8) reach them all soon.
CLEAN_SLICE_EXAMPLES = 8
GENERAL_SUITE = "all"
CLEAN_LABEL = "clean"  # the clean engine's label in seeds and file names


@dataclass(frozen=True)
class CatalogSettings:
    budget_s: float = DEFAULT_BUDGET_S
    shrink_s: float = DEFAULT_SHRINK_S
    seed: int = 0
    slice_examples: int = SLICE_EXAMPLES
    clean_slice_examples: int = CLEAN_SLICE_EXAMPLES
    setup: CheckSetup = CheckSetup()  # --model, --contract, --oracle of graphcheck's search (not the baseline)
    engine: str = "builtin"  # --engine SPEC, resolved again in each process (graphcheck.check.engines)
    clean_budget_s: float | None = None  # the clean engine's fuzzing budget (None: budget_s)

    @property
    def clean_budget(self) -> float:
        """Seconds the clean engine is fuzzed: no fault ends its search early, so it spends all of them."""
        return self.budget_s if self.clean_budget_s is None else self.clean_budget_s


@dataclass(frozen=True)
class StepsToDivergence:
    """Decode steps up to and including the first failing divergence (its ``step + 1``), None without one."""

    detection: int | None  # of the example that first failed, as the search drew it
    shrunk: int | None  # of the shrunk scenario


def search_localisation(search: SearchResult) -> Localisation | None:
    """Where the shrunk scenario's first divergence began; None when nothing was found (or localised)."""
    return search.shrunk.outcome.localisation if search.shrunk is not None else None


def steps_to_divergence(search: SearchResult) -> StepsToDivergence:
    def steps(outcome: CheckOutcome | None) -> int | None:
        first = outcome.first if outcome is not None else None
        return first.step + 1 if first is not None else None

    det, shrunk = search.detection, search.shrunk
    return StepsToDivergence(
        steps(det.outcome if det is not None else None), steps(shrunk.outcome if shrunk is not None else None)
    )


def localisation_matches(localisation: Localisation | None, declared: Sequence[str]) -> bool | None:
    """Does the localisation name one of the kernels, functions or buffers a fault declares it breaks?

    None (unknown) when there is no localisation, or nothing is declared to check it against.
    """
    if localisation is None or not declared:
        return None
    return bool(set(declared) & localisation.names())


@dataclass(frozen=True)
class FaultResult:
    """One fault: graphcheck's search and the peer-style baseline, both with the fault injected."""

    fault: str
    bug_class: int
    signal: str  # what the fault's registry entry says must fire first
    search: SearchResult
    baseline: BaselineResult
    breaks: tuple[str, ...] = ()  # what the fault declares it breaks (``Fault.breaks``)

    @property
    def detected(self) -> bool:
        return self.search.detected

    @property
    def localisation(self) -> Localisation | None:
        return search_localisation(self.search)

    @property
    def localisation_matches(self) -> bool | None:
        """The shrunk divergence localised to a declared kernel, function or buffer; None: unknown."""
        return localisation_matches(self.localisation, self.breaks)

    @property
    def steps_to_divergence(self) -> StepsToDivergence:
        return steps_to_divergence(self.search)


@dataclass(frozen=True)
class CleanResult:
    """The engine with no fault: neither graphcheck nor the baseline may find anything."""

    search: SearchResult
    baseline: BaselineResult

    @property
    def clean(self) -> bool:
        return not self.search.detected and not self.baseline.detected

    @property
    def localisation(self) -> Localisation | None:
        return search_localisation(self.search)

    @property
    def steps_to_divergence(self) -> StepsToDivergence:
        return steps_to_divergence(self.search)


@dataclass(frozen=True)
class CatalogSummary:
    """The totals of a catalog run."""

    faults: int
    detected: int
    baseline_detected: int
    median_seconds: float | None  # to first detection, over detected faults
    median_examples: float | None
    median_shrunk_requests: float | None
    median_shrunk_steps: float | None
    localised_matching: int = 0  # faults whose shrunk divergence was localised to what they declare
    localisation_misses: tuple[str, ...] = ()  # the others: missed, not localised, or localised elsewhere
    median_steps_detection: float | None = None  # steps to the first divergence of the detecting example
    median_steps_shrunk: float | None = None  # ... and of the shrunk scenario

    @property
    def rate(self) -> float:
        return self.detected / self.faults if self.faults else 0.0

    @property
    def baseline_rate(self) -> float:
        return self.baseline_detected / self.faults if self.faults else 0.0


@dataclass(frozen=True)
class CatalogResult:
    backend: str
    description: str  # framework, version, device and graph runner, from the backend
    settings: CatalogSettings
    faults: tuple[FaultResult, ...]
    clean: CleanResult
    elapsed_s: float

    @property
    def summary(self) -> CatalogSummary:
        return summarize(self.faults)

    @property
    def passed(self) -> bool:
        """Every fault caught by graphcheck and the clean engine clean: exit code 0."""
        return all(f.detected for f in self.faults) and self.clean.clean


def _median(values: Sequence[float]) -> float | None:
    return float(statistics.median(values)) if values else None


def summarize(results: Sequence[FaultResult]) -> CatalogSummary:
    found = [r.search for r in results if r.detected]
    shrunk = [s.shrunk.size for s in found if s.shrunk is not None]
    steps = [r.steps_to_divergence for r in results if r.detected]
    return CatalogSummary(
        faults=len(results),
        detected=len(found),
        baseline_detected=sum(r.baseline.detected for r in results),
        median_seconds=_median([s.detection.seconds for s in found]),
        median_examples=_median([s.detection.examples for s in found]),
        median_shrunk_requests=_median([size[0] for size in shrunk]),
        median_shrunk_steps=_median([size[1] for size in shrunk]),
        localised_matching=sum(r.localisation_matches is True for r in results),
        localisation_misses=tuple(r.fault for r in results if r.localisation_matches is not True),
        median_steps_detection=_median([n.detection for n in steps if n.detection is not None]),
        median_steps_shrunk=_median([n.shrunk for n in steps if n.shrunk is not None]),
    )


def suite_plan(bug_class: int | None, suites: Mapping[str, Any]) -> list[Any]:
    """The suites targeting ``bug_class`` in registry order, then the general one; all of them for None."""
    general = [s for n, s in suites.items() if n == GENERAL_SUITE]
    if bug_class is None:
        return list(suites.values())
    targeted = [s for n, s in suites.items() if n != GENERAL_SUITE and bug_class in s.bug_classes]
    return targeted + general


ProgressHook = Callable[[str, Any], None]


def fault_pending_path(work_dir: Path, label: str) -> Path:
    """Where the scenario about to run is kept: named by the fault, so a crash says which one to inject."""
    return work_dir / f"pending-{label}.json"


def _search(
    plan: list[Any], checker: Checker, cfg: CatalogSettings, label: str, work_dir: Path, slice_examples: int
) -> SearchResult:
    """``timed_search`` of ``plan`` with ``checker`` (its ``run`` prepares each draw), the shrunk divergence localised."""
    from graphcheck.search.timed_search import TimeBudget, timed_search

    pending = fault_pending_path(work_dir, label)
    result = timed_search(
        plan,
        checker.run,
        budget=TimeBudget(cfg.clean_budget if label == CLEAN_LABEL else cfg.budget_s, cfg.shrink_s),
        seed=f"{cfg.seed}/{label}",
        pending_path=pending,
        slice_examples=slice_examples,
        draws=checker.strategy,
    )
    pending.unlink(missing_ok=True)  # the search came back: nothing crashed
    if result.shrunk is not None:  # the shrunk scenario was prepared by the checker: it re-runs as it ran
        result.shrunk.outcome.localisation = checker.localise(result.shrunk.outcome)
    return result


def search_fault(name: str, backend: Any, cfg: CatalogSettings, work_dir: Path) -> SearchResult:
    """graphcheck's search with fault ``name`` injected ("" = the clean engine, over every suite it can run)."""
    engine = resolve_engine(cfg.engine)
    checker = Checker(backend, engine, cfg.setup, (name,) if name else ())
    suites = {s.name: s for s in runnable_suites(engine, list(load_suites().values()))[0]}
    if not name:
        return _search(suite_plan(None, suites), checker, cfg, CLEAN_LABEL, work_dir, cfg.clean_slice_examples)
    plan = suite_plan(engine.capabilities.fault(name).bug_class, suites)
    return _search(plan, checker, cfg, name, work_dir, cfg.slice_examples)


def baseline_fault(name: str, backend: Any, cfg: CatalogSettings) -> BaselineResult:
    """The peer-style baseline with fault ``name`` injected ("" = the clean engine)."""
    return run_baseline(backend, (name,) if name else (), engine=resolve_engine(cfg.engine))


def _assemble(
    name: str, search: SearchResult, baseline: BaselineResult, cfg: CatalogSettings
) -> FaultResult | CleanResult:
    if not name:
        return CleanResult(search, baseline)
    fault = resolve_engine(cfg.engine).capabilities.fault(name)
    return FaultResult(name, fault.bug_class, fault.signal, search, baseline, tuple(fault.breaks))


def run_fault_job(name: str, backend: Any, cfg: CatalogSettings, work_dir: Path) -> FaultResult | CleanResult:
    """Search and baseline for fault ``name`` ("" = the clean engine), in this process."""
    return _assemble(name, search_fault(name, backend, cfg, work_dir), baseline_fault(name, backend, cfg), cfg)


def _resolved_run(
    part: str, name: str, backend_name: str, emulate: bool, cfg: CatalogSettings, work_dir: Path, emulator: str
) -> Any:
    """One part ("search" or "baseline") of one catalog job, in a fresh process."""
    from graphcheck.capture.devices import resolve

    backend = resolve(backend_name, emulate=emulate, emulator=emulator)  # a real device: no CPU threads to pin
    return search_fault(name, backend, cfg, work_dir) if part == "search" else baseline_fault(name, backend, cfg)


def _isolated(part: str, name: str, backend: Any, cfg: CatalogSettings, work_dir: Path) -> Any:
    """Run one part of a job in a child process (spawned), so a device fault cannot outlive it.

    On a real device a faulty replay can raise a device-side assert, which
    poisons the framework's context for the whole process: every later capture
    would fail and be counted against whatever runs next (the next fault, or
    the baseline after a search). A fresh process per part keeps them apart.
    """
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        emulator = getattr(backend, "emulator", "kernel")
        job = pool.submit(_resolved_run, part, name, backend.name, bool(backend.emulated), cfg, work_dir, emulator)
        try:
            return job.result()
        except BrokenProcessPool as err:
            pending = fault_pending_path(work_dir, name or CLEAN_LABEL)
            raise RuntimeError(
                f"the catalog process for {name or 'the clean engine'} ({part}) died; "
                f"the scenario it was running is in {pending}"
            ) from err


def run_catalog(
    names: Sequence[str], backend: Any, cfg: CatalogSettings, work_dir: Path, *, on_done: ProgressHook | None = None
) -> CatalogResult:
    """The clean engine, then every named fault in turn; ``on_done(name, result)`` after each ("" = clean).

    The clean engine goes first: a fault is only worth timing on an engine that is clean
    without it, and its search absorbs the one-off warm-up (strategies, first captures)
    that would otherwise count against the first fault's time to detection. Each scenario
    is on disk in ``work_dir`` (``fault_pending_path``) while it runs. On a real device
    (not emulated) every job runs in its own process (``_isolated``).
    """
    started = time.perf_counter()
    if getattr(backend, "emulated", True):

        def job(name: str) -> Any:
            return run_fault_job(name, backend, cfg, work_dir)
    else:

        def job(name: str) -> Any:
            parts = (_isolated(part, name, backend, cfg, work_dir) for part in ("search", "baseline"))
            return _assemble(name, *parts, cfg)

    from graphcheck.check.threads import single_threaded  # the tiny model runs ~4x faster on one torch thread

    results = []
    with single_threaded(backend):
        clean = job("")
        if on_done is not None:
            on_done("", clean)
        for name in names:
            results.append(job(name))
            if on_done is not None:
                on_done(name, results[-1])
    elapsed = time.perf_counter() - started
    return CatalogResult(backend.name, backend.description, cfg, tuple(results), clean, elapsed)


__all__ = [
    "CatalogResult",
    "CatalogSettings",
    "CatalogSummary",
    "CleanResult",
    "DEFAULT_BUDGET_S",
    "DEFAULT_SHRINK_S",
    "FaultResult",
    "StepsToDivergence",
    "fault_pending_path",
    "localisation_matches",
    "run_catalog",
    "run_fault_job",
    "search_localisation",
    "steps_to_divergence",
    "suite_plan",
    "summarize",
]
