"""Comparing two traced kernel calls (``graphcheck.check.trace``): what each wrote, what differs, and why.

A call's writes are the meaningful rows (after the call) that its own
arguments changed. Two aligned calls part when their writes to meaningful rows
differ, when their returned tensors differ on the real rows, or when an
unnamed input has another shape outside any graph. The explanations name the
argument that carries the difference: a static input the graph reads from
storage the engine rebound or freed; an index input whose padding rows point
at the cache rows that differ; a host argument that differs (not a padded
size); an input whose real rows already differ.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np

from graphcheck.check.records import Localisation
from graphcheck.check.state_diff import differing_rows, plain
from graphcheck.check.trace import CallRecord
from graphcheck.state import CACHE, SLOT, EngineState

#: Values shown per localisation.
SHOWN = 8
#: Buffer kinds whose writes are request state (a call only one engine makes matters when it writes them).
STATE_KINDS = (SLOT, CACHE)


def relative_path(path: str | None) -> str | None:
    if path is None:
        return None
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return path


def caller_fields(call: CallRecord) -> dict[str, Any]:
    if call.caller is None:
        return {}
    function, path, line = call.caller
    return {"caller": function, "caller_file": relative_path(path), "caller_line": line}


# --------------------------------------------------------------------------- state comparisons


def changed_rows(before: EngineState | None, after: EngineState | None) -> dict[str, np.ndarray]:
    """Buffer name -> buffer row indices whose meaningful value a call changed (or made meaningful)."""
    if before is None or after is None:
        return {}
    old = before.by_name()
    out = {}
    for buf in after.buffers:
        prev = old.get(buf.name)
        if prev is None or len(buf.rows) == 0:
            continue
        if prev.values.shape == buf.values.shape and np.array_equal(prev.rows, buf.rows):
            bad = differing_rows(prev.values, buf.values)
            if bad.size:
                out[buf.name] = buf.rows[bad].astype(np.int64)
            continue
        index = {int(r): i for i, r in enumerate(prev.rows)}
        changed = []
        for i, row in enumerate(buf.rows):
            j = index.get(int(row))
            if j is None or buf.values[i].tobytes() != prev.values[j].tobytes():
                changed.append(int(row))
        if changed:
            out[buf.name] = np.array(changed, dtype=np.int64)
    return out


def values_at(state: EngineState | None, name: str, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(values, owners) of buffer ``name`` at buffer rows ``rows``; None when a row is not meaningful there
    (no ``state``: a call traced without snapshots, none is)."""
    buf = state.by_name().get(name) if state is not None else None
    if buf is None:
        return None
    order = np.argsort(buf.rows, kind="stable")
    where = np.searchsorted(buf.rows, rows, sorter=order)
    where = np.clip(where, 0, max(len(order) - 1, 0))
    take = order[where] if len(order) else where
    if len(rows) and (not len(order) or not np.array_equal(buf.rows[take], rows)):
        return None
    return buf.values[take], buf.owners[take]


class Found:
    """A difference found at one call: the buffer or argument, rows, expected and actual values."""

    def __init__(
        self,
        argument: str,
        buffer: str | None,
        reason: str,
        rows: Sequence[int] | np.ndarray = (),
        expected: Any = None,
        actual: Any = None,
        slot: int | None = None,
    ) -> None:
        self.argument, self.buffer, self.reason = argument, buffer, reason
        self.rows = tuple(int(r) for r in rows)[:SHOWN]
        self.expected, self.actual, self.slot = expected, actual, slot


def meaningful_rows(state: EngineState | None, name: str) -> np.ndarray:
    buf = state.by_name().get(name) if state is not None else None
    return buf.rows if buf is not None else np.zeros(0, np.int64)


def written_rows(call: CallRecord) -> dict[str, np.ndarray]:
    """Buffer name -> meaningful rows (after the call) that the call wrote.

    From the call's own arguments where their copies tell (a row that only
    became meaningful, say a cache block just allocated, was not written);
    from the state before and after otherwise (an opaque replay, big tensors).
    """
    if call.opaque or not call.args:
        return changed_rows(call.before, call.after)
    written: dict[str, np.ndarray] = {}
    unknown = set()
    for arg in call.args:
        if arg.host or not arg.changed or arg.buffer is None:
            continue
        rows = arg.changed_rows()
        if rows is None:
            unknown.add(arg.buffer)
            continue
        written[arg.buffer] = np.union1d(written.get(arg.buffer, np.zeros(0, np.int64)), rows)
    out = {}
    for name, rows in written.items():
        kept = np.intersect1d(rows, meaningful_rows(call.after, name))
        if kept.size:
            out[name] = kept
    if unknown:
        fallback = changed_rows(call.before, call.after)
        out.update({n: r for n, r in fallback.items() if n in unknown})
    return out


def write_differences(e: CallRecord, g: CallRecord) -> list[Found]:
    """Buffers whose meaningful rows either call wrote and whose values after the calls differ."""
    found = []
    changed_e, changed_g = written_rows(e), written_rows(g)
    for name in sorted(set(changed_e) | set(changed_g), key=lambda n: _order(e.after, n)):
        rows = np.union1d(changed_e.get(name, np.zeros(0, np.int64)), changed_g.get(name, np.zeros(0, np.int64)))
        both = np.intersect1d(meaningful_rows(e.after, name), meaningful_rows(g.after, name))
        if not np.isin(rows, both).all():
            found.append(Found(name, name, "the engines hold different rows of it as request state", rows))
            continue
        ve, vg = values_at(e.after, name, rows), values_at(g.after, name, rows)
        if ve is None or vg is None:
            continue
        bad = differing_rows(ve[0], vg[0])
        if bad.size:
            picked = rows[bad]
            owner = int(ve[1][bad[0]])
            found.append(
                Found(
                    name,
                    name,
                    "written differently",
                    picked,
                    plain(ve[0][bad[:SHOWN]]),
                    plain(vg[0][bad[:SHOWN]]),
                    owner if owner >= 0 else None,
                )
            )
    return found


def _order(state: EngineState | None, name: str) -> int:
    names = [b.name for b in state.buffers] if state is not None else []
    return names.index(name) if name in names else len(names)


def return_differences(e: CallRecord, g: CallRecord) -> list[Found]:
    found = []
    for i, (re, rg) in enumerate(zip(e.returns, g.returns)):
        label = f"returned[{i}]"
        # Inside a graph the outputs are padded: the eager engine's rows must lead the graph's.
        comparable = re.ndim > 0 and rg.ndim > 0 and rg.shape[0] >= re.shape[0] and re.shape[1:] == rg.shape[1:]
        if re.shape != rg.shape and (g.graph is None or not comparable):
            reason = f"returned shape {rg.shape} in the graph engine, {re.shape} eagerly"
            found.append(Found(label, None, reason, (), list(re.shape), list(rg.shape)))
            continue
        if not comparable:
            continue
        n = re.shape[0]
        bad = differing_rows(re, rg[:n])
        if bad.size:
            found.append(
                Found(
                    label,
                    None,
                    "returned different values on the real rows",
                    bad,
                    plain(re[bad[:SHOWN]]),
                    plain(rg[:n][bad[:SHOWN]]),
                )
            )
    return found


def unnamed_shape_mismatch(e: CallRecord, g: CallRecord) -> Found | None:
    """Outside graphs the graph engine passes exact-size tensors, like the eager one."""
    if g.graph is not None:
        return None
    for ae, ag in zip(e.args, g.args):
        if ae.path == ag.path and not ae.host and ae.buffer is None and ag.buffer is None and ae.shape != ag.shape:
            return Found(
                ag.path,
                None,
                f"input of shape {list(ag.shape)} in the graph engine, {list(ae.shape)} eagerly: a graph output handed on unsliced",
                (),
                list(ae.shape),
                list(ag.shape),
            )
    return None


# --------------------------------------------------------------------------- explaining a difference


def stale_input(g: CallRecord) -> Found | None:
    for arg in g.args:
        if arg.status in ("rebound", "freed"):
            what = (
                "storage the engine rebound after capture"
                if arg.status == "rebound"
                else "storage the engine freed after capture"
            )
            return Found(arg.path, arg.buffer, f"reads {what} (0x{arg.data_ptr:x})")
    return None


def rewritten_by(unmatched: list[CallRecord], g: CallRecord) -> tuple[CallRecord, str] | None:
    """An eager-only call since the last aligned pair that rewrote a buffer this call takes."""
    taken = {a.buffer for a in g.args if a.buffer}
    for call in unmatched:
        for arg in call.args:
            if arg.changed and arg.buffer in taken:
                return call, arg.buffer
    return None


def padding_pointer(g: CallRecord, diffs: list[Found]) -> Found | None:
    """An index input whose rows past its meaningful ones point at cache rows that differ.

    An input is an index into a cache the call wrote when the values of its
    meaningful rows are all rows the call wrote (a KV slot mapping is; token
    ids are not); then its other rows (padding) pointing at a differing row
    are the cause.
    """
    if g.before is None:
        return None
    kinds = {b.name: b.kind for b in g.before.buffers}
    meaningful = {b.name: b.rows for b in g.before.buffers}
    for cache in g.args:
        if cache.buffer is None or kinds.get(cache.buffer) != CACHE or not cache.changed:
            continue
        if cache.value is None or cache.after is None or cache.value.shape != cache.after.shape:
            continue
        written = set(differing_rows(cache.value, cache.after).tolist())
        targets = {r for d in diffs if d.buffer == cache.buffer for r in d.rows}
        if not targets:
            continue
        for arg in g.args:
            if arg.host or arg.value is None or arg.buffer is None or arg.value.ndim != 1:
                continue
            if arg.value.dtype.kind not in "iu" or kinds.get(arg.buffer) == CACHE:
                continue
            real = meaningful.get(arg.buffer, np.zeros(0, np.int64))
            real = real[real < arg.value.shape[0]]
            if not real.size or not set(arg.value[real].tolist()) <= written:
                continue  # not an index into this cache
            real_set = set(real.tolist())
            rows = [i for i, v in enumerate(arg.value.tolist()) if v in targets and i not in real_set]
            if rows:
                return Found(
                    arg.path,
                    arg.buffer,
                    f"padding rows past the real ones point at {cache.buffer} rows of a request, which the call overwrote",
                    rows,
                    "padding (the sink)",
                    [int(arg.value[r]) for r in rows[:SHOWN]],
                )
    return None


def padded_sizes(info: Any, k1: int) -> set[int]:
    bucket = getattr(info, "bucket", None)
    return {bucket, bucket * k1} if bucket else set()


def host_difference(e: CallRecord, g: CallRecord, padded: set[int]) -> Found | None:
    for ae, ag in zip(e.args, g.args):
        if not (ae.host and ag.host and ae.path == ag.path) or ae.value == ag.value:
            continue
        padded_size = isinstance(ag.value, int) and not isinstance(ag.value, bool) and ag.value in padded
        if padded_size and g.graph is not None and isinstance(ae.value, int) and ae.value <= ag.value:
            continue  # inside a graph the bucket's padded sizes are the point
        return Found(
            ag.path,
            None,
            f"host argument {ag.path} is {ag.value!r} in the graph engine, {ae.value!r} eagerly (a value frozen or switched on one path)",
            (),
            ae.value,
            ag.value,
        )
    return None


def input_difference(e: CallRecord, g: CallRecord) -> Found | None:
    for ae, ag in zip(e.args, g.args):
        if ae.host or ag.host or ae.path != ag.path or ae.value is None or ag.value is None:
            continue
        if ae.buffer is None and ag.buffer is None:
            n = ae.value.shape[0] if ae.value.ndim else 0
            if ae.value.ndim and ag.value.ndim and ag.value.shape[0] >= n and ae.value.shape[1:] == ag.value.shape[1:]:
                bad = differing_rows(ae.value, ag.value[:n])
                if bad.size:
                    return Found(
                        ag.path,
                        None,
                        "input differs on the real rows",
                        bad,
                        plain(ae.value[bad[:SHOWN]]),
                        plain(ag.value[:n][bad[:SHOWN]]),
                    )
    if e.before is None or g.before is None:
        return None
    eager_state, graph_state = e.before.by_name(), g.before.by_name()
    for arg in g.args:
        if arg.buffer is None or arg.buffer not in eager_state or arg.buffer not in graph_state:
            continue
        be, bg = eager_state[arg.buffer], graph_state[arg.buffer]
        if be.values.shape == bg.values.shape and np.array_equal(be.rows, bg.rows):
            bad = differing_rows(be.values, bg.values)
            if bad.size:
                return Found(
                    arg.path,
                    arg.buffer,
                    "input's meaningful rows already differ when the call starts",
                    be.rows[bad],
                    plain(be.values[bad[:SHOWN]]),
                    plain(bg.values[bad[:SHOWN]]),
                )
    return None


def at_call(
    call: CallRecord,
    calls_in_phase: int,
    engine: str,
    found: Found,
    *,
    step: int,
    method: str,
    request_id: str | None = None,
) -> Localisation:
    """A localisation of what was ``found`` at traced call ``call`` (its reason, argument, buffer, rows,
    values and slot): the call's kernel, place in its phase, graph, source and caller."""
    return Localisation(
        step=step,
        method=method,
        reason=found.reason,
        kernel=call.kernel,
        argument=found.argument,
        buffer=found.buffer,
        position=f"kernel {call.index + 1} of {calls_in_phase} of {call.phase} ({engine})",
        where=call.where,
        rows=found.rows,
        expected=found.expected,
        actual=found.actual,
        slot=found.slot,
        request_id=request_id,
        source_file=relative_path(call.source),
        source_line=call.line,
        **caller_fields(call),
    )
