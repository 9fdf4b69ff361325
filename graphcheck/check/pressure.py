"""Cache pressure: the situations of an engine that schedules for itself and runs out of KV cache.

Read from the schedules the graph engine reported (``graphcheck.schedule``): a
request prefilled again from position 0 after it had run (its cache dropped)
is seen in any engine's schedule; a failed block allocation, a request waiting
for blocks and a request evicted from the cache need the engine's cache report
(``Schedule.cache``; ``EngineCapabilities.cache_report``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Sequence


@dataclass(frozen=True)
class PressureSituation:
    """One cache-pressure situation: its name, what it is, where it counts on a replay, what it needs."""

    name: str
    description: str
    on_replay: str
    needs: tuple[str, ...]


_NEXT = "that step or the next one was replayed (a graph reads what the pressure left)"

#: The cache-pressure situations, in table order.
PRESSURE = (
    PressureSituation(
        "cache allocation failed",
        "the engine could not allocate the KV-cache blocks a request needed for a step",
        _NEXT,
        ("engine-schedule", "cache-report"),
    ),
    PressureSituation(
        "request waits for cache",
        "a request that arrived and has not finished did not run in a step because its blocks could not be had",
        "a step it waited through, or the one after, was replayed",
        ("engine-schedule", "cache-report"),
    ),
    PressureSituation(
        "request offloaded",
        "the engine evicted a running request from the cache to make room (it is requeued)",
        _NEXT,
        ("engine-schedule", "cache-report"),
    ),
    PressureSituation(
        "prefilled again",
        "a request that had run starts over from position 0 (its cache dropped, its prompt and the tokens it "
        "generated prefilled again)",
        "the step of the new prefill, or the one after, was replayed",
        ("engine-schedule",),
    ),
)

Event = tuple[str, Iterable[int]]


def pressure_events(schedules: Sequence[tuple[int, Any]]) -> Iterator[Event]:
    """The pressure situations of ``schedules`` ((step, Schedule or None) in step order), with their steps."""
    ran: set[str] = set()  # requests that ran before the step
    for t, schedule in schedules:
        if schedule is None:
            continue
        steps = (t, t + 1)
        cache = getattr(schedule, "cache", None)
        if cache is not None:
            if cache.failed_allocations:
                yield "cache allocation failed", steps
            if cache.waiting:
                yield "request waits for cache", steps
            if cache.offloaded:
                yield "request offloaded", steps
        for run in schedule.runs:
            if run.first_position == 0 and run.request_id in ran:
                yield "prefilled again", steps
            ran.add(run.request_id)


__all__ = ["PRESSURE", "PressureSituation", "pressure_events"]
