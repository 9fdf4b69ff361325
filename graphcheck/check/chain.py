"""A scenario with a history: the scenarios its engine pair ran before it, replayed first.

A pooled engine pair runs scenario after scenario, reset between them. A bug
that depends on what an earlier scenario left behind (a graph key captured by
one batch and replayed by a later one, a warm-up that only the first scenario
went through) shows only after that history; ``Scenario.history`` records it,
and running such a scenario builds a fresh pair, runs every scenario of its
history on it (each checked like any run, the pair reset after each), then the
scenario itself. Where a scenario of the history already diverges, that one is
the finding, with the history before it.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Callable, Sequence

from graphcheck.check.records import CheckOutcome
from graphcheck.scenario import Scenario

if TYPE_CHECKING:
    from graphcheck.check.checker import Checker
    from graphcheck.check.timings import LockstepTimings


def prepare_chain(prepare: Callable[[Scenario], Scenario], scenario: Scenario) -> Scenario:
    """``scenario`` and its history, each prepared, on one config: an engine option sized from the
    requests (``EngineOption.scale``) takes the largest any of them needs."""
    main = prepare(scenario.without_history())
    earlier = [prepare(s) for s in scenario.preludes()]
    config = _one_config([main.config] + [s.config for s in earlier])
    main = dataclasses.replace(main, config=config)
    return main.with_history([dataclasses.replace(s, config=config) for s in earlier])


def _one_config(configs: Sequence[Any]) -> Any:
    """The first config with each engine option at its largest value over ``configs``."""
    largest: dict[str, int] = {}
    for config in configs:
        for name, value in config.engine_options:
            largest[name] = max(largest.get(name, value), value)
    return dataclasses.replace(configs[0], engine_options=tuple(sorted(largest.items())))


def run_chain(
    pooled: Checker, scenario: Scenario, faults: Sequence[str] | None, timings: LockstepTimings | None
) -> CheckOutcome:
    """Run ``scenario``'s history, then ``scenario``, on one engine pair (``pooled`` holds a pool of its own).

    The outcome's scenario is the one that diverged, with the history before it (``scenario`` when
    none of its history did)."""
    earlier = scenario.preludes()
    for i, prelude in enumerate(earlier):
        outcome = pooled.build(prelude, faults=faults, timings=timings).run()
        stopped = outcome.device_error or outcome.engine_error or outcome.hung
        if not outcome.clean or stopped:
            outcome.scenario = dataclasses.replace(prelude, name=scenario.name).with_history(earlier[:i])
            outcome.history = earlier[:i]
            return outcome
    outcome = pooled.build(scenario.without_history(), faults=faults, timings=timings).run()
    outcome.scenario = scenario
    outcome.history = earlier
    return outcome


def history_lines(scenario: Scenario) -> list[str]:
    """One line per scenario of ``scenario``'s history, for reports: its requests, steps and arrivals."""
    lines = []
    for i, earlier in enumerate(scenario.preludes(), 1):
        ids = ", ".join(f"{r.request_id} (prompt {len(r.prompt)}, arrives {r.arrival_step})" for r in earlier.requests)
        forced = f", {len(earlier.accepts)} forced accepts" if earlier.accepts else ""
        lines.append(f"{i}. {earlier.num_steps} steps, {len(earlier.requests)} requests{forced}: {ids}")
    return lines


def history_line(scenario: Scenario) -> str | None:
    """``history: ...``, one line saying what the engine pair ran before the scenario; None without history."""
    n = len(scenario.history)
    if not n:
        return None
    what = "scenario" if n == 1 else "scenarios"
    return (
        f"history: it diverges only after {n} earlier {what} on the same engine pair (reset after each), "
        "recorded in the scenario file; replay runs them first"
    )


__all__ = ["history_line", "history_lines", "prepare_chain", "run_chain"]
