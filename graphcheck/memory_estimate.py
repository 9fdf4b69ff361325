"""Memory estimates and limits, engine-free: what an estimate holds, and byte counts as text.

An engine may estimate the memory a lockstep run of a scenario needs before
anything is built: the optional adapter member ``memory_estimate(config,
requests) -> MemoryEstimate`` (the built-in engine's is
``graphcheck.backends.engine.memory.engine_memory``, as a :class:`NamedEstimate`
that names the built-in engine in the gate's messages). The memory gate
(``graphcheck.check.memory_gate``) adds the NumPy reference's part and rejects
a scenario whose total is above the limit: ``DEFAULT_MAX_ENGINE_BYTES``, or
``$GRAPHCHECK_MAX_ENGINE_MEMORY`` read by ``parse_memory_size``. Scenario
validation knows nothing of it. A leaf: standard library only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Sequence

if TYPE_CHECKING:
    from graphcheck.scenario import EngineConfig, RequestSpec

#: The default ceiling on ``MemoryEstimate.total``; $GRAPHCHECK_MAX_ENGINE_MEMORY overrides it.
DEFAULT_MAX_ENGINE_BYTES = 4 * 2**30
MAX_ENGINE_MEMORY_ENV = "GRAPHCHECK_MAX_ENGINE_MEMORY"


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes of a lockstep run, by part.

    ``weights`` and ``buffers`` are one engine's (the eager and the graph engine
    each hold both); ``graphs`` what the graph engine's captured graphs hold
    (every capture size); ``working_set`` the largest transient on top of that
    (a step's or a capture's temporaries, a capture's snapshots, the reference's
    prefill); ``reference`` what the NumPy reference holds: 0 in an engine's own
    estimate, filled in by the memory gate.
    """

    weights: int
    buffers: int
    graphs: int
    working_set: int
    reference: int = 0

    @property
    def eager_engine(self) -> int:
        """What the eager engine holds once built."""
        return self.weights + self.buffers

    @property
    def graph_engine(self) -> int:
        """What the graph engine holds once built and captured."""
        return self.weights + self.buffers + self.graphs

    @property
    def total(self) -> int:
        """The peak of the whole lockstep run: both engines, the reference and the working set."""
        return self.eager_engine + self.graph_engine + self.working_set + self.reference


@dataclass(frozen=True)
class NamedEstimate:
    """A ``memory_estimate`` member that says whose figures it gives: the memory gate's messages
    name the engine ``owner`` (an estimate without one: by the factory's name). Called as the
    ``estimate`` it wraps; a subclass of the factory that keeps the member keeps the name."""

    owner: str
    estimate: Callable[[EngineConfig, Sequence[RequestSpec]], MemoryEstimate]

    def __call__(self, config: EngineConfig, requests: Sequence[RequestSpec] = ()) -> MemoryEstimate:
        return self.estimate(config, requests)


_SIZE_UNITS = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
_SIZE = re.compile(r"\s*(\d{1,30})\s*([kmgt]?)(?:i?b)?\s*", re.IGNORECASE)


def parse_memory_size(text: str) -> int | None:
    """Bytes of ``text``: ``4294967296``, ``4G``, ``4GiB``, ``512m``, ``64K`` (powers of 1024);
    ``none`` (or ``unlimited``) is no limit. ValueError when malformed or zero."""
    if text.strip().lower() in ("none", "unlimited"):
        return None
    match = _SIZE.fullmatch(text)
    if match is None or int(match.group(1)) == 0:
        raise ValueError(f"not a positive byte count: {text!r}")
    return int(match.group(1)) * _SIZE_UNITS[match.group(2).lower()]


def format_bytes(n: float) -> str:
    """``n`` bytes in B / KiB / MiB / GiB / TiB, one decimal."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


__all__ = [
    "DEFAULT_MAX_ENGINE_BYTES",
    "MAX_ENGINE_MEMORY_ENV",
    "MemoryEstimate",
    "NamedEstimate",
    "format_bytes",
    "parse_memory_size",
]
