"""Where a divergence began: re-run a (shrunk) failing scenario with a kernel trace and name the kernel.

:func:`localise` re-runs the scenario up to the step of its first failing
divergence, traces that step on both engines (``graphcheck.check.trace``),
aligns the two call sequences by kernel name and walks them in order. The
first kernel that makes the engines part is named, with the argument that
carries the difference:

* an aligned pair whose writes to meaningful rows differ, or whose returned
  tensors differ on the real rows (a graph's are padded: only the eager
  engine's rows are compared), or whose unnamed input has another shape
  outside any graph (outputs handed on unsliced);
* a call only one engine makes that writes request state (per-slot rows, cache
  rows of running requests).

The argument is, first match wins: an input the graph reads from storage the
engine rebound or freed; an input an unmatched eager-only call just rewrote;
an unnamed input of another shape; an index input whose rows past the real
ones (padding) point at the rows that differ; a host argument that differs
(not a padded size); an input whose real rows differ; else the output.

Divergences with no eager/graph difference in the step (both engines wrong
against the reference) are localised to the last kernel that wrote the
buffer; capture failures and crashes to the engine's innermost frame; bucket
and capacity divergences to the policy; rebound and freed static inputs to
the first kernel of the graph that reads them.
"""

from __future__ import annotations

import difflib
from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from graphcheck.adapter import EngineFactory
from graphcheck.check.diff import Divergence
from graphcheck.check.records import CheckOutcome, Localisation
from graphcheck.check.state_diff import differing_rows
from graphcheck.check.trace import CallRecord, KernelTrace, bound_arguments, is_tensor, leaves, source_of, to_host
from graphcheck.driver import apply_events
from graphcheck.scenario import Scenario
from graphcheck.state import CACHE, SLOT, EngineState

#: Values shown per localisation.
_SHOWN = 8
#: Buffer kinds whose writes are request state (a call only one engine makes matters when it writes them).
_STATE_KINDS = (SLOT, CACHE)
#: Shape divergences that are graph policy or sizing, not a kernel.
_POLICY_TENSORS = ("bucket", "padded_tokens", "buffer capacity (slots)")


def _plain(x: Any) -> Any:
    if isinstance(x, np.ndarray):
        return x.tolist()
    return x.item() if hasattr(x, "item") else x


def _relative(path: str | None) -> str | None:
    if path is None:
        return None
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return path


def _caller_fields(call: CallRecord) -> dict[str, Any]:
    if call.caller is None:
        return {}
    function, path, line = call.caller
    return {"caller": function, "caller_file": _relative(path), "caller_line": line}


# --------------------------------------------------------------------------- state comparisons


def _changed_rows(before: EngineState | None, after: EngineState | None) -> dict[str, np.ndarray]:
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


def _values_at(state: EngineState, name: str, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(values, owners) of buffer ``name`` at buffer rows ``rows``; None when a row is not meaningful there."""
    buf = state.by_name().get(name)
    if buf is None:
        return None
    order = np.argsort(buf.rows, kind="stable")
    where = np.searchsorted(buf.rows, rows, sorter=order)
    where = np.clip(where, 0, max(len(order) - 1, 0))
    take = order[where] if len(order) else where
    if len(rows) and (not len(order) or not np.array_equal(buf.rows[take], rows)):
        return None
    return buf.values[take], buf.owners[take]


class _Found:
    """A difference found at one call: the buffer or argument, rows, expected and actual values."""

    def __init__(
        self,
        argument: str,
        buffer: str | None,
        reason: str,
        rows: Sequence[int] = (),
        expected: Any = None,
        actual: Any = None,
        slot: int | None = None,
    ) -> None:
        self.argument, self.buffer, self.reason = argument, buffer, reason
        self.rows = tuple(int(r) for r in rows)[:_SHOWN]
        self.expected, self.actual, self.slot = expected, actual, slot


def _meaningful_rows(state: EngineState | None, name: str) -> np.ndarray:
    buf = state.by_name().get(name) if state is not None else None
    return buf.rows if buf is not None else np.zeros(0, np.int64)


def _written_rows(call: CallRecord) -> dict[str, np.ndarray]:
    """Buffer name -> meaningful rows (after the call) that the call wrote.

    From the call's own arguments where their copies tell (a row that only
    became meaningful, say a cache block just allocated, was not written);
    from the state before and after otherwise (an opaque replay, big tensors).
    """
    if call.opaque or not call.args:
        return _changed_rows(call.before, call.after)
    written: dict[str, np.ndarray] = {}
    unknown = set()
    for arg in call.args:
        if arg.host or not arg.changed or arg.buffer is None:
            continue
        if arg.value is None or arg.after is None or arg.value.shape != arg.after.shape or arg.value.ndim == 0:
            unknown.add(arg.buffer)
            continue
        rows = differing_rows(arg.value, arg.after)
        written[arg.buffer] = np.union1d(written.get(arg.buffer, np.zeros(0, np.int64)), rows)
    out = {}
    for name, rows in written.items():
        kept = np.intersect1d(rows, _meaningful_rows(call.after, name))
        if kept.size:
            out[name] = kept
    if unknown:
        fallback = _changed_rows(call.before, call.after)
        out.update({n: r for n, r in fallback.items() if n in unknown})
    return out


def _write_differences(e: CallRecord, g: CallRecord) -> list[_Found]:
    """Buffers whose meaningful rows either call wrote and whose values after the calls differ."""
    found = []
    changed_e, changed_g = _written_rows(e), _written_rows(g)
    for name in sorted(set(changed_e) | set(changed_g), key=lambda n: _order(e.after, n)):
        rows = np.union1d(changed_e.get(name, np.zeros(0, np.int64)), changed_g.get(name, np.zeros(0, np.int64)))
        both = np.intersect1d(_meaningful_rows(e.after, name), _meaningful_rows(g.after, name))
        if not np.isin(rows, both).all():
            found.append(_Found(name, name, "the engines hold different rows of it as request state", rows))
            continue
        ve, vg = _values_at(e.after, name, rows), _values_at(g.after, name, rows)
        if ve is None or vg is None:
            continue
        bad = differing_rows(ve[0], vg[0])
        if bad.size:
            picked = rows[bad]
            owner = int(ve[1][bad[0]])
            found.append(
                _Found(
                    name,
                    name,
                    "written differently",
                    picked,
                    _plain(ve[0][bad[:_SHOWN]]),
                    _plain(vg[0][bad[:_SHOWN]]),
                    owner if owner >= 0 else None,
                )
            )
    return found


def _order(state: EngineState | None, name: str) -> int:
    names = [b.name for b in state.buffers] if state is not None else []
    return names.index(name) if name in names else len(names)


def _return_differences(e: CallRecord, g: CallRecord) -> list[_Found]:
    found = []
    for i, (re, rg) in enumerate(zip(e.returns, g.returns)):
        label = f"returned[{i}]"
        if g.graph is None and re.shape != rg.shape:
            found.append(
                _Found(
                    label,
                    None,
                    f"returned shape {rg.shape} in the graph engine, {re.shape} eagerly",
                    (),
                    list(re.shape),
                    list(rg.shape),
                )
            )
            continue
        if re.ndim == 0 or rg.ndim == 0 or rg.shape[0] < re.shape[0] or re.shape[1:] != rg.shape[1:]:
            if re.shape != rg.shape:
                found.append(
                    _Found(
                        label,
                        None,
                        f"returned shape {rg.shape} in the graph engine, {re.shape} eagerly",
                        (),
                        list(re.shape),
                        list(rg.shape),
                    )
                )
            continue
        n = re.shape[0]
        bad = differing_rows(re, rg[:n])
        if bad.size:
            found.append(
                _Found(
                    label,
                    None,
                    "returned different values on the real rows",
                    bad,
                    _plain(re[bad[:_SHOWN]]),
                    _plain(rg[:n][bad[:_SHOWN]]),
                )
            )
    return found


def _unnamed_shape_mismatch(e: CallRecord, g: CallRecord) -> _Found | None:
    """Outside graphs the graph engine passes exact-size tensors, like the eager one."""
    if g.graph is not None:
        return None
    for ae, ag in zip(e.args, g.args):
        if ae.path == ag.path and not ae.host and ae.buffer is None and ag.buffer is None and ae.shape != ag.shape:
            return _Found(
                ag.path,
                None,
                f"input of shape {list(ag.shape)} in the graph engine, {list(ae.shape)} eagerly: a graph output handed on unsliced",
                (),
                list(ae.shape),
                list(ag.shape),
            )
    return None


# --------------------------------------------------------------------------- explaining a difference


def _stale_input(g: CallRecord) -> _Found | None:
    for arg in g.args:
        if arg.status in ("rebound", "freed"):
            what = (
                "storage the engine rebound after capture"
                if arg.status == "rebound"
                else "storage the engine freed after capture"
            )
            return _Found(arg.path, arg.buffer, f"reads {what} (0x{arg.data_ptr:x})")
    return None


def _rewritten_by(unmatched: list[CallRecord], g: CallRecord) -> tuple[CallRecord, str] | None:
    """An eager-only call since the last aligned pair that rewrote a buffer this call takes."""
    taken = {a.buffer for a in g.args if a.buffer}
    for call in unmatched:
        for arg in call.args:
            if arg.changed and arg.buffer in taken:
                return call, arg.buffer
    return None


def _padding_pointer(g: CallRecord, diffs: list[_Found]) -> _Found | None:
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
                return _Found(
                    arg.path,
                    arg.buffer,
                    f"padding rows past the real ones point at {cache.buffer} rows of a request, which the call overwrote",
                    rows,
                    "padding (the sink)",
                    [int(arg.value[r]) for r in rows[:_SHOWN]],
                )
    return None


def _sizes(info: Any, k1: int) -> set[int]:
    bucket = getattr(info, "bucket", None)
    return {bucket, bucket * k1} if bucket else set()


def _host_difference(e: CallRecord, g: CallRecord, padded: set[int]) -> _Found | None:
    for ae, ag in zip(e.args, g.args):
        if not (ae.host and ag.host and ae.path == ag.path) or ae.value == ag.value:
            continue
        padded_size = isinstance(ag.value, int) and not isinstance(ag.value, bool) and ag.value in padded
        if padded_size and g.graph is not None and isinstance(ae.value, int) and ae.value <= ag.value:
            continue  # inside a graph the bucket's padded sizes are the point
        return _Found(
            ag.path,
            None,
            f"host argument {ag.path} is {ag.value!r} in the graph engine, {ae.value!r} eagerly (a value frozen or switched on one path)",
            (),
            ae.value,
            ag.value,
        )
    return None


def _input_difference(e: CallRecord, g: CallRecord) -> _Found | None:
    for ae, ag in zip(e.args, g.args):
        if ae.host or ag.host or ae.path != ag.path or ae.value is None or ag.value is None:
            continue
        if ae.buffer is None and ag.buffer is None:
            n = ae.value.shape[0] if ae.value.ndim else 0
            if ae.value.ndim and ag.value.ndim and ag.value.shape[0] >= n and ae.value.shape[1:] == ag.value.shape[1:]:
                bad = differing_rows(ae.value, ag.value[:n])
                if bad.size:
                    return _Found(
                        ag.path,
                        None,
                        "input differs on the real rows",
                        bad,
                        _plain(ae.value[bad[:_SHOWN]]),
                        _plain(ag.value[:n][bad[:_SHOWN]]),
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
                return _Found(
                    arg.path,
                    arg.buffer,
                    "input's meaningful rows already differ when the call starts",
                    be.rows[bad],
                    _plain(be.values[bad[:_SHOWN]]),
                    _plain(bg.values[bad[:_SHOWN]]),
                )
    return None


# --------------------------------------------------------------------------- the walk


class _Localiser:
    def __init__(self, eager: list[CallRecord], graph: list[CallRecord], step: int, padded: set[int]) -> None:
        self.eager, self.graph, self.step, self.padded = eager, graph, step, padded

    def _result(self, call: CallRecord, calls: list[CallRecord], found: _Found, engine: str) -> Localisation:
        return Localisation(
            step=self.step,
            method="kernel trace",
            reason=found.reason,
            kernel=call.kernel,
            argument=found.argument,
            buffer=found.buffer,
            position=f"kernel {call.index + 1} of {len(calls)} of step {self.step} ({engine})",
            where=call.where,
            rows=found.rows,
            expected=found.expected,
            actual=found.actual,
            slot=found.slot,
            source_file=_relative(call.source),
            source_line=call.line,
            **_caller_fields(call),
        )

    def run(self) -> Localisation | None:
        matcher = difflib.SequenceMatcher(
            a=[c.kernel for c in self.eager], b=[c.kernel for c in self.graph], autojunk=False
        )
        unmatched: list[CallRecord] = []
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag == "equal":
                for e, g in zip(self.eager[i1:i2], self.graph[j1:j2]):
                    hit = self._pair(e, g, unmatched)
                    if hit is not None:
                        return hit
                    unmatched = []
                continue
            hit = self._unmatched(self.eager[i1:i2], self.graph[j1:j2])
            if hit is not None:
                return hit
            unmatched += self.eager[i1:i2]
        return None

    def _unmatched(self, eager: list[CallRecord], graph: list[CallRecord]) -> Localisation | None:
        opaque = [g for g in graph if g.opaque]
        if opaque and eager:  # a device graph that replays as one launch: compare the region as a whole
            e, g = eager[-1], opaque[-1]
            region = CallRecord(g.index, g.phase, g.kernel, None, None, g.graph, before=eager[0].before, after=e.after)
            diffs = _write_differences(region, replace(g, before=graph[0].before))
            if diffs:
                d = diffs[0]
                d.reason += "; the device graph replays as one launch, so the region is as far as the trace sees"
                return self._result(g, self.graph, d, "graph engine")
            return None
        for calls, engine, all_calls in (
            (eager, "only in the eager engine", self.eager),
            (graph, "only in the graph engine", self.graph),
        ):
            for call in calls:
                changed = _written_rows(call)
                kinds = {b.name: b.kind for b in call.after.buffers} if call.after is not None else {}
                state = [n for n in changed if kinds.get(n) in _STATE_KINDS]
                if state:
                    name = state[0]
                    rows = changed[name]
                    got = _values_at(call.after, name, rows)
                    return self._result(
                        call,
                        all_calls,
                        _Found(
                            name,
                            name,
                            f"this call runs {engine} and writes request state",
                            rows,
                            None,
                            _plain(got[0][:_SHOWN]) if got else None,
                        ),
                        engine,
                    )
        return None

    def _pair(self, e: CallRecord, g: CallRecord, unmatched: list[CallRecord]) -> Localisation | None:
        shape = _unnamed_shape_mismatch(e, g)
        diffs = _write_differences(e, g) + _return_differences(e, g)
        if shape is None and not diffs:
            return None
        stale = _stale_input(g)
        if stale is not None:
            return self._result(g, self.graph, stale, "graph engine")
        skipped = _rewritten_by(unmatched, g)
        if skipped is not None:
            call, buffer = skipped
            found = _Found(
                buffer,
                buffer,
                f"runs only in the eager engine; the graph engine's {g.kernel} then reads {buffer} without it",
            )
            return self._result(call, self.eager, found, "eager engine")
        explanation = (
            shape or _padding_pointer(g, diffs) or _host_difference(e, g, self.padded) or _input_difference(e, g)
        )
        found = explanation or diffs[0]
        if explanation is not None and diffs and explanation.expected is None:
            found.expected, found.actual = diffs[0].expected, diffs[0].actual
        return self._result(g, self.graph, found, "graph engine")


# --------------------------------------------------------------------------- entry points


def _from_traceback(outcome: CheckOutcome, first: Divergence) -> Localisation | None:
    if outcome.raised_at is None:
        return None
    function, path, line = outcome.raised_at
    return Localisation(
        step=first.step,
        method="traceback",
        reason=f"{first.kind}: {first.actual}",
        kernel=function,
        position=f"step {first.step}" if first.kind == "crash" else "graph capture (engine construction)",
        where=first.tensor,
        source_file=_relative(path),
        source_line=line,
    )


def _policy(first: Divergence) -> Localisation:
    return Localisation(
        step=first.step,
        method="policy",
        reason=f"{first.pair}: expected {first.expected!r}, got {first.actual!r}"
        + (f" ({first.detail})" if first.detail else ""),
        buffer=first.tensor,
        argument=first.tensor,
        position=f"step {first.step}",
        where="graph choice and buffer sizes (no kernel)",
    )


class _Run:
    """The scenario re-run up to step ``t`` with both engines traced (construction and step ``t``)."""

    def __init__(self, scenario: Scenario, backend: Any, faults: Sequence[str], factory: EngineFactory) -> None:
        from graphcheck.backends.graphs import kernels
        from graphcheck.reference import make_weights

        self.scenario = scenario
        weights = make_weights(scenario.config)
        self.traces = {"eager": KernelTrace("eager"), "graph": KernelTrace("graph")}
        self.engines: dict[str, Any] = {}
        trace_backend = getattr(backend, "for_tracing", lambda: backend)()
        for name, device, graphs in (("eager", backend, False), ("graph", trace_backend, True)):
            with kernels.tracing(self.traces[name]):
                self.engines[name] = factory(scenario.config, weights, device=device, use_graphs=graphs, faults=faults)
            self.traces[name].bind(self.engines[name])

    def step(self, t: int, *, traced: bool) -> None:
        from graphcheck.backends.graphs import kernels

        for name, engine in self.engines.items():
            trace = self.traces[name]
            trace.start_phase(f"step {t}")
            if traced:
                with kernels.tracing(trace):
                    apply_events(engine, self.scenario, t)
                    engine.step(t, self.scenario.accept_overrides_at(t))
            else:
                apply_events(engine, self.scenario, t)
                engine.step(t, self.scenario.accept_overrides_at(t))


def _broke_layout(first: Divergence, calls: list[CallRecord]) -> Localisation | None:
    """The first call after which the engine's own layout invariants break anew (both engines agree)."""
    for call in calls:
        if call.before is None or call.after is None:
            continue
        new = [v for v in call.after.violations if v not in call.before.violations]
        if new:
            buffer = new[0].split("[", 1)[0]
            return Localisation(
                step=first.step,
                method="reference",
                reason=f"eager and graph agree, both differ from the reference ({first.pair}); this call leaves "
                f"the engine's packed layout inconsistent: {new[0]}",
                kernel=call.kernel,
                argument=buffer,
                buffer=buffer,
                position=f"kernel {call.index + 1} of {len(calls)} of step {first.step} (eager engine)",
                where=call.where,
                expected=first.expected,
                actual=first.actual,
                slot=first.slot,
                request_id=first.request_id,
                source_file=_relative(call.source),
                source_line=call.line,
                **_caller_fields(call),
            )
    return None


def _reference_only(run: _Run, first: Divergence, calls: list[CallRecord]) -> Localisation:
    """Both engines agree: a call that broke the engine's layout invariants, else the last kernel of
    the step that wrote the diverging buffer's row."""
    broke = _broke_layout(first, calls)
    if broke is not None:
        return broke
    name, slot = first.tensor, first.slot
    for call in reversed(calls):
        rows = _written_rows(call).get(name)
        if rows is None:
            continue
        owners = _values_at(call.after, name, rows)
        if slot is None or owners is None or slot in set(int(o) for o in owners[1]):
            return Localisation(
                step=first.step,
                method="reference",
                reason=f"eager and graph agree, both differ from the reference ({first.pair}): the last kernel of the step to write {name}",
                kernel=call.kernel,
                argument=name,
                buffer=name,
                position=f"kernel {call.index + 1} of {len(calls)} of step {first.step} (eager engine)",
                where=call.where,
                expected=first.expected,
                actual=first.actual,
                slot=slot,
                request_id=first.request_id,
                source_file=_relative(call.source),
                source_line=call.line,
                **_caller_fields(call),
            )
    return Localisation(
        step=first.step,
        method="reference",
        reason=f"eager and graph agree, both differ from the reference ({first.pair}); no kernel of the step wrote {name}"
        + (f" of slot {slot}" if slot is not None else ""),
        argument=name,
        buffer=name,
        position=f"step {first.step}",
        expected=first.expected,
        actual=first.actual,
        slot=slot,
        request_id=first.request_id,
    )


def _stale_pointers(engine: Any, name: str) -> set[int]:
    """Captured addresses of the static inputs called ``name`` (or shown so, when unnamed) that are stale now."""
    current = engine.buffer_tensors()
    found = set()
    for bucket in engine.graphs.values():
        for graph in (bucket.target, bucket.draft):
            if graph is None:
                continue
            found |= {inp.data_ptr for inp, _ in graph.stale_inputs(current) if inp.name == name}
            for inp in graph.dead_inputs():
                shown = inp.name or f"<unnamed {inp.dtype}[{', '.join(str(n) for n in inp.shape)}]>"
                if shown == name:
                    found.add(inp.data_ptr)
    return found


def _graph_input(run: _Run, first: Divergence) -> Localisation | None:
    """A rebound or freed static input: the first recorded kernel call of a graph that reads it."""
    engine = run.engines["graph"]
    pointers = _stale_pointers(engine, first.tensor)
    status = "freed" if first.actual is None else "rebound"
    for bucket in engine.graphs.values():
        for graph in (bucket.target, bucket.draft):
            calls = getattr(graph, "kernel_calls", None)
            if graph is None or calls is None:
                continue
            for fn, args, kwargs in calls():
                for path, value in (pv for pname, v in bound_arguments(fn, args, kwargs) for pv in leaves(pname, v)):
                    if not (is_tensor(value) and value.data_ptr() in pointers):
                        continue
                    source, line = source_of(fn)
                    return Localisation(
                        step=first.step,
                        method="graph inputs",
                        reason=f"the graph reads {first.tensor} from storage the engine {status} after capture",
                        kernel=getattr(fn, "__qualname__", repr(fn)),
                        argument=path,
                        buffer=None if first.tensor.startswith("<") else first.tensor,
                        position=f"step {first.step}",
                        where=f"inside {getattr(graph, 'label', 'a graph')}",
                        expected=first.expected,
                        actual=first.actual,
                        source_file=_relative(source),
                        source_line=line,
                    )
    return None


def _graph_region(first: Divergence) -> Localisation:
    """A stale static input whose graph cannot list its kernel calls (one opaque device graph)."""
    return Localisation(
        step=first.step,
        method="graph inputs",
        reason=f"a captured graph reads {first.tensor} from storage the engine no longer holds under that name "
        "(its graph replays as one launch, so the kernel that reads it is not known)",
        argument=first.tensor,
        buffer=None if first.tensor.startswith("<") else first.tensor,
        position=f"step {first.step}",
        where=first.detail.split(":", 1)[0],
        expected=first.expected,
        actual=first.actual,
    )


def _held_tensors(run: _Run, t: int) -> Localisation | None:
    """Memory growth: a tensor a kernel returned during step ``t`` that the graph engine still holds."""
    engine, trace = run.engines["graph"], run.traces["graph"]
    made = {}
    for call in trace.phase_calls(f"step {t}"):
        if call.graph is None:
            for i in call.return_ids:
                made[i] = call
    for attr, value in vars(engine).items():
        for path, leaf in leaves(attr, value):
            if is_tensor(leaf) and id(leaf) in made:
                call = made[id(leaf)]
                return Localisation(
                    step=t,
                    method="kernel trace",
                    reason=f"a tensor {call.kernel} made during the step is still held by the engine as {path}",
                    kernel=call.kernel,
                    argument=path,
                    buffer=attr,
                    position=f"kernel {call.index + 1} of step {t} (graph engine)",
                    where=call.where,
                    actual=list(to_host(leaf).shape),
                    source_file=_relative(call.source),
                    source_line=call.line,
                    **_caller_fields(call),
                )
    return None


def localise(
    outcome: CheckOutcome, backend: Any, *, faults: Sequence[str] = (), engine_factory: EngineFactory | None = None
) -> Localisation | None:
    """Where ``outcome``'s first failing divergence began; None when it is clean or nothing could be named.

    Re-runs the scenario (both engines traced around the divergence's step);
    the engines must be deterministic, as the built-in one is.
    """
    first = outcome.first
    if first is None:
        return None
    capacity = [d for d in outcome.failures if d.kind == "shape" and d.tensor == "buffer capacity (slots)"]
    if capacity:  # buffers too small for the largest bucket: what fails after that is a consequence
        return _policy(capacity[0])
    if first.kind in ("capture", "crash"):
        return _from_traceback(outcome, first)
    if first.kind == "shape" and first.tensor in _POLICY_TENSORS:
        return _policy(first)
    from graphcheck.backends.engine import Engine

    factory = engine_factory or Engine
    run = _Run(outcome.scenario, backend, faults, factory)
    t = first.step
    for s in range(t):
        run.step(s, traced=False)
    if first.kind == "address" and "freed before this step" in first.detail:
        return _graph_input(run, first) or _graph_region(first)  # the lockstep did not run this step
    run.step(t, traced=True)
    if first.kind == "address":
        return _graph_input(run, first) or _graph_region(first)
    if first.kind == "memory":
        return _held_tensors(run, t)
    eager = run.traces["eager"].phase_calls(f"step {t}")
    graph = run.traces["graph"].phase_calls(f"step {t}")
    info = run.engines["graph"].last_step_info
    found = _Localiser(eager, graph, t, _sizes(info, outcome.scenario.config.tokens_per_request)).run()
    if found is not None:
        return found
    if first.pair.startswith("slot hygiene"):
        return _last_writer(run, first, t, "graph" if "graph" in first.pair else "eager")
    if first.kind == "state":  # the engines already differed when the step began
        earlier = _earlier_write(outcome.scenario, backend, faults, factory, first)
        return earlier or _last_writer(run, first, t, "graph")
    return _reference_only(run, first, eager)


def _earlier_write(
    scenario: Scenario, backend: Any, faults: Sequence[str], factory: EngineFactory, first: Divergence
) -> Localisation | None:
    """A state difference no kernel of its step made: rows the graph engine wrote earlier, while they
    were not request state (a padding write into a free cache block, say), that became request state
    since. Re-runs every step traced and names the last graph call that wrote those rows."""
    run = _Run(scenario, backend, faults, factory)
    t, name = first.step, first.tensor
    for s in range(t + 1):
        run.step(s, traced=True)
    eager = run.engines["eager"].state_snapshot().by_name().get(name)
    graph = run.engines["graph"].state_snapshot().by_name().get(name)
    if eager is None or graph is None or not np.array_equal(eager.rows, graph.rows):
        return None
    differ = eager.rows[differing_rows(eager.values, graph.values)]
    calls = run.traces["graph"].calls
    for call in reversed(calls):
        for arg in call.args:
            if arg.buffer != name or not arg.changed or arg.value is None or arg.after is None:
                continue
            if arg.value.shape != arg.after.shape or not arg.value.ndim:
                continue
            hit = np.intersect1d(differ, differing_rows(arg.value, arg.after))
            if not hit.size:
                continue
            wrote = _Found(name, name, "written", hit)
            cause = _padding_pointer(call, [wrote]) or wrote
            cause.reason = (
                f"{call.phase}: wrote rows of {name} that were not request state then (padding, a free block); "
                f"they are request state at step {t}, holding the graph engine's values"
                + (f"; {cause.reason}" if cause is not wrote else "")
            )
            if cause.actual is None:
                cause.expected = _plain(eager.values[np.isin(eager.rows, hit)][:_SHOWN])
                cause.actual = _plain(graph.values[np.isin(graph.rows, hit)][:_SHOWN])
            phase_calls = [c for c in calls if c.phase == call.phase]
            return Localisation(
                step=int(call.phase.split()[1]) if call.phase.startswith("step ") else 0,
                method="kernel trace",
                reason=cause.reason,
                kernel=call.kernel,
                argument=cause.argument,
                buffer=cause.buffer,
                position=f"kernel {call.index + 1} of {len(phase_calls)} of {call.phase} (graph engine)",
                where=call.where,
                rows=cause.rows,
                expected=cause.expected,
                actual=cause.actual,
                source_file=_relative(call.source),
                source_line=call.line,
                **_caller_fields(call),
            )
    return None


def _row_changed(arg: Any, row: int | None) -> bool:
    """Whether the call changed row ``row`` of the argument (True when the copies cannot tell)."""
    if row is None or arg.value is None or arg.after is None or arg.value.shape != arg.after.shape:
        return True
    if not arg.value.ndim or row >= arg.value.shape[0]:
        return True
    return arg.value[row].tobytes() != arg.after[row].tobytes()


def _last_writer(run: _Run, first: Divergence, t: int, engine: str) -> Localisation:
    """The last traced call (construction or step ``t``) of ``engine`` that wrote the diverging row.

    For a dirty free slot, and for a state difference no kernel of step ``t``
    made (the engines already differed when it began: construction left it).
    """
    trace = run.traces[engine]
    for call in reversed([c for c in trace.calls if c.phase in ("construction", f"step {t}")]):
        for arg in call.args:
            if arg.changed and arg.buffer == first.tensor and _row_changed(arg, first.slot):
                state = f"free slot {first.slot} at {first.actual!r}, not the idle {first.expected!r}"
                if not first.pair.startswith("slot hygiene"):
                    state = f"slot {first.slot} at {first.actual!r} in the graph engine, {first.expected!r} eagerly"
                return Localisation(
                    step=t,
                    method="kernel trace",
                    reason=f"the last call to write {first.tensor} ({call.phase}) leaves {state}",
                    kernel=call.kernel,
                    argument=arg.path,
                    buffer=first.tensor,
                    position=f"kernel {call.index + 1} of {call.phase} ({engine} engine)",
                    where=call.where,
                    rows=(first.slot,) if first.slot is not None else (),
                    expected=first.expected,
                    actual=first.actual,
                    slot=first.slot,
                    source_file=_relative(call.source),
                    source_line=call.line,
                    **_caller_fields(call),
                )
    return Localisation(
        step=t,
        method="kernel trace",
        reason=f"slot {first.slot} of {first.tensor} differs ({first.pair}) and no traced call wrote it",
        buffer=first.tensor,
        argument=first.tensor,
        slot=first.slot,
    )


def localise_outcome(
    outcome: CheckOutcome, backend: Any, *, faults: Sequence[str] = (), engine_factory: EngineFactory | None = None
) -> Localisation | None:
    """:func:`localise`, never raising: a localisation that fails says so instead of losing the run."""
    try:
        return localise(outcome, backend, faults=faults, engine_factory=engine_factory)
    except Exception as exc:  # the divergence stands; only its localisation is lost
        first = outcome.first
        return Localisation(
            step=first.step if first is not None else 0,
            method="unavailable",
            reason=f"the kernel trace could not be completed: {type(exc).__name__}: {exc}",
        )
