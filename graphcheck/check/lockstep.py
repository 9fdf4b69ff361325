"""Run one scenario on the reference, the eager engine and the graph engine in lockstep.

Every step, the script's events go to all three decoders, each runs the step,
and each yields a StepRecord. The records are diffed at once (eager vs graph
bit for bit; both against the reference, honouring ambiguity), and the graph
engine's replayed graphs are checked for stale or dead static inputs, for the
right bucket and padding, and for memory growth. The run stops after the
first step with a failing divergence: everything after it would only repeat
the consequences.

The harness talks to engines only through the protocol of
``graphcheck.adapter`` (an ``EngineFactory`` builds each ``EngineAdapter``:
``submit``/``abort``/``step``, ``last_step_info``, ``graphs``,
``buffer_tensors()``, ``memory_bytes()``, ``runner.name``, ``sizes.slots``);
the built-in engine is its worked example (docs/adapters.md). torch and paddle
are imported only through the engines and ``graphcheck.capture``.
"""

from __future__ import annotations

import time
import traceback
import weakref
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any, Sequence, TypeAlias

from graphcheck.adapter import (
    EngineAdapter,
    EngineFactory,
    captured_graphs,
    engine_extras,
    graph_extras,
    input_label,
    report_extras,
)
from graphcheck.capabilities import EngineCapabilities
from graphcheck.check.boundary import EngineAborted, call, raised_in
from graphcheck.check.bucket_check import (
    check_graph_count,
    check_host_values,
    check_padding,
    check_unused_graph,
    policy_values,
)
from graphcheck.check.diff import Divergence, diff_steps
from graphcheck.check.engines import EngineSpecError, builtin_factory, require_adapter
from graphcheck.check.guarded import build_guarded, engine_type
from graphcheck.check.memory_gate import admit
from graphcheck.check.noise import DRIFT_STEPS, NumericTrace, calibration_for
from graphcheck.check.numeric import DriftWatch, Parting, diff_engines_numeric, largest_difference, tolerance_for
from graphcheck.check.oracles import OracleError, make_oracle, resolve_oracle
from graphcheck.check.pool import EnginePool, PoolKey
from graphcheck.check.promises import bucket_declared
from graphcheck.check.recompute import RecomputeCheck
from graphcheck.check.records import Binding, CheckOutcome, EngineOutOfMemory, StepRecord
from graphcheck.check.state_diff import check_hygiene, diff_states
from graphcheck.check.timings import LockstepTimings
from graphcheck.check.watchdog import EngineHung
from graphcheck.driver import apply_events
from graphcheck.memory_estimate import DEFAULT_MAX_ENGINE_BYTES, MAX_ENGINE_MEMORY_ENV, MemoryEstimate, format_bytes
from graphcheck.scenario import Scenario
from graphcheck.step_result import StepResult

_UNTIMED = nullcontext()


def _graph_label(kind: str, size: int) -> str:
    return f"{kind}[{size}]"


#: graph -> (the key its bindings were made from, those bindings); weak, so it keeps no graph alive.
BindingsMemo: TypeAlias = "weakref.WeakKeyDictionary[Any, tuple[tuple[Any, ...], tuple[Binding, ...]]]"


def bindings_of(engine: EngineAdapter, bucket: int, memo: BindingsMemo | None = None) -> tuple[Binding, ...]:
    """The static inputs of the graphs of ``bucket``, against the engine's current buffers.

    Named inputs are all reported; an unnamed one (a tensor the engine made
    outside the graph without keeping it as a buffer) only once it is dead,
    as ``<unnamed DTYPE[SHAPE]>``: the graph reads storage nobody owns.
    ``memo`` (one per engine, e.g. a Lockstep's) reuses a graph's bindings while
    everything they are made of is unchanged (:func:`_graph_bindings`).
    """
    current = engine.buffer_tensors()
    names = tuple(current)
    found: list[Binding] = []
    for kind, _, graph in captured_graphs(engine, bucket):
        label = _graph_label(kind, bucket)
        stale = {inp.tensor_id: ptr for inp, ptr in graph.stale_inputs(current)}
        dead = frozenset(inp.tensor_id for inp in graph.dead_inputs())
        key = (label, _input_fields(graph.static_inputs), tuple(stale.items()), dead, names)
        cached = _memo_get(memo, graph, key)
        if cached is None:
            cached = _graph_bindings(label, graph.static_inputs, current, stale, dead)
            _memo_put(memo, graph, key, cached)
        found += cached
    return tuple(found)


def _input_fields(inputs: Sequence[Any]) -> tuple[tuple[Any, ...], ...]:
    """What a binding takes from each static input, by value (an adapter's inputs need not be frozen)."""
    return tuple((inp.name, inp.tensor_id, inp.data_ptr, inp.shape, inp.dtype) for inp in inputs)


def _memo_get(memo: BindingsMemo | None, graph: Any, key: tuple[Any, ...]) -> tuple[Binding, ...] | None:
    """The memoised bindings of ``graph`` when they were made from an equal ``key``, else None."""
    if memo is None:
        return None
    try:
        entry = memo.get(graph)
    except TypeError:  # an adapter's graph that takes no weak reference: never memoised
        return None
    return entry[1] if entry is not None and entry[0] == key else None


def _memo_put(memo: BindingsMemo | None, graph: Any, key: tuple[Any, ...], bindings: tuple[Binding, ...]) -> None:
    """Memoise ``bindings`` of ``graph``, made from ``key`` (not for a graph that takes no weak reference)."""
    if memo is not None:
        try:
            memo[graph] = (key, bindings)
        except TypeError:
            pass


def _graph_bindings(
    label: str, inputs: Sequence[Any], current: dict[str, Any], stale: dict[int, int], dead: frozenset[int]
) -> tuple[Binding, ...]:
    """The bindings of one graph's static ``inputs``.

    A pure function of the label, the inputs' fields, the stale
    pointers, the dead inputs and which names ``current`` has: :func:`bindings_of`
    memoises it on exactly those (Binding is frozen, so records may share them).
    """
    found = []
    for inp in inputs:
        if inp.name is None:
            if inp.tensor_id in dead:
                found.append(Binding(label, input_label(inp), inp.data_ptr, None, False, inp.shape, inp.dtype))
            continue
        ptr = stale.get(inp.tensor_id, inp.data_ptr if inp.name in current else None)
        found.append(Binding(label, inp.name, inp.data_ptr, ptr, inp.tensor_id not in dead, inp.shape, inp.dtype))
    return tuple(found)


def expected_bucket(scenario: Scenario, real_bsz: int, has_prefill: bool) -> int | None:
    """The capture size a step must replay: the smallest >= R on decode-only steps."""
    if has_prefill or real_bsz == 0:
        return None
    fits = [s for s in scenario.config.capture_sizes if s >= real_bsz]
    return min(fits) if fits else None


class Lockstep:
    """Reference, eager engine and graph engine of one scenario, stepped together."""

    def __init__(
        self,
        scenario: Scenario,
        backend: Any,
        *,
        faults: Sequence[str] = (),
        engine_factory: EngineFactory | None = None,
        timings: LockstepTimings | None = None,
        oracle: str = "auto",
        pool: EnginePool | None = None,
        engine_label: str = "builtin",
    ):
        """``timings``, when given, is filled with the seconds of each phase (graphcheck.check.timings).

        ``oracle``: "exact", "model-agnostic" or "auto" (graphcheck.check.oracles); an
        impossible choice raises OracleError before anything is built.

        ``pool``: take the engines from it (reset, when it holds them) and give them
        back when :meth:`run` ends, but for an engine whose step raised.

        ``engine_label``: how the outcome names the engine (``--engine``'s SPEC). An
        engine that lacks a member of the adapter protocol raises EngineSpecError
        (not a finding: nothing can be checked).
        """
        from graphcheck.reference import make_weights

        factory = engine_factory or builtin_factory()
        self._estimate = admit(scenario, factory)  # MemoryLimitError before anything is built
        self.scenario = scenario
        self.timings = timings
        self._pool = pool
        self._keys: dict[str, PoolKey] = {}
        self._histories: dict[str, tuple[Scenario, ...]] = {}  # "eager" / "graph": what the pooled engine ran before
        self._broken: set[str] = set()  # "eager" / "graph": raised in a step, never given back
        self.capabilities = capabilities_of(factory)
        oracle_name = resolve_oracle(oracle, scenario.config, self.capabilities.schedule)
        try:
            with self._phase("setup_harness"):
                weights = pool.weights(scenario.config) if pool is not None else make_weights(scenario.config)
                self.oracle = make_oracle(oracle_name, scenario, weights)
        except Exception as exc:
            if is_out_of_memory(exc):
                raise _out_of_memory(self._estimate, "reference setup", exc) from exc
            raise
        self.outcome = CheckOutcome(
            scenario, backend.name, "none", faults=tuple(faults), oracle=oracle_name, engine=engine_label
        )
        self._engine_label = engine_label
        self.eager = self.graph = None
        self._calibration = self._tolerance = self._drift = None
        self._parting = Parting()
        self._reports: dict[str, Any] = {}
        self._memory_baseline: int | None = None
        self._freed_seen: set[tuple[str, str]] = set()  # (graph, input) reported by _freed_inputs
        self._emulated = bool(getattr(backend, "emulated", False))
        self._backend = backend
        self._replays = 0
        self._graph_count = -1  # graphs the graph engine held at the last memory check
        self._bindings: BindingsMemo = weakref.WeakKeyDictionary()  # bindings_of's memo
        self._t = 0  # the step under way
        try:
            self._build(factory, weights, backend, faults)
        except EngineAborted as aborted:  # the engine tried to end graphcheck: its own kind of engine error
            self._broken.update(("eager", "graph"))
            self.eager = self.graph = None
            self._aborted(0, aborted)
        except EngineHung as hung:
            self._broken.update(("eager", "graph"))
            self.eager = self.graph = None
            self._hung(0, hung)
        except Exception as exc:  # a member the harness reads after construction raised (sizes, runner, ...)
            if raised_in(exc) is None or is_out_of_memory(exc):
                raise
            self._broken.update(("eager", "graph"))
            self.graph = None  # nothing is stepped
            self._fail("capture", 0, f"engine construction: {raised_in(exc)}", exc)

    def _build(self, factory: EngineFactory, weights: Any, backend: Any, faults: Sequence[str]) -> None:
        """The float calibration, then both engines built and captured (a failure there is the finding)."""
        scenario = self.scenario
        if tolerance_for(scenario.config.model) is not None:  # a float model: its band is measured
            cal = call(
                "the float calibration", calibration_for, factory, backend, scenario.config, self.capabilities.fit
            )
            self._calibration, self._tolerance = cal, cal.tolerance()
            self._drift = DriftWatch(cal.drift_level, DRIFT_STEPS, cal.band)
        where = "eager engine construction"
        try:
            with self._phase("setup_eager"):
                self.eager = self._engine(factory, weights, backend, faults, use_graphs=False)
            where = "graph engine construction and capture"
            with self._phase("setup_graph"):
                self.graph = self._engine(factory, weights, backend, faults, use_graphs=True)
        except (EngineSpecError, EngineAborted, EngineHung):
            self._broken.update(("eager", "graph"))
            raise
        except Exception as exc:
            self._broken.update(("eager", "graph"))  # a half-built pair is never given back
            if is_out_of_memory(exc):  # the machine's limit, not the engine's bug: never a divergence
                self.eager = self.graph = None
                error = _out_of_memory(self._estimate, where, exc)
                traceback.clear_frames(exc.__traceback__)  # let the half-built engines go
                raise error from exc
            self._fail("capture", 0, "engine construction", exc)  # a capture that fails is itself the finding
            if self.eager is not None:  # buffers too small for the buckets explain a failed capture
                self._check_capacity(self.eager)
            return
        if self.oracle.needs_reports or self._tolerance is not None:
            for engine in (self.eager, self.graph):
                if not callable(getattr(engine, "model_report", None)):
                    raise OracleError(
                        f"{engine_type(engine)} has no model_report(): the model-agnostic oracle and the float "
                        "tolerance need each step's model scores (docs/adapters.md, 'Engines that run their own model')"
                    )
        self.outcome.runner = self.graph.runner.name if self.graph.runner is not None else "none"
        self._recompute = self._full_recompute()
        self.snapshots = supports_snapshots(self.eager) and supports_snapshots(self.graph)
        self._occupants: dict[int, str] = {}  # slot -> the last request that ran there
        self._check_capacity()

    def _engine(self, factory: EngineFactory, weights: Any, backend: Any, faults: Sequence[str], *, use_graphs: bool):
        """An engine of this scenario's config: the pool's, reset, when it has one; else a new one."""
        config = self.scenario.config
        if self._pool is not None:
            key = self._pool.key(factory, backend, config, faults, use_graphs=use_graphs)
            self._keys["graph" if use_graphs else "eager"] = key
            taken = self._pool.take_with_history(key)
            if taken is not None:
                engine, self._histories["graph" if use_graphs else "eager"] = taken
                self.outcome.history = max(self._histories.values(), key=len)
                return engine
        engine = build_guarded(
            self._engine_label, factory, config, weights, device=backend, use_graphs=use_graphs, faults=faults
        )
        require_adapter(engine, self._engine_label)
        return engine

    def release(self) -> None:
        """Give the engines back to the pool (idempotent); an engine whose step raised is dropped."""
        for source in ("eager", "graph"):
            engine = getattr(self, source)
            if self._pool is not None and engine is not None and source not in self._broken:
                ran = self._histories.get(source, ()) + (self.scenario,)
                self._pool.give(self._keys[source], engine, ran)
        self._pool = None

    # ------------------------------------------------------------------ running
    def run(self) -> CheckOutcome:
        started = time.perf_counter()
        try:
            self._steps()
        except EngineAborted as aborted:
            self._broken.update(("eager", "graph"))
            self._aborted(self._t, aborted)
        except EngineHung as hung:
            self._broken.update(("eager", "graph"))
            self._hung(self._t, hung)
        except Exception as exc:  # an engine member the checks read raised (memory_bytes, state_snapshot, ...)
            if raised_in(exc) is None:
                raise  # graphcheck's own bug: its traceback is the report
            self._broken.update(("eager", "graph"))
            if is_out_of_memory(exc):
                raise _out_of_memory(self._estimate, f"step {self._t} ({raised_in(exc)})", exc) from exc
            self._fail("crash", self._t, raised_in(exc) or "engine", exc)
        self.outcome.elapsed_s = time.perf_counter() - started
        if self._calibration is not None:
            self.outcome.numeric = NumericTrace(self._calibration, tuple(self._drift.trace))
        if self.outcome.device_error is None:
            self.release()
        if self.timings is not None:
            self.timings.wall += self.outcome.elapsed_s
            self.timings.steps += self.outcome.steps_run
            self.timings.runs += 1
        return self.outcome

    def _steps(self) -> None:
        if self.graph is None:
            return
        for t in range(self.scenario.num_steps):
            if not self.step(t):
                return
        self._drain()

    def _drain(self) -> None:
        """A pipelined engine (``graphcheck.adapter.Pipelined``) still has batches in flight after the
        last step: report them, one drain step per batch, checked like any step."""
        depth = min(getattr(e, "pipeline_depth", 0) for _, e in self._engines())
        for t in range(self.scenario.num_steps, self.scenario.num_steps + depth):
            if not self.step(t, drain=True):
                return

    def step(self, t: int, *, drain: bool = False) -> bool:
        """Run step ``t`` on all three; False once a failing divergence was found. ``drain``: a step
        after the scenario's last, which launches nothing (the script has no events there).

        Before the step, every captured graph is audited for static inputs whose
        storage the engine has let go (each reported once). Replaying such a graph
        reads freed memory: on a device that is an illegal access or a device-side
        assert that poisons the whole process, so there the step is not run and the
        freed input is the finding. The emulator keeps the storage, so the step runs
        and shows what the stale read does.
        """
        self._t = t
        freed = self._freed_inputs(t)
        if freed:
            self.outcome.divergences.extend(freed)
            if not self._emulated:
                return False
        results: dict[str, StepResult] = {}
        overrides = self.scenario.accept_overrides_at(t)
        for source, decoder in (("eager", self.eager), ("graph", self.graph)):
            try:
                with self._phase(source):
                    if drain:
                        results[source] = decoder.drain(t)
                    else:
                        apply_events(decoder, self.scenario, t)
                        results[source] = decoder.step(t, overrides)
            except (EngineAborted, EngineSpecError, EngineHung):  # the run's end, not a crash
                raise
            except Exception as exc:
                self._broken.add(source)
                if is_out_of_memory(exc):  # the machine's limit, not the engine's bug
                    raise _out_of_memory(self._estimate, f"step {t} of the {source}", exc) from exc
                self._fail("crash", t, source, exc)
                return False
        try:
            with self._phase("reference"):
                self._reports = self._model_reports()
                for decoder in self.oracle.decoders():
                    if not drain:
                        apply_events(decoder, self.scenario, t)
                schedules = {s: getattr(e.last_step_info, "schedule", None) for s, e in self._engines()}
                results["reference"] = self.oracle.step(t, overrides, results, self._reports, schedules)
        except (EngineAborted, EngineSpecError, EngineHung):
            raise
        except Exception as exc:
            if is_out_of_memory(exc):
                raise _out_of_memory(self._estimate, f"step {t} of the reference", exc) from exc
            self._fail("crash", t, "reference", exc)
            return False
        self.outcome.steps_run = t + 1
        with self._phase("record"):
            records = {s: self._record(s, t, results[s]) for s in ("reference", "eager", "graph")}
        for source, record in records.items():
            self.outcome.records[source].append(record)
        with self._phase("diff"):
            found = self._diff(records)
        if self.snapshots:
            with self._phase("state"):
                found += self._state(t, records)
        self.outcome.divergences.extend(found)
        return not any(not d.ambiguous for d in found)

    def _model_reports(self) -> dict[str, Any]:
        """Each engine's model report of the step, when the oracle or the tolerance needs them."""
        if not self.oracle.needs_reports and self._tolerance is None:
            return {}
        return {source: dict(engine.model_report()) for source, engine in self._engines()}

    def _engines(self) -> tuple[tuple[str, Any], ...]:
        return (("eager", self.eager), ("graph", self.graph))

    def _full_recompute(self) -> RecomputeCheck | None:
        """The third path, for a graph engine that can run its model without batching (``recompute_scores``)."""
        if self._tolerance is None or not callable(getattr(self.graph, "recompute_scores", None)):
            return None
        prompts = {r.request_id: r.prompt for r in self.scenario.requests}
        # Another model path (no cache, no batching, other kernels) than the probe measured: the ceiling.
        return RecomputeCheck(self.graph, prompts, tolerance_for(self.scenario.config.model), "graph")

    def _phase(self, name: str) -> AbstractContextManager[None]:
        """Time the ``with`` body into ``timings.<name>``; a shared no-op when not timing."""
        return self.timings.phase(name) if self.timings is not None else _UNTIMED

    # ------------------------------------------------------------------ records
    def _record(self, source: str, t: int, result: StepResult) -> StepRecord:
        if source == "reference":
            return StepRecord(source, t, result)
        engine = self.eager if source == "eager" else self.graph
        info = engine.last_step_info
        slots = info.slots
        if info.used_graph:
            bucket_declared(self._engine_label, info.bucket, engine.graphs)
        audited = info.used_graph or bool(getattr(info, "captured", False))  # a lazy capture: audit its table now
        bindings = bindings_of(engine, info.bucket, self._bindings) if audited else ()
        # Memory is judged on replays only (_memory); both engines are measured there, side by side.
        replayed = self.graph.last_step_info.used_graph
        return StepRecord(
            source,
            t,
            result,
            slots,
            info.bucket,
            info.used_graph,
            info.real_bsz,
            info.num_running,
            info.real_tokens,
            info.padded_tokens,
            bindings,
            engine.memory_bytes() if replayed else 0,
            getattr(info, "schedule", None),
        )

    # ------------------------------------------------------------------ checks
    def _diff(self, records: dict[str, StepRecord]) -> list[Divergence]:
        ref, eager, graph = (records[s].result for s in ("reference", "eager", "graph"))
        slots = records["graph"].slot_of()
        if self._tolerance is None:
            found = diff_steps(eager, graph, "eager vs graph", slots=slots)
        else:
            reports = (self._reports.get("eager", {}), self._reports.get("graph", {}))
            expected = self.oracle.expected_per_engine()
            found = diff_engines_numeric(eager, graph, reports, self._tolerance, self._parting, slots, expected)
            delta = largest_difference(eager, graph, reports, self._parting.parted)
            drift = self._drift.add(eager.step, delta, records["graph"].used_graph)
            if drift is not None:
                found.append(drift)
        found += self.oracle.diff(ref, {"eager": eager, "graph": graph}, slots)
        g = records["graph"]
        found += self._address(g) + self._shape(g, records["eager"]) + self._memory(g)
        found += self._schedules(g.step)
        if self._recompute is not None:
            found += self._recompute.check(graph, self._reports.get("graph", {}), slots)
        return found

    def _schedules(self, step: int) -> list[Divergence]:
        """An engine that schedules for itself must schedule eager and graph alike (until a near tie parts them)."""
        eager, graph = (getattr(e.last_step_info, "schedule", None) for _, e in self._engines())
        if eager is None or graph is None or _same_runs(eager, graph) or self._parting.parted:
            return []
        return [
            Divergence(
                "value",
                step,
                "schedule",
                "eager vs graph",
                [(r.request_id, r.query_tokens, r.first_position, r.produces) for r in eager.runs],
                [(r.request_id, r.query_tokens, r.first_position, r.produces) for r in graph.runs],
                detail="(request, query tokens, first position, produces) of every request the step ran",
            )
        ]

    def _state(self, t: int, records: dict[str, StepRecord]) -> list[Divergence]:
        """Eager vs graph on every buffer's meaningful rows, then each engine's free slots.

        With a float model, float buffers are compared within the tolerance; once
        requests have parted at a near tie only per-slot buffers of the slots both
        engines give the same unparted request are compared (cache blocks and packed
        rows follow the scheduling, which may then differ).
        """
        eager, graph = self.eager.state_snapshot(), self.graph.state_snapshot()
        running = {slot: rid for rid, slot in records["graph"].slots}
        if not self._parting.parted:
            found = diff_states(eager, graph, t, "eager vs graph", running, tolerance=self._tolerance)
        else:
            same = set(records["eager"].slots) & set(records["graph"].slots)
            kept = {slot for rid, slot in same if rid not in self._parting.parted}
            found = diff_states(eager, graph, t, "eager vs graph", running, tolerance=self._tolerance, only_slots=kept)
        self._occupants.update(running)
        for name, state in (("eager engine", eager), ("graph engine", graph)):
            found += check_hygiene(state, t, name, self._occupants)
        return found

    def _address(self, rec: StepRecord) -> list[Divergence]:
        found = []
        for b in rec.bindings:
            if not b.stale or (b.graph, b.name) in self._freed_seen:
                continue
            if not b.alive:
                self._freed_seen.add((b.graph, b.name))
            found.append(
                Divergence(
                    "address",
                    rec.step,
                    b.name,
                    "graph capture vs replay",
                    hex(b.captured_ptr),
                    hex(b.current_ptr) if b.current_ptr is not None else None,
                    detail=f"{b.graph}: "
                    + (
                        "captured storage was freed"
                        if not b.alive
                        else "buffer rebound after capture; the graph reads the old storage"
                    ),
                )
            )
        return found

    def _freed_inputs(self, t: int) -> list[Divergence]:
        """Static inputs of any captured graph whose storage is gone, before step ``t`` runs."""
        consequence = (
            "the emulator still holds it, so the step runs and shows the stale read"
            if self._emulated
            else "replaying the graph would read freed memory, so the step was not run"
        )
        found = []
        for kind, bucket, graph in captured_graphs(self.graph):
            label = _graph_label(kind, bucket)
            for inp in graph.dead_inputs():
                name = input_label(inp)
                if (label, name) in self._freed_seen:
                    continue
                self._freed_seen.add((label, name))
                found.append(
                    Divergence(
                        "address",
                        t,
                        name,
                        "graph capture vs replay",
                        hex(inp.data_ptr),
                        None,
                        detail=f"{label}: captured storage was freed before this step; {consequence}",
                    )
                )
        return found

    def _shape(self, rec: StepRecord, eager: StepRecord) -> list[Divergence]:
        if self.capabilities.buckets is not None:
            found = self._declared_buckets(rec)
        else:
            found = self._capture_size_buckets(rec)
        rescheduled = bool(self._parting.parted) and rec.slots != eager.slots  # after a near tie (numeric)
        if rec.real_tokens != eager.real_tokens and not rescheduled:
            found.append(
                Divergence("shape", rec.step, "real_tokens", "eager vs graph", eager.real_tokens, rec.real_tokens)
            )
        return found

    def _declared_buckets(self, rec: StepRecord) -> list[Divergence]:
        """The engine's own padding policy (``graphcheck.buckets``), recomputed from the real sizes it reports."""
        report, policy = report_extras(self.graph.last_step_info), self.capabilities.buckets
        values = policy_values(self.scenario.config.engine_options, report.limits, self.capabilities.options)
        found: list[Divergence] = []
        tokens = engine_extras(self.graph, sizes=True).tokens
        if tokens is not None and rec.padded_tokens > tokens:
            found.append(
                Divergence(
                    "shape", rec.step, "buffer capacity (tokens)", "padded tokens vs buffers", tokens, rec.padded_tokens
                )
            )
        if rec.bucket is None:
            return found + check_unused_graph(policy, rec.step, report, self.graph.graphs, values)
        found += check_padding(policy, rec.step, report, values)
        graphs = self.graph.graphs
        if rec.bucket in graphs:
            target = graph_extras(graphs[rec.bucket].target)
            found += check_host_values(rec.step, report, target, _graph_label("target", rec.bucket))
        found += check_graph_count(policy, rec.step, len(graphs), values, report.graph_sets)
        return found

    def _capture_size_buckets(self, rec: StepRecord) -> list[Divergence]:
        """graphcheck's own policy: the smallest capture size >= R on decode-only steps, eager otherwise."""
        has_prefill = self.graph.last_step_info.has_prefill
        want = expected_bucket(self.scenario, rec.real_bsz, has_prefill)
        found = []
        if rec.bucket != want:
            found.append(
                Divergence(
                    "shape",
                    rec.step,
                    "bucket",
                    "policy vs graph engine",
                    want,
                    rec.bucket,
                    detail=f"R={rec.real_bsz}, prefill={has_prefill}",
                )
            )
        if rec.used_graph:
            padded = rec.bucket * self.scenario.config.tokens_per_request
            if rec.padded_tokens != padded:
                found.append(
                    Divergence("shape", rec.step, "padded_tokens", "policy vs graph engine", padded, rec.padded_tokens)
                )
        return found

    def _memory(self, rec: StepRecord) -> list[Divergence]:
        """Memory must stay flat across replays once every graph has replayed once.

        An engine that captures lazily (``StepReport.captured``) grows by each new graph: a
        capture starts the count again, and replays of the graphs that exist must stay flat."""
        graphs = len(self.graph.graphs)
        if getattr(self.graph.last_step_info, "captured", False) or graphs != self._graph_count:
            # A pipelined engine reports a capture with the batch it was for, a call after the
            # graph came to exist: the count of graphs says when.
            self._replays, self._memory_baseline, self._graph_count = 0, None, graphs
        if not rec.used_graph:
            return []
        self._replays += 1
        if self._replays <= 1 or self._memory_baseline is None:
            self._memory_baseline = rec.memory_bytes
            return []
        if rec.memory_bytes > self._memory_baseline:
            return [
                Divergence(
                    "memory",
                    rec.step,
                    "memory_bytes",
                    "replay vs first replay",
                    self._memory_baseline,
                    rec.memory_bytes,
                    detail=f"+{rec.memory_bytes - self._memory_baseline} bytes since the first replay",
                )
            ]
        return []

    def _check_capacity(self, engine: Any = None) -> None:
        if self.capabilities.layout == "packed":  # no slots: padded tokens are checked every step
            return
        cfg = self.scenario.config
        have = (engine or self.graph).sizes.slots
        if have < cfg.max_padded_reqs:
            self.outcome.divergences.append(
                Divergence(
                    "shape",
                    0,
                    "buffer capacity (slots)",
                    "max(max_num_seqs, largest bucket) + 1 vs buffers",
                    cfg.max_padded_reqs,
                    have,
                )
            )

    def _fail(self, kind: str, t: int, where: str, exc: BaseException) -> None:
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        if self.outcome.raised_at is None:
            self.outcome.raised_at = engine_frame(exc)
        self.outcome.divergences.append(
            Divergence(kind, t, where, "engine", None, f"{type(exc).__name__}: {exc}", detail=text)
        )
        probe = getattr(self._backend, "device_error", None)
        if not self._emulated and callable(probe):
            self.outcome.device_error = probe()

    def _aborted(self, t: int, aborted: EngineAborted) -> None:
        """The engine raised what would end graphcheck: the run's engine error, reported as a crash at ``t``."""
        self.outcome.engine_error = f"{aborted.error} in {aborted.where}"
        if self.outcome.raised_at is None:
            self.outcome.raised_at = engine_frame(aborted.original)
        self.outcome.divergences.append(
            Divergence("crash", t, aborted.where, "engine", None, aborted.error, detail=aborted.detail)
        )

    def _hung(self, t: int, hung: EngineHung) -> None:
        """A call into the engine ran past the hang limit: a ``hang`` finding at ``t`` (its engines dropped)."""
        self.outcome.hung = str(hung)
        self.outcome.divergences.append(
            Divergence(
                "hang", t, hung.where, "engine", f"done within {hung.limit_s:g} s", "still running", detail=str(hung)
            )
        )


#: Exception type names (anywhere in the MRO) that are allocation failures: torch.OutOfMemoryError
#: (torch.cuda.OutOfMemoryError is the same class) and its device variants.
_OOM_TYPE_NAMES = frozenset({"OutOfMemoryError", "ResourceExhaustedError"})
#: Lower-case message fragments of allocation failures: torch's CPU allocator ("can't allocate
#: memory"), CUDA / NPU / XPU ("out of memory", CUBLAS_STATUS_ALLOC_FAILED), paddle
#: ("(ResourceExhausted) Fail to alloc memory"), C++ std::bad_alloc.
_OOM_MESSAGES = (
    "out of memory",
    "can't allocate memory",
    "cannot allocate memory",
    "could not allocate",
    "failed to allocate",
    "fail to alloc",
    "alloc_failed",
    "std::bad_alloc",
    "resourceexhausted",
    "memory allocation failed",
)


def _same_runs(eager: Any, graph: Any) -> bool:
    """Whether two schedules ran the same requests alike (their cache reports are the engines' own)."""
    return (eager.runs, eager.pipeline_depth) == (graph.runs, graph.pipeline_depth)


def is_out_of_memory(exc: BaseException | None) -> bool:
    """Whether ``exc``, or an exception it was raised from or while handling, is an allocation failure.

    MemoryError (NumPy's and Paddle's allocation errors are MemoryErrors), torch's
    OutOfMemoryError, or a RuntimeError (or any other) whose message says the allocator
    could not allocate.
    """
    for _ in range(8):  # a bounded walk of __cause__ / __context__
        if exc is None:
            return False
        if isinstance(exc, MemoryError) or any(c.__name__ in _OOM_TYPE_NAMES for c in type(exc).__mro__):
            return True
        try:
            text = str(exc)[:4000].lower()
        except Exception:
            text = ""
        if any(fragment in text for fragment in _OOM_MESSAGES):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def _out_of_memory(found: MemoryEstimate | None, where: str, exc: BaseException) -> EngineOutOfMemory:
    estimate = found.total if found is not None else None
    try:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    except Exception:
        first = ""
    first = first if len(first) <= 200 else first[:197] + "..."
    known = (
        f"the engine's estimate for this scenario is {format_bytes(estimate)}"
        if estimate is not None
        else "the engine gives no memory estimate"
    )
    message = (
        f"out of memory in {where}: {type(exc).__name__}: {first} ({known}; the memory gate "
        f"rejects estimates above {MAX_ENGINE_MEMORY_ENV}, default {format_bytes(DEFAULT_MAX_ENGINE_BYTES)}). "
        "Not a divergence of the engine"
    )
    detail = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return EngineOutOfMemory(message, estimate_bytes=estimate, where=where, detail=detail)


#: Libraries whose frames are never the engine's own code.
_LIBRARIES = frozenset({"torch", "torch_npu", "paddle", "numpy", "hypothesis", "_pytest", "pluggy", "importlib"})


def _harness_dirs() -> tuple[str, ...]:
    """Folders of the harness, the graph runners and what engines declare machinery (the built-in
    engine's array facade: ``graphcheck.capture.sites.add_machinery``): not the engine's own code."""
    from graphcheck.capture.sites import machinery_folders

    folders = (Path(__file__).resolve().parent, *(Path(p).resolve() for p in machinery_folders()))
    return tuple(str(p) for p in folders)


def engine_frame(exc: BaseException) -> tuple[str, str, int] | None:
    """(function, file, line) of the innermost frame of ``exc``'s traceback in the engine's own code."""
    harness = _harness_dirs()
    found = None
    for frame in traceback.extract_tb(exc.__traceback__):
        path = Path(frame.filename).resolve()
        if str(path).startswith(harness) or _LIBRARIES & set(path.parts) or not path.suffix == ".py":
            continue
        found = (frame.name, frame.filename, frame.lineno or 0)
    return found


def capabilities_of(factory: Any) -> EngineCapabilities:
    """What ``factory`` declares (``capabilities``), else graphcheck's defaults."""
    declared = getattr(factory, "capabilities", None)
    return declared if isinstance(declared, EngineCapabilities) else EngineCapabilities()


def supports_snapshots(engine: Any) -> bool:
    """Whether ``engine`` implements the optional ``state_snapshot()`` (``graphcheck.adapter.StateSnapshots``)."""
    return callable(getattr(engine, "state_snapshot", None))
