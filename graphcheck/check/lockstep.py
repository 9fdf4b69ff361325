"""Run one scenario on the reference, the eager engine and the graph engine in lockstep.

Every step, the script's events go to all three decoders, each runs the step,
and each yields a StepRecord. The records are diffed at once (eager vs graph
bit for bit; both against the reference, honouring ambiguity), and the graph
engine's replayed graphs are checked for stale or dead static inputs, for the
right bucket and padding, and for memory growth. The run stops after the
first step with a failing divergence: everything after it would only repeat
the consequences.

:class:`Lockstep` coordinates; each job is a part of its own: building and capturing
the engine pair, all or nothing (``graphcheck.check.pair``), comparing the three
(``graphcheck.check.step_diff``), auditing the graph engine (``graphcheck.check.audits``,
with ``graphcheck.check.bindings``), and turning what an engine raised into a finding
(``graphcheck.check.failures``).

The harness talks to engines only through the protocol of
``graphcheck.adapter`` (an ``EngineFactory`` builds each ``EngineAdapter``:
``submit``/``abort``/``step``, ``last_step_info``, ``graphs``,
``buffer_tensors()``, ``memory_bytes()``, ``runner.name``, ``sizes.slots``;
optional members through its typed records), and reaches the built-in engine as
any other, through its ``--engine`` SPEC (docs/adapters.md). torch and paddle
are imported only through the engines and ``graphcheck.capture``.
"""

from __future__ import annotations

import time
import weakref
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Sequence

from graphcheck.adapter import EngineFactory, ReportExtras, factory_extras, report_extras
from graphcheck.check.audits import GraphAudit
from graphcheck.check.bindings import BindingsMemo, bindings_of
from graphcheck.check.boundary import EngineAborted, call, raised_in
from graphcheck.check.diff import Divergence
from graphcheck.check.engines import EngineSpecError, builtin_factory
from graphcheck.check.failures import FailureLog, is_out_of_memory, out_of_memory
from graphcheck.check.memory_gate import admit
from graphcheck.check.noise import calibration_for
from graphcheck.check.numeric import tolerance_for
from graphcheck.check.oracles import make_oracle, resolve_oracle
from graphcheck.check.pair import EngineLease, EnginePair, PairNotBuilt, build_pair
from graphcheck.check.pool import EnginePool
from graphcheck.check.promises import bucket_declared
from graphcheck.check.records import CheckOutcome, StepRecord
from graphcheck.check.step_diff import StepDiff
from graphcheck.check.timings import LockstepTimings
from graphcheck.check.watchdog import EngineHung
from graphcheck.driver import apply_events
from graphcheck.scenario import Scenario
from graphcheck.step_result import StepResult

_UNTIMED = nullcontext()
_SOURCES = ("reference", "eager", "graph")


class Lockstep:
    """Reference, eager engine and graph engine of one scenario, stepped together.

    Construction builds and captures the pair. ``pair`` is then the whole pair, or None
    when building or capturing it failed: the outcome holds that finding and :meth:`run`
    steps nothing. Never half a pair.
    """

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
        (not a finding: nothing can be checked). Without ``engine_factory``: the built-in
        engine, resolved from its SPEC.
        """
        factory = engine_factory or builtin_factory()
        self._estimate = admit(scenario, factory)  # MemoryLimitError before anything is built
        self.scenario, self.timings = scenario, timings
        self.capabilities = factory_extras(factory, capabilities=True).declared()
        oracle_name = resolve_oracle(oracle, scenario.config, self.capabilities.schedule)
        weights, self.oracle = self._harness(oracle_name, pool)
        self.outcome = CheckOutcome(
            scenario, backend.name, "none", faults=tuple(faults), oracle=oracle_name, engine=engine_label
        )
        self._failures = FailureLog(self.outcome, backend)
        self._lease = EngineLease(scenario, factory, backend, faults, engine_label, pool, self.outcome)
        self.audit = GraphAudit(scenario, self.capabilities, emulated=self._failures.emulated)
        self.comparison = StepDiff(self.oracle)
        self._engine_label = engine_label
        self._bindings: BindingsMemo = weakref.WeakKeyDictionary()  # bindings_of's memo
        self._t = 0  # the step under way
        self.pair: EnginePair | None = self._built(factory, weights, backend)

    # ------------------------------------------------------------------ building
    def _harness(self, oracle_name: str, pool: EnginePool | None) -> tuple[Any, Any]:
        """The model weights and the oracle (the reference's side); an allocation failure is the machine's."""
        from graphcheck.reference import make_weights

        config = self.scenario.config
        try:
            with self._phase("setup_harness"):
                weights = pool.weights(config) if pool is not None else make_weights(config)
                return weights, make_oracle(oracle_name, self.scenario, weights)
        except Exception as exc:
            if is_out_of_memory(exc):
                raise out_of_memory(self._estimate, "reference setup", exc) from exc
            raise

    def _built(self, factory: EngineFactory, weights: Any, backend: Any) -> EnginePair | None:
        """The pair (:meth:`_build`), or None with the engine's failure recorded as the finding."""
        try:
            return self._build(factory, weights, backend)
        except EngineAborted as aborted:  # the engine tried to end graphcheck: its own kind of engine error
            self._lease.broke()
            self._failures.aborted(0, aborted)
        except EngineHung as hung:
            self._lease.broke()
            self._failures.hung(0, hung)
        except Exception as exc:  # a member the harness reads after construction raised (sizes, runner, ...)
            if raised_in(exc) is None or is_out_of_memory(exc):
                raise
            self._lease.broke()
            self._failures.failed("capture", 0, f"engine construction: {raised_in(exc)}", exc)
        return None

    def _build(self, factory: EngineFactory, weights: Any, backend: Any) -> EnginePair | None:
        """The float calibration, then both engines built and captured (a failure there is the finding)."""
        config = self.scenario.config
        if tolerance_for(config.model) is not None:  # a float model: its band is measured
            cal = call("the float calibration", calibration_for, factory, backend, config, self.capabilities.fit)
            self.comparison = StepDiff(self.oracle, cal)
        try:
            pair = build_pair(self._lease, weights, self._estimate, self._phase)
        except PairNotBuilt as failed:  # a capture that fails is itself the finding
            self._failures.failed("capture", 0, failed.where, failed.cause)
            if failed.eager is not None:  # buffers too small for the buckets explain a failed capture
                self.outcome.divergences.extend(self.audit.capacity(failed.eager.sizes.slots))
            return None
        self.comparison.attach(pair, self.scenario)
        self.outcome.runner = pair.graph.runner.name if pair.graph.runner is not None else "none"
        self.audit.tokens = pair.graph_extras.tokens
        self.outcome.divergences.extend(self.audit.capacity(pair.graph.sizes.slots))
        return pair

    @property
    def eager(self) -> Any:
        """The eager engine (None without a pair)."""
        return self.pair.eager if self.pair is not None else None

    @property
    def graph(self) -> Any:
        """The graph engine (None without a pair)."""
        return self.pair.graph if self.pair is not None else None

    @property
    def snapshots(self) -> bool:
        """Whether both engines give state snapshots (``state`` and slot-hygiene checks run)."""
        return self.pair is not None and self.pair.snapshots

    def release(self) -> None:
        """Give the engines back to the pool (idempotent); an engine whose step raised is dropped."""
        self._lease.give_back(self.pair.engines() if self.pair is not None else ())

    # ------------------------------------------------------------------ running
    def run(self) -> CheckOutcome:
        started = time.perf_counter()
        if self.pair is not None:
            self._run(self.pair)
        self.outcome.elapsed_s = time.perf_counter() - started
        numeric = self.comparison.trace()
        if numeric is not None:
            self.outcome.numeric = numeric
        if self.outcome.device_error is None:
            self.release()
        if self.timings is not None:
            self.timings.wall += self.outcome.elapsed_s
            self.timings.steps += self.outcome.steps_run
            self.timings.runs += 1
        return self.outcome

    def _run(self, pair: EnginePair) -> None:
        """Every step, then the drain steps of a pipelined pair; what the engine raised, as its finding."""
        try:
            for t in range(self.scenario.num_steps):
                if not self.step(t):
                    return
            for t in range(self.scenario.num_steps, self.scenario.num_steps + pair.pipeline_depth):
                if not self.step(t, drain=True):  # batches still in flight after the last step
                    return
        except EngineAborted as aborted:
            self._lease.broke()
            self._failures.aborted(self._t, aborted)
        except EngineHung as hung:
            self._lease.broke()
            self._failures.hung(self._t, hung)
        except Exception as exc:  # an engine member the checks read raised (memory_bytes, state_snapshot, ...)
            if raised_in(exc) is None:
                raise  # graphcheck's own bug: its traceback is the report
            self._lease.broke()
            if is_out_of_memory(exc):
                raise out_of_memory(self._estimate, f"step {self._t} ({raised_in(exc)})", exc) from exc
            self._failures.failed("crash", self._t, raised_in(exc) or "engine", exc)

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
        pair = self._pair()
        self._t = t
        freed = self.audit.freed_inputs(pair.graph, t)
        if freed:
            self.outcome.divergences.extend(freed)
            if not self.audit.emulated:
                return False
        overrides = self.scenario.accept_overrides_at(t)
        results = self._step_engines(pair, t, overrides, drain)
        reports = self._step_reference(pair, t, overrides, drain, results) if results is not None else None
        if results is None or reports is None:
            return False
        self.outcome.steps_run = t + 1
        with self._phase("record"):
            records = {s: self._record(pair, s, t, results[s], reports) for s in _SOURCES}
        for source, record in records.items():
            self.outcome.records[source].append(record)
        with self._phase("diff"):
            found = self._checks(pair, records, reports)
        if pair.snapshots:
            with self._phase("state"):
                found += self._state(pair, t, records)
        self.outcome.divergences.extend(found)
        return not any(not d.ambiguous for d in found)

    def _pair(self) -> EnginePair:
        if self.pair is None:
            raise RuntimeError("no engine pair to step: building or capturing it failed (see the outcome)")
        return self.pair

    def _step_engines(self, pair: EnginePair, t: int, overrides: Any, drain: bool) -> dict[str, StepResult] | None:
        """Step ``t`` on the eager, then the graph engine; None once one of them crashed (recorded)."""
        results: dict[str, StepResult] = {}
        for source, decoder in pair.engines():
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
                self._lease.broke(source)
                if is_out_of_memory(exc):  # the machine's limit, not the engine's bug
                    raise out_of_memory(self._estimate, f"step {t} of the {source}", exc) from exc
                self._failures.failed("crash", t, source, exc)
                return None
        return results

    def _step_reference(
        self, pair: EnginePair, t: int, overrides: Any, drain: bool, results: dict[str, StepResult]
    ) -> dict[str, ReportExtras] | None:
        """The oracle's step into ``results``; each engine's optional report fields of the step (None
        once the reference crashed, recorded)."""
        try:
            with self._phase("reference"):
                self.comparison.take_reports(pair)
                for decoder in self.oracle.decoders():
                    if not drain:
                        apply_events(decoder, self.scenario, t)
                reports = {s: report_extras(e.last_step_info) for s, e in pair.engines()}
                schedules = {s: r.schedule for s, r in reports.items()}
                results["reference"] = self.oracle.step(t, overrides, results, self.comparison.reports, schedules)
        except (EngineAborted, EngineSpecError, EngineHung):
            raise
        except Exception as exc:
            if is_out_of_memory(exc):
                raise out_of_memory(self._estimate, f"step {t} of the reference", exc) from exc
            self._failures.failed("crash", t, "reference", exc)
            return None
        return reports

    def _phase(self, name: str) -> AbstractContextManager[None]:
        """Time the ``with`` body into ``timings.<name>``; a shared no-op when not timing."""
        return self.timings.phase(name) if self.timings is not None else _UNTIMED

    # ------------------------------------------------------------------ records and checks
    def _record(
        self, pair: EnginePair, source: str, t: int, result: StepResult, reports: dict[str, ReportExtras]
    ) -> StepRecord:
        if source == "reference":
            return StepRecord(source, t, result)
        engine, report = (pair.eager if source == "eager" else pair.graph), reports[source]
        info = engine.last_step_info
        slots = info.slots
        if info.used_graph:
            bucket_declared(self._engine_label, info.bucket, engine.graphs)
        audited = info.used_graph or report.captured  # a lazy capture: audit its table now
        bindings = bindings_of(engine, info.bucket, self._bindings) if audited else ()
        # Memory is judged on replays only (GraphAudit.memory); both engines are measured there, side by side.
        replayed = pair.graph.last_step_info.used_graph
        memory = engine.memory_bytes() if replayed else 0
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
            memory,
            report.schedule,
        )

    def _checks(
        self, pair: EnginePair, records: dict[str, StepRecord], reports: dict[str, ReportExtras]
    ) -> list[Divergence]:
        """The step's comparisons, then the graph engine's audits, causes before consequences."""
        graph, eager, parting = records["graph"], records["eager"], self.comparison.parting
        found = self.comparison.engines(records) + self.comparison.against_oracle(records)
        found += self.audit.address(graph) + self.audit.shape(pair.graph, graph, eager, reports["graph"], parting)
        found += self.audit.memory.check(graph, len(pair.graph.graphs), reports["graph"].captured)
        found += self.audit.schedules(graph.step, reports["eager"], reports["graph"], parting)
        return found + self.comparison.against_recompute(graph.result, graph.slot_of())

    def _state(self, pair: EnginePair, t: int, records: dict[str, StepRecord]) -> list[Divergence]:
        """Eager vs graph state snapshots and slot hygiene (``GraphAudit.state``)."""
        eager, graph = pair.eager_extras.state_snapshot, pair.graph_extras.state_snapshot
        assert eager is not None and graph is not None, "run only where pair.snapshots (both engines give them)"
        snapshots = (eager(), graph())
        return self.audit.state(snapshots, t, records, self.comparison.parting, self.comparison.tolerance)


__all__ = ["Lockstep"]
