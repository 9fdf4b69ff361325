"""Engine state snapshots: which rows of an engine's persistent buffers mean something now.

An engine that implements the optional ``state_snapshot()`` member of the
adapter protocol (``graphcheck.adapter.StateSnapshots``) returns an
:class:`EngineState` after every step: per named buffer, the rows that hold
request state right now and their values, copied to the host. The lockstep
compares those rows eager vs graph bit for bit, and checks that the rows of
free slots hold the buffer's idle value (slot hygiene). Rows an engine does not
declare (padding, scratch past the real tokens, cache blocks nobody owns) are
never compared: eager and graph engines legitimately differ there.

Arrays are NumPy arrays, typed ``Any`` so that this module stays a standard
library leaf that engines (``graphcheck.backends``) may import.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: Buffer kinds: what a row of the buffer is.
SLOT = "slot"  # one row per request slot ([B, ...]): running slots are meaningful, free ones idle
TOKEN = "token"  # packed per-token rows: the step's real-token rows are meaningful
CACHE = "cache"  # KV-cache rows: the rows of blocks that running requests own
KINDS = (SLOT, TOKEN, CACHE)


@dataclass(frozen=True)
class BufferState:
    """The meaningful rows of one named buffer, and the idle rows of a per-slot one.

    ``rows``: int64 array [n] of row indices (the buffer's first dimension);
    ``values``: the buffer's rows ``rows`` (shape ``[n, ...]``), a host copy;
    ``owners``: int64 array [n], the slot each row belongs to (-1: none, e.g.
    the end offset of a prefix-sum array). For ``kind == SLOT`` only:
    ``idle_rows`` are the free slots, ``idle_values`` their rows, and every
    element of them must equal ``idle_value``.
    """

    name: str
    kind: str
    rows: Any
    values: Any
    owners: Any
    idle_rows: Any = None
    idle_values: Any = None
    idle_value: Any = None

    @property
    def has_idle(self) -> bool:
        return self.idle_rows is not None and self.idle_value is not None


@dataclass(frozen=True)
class EngineState:
    """An engine's persistent state after a step (or after construction): one entry per buffer."""

    buffers: tuple[BufferState, ...]
    #: Broken layout invariants the engine declares about itself (e.g. packed offsets that do not
    #: match the packed rows' slots), one message each; a kernel trace names the call that broke one.
    violations: tuple[str, ...] = ()

    def by_name(self) -> dict[str, BufferState]:
        return {b.name: b for b in self.buffers}
