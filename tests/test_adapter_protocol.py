"""The adapter protocol (graphcheck.adapter) is enough to check an engine.

``SlotEngine`` is a second adapter. It hides the built-in engine behind its
own layout: its own buffer names (``buf/infer_seed``, ``kv/k_cache``,
``param/wq``), its own step report, capacity and runner records, and its own
static-input audit. Capture and replay stay with the wrapped engine, per
bucket; at construction the adapter records, for every captured graph, the
buffers that graph reads (identity, data pointer, shape, dtype and a weak
reference), as an engine that owns its static buffers would, and answers the
harness's stale and dead queries from that record alone. Its public members
are exactly the protocol's, so a clean lockstep run proves the harness needs
nothing else; injected bugs prove the checks still bite through it.
"""

from __future__ import annotations

import dataclasses
import weakref
from dataclasses import dataclass
from typing import Any, Iterator, Mapping, Sequence

import pytest
from hypothesis import settings

from graphcheck.adapter import (
    CaptureBucket,
    CapturedGraph,
    EngineAdapter,
    GraphInput,
    RunnerInfo,
    SlotCapacity,
    StateSnapshots,
    StepReport,
)
from graphcheck.check.checker import Checker
from graphcheck.check.engines import engine_from_factory
from graphcheck.scenario import RequestSpec
from graphcheck.search.builtin import demo_scenario
from graphcheck.step_result import StepResult

torch = pytest.importorskip("torch")

from graphcheck.backends.engine import Engine  # noqa: E402
from graphcheck.capture.devices import resolve  # noqa: E402
from graphcheck.suites import SUITES  # noqa: E402
from graphcheck.suites.properties import property_test  # noqa: E402


def own_name(inner: str) -> str:
    """SlotEngine's name for a buffer the wrapped engine calls ``inner``."""
    if inner.startswith("weights."):
        return "param/" + inner.removeprefix("weights.")
    if inner.endswith("_cache"):
        return "kv/" + inner
    return "buf/" + inner


@dataclass(frozen=True)
class Row:
    """One static input as SlotEngine recorded it (a GraphInput)."""

    name: str
    tensor_id: int
    data_ptr: int
    shape: tuple[int, ...]
    dtype: str


class AuditedGraph:
    """SlotEngine's audit record of one captured graph (a CapturedGraph)."""

    def __init__(self, read: Mapping[str, Any]):
        self._rows = tuple(Row(n, id(t), t.data_ptr(), tuple(t.shape), str(t.dtype)) for n, t in read.items())
        self._refs = tuple(weakref.ref(t) for t in read.values())

    @property
    def static_inputs(self) -> Sequence[Row]:
        return self._rows

    def stale_inputs(self, current: Mapping[str, Any]) -> Iterator[tuple[Row, int]]:
        for row, ref in zip(self._rows, self._refs):
            if row.name in current:
                now = current[row.name]
                ptr = now.data_ptr() if isinstance(now, torch.Tensor) else 0
                if now is not ref() or ptr != row.data_ptr:
                    yield row, ptr

    def dead_inputs(self) -> Iterator[Row]:
        return (row for row, ref in zip(self._rows, self._refs) if ref() is None)


@dataclass(frozen=True)
class Bucket:
    target: AuditedGraph | None
    draft: AuditedGraph | None


@dataclass(frozen=True)
class SlotStep:
    bucket: int | None
    used_graph: bool
    real_bsz: int
    num_running: int
    real_tokens: int
    padded_tokens: int
    has_prefill: bool
    slots: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class Capacity:
    slots: int


@dataclass(frozen=True)
class RunnerTag:
    name: str


class SlotEngine:
    """The built-in engine behind SlotEngine's own layout; public members: the protocol's only."""

    def __init__(self, config, weights, *, device, use_graphs, faults):
        self._core = Engine(config, weights, device=device, use_graphs=use_graphs, faults=faults)
        self._graphs = {size: self._audit(graphs) for size, graphs in self._core.graphs.items()}
        runner = self._core.runner
        self._runner = RunnerTag(f"slot-engine/{runner.name}") if runner is not None else None
        self._sizes = Capacity(self._core.sizes.slots)
        self._last: SlotStep | None = None

    def _audit(self, graphs: Any) -> Bucket:
        """Record, per graph of a bucket, the named buffers it reads (its captured arguments)."""
        named = {id(t): (own_name(n), t) for n, t in self._core.buffer_tensors().items()}

        def record(graph: Any) -> AuditedGraph | None:
            if graph is None:
                return None
            read = [named[inp.tensor_id] for inp in graph.static_inputs if inp.tensor_id in named]
            return AuditedGraph(dict(read))

        return Bucket(record(graphs.target), record(graphs.draft))

    # ---- the protocol
    def submit(self, spec: RequestSpec) -> None:
        self._core.submit(spec)

    def abort(self, request_id: str) -> None:
        self._core.abort(request_id)

    def step(self, t: int, overrides: Mapping[str, int]) -> StepResult:
        result = self._core.step(t, overrides)
        info = self._core.last_step_info
        self._last = SlotStep(
            info.bucket,
            info.used_graph,
            info.real_bsz,
            info.num_running,
            info.real_tokens,
            info.padded_tokens,
            info.has_prefill,
            info.slots,
        )
        return result

    @property
    def last_step_info(self) -> SlotStep | None:
        return self._last

    @property
    def graphs(self) -> Mapping[int, Bucket]:
        return self._graphs

    def buffer_tensors(self) -> dict[str, Any]:
        return {own_name(n): t for n, t in self._core.buffer_tensors().items()}

    def memory_bytes(self) -> int:
        return self._core.memory_bytes()

    @property
    def runner(self) -> RunnerTag | None:
        return self._runner

    @property
    def sizes(self) -> Capacity:
        return self._sizes


class RebindingSlotEngine(SlotEngine):
    """A bug in the adapter's own step: at step 4 it swaps infer_seed for a copy (assigned, not copied into)."""

    def step(self, t: int, overrides: Mapping[str, int]) -> StepResult:
        if t == 4 and self._core.use_graphs:
            self._core.buffers.infer_seed = self._core.buffers.infer_seed.clone()
        return super().step(t, overrides)


def public(obj: Any) -> set[str]:
    return {name for name in dir(obj) if not name.startswith("_")}


def members(protocol: type) -> set[str]:
    return {name for name in vars(protocol) if not name.startswith("_")}


@pytest.fixture(scope="module")
def cpu() -> Any:
    return resolve("cpu")


def test_protocol_names_exactly_what_the_lockstep_reads() -> None:
    assert members(EngineAdapter) == {
        "submit",
        "abort",
        "step",
        "last_step_info",
        "graphs",
        "buffer_tensors",
        "memory_bytes",
        "runner",
        "sizes",
    }
    assert members(CaptureBucket) == {"target", "draft"}
    assert members(CapturedGraph) == {"static_inputs", "stale_inputs", "dead_inputs"}
    assert members(GraphInput) == {"name", "tensor_id", "data_ptr", "shape", "dtype"}
    assert members(StepReport) == {
        "bucket",
        "used_graph",
        "real_bsz",
        "num_running",
        "real_tokens",
        "padded_tokens",
        "has_prefill",
        "slots",
    }
    assert members(RunnerInfo) == {"name"} and members(SlotCapacity) == {"slots"}
    assert members(StateSnapshots) == {"state_snapshot"}  # optional: the lockstep asks for it only if present


def test_the_builtin_engine_is_an_adapter(cpu) -> None:
    scenario = demo_scenario(num_steps=3)
    from graphcheck.reference import make_weights

    engine = Engine(scenario.config, make_weights(scenario.config), device=cpu, use_graphs=True, faults=())
    engine.submit(scenario.requests[0])
    engine.step(0, {})
    assert isinstance(engine, EngineAdapter)
    assert isinstance(engine.last_step_info, StepReport)
    assert isinstance(engine.runner, RunnerInfo) and isinstance(engine.sizes, SlotCapacity)
    for bucket in engine.graphs.values():
        assert isinstance(bucket, CaptureBucket)
        for graph in (bucket.target, bucket.draft):
            assert graph is None or isinstance(graph, CapturedGraph)
            assert graph is None or all(isinstance(row, GraphInput) for row in graph.static_inputs)


def test_the_second_adapter_exposes_only_the_protocol(cpu) -> None:
    scenario = demo_scenario(num_steps=2)
    from graphcheck.reference import make_weights

    engine = SlotEngine(scenario.config, make_weights(scenario.config), device=cpu, use_graphs=True, faults=())
    assert public(engine) == members(EngineAdapter)
    assert isinstance(engine, EngineAdapter)
    bucket = next(iter(engine.graphs.values()))
    assert public(bucket) == members(CaptureBucket) and public(bucket.target) == members(CapturedGraph)
    assert public(bucket.target.static_inputs[0]) == members(GraphInput)
    assert all(row.name.split("/")[0] in ("buf", "kv", "param") for row in bucket.target.static_inputs)
    # StepReport is structural: SlotStep shares nothing with the built-in StepInfo but the fields.
    assert {f.name for f in dataclasses.fields(SlotStep)} == members(StepReport)


def test_the_second_adapter_runs_clean_in_lockstep(cpu) -> None:
    # SlotEngine lacks the optional StateSnapshots protocol: every other check still runs.
    from graphcheck.check.lockstep import Lockstep

    assert (
        not hasattr(SlotEngine, "state_snapshot")
        and not Lockstep(demo_scenario(), cpu, engine_factory=SlotEngine).snapshots
    )
    outcome = Checker(cpu, engine_from_factory(SlotEngine))(demo_scenario())
    assert outcome.clean, [d.headline() for d in outcome.failures]
    assert outcome.runner == "slot-engine/emulated"
    bindings = [b for r in outcome.records["graph"] if r.used_graph for b in r.bindings]
    assert bindings and not any(b.stale for b in bindings)
    assert {"buf/infer_seed", "kv/k_cache", "param/wq"} <= {b.name for b in bindings}


def test_a_rebinding_in_the_adapter_is_an_address_divergence_under_its_own_name(cpu) -> None:
    outcome = Checker(cpu, engine_from_factory(RebindingSlotEngine))(demo_scenario())
    first = outcome.first
    assert first is not None and (first.kind, first.step, first.tensor) == ("address", 4, "buf/infer_seed")
    assert first.detail.startswith("target[")  # the old storage is stale, and freed once nothing holds it


def test_an_injected_engine_fault_shows_through_the_adapter(cpu) -> None:
    outcome = Checker(cpu, engine_from_factory(SlotEngine))(demo_scenario(), faults=["rebind-output-offsets"])
    first = outcome.first
    assert first is not None and (first.kind, first.tensor) == ("address", "buf/cu_seqlens_out")


def test_a_suite_property_runs_on_the_second_adapter() -> None:
    # Every graph scope and NAIVE mode, through suites.properties.property_test's engine_factory.
    test = property_test(SUITES["addresses"], engine_factory=SlotEngine)
    settings(settings.default, max_examples=min(settings.default.max_examples, 6), database=None)(test)()
