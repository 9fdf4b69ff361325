"""Where the time of a lockstep run goes, for the benchmarks (``graphcheck bench``).

A :class:`LockstepTimings` handed to ``Lockstep(..., timings=...)`` is filled
with ``time.perf_counter`` deltas per phase, summed over the run's steps.
Without one the runner does no timing at all. Engine phases end with the
engine's own per-step read-back (a device sync), so on a GPU they hold the
device work too.

Checking overhead is the lockstep's wall time over the step loop divided by
the time the two engines spent stepping: 1.0 would mean the reference, the
records and the diff cost nothing. Construction (weights, reference, engine
construction with graph capture) is kept apart in ``setup_*`` and left out of
the ratio: capture is engine time, and counting it would flatter the ratio of
short scenarios.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Iterator

#: The phases of one lockstep step, in the order they run.
STEP_PHASES = ("reference", "eager", "graph", "record", "diff", "state")

#: Most checking overhead allowed: on an accelerator (graphs replay fast, so the
#: reference and the diff weigh more), and on the CPU (emulated runner, 2 cores).
OVERHEAD_TARGET_DEVICE = 2.0
OVERHEAD_TARGET_CPU = 3.0


def overhead_target(device: str) -> float:
    """The overhead target for a framework device string ("cpu", "cuda", "xpu:0", ...)."""
    return OVERHEAD_TARGET_CPU if device == "cpu" else OVERHEAD_TARGET_DEVICE


@dataclass
class LockstepTimings:
    """Seconds per phase of one or more lockstep runs (fields add up across runs)."""

    setup_harness: float = 0.0  # weights and reference decoder
    setup_eager: float = 0.0  # eager engine construction
    setup_graph: float = 0.0  # graph engine construction, captures included
    reference: float = 0.0  # script events + step on the reference
    eager: float = 0.0  # script events + step on the eager engine
    graph: float = 0.0  # script events + step on the graph engine
    record: float = 0.0  # StepRecords: bindings of replayed graphs, memory bytes
    diff: float = 0.0  # diff_steps, address / shape / memory checks
    state: float = 0.0  # state snapshots of both engines, their diff and slot hygiene
    wall: float = 0.0  # the whole step loop (Lockstep.run), phases and glue
    steps: int = 0
    runs: int = 0

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Add the wall time of the ``with`` body to the field ``name``."""
        started = time.perf_counter()
        try:
            yield
        finally:
            setattr(self, name, getattr(self, name) + time.perf_counter() - started)

    def add(self, other: LockstepTimings) -> None:
        """Accumulate ``other`` into this one."""
        for name, value in asdict(other).items():
            setattr(self, name, getattr(self, name) + value)

    @property
    def engine(self) -> float:
        """Seconds both engines spent stepping."""
        return self.eager + self.graph

    @property
    def checking(self) -> float:
        """Seconds of the step loop that were not engine steps (reference, records, diff, glue)."""
        return self.wall - self.engine

    def as_dict(self) -> dict[str, float | int | None]:
        """The fields plus the derived figures, JSON-ready (for benchmark extra_info)."""
        out: dict[str, float | int | None] = dict(asdict(self))
        out.update(
            engine=self.engine,
            checking=self.checking,
            overhead=checking_overhead(self),
            steps_per_s=steps_per_second(self),
        )
        return out


def checking_overhead(t: LockstepTimings) -> float | None:
    """Lockstep wall over the step loop / (eager + graph engine step time); None with no engine time."""
    return t.wall / t.engine if t.engine > 0 else None


def steps_per_second(t: LockstepTimings) -> float | None:
    """Checked steps (each one reference + eager + graph step, diffed) per second of step loop."""
    return t.steps / t.wall if t.wall > 0 else None


__all__ = [
    "OVERHEAD_TARGET_CPU",
    "OVERHEAD_TARGET_DEVICE",
    "STEP_PHASES",
    "LockstepTimings",
    "checking_overhead",
    "overhead_target",
    "steps_per_second",
]
