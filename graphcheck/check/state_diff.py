"""Compare engine state snapshots: eager vs graph bit for bit, and slot hygiene.

``diff_states`` compares the meaningful rows of every buffer two engines
declare (``graphcheck.state``), as raw bytes: a float that differs only in its
bits differs. ``check_hygiene`` checks one engine: every row of a free slot
holds the buffer's idle value, so what a request leaves behind in its slot is
found at the step it leaves, not when the slot's next occupant trips on it.
Both yield ``state`` divergences, one per buffer, naming its first bad row.
"""

from __future__ import annotations

import functools
from dataclasses import replace
from typing import Any, Mapping

import numpy as np

from graphcheck.check.diff import Divergence
from graphcheck.state import SLOT, BufferState, EngineState

#: Elements of a row shown in a divergence; longer rows show their differing columns.
_SHOWN = 8


def _bytes_by_row(values: np.ndarray) -> np.ndarray:
    n = values.shape[0]
    return np.ascontiguousarray(values).reshape(n, -1).view(np.uint8)


def _same_bytes(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and a.tobytes() == b.tobytes()


def _fingerprint(state: EngineState) -> bytes:
    """Every buffer's name, rows and values as one byte string: equal states, equal strings."""
    return b"".join(b.name.encode() + b.rows.tobytes() + b.values.tobytes() for b in state.buffers)


def differing_rows(expected: np.ndarray, actual: np.ndarray) -> np.ndarray:
    """Indices of the rows (first dimension) whose bytes differ; shapes must match."""
    if expected.shape[0] == 0:
        return np.zeros(0, np.int64)
    a, b = _bytes_by_row(expected), _bytes_by_row(actual)
    return np.flatnonzero(np.any(a != b, axis=1))


def plain(x: Any) -> Any:
    """NumPy arrays and scalars as plain Python values (JSON-ready); anything else as it is."""
    return x.tolist() if hasattr(x, "tolist") else x


def describe_row(expected: np.ndarray, actual: np.ndarray) -> tuple[Any, Any, str]:
    """``(expected, actual, where)`` for one row: scalars as they are, vectors cut to the differing columns."""
    if np.ndim(expected) == 0:
        return plain(expected), plain(actual), ""
    e, a = np.ravel(expected), np.ravel(actual)
    if e.size <= _SHOWN:
        return plain(e), plain(a), ""
    e, a = np.ascontiguousarray(e), np.ascontiguousarray(a)
    cols = np.flatnonzero(np.any(e.view(np.uint8).reshape(e.size, -1) != a.view(np.uint8).reshape(a.size, -1), axis=1))
    first = int(cols[0]) if cols.size else 0
    lo = max(0, min(first, e.size - _SHOWN))
    shown = slice(lo, lo + _SHOWN)
    return plain(e[shown]), plain(a[shown]), f"columns {lo}..{lo + _SHOWN - 1} of {e.size}"


def _request(slot: int, requests: Mapping[int, str]) -> str | None:
    return requests.get(slot) if slot >= 0 else None


def _first_bad_row(
    step: int, pair: str, buf: BufferState, other: BufferState, bad: np.ndarray, requests: Mapping[int, str]
) -> Divergence:
    """The divergence of ``buf`` (expected) from ``other`` (actual) at the first of their ``bad`` rows."""
    index, count = int(bad[0]), int(bad.size)
    row, owner = int(buf.rows[index]), int(buf.owners[index])
    want, got, where = describe_row(buf.values[index], other.values[index])
    parts = [f"{buf.kind} buffer {buf.name}, row {row}"]
    if where:
        parts.append(where)
    if count > 1:
        parts.append(f"{count} rows differ")
    return Divergence(
        "state",
        step,
        buf.name,
        pair,
        want,
        got,
        _request(owner, requests),
        owner if owner >= 0 else None,
        detail="; ".join(parts),
    )


def diff_states(
    expected: EngineState,
    actual: EngineState,
    step: int,
    pair: str,
    requests: Mapping[int, str],
    *,
    tolerance: Any = None,
    only_slots: set[int] | None = None,
) -> list[Divergence]:
    """One divergence per buffer whose meaningful rows differ between the two snapshots.

    ``requests``: slot -> the request id running there (names the row's owner).
    ``tolerance`` (``graphcheck.check.numeric.Tolerance``): float buffers may differ
    within it. ``only_slots``: compare only the rows of per-slot buffers owned by
    these slots (and nothing else).
    """
    if len(expected.buffers) == len(actual.buffers) and _fingerprint(expected) == _fingerprint(actual):
        return []  # the common case, in one comparison
    found = []
    theirs = actual.by_name()
    for mine in expected.buffers:
        other = theirs.get(mine.name)
        if other is None:
            continue
        if only_slots is not None:
            if mine.kind != SLOT or mine.name == "block_tables":
                continue
            mine, other = _owned_by(mine, only_slots), _owned_by(other, only_slots)
        if mine.values.shape != other.values.shape or not np.array_equal(mine.rows, other.rows):
            found.append(
                Divergence(
                    "state",
                    step,
                    mine.name,
                    pair,
                    f"{len(mine.rows)} meaningful rows",
                    f"{len(other.rows)} meaningful rows",
                    detail=f"{mine.kind} buffer {mine.name}: the engines declare different meaningful rows "
                    "(their offsets or block tables differ)",
                )
            )
            continue
        if mine.values.dtype != other.values.dtype:
            continue  # a dtype difference is the engine's choice, never a state divergence
        if _same_bytes(mine.values, other.values):
            continue
        if tolerance is not None and np.issubdtype(mine.values.dtype, np.floating):
            bad = _rows_beyond(mine.values, other.values, tolerance)
        else:
            bad = differing_rows(mine.values, other.values)
        if bad.size:
            found.append(_first_bad_row(step, pair, mine, other, bad, requests))
    return found


def _owned_by(buf: BufferState, slots: set[int]) -> BufferState:
    keep = np.isin(buf.owners, sorted(slots))
    return replace(buf, rows=buf.rows[keep], values=buf.values[keep], owners=buf.owners[keep])


def _rows_beyond(expected: np.ndarray, actual: np.ndarray, tolerance: Any) -> np.ndarray:
    """Rows with an element beyond the tolerance (float buffers of a float model)."""
    if expected.shape[0] == 0:
        return np.zeros(0, np.int64)
    close = tolerance.close(expected, actual).reshape(expected.shape[0], -1)
    return np.flatnonzero(~close.all(axis=1))


def _all_idle_bytes(values: np.ndarray, idle_value: Any) -> bool:
    """Whether ``values`` holds exactly the bytes of ``idle_value`` everywhere: then no row can differ
    (``check_hygiene`` judges a row by its bytes). Cheaper than the elementwise compare; False means
    only "compare elementwise" (a -0.0 for 0.0 differs in bytes, not in value)."""
    try:
        idle = _idle_bytes(values.dtype, values.shape, idle_value)
    except (TypeError, ValueError, OverflowError):  # a value the dtype cannot hold: compare elementwise
        return False
    return values.tobytes() == idle


@functools.lru_cache(maxsize=256)
def _idle_bytes(dtype: np.dtype, shape: tuple[int, ...], idle_value: Any) -> bytes:
    """The bytes of an array of ``shape`` and ``dtype`` filled with ``idle_value`` (a pure function: cached)."""
    return np.full(shape, idle_value, dtype=dtype).tobytes()


def check_hygiene(state: EngineState, step: int, engine: str, previous: Mapping[int, str]) -> list[Divergence]:
    """One divergence per per-slot buffer with a free slot not holding its idle value.

    ``previous``: slot -> the last request that ran there (named as the one that left it).
    """
    found = []
    for buf in state.buffers:
        if buf.kind != SLOT or not buf.has_idle or len(buf.idle_rows) == 0:
            continue
        values = buf.idle_values
        if _all_idle_bytes(values, buf.idle_value):
            continue
        if not (values != buf.idle_value).any():  # the method: no dispatch wrapper (per buffer, per step)
            continue
        idle = np.full_like(values, buf.idle_value)
        bad = differing_rows(idle, values)
        if not bad.size:
            continue
        i = int(bad[0])
        slot = int(buf.idle_rows[i])
        want, got, where = describe_row(idle[i], buf.idle_values[i])
        left_by = previous.get(slot)
        parts = [f"free slot {slot} of {buf.name} holds a non-idle value"]
        if where:
            parts.append(where)
        if bad.size > 1:
            parts.append(f"{bad.size} free slots dirty")
        parts.append(f"left by request {left_by}" if left_by else "no request has run in this slot")
        found.append(
            Divergence(
                "state", step, buf.name, f"slot hygiene ({engine})", want, got, left_by, slot, detail="; ".join(parts)
            )
        )
    return found
