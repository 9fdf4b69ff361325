"""The framework-neutral parts of the graph-runner interface, on fake tensors."""

from __future__ import annotations

import gc
import weakref
from dataclasses import dataclass, field
from typing import Any

import pytest

from graphcheck.capture.base import (
    CaptureError,
    EscapedOpError,
    Graph,
    GraphRunner,
    HostSyncInCapture,
    PoisonedTensorError,
    Region,
    StaticInput,
    StaticInputTable,
    iter_tensors,
)


class FakeTensor:
    def __init__(self, ptr: int, shape=(4,), dtype="float32", storage: int | None = None, base=None):
        self.ptr, self.shape, self.dtype = ptr, tuple(shape), dtype
        self.storage = ptr if storage is None else storage
        self.base = base

    def view(self, offset: int) -> FakeTensor:
        return FakeTensor(self.ptr + offset, self.shape, self.dtype, self.storage, base=self.base or self)


class FakeOps:
    def is_tensor(self, obj: Any) -> bool:
        return isinstance(obj, FakeTensor)

    def data_ptr(self, t: FakeTensor) -> int:
        return t.ptr

    def shape(self, t: FakeTensor) -> tuple[int, ...]:
        return t.shape

    def dtype_name(self, t: FakeTensor) -> str:
        return t.dtype

    def storage_key(self, t: FakeTensor) -> int:
        return t.storage

    def view_base(self, t: FakeTensor):
        return t.base


OPS = FakeOps()


class FakeGraph(Graph):
    def __init__(self, table: StaticInputTable) -> None:
        self._ops = OPS
        self.outputs = None
        self.static_inputs = tuple(table.inputs)
        self._root_refs = tuple(weakref.ref(r) for r in table.roots)

    def replay(self) -> None:
        pass


@dataclass
class Pair:
    a: Any
    b: Any
    meta: dict = field(default_factory=dict)


def test_iter_tensors_walks_containers_and_dataclasses():
    t = [FakeTensor(i) for i in range(6)]
    obj = (t[0], [t[1], 3, "s"], {"k": t[2]}, Pair(t[3], (t[4],), {"deep": Pair(t[5], None)}), object())
    assert list(iter_tensors(obj, OPS.is_tensor)) == t
    assert list(iter_tensors(Pair, OPS.is_tensor)) == []  # a dataclass type is no instance


def test_error_hierarchy():
    assert issubclass(HostSyncInCapture, CaptureError) and issubclass(EscapedOpError, CaptureError)
    assert issubclass(CaptureError, RuntimeError)
    assert issubclass(PoisonedTensorError, RuntimeError) and not issubclass(PoisonedTensorError, CaptureError)


def test_interfaces_are_abstract():
    with pytest.raises(TypeError):
        GraphRunner()  # type: ignore[abstract]
    with pytest.raises(TypeError):
        Graph()  # type: ignore[abstract]


def test_static_input_is_frozen():
    inp = StaticInput("x", 1, 2, (3,), "int64")
    with pytest.raises(AttributeError):
        inp.name = "y"  # type: ignore[misc]


def _table(names=None):
    region = Region()
    return region, StaticInputTable(OPS, region, names)


def test_table_skips_region_allocations_and_dedupes():
    x, y = FakeTensor(100), FakeTensor(200, shape=(2, 3), dtype="int32")
    region, table = _table({id(x): "x"})
    made = FakeTensor(300)
    region.note_created(OPS, made, fresh_storage=True)
    table.add_call_args(((x, made), {"y": y}))
    table.add_call_args(((x,), {}))
    assert table.inputs == [
        StaticInput("x", id(x), 100, (4,), "float32"),
        StaticInput(None, id(y), 200, (2, 3), "int32"),
    ]


def test_table_records_a_region_view_as_its_named_base():
    x = FakeTensor(100)
    region, table = _table({id(x): "x"})
    view = x.view(8)
    region.note_created(OPS, view, fresh_storage=False)
    table.add(view)
    table.add(x)
    assert table.inputs == [StaticInput("x", id(x), 100, (4,), "float32")]


def test_a_preexisting_view_is_its_own_static_input():
    x = FakeTensor(100)
    v = x.view(8)  # made before capture: the engine holds v itself
    region, table = _table({id(v): "v"})
    table.add(v)
    assert table.inputs == [StaticInput("v", id(v), 108, (4,), "float32")]


def test_stale_inputs_reports_rebinding_and_pointer_moves():
    x, y, z = FakeTensor(100), FakeTensor(200), FakeTensor(300)
    _, table = _table({id(x): "x", id(y): "y", id(z): "z"})
    table.add_call_args((x, y, z))
    graph = FakeGraph(table)
    del table
    new_x = FakeTensor(900)
    y.ptr = 250  # same object, moved storage (as after set_/resize)
    stale = graph.stale_inputs({"x": new_x, "y": y, "z": z, "unknown": FakeTensor(1)})
    assert [(inp.name, inp.data_ptr, ptr) for inp, ptr in stale] == [("x", 100, 900), ("y", 200, 250)]
    assert graph.stale_inputs({"z": None}) == [(graph.static_inputs[2], 0)]


def test_dead_inputs_follow_the_engine_objects():
    x, y = FakeTensor(100), FakeTensor(200)
    _, table = _table({id(x): "x", id(y): "y"})
    table.add_call_args((x, y))
    graph = FakeGraph(table)
    del table
    assert graph.dead_inputs() == []
    del y
    gc.collect()
    assert [inp.name for inp in graph.dead_inputs()] == ["y"]
