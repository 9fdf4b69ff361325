"""Fuzz suites against a wall-clock budget: time to the first divergence, then a budgeted shrink.

``timed_search`` walks a plan of suites in slices of ``slice_examples``
Hypothesis examples each, round after round with fresh seeds, until one
example diverges or the ``TimeBudget``'s ``search_s`` is spent. The diverging example is
then shrunk in the same Hypothesis ``find`` call for at most ``shrink_s`` seconds;
every failing scenario seen while shrinking is a candidate, and the smallest
by (requests, steps) is kept, so a shrink cut short by its budget still
returns the best one found. Time and examples to detection stop at the end of
the first diverging example: shrinking is not counted.

Every scenario is written to ``pending_path`` before it runs. The draw order
comes from seeded ``random.Random`` objects, so the same seed gives the same
examples; only where the budget cuts a search depends on the machine.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from hypothesis import HealthCheck, Phase, find, settings
from hypothesis.errors import Flaky, NoSuchExample, Unsatisfiable

from graphcheck.check.diff import Divergence
from graphcheck.check.records import CheckOutcome
from graphcheck.scenario import Scenario
from graphcheck.search.fuzz import DeviceLost, scenario_size, write_pending

Checker = Callable[[Scenario], CheckOutcome]


@dataclass(frozen=True)
class TimeBudget:
    """The seconds a timed search may take: searching until the first divergence, then shrinking it."""

    search_s: float
    shrink_s: float
    #: the seconds the budgets are measured in (tests pass one that does not depend on the machine's speed)
    clock: Callable[[], float] = time.perf_counter


@dataclass(frozen=True)
class Detection:
    """The first diverging example of a search."""

    suite: str
    seconds: float  # from the start of the search to the end of this example
    examples: int  # lockstep runs up to and including this one
    outcome: CheckOutcome

    @property
    def kind(self) -> str:
        return self._first.kind

    @property
    def headline(self) -> str:
        return self._first.headline()

    @property
    def _first(self) -> Divergence:
        first = self.outcome.first
        assert first is not None, "a detection is made of a diverging outcome"
        return first


@dataclass(frozen=True)
class Shrunk:
    """The smallest failing scenario the shrink found."""

    outcome: CheckOutcome
    examples: int  # lockstep runs spent shrinking
    seconds: float
    complete: bool  # False when the shrink budget ran out first

    @property
    def scenario(self) -> Scenario:
        return self.outcome.scenario

    @property
    def size(self) -> tuple[int, int]:
        return scenario_size(self.scenario)


@dataclass(frozen=True)
class SearchResult:
    """What a timed search found: its first divergence and the shrunk scenario, or neither."""

    suites: tuple[str, ...]  # the suites that ran, in order of first use
    examples: int  # lockstep runs before detection (all of them when nothing diverged)
    seconds: float  # search time, shrinking excluded
    detection: Detection | None
    shrunk: Shrunk | None

    @property
    def detected(self) -> bool:
        return self.detection is not None


class _Spent(BaseException):
    """Stops a Hypothesis search at a budget: not an Exception, so Hypothesis lets it through."""


@dataclass
class _Tracker:
    """Counts examples and keeps the first and the smallest failing outcome."""

    started: float
    deadline: float
    shrink_s: float
    examples: int = 0
    shrink_examples: int = 0
    suites: list[str] = field(default_factory=list)
    detection: Detection | None = None
    best: CheckOutcome | None = None
    shrink_started: float = 0.0
    cut: bool = False  # the last slice ended at a budget
    clock: Callable[[], float] = time.perf_counter

    def before(self) -> None:
        if self.clock() >= self.deadline:
            raise _Spent

    def after(self, suite: str, outcome: CheckOutcome) -> None:
        now = self.clock()
        if self.detection is None:
            self.examples += 1
            if not outcome.clean:
                self.detection = Detection(suite, now - self.started, self.examples, outcome)
                self.best, self.shrink_started = outcome, now
                self.deadline = now + self.shrink_s
            return
        self.shrink_examples += 1
        # Ties go to the later scenario: Hypothesis only ever moves to simpler ones.
        assert self.best is not None  # set with the detection
        if not outcome.clean and scenario_size(outcome.scenario) <= scenario_size(self.best.scenario):
            self.best = outcome


def _settings(examples: int) -> settings:
    return settings(
        max_examples=examples,
        deadline=None,
        database=None,
        derandomize=False,
        suppress_health_check=list(HealthCheck),
        phases=(Phase.generate, Phase.shrink),
    )


def _run_slice(strategy: Any, predicate: Callable[[Scenario], bool], examples: int, seed: str) -> bool:
    """One ``find`` over ``strategy``; True when it ended by a budget rather than by itself."""
    try:
        find(strategy, predicate, settings=_settings(examples), random=random.Random(seed))
    except _Spent:
        return True
    except (NoSuchExample, Unsatisfiable, Flaky):
        pass  # clean slice, or a flaky shrink: whatever the tracker holds stands
    return False


def timed_search(
    plan: Sequence[Any],
    check: Checker,
    *,
    budget: TimeBudget,
    seed: str,
    pending_path: Path,
    slice_examples: int = 25,
    draws: Callable[[Any], Any] | None = None,
) -> SearchResult:
    """Fuzz the suites of ``plan`` (objects with ``name`` and ``strategy()``) until a divergence or the budget.

    ``draws`` wraps each suite's strategy (``graphcheck.check.checker.Checker.strategy``: the
    engine's own options drawn with every scenario, as ``graphcheck run`` draws them)."""
    if not plan:
        raise ValueError("timed_search needs at least one suite")
    clock = budget.clock
    started = clock()
    tracker = _Tracker(started, started + budget.search_s, budget.shrink_s, clock=clock)
    round_no = 0
    while True:
        for suite in plan:
            if clock() >= tracker.deadline:
                return _result(tracker, started)
            if suite.name not in tracker.suites:
                tracker.suites.append(suite.name)

            def predicate(scenario: Scenario, name: str = suite.name) -> bool:
                tracker.before()
                write_pending(pending_path, scenario)
                outcome = check(scenario)
                tracker.after(name, outcome)
                if outcome.device_error or outcome.engine_error or outcome.hung:
                    raise DeviceLost(outcome)
                return not outcome.clean

            try:
                strategy = draws(suite.strategy()) if draws is not None else suite.strategy()
                tracker.cut = _run_slice(strategy, predicate, slice_examples, f"{seed}/{suite.name}/{round_no}")
            except DeviceLost:  # nothing more can run in this process: keep what the tracker holds
                tracker.cut = True
                return _result(tracker, started)
            if tracker.detection is not None:
                return _result(tracker, started)
        round_no += 1


def _result(tracker: _Tracker, started: float) -> SearchResult:
    det = tracker.detection
    if det is None:
        return SearchResult(tuple(tracker.suites), tracker.examples, tracker.clock() - started, None, None)
    shrink_seconds = tracker.clock() - tracker.shrink_started
    assert tracker.best is not None  # set with the detection
    shrunk = Shrunk(tracker.best, tracker.shrink_examples, shrink_seconds, complete=not tracker.cut)
    return SearchResult(tuple(tracker.suites), tracker.examples, det.seconds, det, shrunk)


__all__ = ["Detection", "SearchResult", "Shrunk", "TimeBudget", "scenario_size", "timed_search"]
