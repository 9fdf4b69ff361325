"""Findings that need the engine pair's history: confirmed, then shrunk, outside Hypothesis.

A fuzzed example runs its scenarios on a pooled engine pair, which keeps what
it ran before (``graphcheck.check.pool``). When a scenario diverges there, the
search runs it again alone on a fresh pair. Diverging again, the finding is
the scenario alone, and Hypothesis shrinks it as any. Clean, the divergence
needed what the pair went through before: the finding is the scenario with
that history (``Scenario.history``), and Hypothesis cannot shrink it (its
examples do not hold the earlier batches), so :func:`shrink_history` does:
fewer earlier scenarios first (one alone, from the last; then one left out at
a time), then shorter ones (fewer requests, fewer steps), every candidate run
on a fresh pair (``graphcheck.check.chain``) and kept when it still diverges.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Callable, Iterator

from graphcheck.check.records import CheckOutcome
from graphcheck.scenario import Scenario, ScenarioError, validate

#: Candidates a history shrink runs, at most, and its seconds.
MAX_ATTEMPTS = 60
BUDGET_S = 120.0


class NeedsHistory(BaseException):
    """A divergence that did not repeat on a fresh engine pair: ``outcome`` ran after ``outcome.history``.

    A BaseException, so that Hypothesis does not shrink it (its examples cannot hold the history).
    """

    def __init__(self, outcome: CheckOutcome) -> None:
        super().__init__(f"a divergence after {len(outcome.history)} earlier scenario(s) on the same engines")
        self.outcome = outcome

    @property
    def scenario(self) -> Scenario:
        """The diverging scenario with the history it ran after."""
        return self.outcome.scenario.without_history().with_history(self.outcome.history)


Run = Callable[[Scenario], CheckOutcome]


@dataclass
class _Shrink:
    run: Run
    best: CheckOutcome
    deadline: float
    attempts: int = 0

    def tries_left(self) -> bool:
        return self.attempts < MAX_ATTEMPTS and time.perf_counter() < self.deadline

    def accept(self, candidate: Scenario) -> bool:
        """Run ``candidate``; keep it (or the history scenario that diverged first) when it diverges."""
        if not self.tries_left():
            return False
        self.attempts += 1
        outcome = self.run(candidate)
        if outcome.clean or outcome.device_error or outcome.engine_error or outcome.hung:
            return False
        self.best = outcome
        return True

    @property
    def scenario(self) -> Scenario:
        return self.best.scenario


def shrink_history(run: Run, outcome: CheckOutcome, *, budget_s: float = BUDGET_S) -> CheckOutcome:
    """The smallest diverging scenario with history found from ``outcome`` (diverged, with its history)
    within ``budget_s`` seconds and MAX_ATTEMPTS runs; ``run`` runs a scenario with its history on a
    fresh engine pair."""
    shrink = _Shrink(run, outcome, time.perf_counter() + budget_s)
    _fewer_earlier(shrink)
    _shorter(shrink)
    return shrink.best


def _fewer_earlier(shrink: _Shrink) -> None:
    """One earlier scenario alone, the last first; else leave out one at a time while it still diverges."""
    earlier = shrink.scenario.preludes()
    if len(earlier) > 1:
        for one in reversed(earlier):
            if shrink.accept(shrink.scenario.with_history([one])):
                return
    i = 0
    while i < len(earlier := shrink.scenario.preludes()) and shrink.tries_left():
        if not shrink.accept(shrink.scenario.with_history(earlier[:i] + earlier[i + 1 :])):
            i += 1


def _shorter(shrink: _Shrink) -> None:
    """Each scenario (the earlier ones, then the diverging one) with fewer steps, then fewer requests."""
    position = 0
    while position <= len(shrink.scenario.history) and shrink.tries_left():
        for candidate in _smaller_at(shrink.scenario, position, shrink.best):
            if shrink.accept(candidate):
                break
        else:
            position += 1


def _smaller_at(scenario: Scenario, position: int, best: CheckOutcome) -> Iterator[Scenario]:
    """``scenario`` with its ``position``-th part (its history's, then its own last) made smaller."""
    parts = list(scenario.preludes()) + [scenario.without_history()]
    part = parts[position]
    last = position == len(parts) - 1
    steps = [best.first.step + 1] if last and best.first is not None else []
    steps += [part.num_steps // 2, part.num_steps - 1]
    for n in steps:
        if 1 <= n < part.num_steps:
            yield from _replaced(scenario, parts, position, cut_steps(part, n))
    for spec in part.requests:
        if len(part.requests) > 1:
            yield from _replaced(scenario, parts, position, drop_request(part, spec.request_id))


def _replaced(scenario: Scenario, parts: list[Scenario], position: int, part: Scenario | None) -> Iterator[Scenario]:
    if part is None:
        return
    parts = parts[:position] + [part] + parts[position + 1 :]
    main = dataclasses.replace(parts[-1], name=scenario.name)
    yield main.with_history(parts[:-1])


def cut_steps(scenario: Scenario, num_steps: int) -> Scenario | None:
    """``scenario`` ending after ``num_steps`` steps: what comes later dropped (None when that is invalid)."""
    requests = tuple(
        dataclasses.replace(
            r,
            abort_step=r.abort_step if r.abort_step is not None and r.abort_step < num_steps else None,
            reasoning=tuple(c for c in r.reasoning if c.step < num_steps),
        )
        for r in scenario.requests
        if r.arrival_step < num_steps
    )
    if not requests:
        return None
    accepts = tuple(a for a in scenario.accepts if a.step < num_steps)
    return _valid(dataclasses.replace(scenario, requests=requests, accepts=accepts, num_steps=num_steps))


def drop_request(scenario: Scenario, request_id: str) -> Scenario | None:
    """``scenario`` without request ``request_id`` and its forced accepts (None when that is invalid)."""
    requests = tuple(r for r in scenario.requests if r.request_id != request_id)
    accepts = tuple(a for a in scenario.accepts if a.request_id != request_id)
    return _valid(dataclasses.replace(scenario, requests=requests, accepts=accepts))


def _valid(scenario: Scenario) -> Scenario | None:
    try:
        return validate(scenario)
    except ScenarioError:
        return None


__all__ = ["NeedsHistory", "cut_steps", "drop_request", "shrink_history"]
