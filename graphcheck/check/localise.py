"""Where a divergence began: re-run a (shrunk) failing scenario with a kernel trace and name the kernel.

:func:`localise` re-runs the scenario up to the step of its first failing
divergence and traces that step on both engines (``graphcheck.check.trace``);
``graphcheck.check.align`` finds the first kernel where they part and
``graphcheck.check.call_diff`` says which argument carries the difference.
When no kernel of the step makes them part:

* a state difference the engines already had is traced back to the earlier
  graph call that wrote those rows while they were padding or free, else to
  the last call (construction included) that wrote them;
* a free slot holding a non-idle value, to the last call that wrote that row;
* both engines wrong against the reference, to a call that broke the engine's
  declared layout invariants, else to the last kernel that wrote the buffer.

Capture failures and crashes go to the engine's innermost frame; bucket and
capacity divergences to the policy; rebound and freed static inputs to the
first recorded kernel of a graph that reads them; memory growth to the kernel
whose result the engine still holds.
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any, Sequence

import numpy as np

from graphcheck.adapter import EngineFactory, captured_graphs, engine_extras, graph_extras, input_label
from graphcheck.check import boundary
from graphcheck.check.align import first_parting
from graphcheck.check.call_diff import (
    SHOWN,
    Found,
    at_call,
    padded_sizes,
    padding_pointer,
    relative_path,
    values_at,
    written_rows,
)
from graphcheck.check.diff import Divergence
from graphcheck.check.records import CheckOutcome, Localisation
from graphcheck.check.state_diff import differing_rows, plain
from graphcheck.check.trace import CallRecord, KernelTrace, bound_arguments, is_tensor, leaves, source_of, to_host
from graphcheck.driver import apply_events
from graphcheck.scenario import Scenario

#: Shape divergences that are graph policy or sizing, not a kernel (a declared bucket policy's
#: padded sizes, host values a graph froze, buffer capacity).
#: shape divergences of a choice the engine made (graph key, padding, buffer sizes), not of a kernel's output;
#: "graph dispatch": a step that ran eagerly although its key's graph was captured (right tokens, a wasted graph)
_POLICY_TENSORS = ("bucket", "padded_tokens", "buffer capacity (slots)", "buffer capacity (tokens)", "graph dispatch")
_POLICY_PREFIXES = ("padded ", "host value ")


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
        source_file=relative_path(path),
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


def _cuda_emulated() -> bool:
    from graphcheck.capture import cuda_emulation

    return cuda_emulation.active()


class _Run:
    """The scenario re-run up to step ``t`` with both engines traced (construction and step ``t``)."""

    def __init__(self, scenario: Scenario, backend: Any, faults: Sequence[str], factory: EngineFactory) -> None:
        from graphcheck.capture import kernels
        from graphcheck.reference import make_weights

        self.scenario = scenario
        weights = make_weights(scenario.config)
        self.traces = {"eager": KernelTrace("eager"), "graph": KernelTrace("graph")}
        self.engines: dict[str, Any] = {}
        # Graphs that replay aten ops: the op-level runner, or an engine capturing with torch.cuda
        # under the emulator (graph_api="torch.cuda" on the CPU; Checker.localise installs it).
        self.op_level = bool(getattr(backend, "op_level", False)) or _cuda_emulated()
        trace_backend = getattr(backend, "for_tracing", lambda: backend)()
        for name, device, graphs in (("eager", backend, False), ("graph", trace_backend, True)):
            with kernels.tracing(self.tracer(name)):
                self.engines[name] = factory(scenario.config, weights, device=device, use_graphs=graphs, faults=faults)
            self.traces[name].bind(self.engines[name])
        for earlier in scenario.preludes():  # the pair's history first, untraced, reset after each
            self._run_through(earlier)

    def _run_through(self, earlier: Scenario) -> None:
        """Run ``earlier`` to its end on both engines (drain steps included), then reset them."""
        for engine in self.engines.values():
            depth = engine_extras(engine).pipeline_depth
            for t in range(earlier.num_steps + depth):
                if t >= earlier.num_steps:
                    engine.drain(t)
                    continue
                apply_events(engine, earlier, t)
                engine.step(t, earlier.accept_overrides_at(t))
            engine.reset()

    def tracer(self, name: str) -> Any:
        """What traces engine ``name``: its KernelTrace, op by op on an op-level runner (whose graphs
        replay aten ops, so the eager calls must be aten ops too for the two to align)."""
        if not self.op_level:
            return self.traces[name]
        from graphcheck.capture.op_trace import OpLevelTracer

        return OpLevelTracer(self.traces[name])

    def step(self, t: int, *, traced: bool) -> None:
        from graphcheck.capture import kernels

        for name, engine in self.engines.items():
            trace = self.traces[name]
            trace.start_phase(f"step {t}")
            with kernels.tracing(self.tracer(name)) if traced else nullcontext():
                if t >= self.scenario.num_steps:  # a pipelined engine's drain step (Lockstep._run)
                    engine.drain(t)
                    continue
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
            reason = (
                f"eager and graph agree, both differ from the reference ({first.pair}); this call leaves "
                f"the engine's packed layout inconsistent: {new[0]}"
            )
            found = Found(buffer, buffer, reason, expected=first.expected, actual=first.actual, slot=first.slot)
            return at_call(
                call,
                len(calls),
                "eager engine",
                found,
                step=first.step,
                method="reference",
                request_id=first.request_id,
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
        rows = written_rows(call).get(name)
        if rows is None:
            continue
        owners = values_at(call.after, name, rows)
        if slot is None or owners is None or slot in set(int(o) for o in owners[1]):
            reason = f"eager and graph agree, both differ from the reference ({first.pair}): the last kernel of the step to write {name}"
            found = Found(name, name, reason, expected=first.expected, actual=first.actual, slot=slot)
            return at_call(
                call,
                len(calls),
                "eager engine",
                found,
                step=first.step,
                method="reference",
                request_id=first.request_id,
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
    """Captured addresses of the static inputs shown as ``name`` that are stale now (rebound or freed)."""
    current = engine.buffer_tensors()
    found = set()
    for _, _, graph in captured_graphs(engine):
        found |= {inp.data_ptr for inp, _ in graph.stale_inputs(current) if inp.name == name}
        found |= {inp.data_ptr for inp in graph.dead_inputs() if input_label(inp) == name}
    return found


def _graph_input(run: _Run, first: Divergence) -> Localisation | None:
    """A rebound or freed static input: the first recorded kernel call of a graph that reads it."""
    engine = run.engines["graph"]
    pointers = _stale_pointers(engine, first.tensor)
    status = "freed" if first.actual is None else "rebound"
    for _, _, graph in captured_graphs(engine):
        extras = graph_extras(graph)
        calls = extras.kernel_calls
        if calls is None:
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
                    where=f"inside {extras.label}",
                    expected=first.expected,
                    actual=first.actual,
                    source_file=relative_path(source),
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
    engine, calls = run.engines["graph"], run.traces["graph"].phase_calls(f"step {t}")
    made = {i: call for call in calls if call.graph is None for i in call.return_ids}
    for attr, value in vars(engine).items():
        for path, leaf in leaves(attr, value):
            if is_tensor(leaf) and id(leaf) in made:
                call = made[id(leaf)]
                reason = f"a tensor {call.kernel} made during the step is still held by the engine as {path}"
                found = Found(path, attr, reason, actual=list(to_host(leaf).shape))
                return at_call(call, len(calls), "graph engine", found, step=t, method="kernel trace")
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
    if first.kind == "shape" and (first.tensor in _POLICY_TENSORS or first.tensor.startswith(_POLICY_PREFIXES)):
        return _policy(first)
    from graphcheck.check.engines import builtin_factory

    factory = engine_factory or builtin_factory()
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
    if not eager and not graph:
        return Localisation(
            step=t,
            method="unavailable",
            reason="no kernel call was traced: the engine's kernels are not marked with graphcheck's kernel "
            "decorator (docs/adapters.md), so only the divergence itself is known",
            argument=first.tensor,
            position=f"step {t}",
        )
    found = first_parting(eager, graph, t, padded_sizes(info, outcome.scenario.config.tokens_per_request))
    if found is not None:
        return found
    if first.pair.startswith("slot hygiene"):
        return _last_writer(run, first, t, "graph" if "graph" in first.pair else "eager")
    if first.kind == "state":  # the engines already differed when the step began
        earlier = _earlier_write(outcome.scenario, backend, faults, factory, first)
        return earlier or _last_writer(run, first, t, "graph")
    if first.pair.startswith(("reference", "oracle")):
        return _reference_only(run, first, eager)
    return Localisation(
        step=t,
        method="kernel trace",
        reason=f"no traced kernel of step {t} writes its meaningful rows differently in the two engines: the "
        f"{first.kind} divergence in {first.tensor} ({first.pair}) comes from outside the traced kernels",
        argument=first.tensor,
        position=f"step {t}",
        slot=first.slot,
        request_id=first.request_id,
    )


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
            changed = arg.changed_rows() if arg.buffer == name else None
            hit = np.intersect1d(differ, changed) if changed is not None else differ[:0]
            if not hit.size:
                continue
            wrote = Found(name, name, "written", hit)
            cause = padding_pointer(call, [wrote]) or wrote
            cause.reason = (
                f"{call.phase}: wrote rows of {name} that were not request state then (padding, a free block); "
                f"they are request state at step {t}, holding the graph engine's values"
                + (f"; {cause.reason}" if cause is not wrote else "")
            )
            if cause.actual is None:
                cause.expected = plain(eager.values[np.isin(eager.rows, hit)][:SHOWN])
                cause.actual = plain(graph.values[np.isin(graph.rows, hit)][:SHOWN])
            return at_call(
                call,
                len(run.traces["graph"].phase_calls(call.phase)),
                "graph engine",
                cause,  # no slot: padding_pointer's and ``wrote`` name none
                step=int(call.phase.split()[1]) if call.phase.startswith("step ") else 0,
                method="kernel trace",
            )
    return None


def _row_changed(arg: Any, row: int | None) -> bool:
    """Whether the call changed row ``row`` of the argument (True when the copies cannot tell)."""
    changed = arg.changed_rows()
    return row is None or changed is None or row in changed.tolist() or row >= len(arg.value)


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
                found = Found(
                    arg.path,
                    first.tensor,
                    f"the last call to write {first.tensor} ({call.phase}) leaves {state}",
                    (first.slot,) if first.slot is not None else (),
                    first.expected,
                    first.actual,
                    first.slot,
                )
                return at_call(
                    call, len(trace.phase_calls(call.phase)), f"{engine} engine", found, step=t, method="kernel trace"
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
    try:  # the trace re-runs the engine: through the boundary (an EngineAborted is an Exception)
        return boundary.call(
            "the kernel trace", localise, outcome, backend, faults=faults, engine_factory=engine_factory
        )
    except Exception as exc:  # the divergence stands; only its localisation is lost
        first = outcome.first
        return Localisation(
            step=first.step if first is not None else 0,
            method="unavailable",
            reason=f"the kernel trace could not be completed: {type(exc).__name__}: {exc}",
        )
