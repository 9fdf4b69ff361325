"""Fuzz one suite: Hypothesis draws scenarios, the lockstep run judges them.

``fuzz_suite`` asks Hypothesis for a scenario whose lockstep run diverges and,
when one is found, lets it shrink that scenario to a minimal one. Before each
scenario runs it is written to ``pending_path``, so an engine that takes the
whole process down still leaves the failing scenario on disk. The same seed
gives the same run: the draw order comes from a seeded ``random.Random``.

With an example database (``SearchOptions.database``, graphcheck.search.database),
failing scenarios are saved under ``SearchOptions.database_key`` and replayed before
anything new is drawn, so a fault another process or an earlier run found is found
again at the first example; the same seed then gives the same run for the same
database contents.
``hypothesis.find`` cannot do both (its seeded ``random`` switches the database
off), so the search is a ``@given`` test of its own, seeded with ``@seed`` and
given its settings, database included, after the seed.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Literal, Sequence

from hypothesis import HealthCheck, Phase, Verbosity, event, given, settings
from hypothesis import errors as hypothesis_errors
from hypothesis import seed as hypothesis_seed
from hypothesis.database import ExampleDatabase
from hypothesis.errors import Flaky, Unsatisfiable

from graphcheck.check.applicable import Applicability, applicability
from graphcheck.check.checker import Checker
from graphcheck.check.engines import EngineSpecError
from graphcheck.check.memory_gate import MemoryLimitError
from graphcheck.check.noise import NumericTally
from graphcheck.check.pool import EnginePool
from graphcheck.check.records import CheckOutcome, EngineOutOfMemory
from graphcheck.check.situations import CoverageTally, merged_coverage, situation_table, situations_reached
from graphcheck.display import one_line
from graphcheck.errors import DivergenceError, EngineAbortedError, InputError
from graphcheck.files import write_atomic
from graphcheck.scenario import Scenario
from graphcheck.search.batches import batches
from graphcheck.search.collector import fewer_collections
from graphcheck.search.database import KeyedDatabase
from graphcheck.search.determinism import seed_only
from graphcheck.search.history import NeedsHistory, shrink_history
from graphcheck.search.result import SuiteResult, shrink_state

ExampleHook = Callable[[Scenario, CheckOutcome], None]


@dataclass(frozen=True)
class SearchProgress:
    """Where one suite's search stands after an example: searching, or shrinking what it found."""

    suite: str
    examples: int  # lockstep runs so far, shrink attempts included
    steps: int
    budget: int  # scenarios the search may run: examples x scenarios per example (shrinking not counted)
    shrinking: bool  # a diverging scenario was found; the runs since try to make it smaller
    smallest: tuple[int, int] | None  # (requests, steps) of the smallest diverging scenario seen


ProgressHook = Callable[[SearchProgress], None]


class SearchInterrupted(KeyboardInterrupt):
    """Ctrl-C during a search; ``result`` is what it had found (the smallest diverging scenario seen, or none).

    A KeyboardInterrupt, so whoever does not look for it still stops.
    """

    def __init__(self, result: SuiteResult) -> None:
        super().__init__()
        self.result = result


def _where(outcome: CheckOutcome | None) -> str | None:
    """Where the outcome's first failing divergence began (``Localisation.headline``), when it was localised."""
    if outcome is None or outcome.first is None or outcome.localisation is None:
        return None
    return outcome.localisation.headline()


def write_fuzz_summary(
    path: Path,
    results: Sequence[SuiteResult],
    *,
    involved: Iterable[str] = (),
    applicable: Applicability | None = None,
    **run: Any,
) -> None:
    """``fuzz.json``: ``run`` (seed, jobs, database, ...) and one entry per fuzzed suite (or job): its
    figures (``graph_steps``: the graph engine's steps that ran a request, ``replayed_steps``: of them, those that replayed a
    graph; also for the whole run), ``first`` (the first divergence's headline), ``where`` (where it began; null when unknown)
    and ``situations`` (examples per situation reached) with ``situations_replayed`` (of them, the
    examples that reached it on a replayed step); then ``situations``, the run's situation table
    (graphcheck.check.situations: every situation, the examples that reached it, how many on a
    replayed step, how many of them diverged, and whether the reported diverging scenarios,
    ``involved``, reach it), ``situations_missing``, the ones no example reached, and
    ``situations_missing_on_replay``, the ones none reached on a replayed step. ``numeric`` (run and suite; null for the
    exact model): the float calibrations used (measured noise floor, band, ceiling, drift level), the
    largest score difference eager vs graph any example showed, and the float examples counted.
    ``applicable`` (graphcheck.check.applicable): the table and both missing lists count only the
    situations the engine can reach; ``situations_left_out`` names the others, each with why."""
    entries = [
        {
            "suite": r.name,
            "examples": r.examples,
            "steps": r.steps,
            "graph_steps": r.coverage.graph_steps,
            "replayed_steps": r.coverage.replayed_steps,
            "elapsed_s": round(r.elapsed_s, 3),
            "first_failure_at": r.first_failure_at,
            "ambiguous_examples": r.ambiguous_examples,
            "clean": r.clean,
            "first": r.headline,
            "where": _where(r.outcome),
            "situations": dict(sorted(r.coverage.hits.items())),
            "situations_replayed": dict(sorted(r.coverage.replayed.items())),
            "numeric": r.numeric.to_dict(),
        }
        for r in results
    ]
    tally = merged_coverage(r.coverage for r in results)
    numeric = NumericTally()
    for r in results:
        numeric = numeric.merge(r.numeric)
    summary = {
        "run": run,
        "numeric": numeric.to_dict(),
        "graph_steps": tally.graph_steps,
        "replayed_steps": tally.replayed_steps,
        "suites": entries,
        "situations": [row.to_dict() for row in situation_table(tally, involved, applicable)],
        "situations_missing": tally.missing(applicable),
        "situations_missing_on_replay": tally.missing_on_replay(applicable),
        "situations_left_out": dict(applicable.left_out) if applicable is not None else {},
    }
    write_atomic(path, json.dumps(summary, indent=2) + "\n")  # whole or not at all (a full disk)


class DeviceLost(BaseException):
    """A check left the device unusable (``CheckOutcome.device_error``), or the engine tried to end the
    process (``CheckOutcome.engine_error``): stop searching.

    Every later check in this process would fail with the same sticky error, so
    shrinking would "succeed" on anything; an engine that exits is not run again. A
    BaseException, so Hypothesis does not take it for a test failure and shrink it;
    the search ends with the outcome as it is, unshrunk.
    """

    def __init__(self, outcome: CheckOutcome) -> None:
        super().__init__(outcome.device_error or outcome.engine_error or outcome.hung)
        self.outcome = outcome


def scenario_size(scenario: Scenario) -> tuple[int, int]:
    """(requests, steps): how shrinking measures a scenario, smaller first."""
    return len(scenario.requests), scenario.num_steps


def label_found(outcome: CheckOutcome, suite: str, *, interrupted: bool = False) -> bool:
    """Name the scenario a search of ``suite`` found: ``SUITE/shrunk``, ``SUITE/unshrunk: device lost``
    or ``SUITE/interrupted`` (Ctrl-C; the smallest seen so far).

    Returns whether the search stopped there, unshrunk (the device lost, or the engine aborted).
    """
    lost = outcome.device_error is not None or outcome.engine_error is not None or outcome.hung is not None
    label = shrink_state(outcome, interrupted=interrupted)
    outcome.scenario = dataclasses.replace(outcome.scenario, name=f"{suite}/{label}")
    return lost


def write_pending(path: Path, scenario: Scenario) -> bool:
    """Write the scenario about to run, whole, before anything can crash; False when the disk
    refused it (full, read-only): warned once, the run goes on, no partial file stays behind.

    The file outlives the process: whatever ends it (an engine's segfault, ``os._exit``, a kill -9)
    leaves the written bytes to the operating system. It is not fsync'd: that would guard against
    the machine itself going down, at a disk flush for every scenario checked.
    """
    tmp = path.with_suffix(".tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.write(scenario.to_json())
        os.replace(tmp, path)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        if not _PENDING_WARNED:
            _PENDING_WARNED.append(path)
            print(
                f"graphcheck: warning: cannot write {path} ({err.strerror or err}): a scenario that crashes the "
                "engine cannot be kept on disk; the run goes on",
                file=sys.stderr,
            )
        return False
    return True


_PENDING_WARNED: list[Path] = []  # the first pending file that could not be written (warned once)


#: Errors a lockstep run raises that are not findings: the machine's limit, the memory gate's refusal, an engine nothing can check.
NOT_FINDINGS = (EngineOutOfMemory, MemoryLimitError, EngineSpecError, EngineAbortedError)


class _NotAFinding(BaseException):
    """Carries one of NOT_FINDINGS through Hypothesis, which would take an Exception for a failure to shrink."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


class _Diverged(Exception):
    """Raised inside the search's test: the scenario it was given diverges."""


class EngineNondeterministic(DivergenceError):
    """The engine gave different results for the same scenario: it diverged once, and ran clean when run again.

    Hypothesis's ``FlakyFailure``, or a shrunk scenario clean on its last run: nothing can be
    shrunk or reported that does not repeat. ``scenario`` is one that diverged, ``kept`` the
    file it was written to (None when the disk refused it).
    """

    def __init__(self, suite: str, scenario: Scenario, kept: Path | None) -> None:
        where = f"kept in {kept}: `graphcheck replay` it" if kept is not None else "not kept (the disk refused it)"
        super().__init__(
            f"suite {one_line(suite)}: the engine gave different results for the same scenario "
            f"{one_line(scenario.name or '(unnamed)')}: it diverged once and ran clean when run again on a fresh "
            f"engine pair, after the scenarios it had run after too (a nondeterministic engine), so the search "
            f"cannot go on; the scenario is {where}"
        )
        self.suite, self.scenario, self.kept = suite, scenario, kept


class SuiteNotReproducible(InputError):
    """A suite's strategy drew differently for the same example (Hypothesis's ``FlakyStrategyDefinition``)."""

    def __init__(self, suite: str) -> None:
        super().__init__(
            f"suite {one_line(suite)}: its strategy drew different scenarios for the same example (it depends on "
            "state outside Hypothesis, such as random numbers of its own), so the search cannot go on"
        )


#: Hypothesis's flaky-strategy error (``()`` where it has none: then every Flaky is taken for the engine's).
_FLAKY_DRAWS: Any = getattr(hypothesis_errors, "FlakyStrategyDefinition", ())


def _not_repeated(suite: str, flaky: Flaky, diverged: CheckOutcome | None, pending_path: Path) -> Exception:
    """What a Hypothesis ``Flaky`` out of a search means: the suite's draws or the engine's results did not
    repeat. The engine's case writes the diverging scenario to ``pending_path``. ``flaky`` itself when
    it carries an error other than a divergence (a harness bug, whose traceback is the report)."""
    if isinstance(flaky, _FLAKY_DRAWS):
        return SuiteNotReproducible(suite)
    if diverged is None or any(not isinstance(e, _Diverged) for e in getattr(flaky, "exceptions", ())):
        return flaky
    kept = pending_path if write_pending(pending_path, diverged.scenario) else None
    return EngineNondeterministic(suite, diverged.scenario, kept)


def find_diverging(
    strategy: Any,
    diverges: Callable[[Any], Scenario | None],
    config: settings,
    *,
    seed: int,
    database_key: bytes | None,
) -> Scenario | None:
    """The diverging scenario of the minimal example of ``strategy``, or None when none is found.

    ``diverges`` judges an example (a scenario, or a batch of them): the scenario of
    it that diverges, or None. Like ``hypothesis.find`` (and with its draw order for a
    seed), but keeping ``config.database``: saved examples are replayed first, failing
    ones saved, under ``database_key`` (required with a database).
    """
    if config.database is not None and not database_key:
        raise ValueError("find_diverging: a database needs a database_key")
    found: list[Scenario] = []

    def search(example: Any) -> None:
        failing = diverges(example)
        if failing is not None:
            found[:] = [failing]  # the last one is that of the final, shrunk example
            raise _Diverged

    if config.database is not None:
        # Hypothesis keys examples on this function's source, the same for every search: prefix it.
        if database_key is None:
            raise ValueError("a search with an example database needs a database_key")
        config = settings(config, database=KeyedDatabase(config.database, database_key))
    test: Any = given(strategy)(search)
    # @seed also sets database=None; the settings applied after it put the database back.
    test = config(hypothesis_seed(random.Random(seed).getrandbits(64))(test))
    try:
        # seed_only: the same seed draws the same examples whatever the process imported.
        with seed_only(), fewer_collections():
            test()
    except _Diverged:
        return found[0]
    except Unsatisfiable:
        pass
    return None


#: Scenarios per fuzzed example (one engine configuration), at most: see graphcheck.search.batches.
DEFAULT_PER_CONFIG = 8
#: Passing scenarios a batched search remembers (judge_batch), at most.
_PASSED_KEPT = 4096


@dataclass(frozen=True)
class SearchHooks:
    """Callbacks of one suite's search; each may be None."""

    on_example: ExampleHook | None = None  # every lockstep run, shrink attempts included
    on_progress: ProgressHook | None = None  # where the search stands after each of them


@dataclass(frozen=True)
class SearchOptions:
    """How one suite's search runs: scenarios per example, where its engines are kept, where examples are saved.

    ``per_config``: scenarios per Hypothesis example, at most (a batch on one engine configuration).
    ``pool``: where the engines are kept between scenarios (``"new"``: a pool of the search's own;
    None: every scenario builds its engines). ``database``: the example database, its examples saved
    under ``database_key`` (required with a database).
    """

    per_config: int = DEFAULT_PER_CONFIG
    pool: EnginePool | None | Literal["new"] = "new"
    database: ExampleDatabase | None = None
    database_key: bytes | None = None


def fuzz_suite(
    name: str,
    strategy: Any,
    checker: Checker,
    *,
    examples: int,
    seed: int,
    pending_path: Path,
    hooks: SearchHooks | None = None,
    options: SearchOptions | None = None,
) -> SuiteResult:
    """Search ``strategy`` for a scenario ``checker`` finds diverging; shrink it if found.

    ``strategy`` draws scenarios as the checker runs them (``Checker.strategy``
    prepares a suite's: setup and engine capabilities applied), so what is saved,
    shrunk and reported is what ran.

    Each of the ``examples`` Hypothesis examples is a batch of 1 to ``options.per_config``
    scenarios on one engine configuration (``graphcheck.search.batches``), run in
    order until one diverges; that scenario is the finding, and what is shrunk is
    the batch (its passing scenarios deleted, the failing one made smaller).
    ``options.pool``: where the engines are kept between scenarios (``"new"``: a pool of
    this search's own; None: every scenario builds its engines). ``SearchOptions(per_config=1,
    pool=None)`` is the search of one scenario per example, engines built for each.

    With ``options.database``, the examples saved under ``options.database_key`` are replayed
    first and failing ones are saved there (a key is required then; a batched
    search saves under ``KEY:per_config=N``, as its examples are batches). A
    Ctrl-C raises :class:`SearchInterrupted` with what was found so far; a divergence
    that does not repeat, :class:`EngineNondeterministic` (the scenario on disk); draws
    that do not repeat, :class:`SuiteNotReproducible`.
    """
    hooks, options = hooks or SearchHooks(), options or SearchOptions()
    per_config, pool, database, database_key = options.per_config, options.pool, options.database, options.database_key
    if per_config < 1:
        raise ValueError(f"fuzz_suite: per_config must be at least 1, got {per_config}")
    checker = checker.with_pool(EnginePool() if pool == "new" else pool)
    search = _Search(name, seed, checker, pending_path, examples * per_config, hooks)
    config = settings(
        max_examples=examples,
        deadline=None,
        database=database,
        derandomize=False,
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=False,
        verbosity=Verbosity.quiet,  # the report is ours; no "Falsifying example" printout
        print_blob=False,
        phases=((Phase.reuse,) if database is not None else ()) + (Phase.generate, Phase.shrink),
    )
    judge: Callable[[Any], Scenario | None]
    if per_config == 1:
        drawn, judge = strategy, search.judge
    else:
        drawn, judge = batches(strategy, per_config), search.judge_batch
        database_key = database_key + f":per_config={per_config}".encode() if database_key else database_key
    try:
        shrunk = find_diverging(drawn, judge, config, seed=seed, database_key=database_key)
        if shrunk is None:
            return search.result(None)
        write_pending(pending_path, shrunk)
        outcome = checker.with_pool(None).run(shrunk, localise=True)  # fresh engines: the scenario alone
        if outcome.clean:  # it diverged in the search
            raise EngineNondeterministic(name, shrunk, pending_path if pending_path.is_file() else None)
        return search.result(outcome)
    except NeedsHistory as needs:
        return search.result(_with_history(name, checker, needs, pending_path))
    except Flaky as flaky:
        error = _not_repeated(name, flaky, search.smallest, pending_path)
        if error is flaky:
            raise
        raise error from None
    except DeviceLost as lost:  # the failing scenario is on disk (pending_path); nothing more can run here
        return search.result(lost.outcome)
    except _NotAFinding as stop:
        raise stop.error from None
    except KeyboardInterrupt:
        raise SearchInterrupted(search.result(search.smallest, interrupted=True)) from None


def _with_history(name: str, checker: Checker, needs: NeedsHistory, pending_path: Path) -> CheckOutcome:
    """The finding of a divergence that needs the engine pair's history: run again with that history on a
    fresh pair, shrunk (``graphcheck.search.history``) and localised."""
    fresh = checker.with_pool(None)
    scenario = dataclasses.replace(needs.scenario, name=f"{name}/shrunk")
    write_pending(pending_path, scenario)
    found = fresh.run(scenario)
    if found.clean or found.device_error or found.engine_error or found.hung:
        if not found.clean:  # stopped: reported as it is, unshrunk
            return found
        raise EngineNondeterministic(name, scenario, pending_path if pending_path.is_file() else None)
    shrunk = shrink_history(fresh.run, found).scenario
    write_pending(pending_path, shrunk)
    outcome = fresh.run(shrunk, localise=True)
    if outcome.clean:
        raise EngineNondeterministic(name, shrunk, pending_path if pending_path.is_file() else None)
    return outcome


class _Search:
    """The lockstep judge of one suite's search, and its counts."""

    def __init__(
        self,
        name: str,
        seed: int,
        checker: Checker,
        pending_path: Path,
        budget: int,
        hooks: SearchHooks,
    ) -> None:
        self.name, self.seed, self.checker, self.pending_path = name, seed, checker, pending_path
        self.budget, self.on_example, self.on_progress = budget, hooks.on_example, hooks.on_progress
        self.started = time.perf_counter()
        self.examples = self.steps = self.ambiguous_examples = 0
        self.judged = 0  # Hypothesis examples (a scenario, or a batch of them) judged so far
        self.first_failure_at: int | None = None
        self.smallest: CheckOutcome | None = None
        self.coverage = CoverageTally()
        self.numeric = NumericTally()
        self.passed: set[Scenario] = set()  # scenarios of batches that ran clean (judge_batch)
        self.failed: set[Scenario] = set()  # scenarios that diverged (on a fresh pair, or alone)
        self.needs_history: CheckOutcome | None = None  # a divergence that did not repeat on a fresh pair
        self.applicable = applicability(getattr(checker.engine, "capabilities", None))

    def judge(self, scenario: Scenario) -> Scenario | None:
        """``scenario`` when it diverges, else None."""
        self.judged += 1
        return scenario if self.diverges(scenario) else None

    def judge_batch(self, batch: tuple[Scenario, ...]) -> Scenario | None:
        """The first scenario of ``batch`` that diverges (the rest are not run), else None.

        A scenario that already passed in this search is not run again: a lockstep run
        is deterministic, and shrinking keeps redrawing the batch's minimal passing ones.
        """
        self.judged += 1
        for scenario in batch:
            if scenario in self.passed:
                continue
            if self.diverges(scenario):
                return scenario
            if len(self.passed) >= _PASSED_KEPT:
                self.passed.clear()
            self.passed.add(scenario)
        return None

    def diverges(self, scenario: Scenario) -> bool:
        if scenario in self.failed:  # judged once: the same verdict, whatever the pool holds now
            return True
        write_pending(self.pending_path, scenario)
        try:
            outcome = self._run(scenario)
        except NOT_FINDINGS as error:  # Hypothesis must not shrink it
            raise _NotAFinding(error) from None
        self.examples += 1
        self.steps += outcome.steps_run
        self.ambiguous_examples += bool(outcome.ambiguous)
        self._record_situations(scenario, outcome)
        if not outcome.clean:
            if self.first_failure_at is None:
                # The example, not the lockstep run: a replayed batch's passing scenarios run before its failing one.
                self.first_failure_at = self.judged
            if self.smallest is None or scenario_size(scenario) < scenario_size(self.smallest.scenario):
                self.smallest = outcome
        if self.on_example is not None:
            self.on_example(scenario, outcome)
        if self.on_progress is not None:
            self.on_progress(self.progress())
        if outcome.device_error or outcome.engine_error or outcome.hung:
            raise DeviceLost(outcome)
        if self.needs_history is not None:
            raise NeedsHistory(self.needs_history)
        if not outcome.clean:
            self.failed.add(scenario)
        return not outcome.clean

    def _run(self, scenario: Scenario) -> CheckOutcome:
        """The lockstep run of ``scenario`` on pooled engines; a divergence there after earlier scenarios is
        run again on a fresh pair: diverging again, that run is the outcome; clean, the divergence needs the
        pair's history (``needs_history``: the search stops with :class:`NeedsHistory`)."""
        outcome = self.checker.run(scenario)
        stopped = outcome.device_error or outcome.engine_error or outcome.hung
        if outcome.clean or stopped or not outcome.history:
            return outcome
        fresh = self.checker.with_pool(None).run(scenario)
        if fresh.clean:
            self.needs_history = outcome
            return outcome
        return fresh

    def _record_situations(self, scenario: Scenario, outcome: CheckOutcome) -> None:
        """Tally the situations the example reached, and tell Hypothesis (its statistics show them as events).

        No ``hypothesis.target``: measured on batches, its hill-climbing pass redraws nearly the
        same batch again and again (a thorough search drew 374 distinct scenarios of 1,600 with
        it, 554 without); the rare situations are built directly instead (suite ``combinations``).
        A situation reached on a replayed step is counted a second time, apart (``CoverageTally.replayed``)."""
        reached = situations_reached(scenario, outcome, self.applicable)
        self.coverage.add_reached(reached, diverged=not outcome.clean)
        self.coverage.add_steps(outcome)
        self.numeric.add(outcome.numeric)
        for name in sorted(reached.anywhere):
            event(f"situation: {name}")
        for name in sorted(reached.replayed):
            event(f"situation on a replayed step: {name}")

    def progress(self) -> SearchProgress:
        smallest = scenario_size(self.smallest.scenario) if self.smallest is not None else None
        return SearchProgress(self.name, self.examples, self.steps, self.budget, self.smallest is not None, smallest)

    def result(self, outcome: CheckOutcome | None, *, interrupted: bool = False) -> SuiteResult:
        elapsed = time.perf_counter() - self.started
        at = self.first_failure_at if outcome is not None else None
        return SuiteResult(
            self.name,
            self.seed,
            self.examples,
            self.steps,
            elapsed,
            (outcome,) if outcome is not None else (),
            at,
            interrupted,
            self.ambiguous_examples,
            self.coverage,
            self.numeric,
        )
