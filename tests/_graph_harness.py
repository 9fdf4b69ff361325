"""Small graphs for the graph-runner tests (not collected by pytest).

* Kernels in torch's spelling, shared by the emulated, cuda and npu runner tests
  (paddle's in-place ``copy_`` takes a ``blocking`` flag: tests/test_graphs_paddle.py
  keeps its own ``add_into``/``scale_``/``sum_fields``).
* ``Bufs``/``names_of``: three named buffers, ``out = x + y``.
* Checks whose bodies are the same for the emulated runner on torch and on paddle:
  each takes the runner and a ``Framework`` (how to make and read that framework's
  tensors, and its in-place kernels), and is named after the test that calls it.
"""

from __future__ import annotations

import gc
from dataclasses import dataclass
from typing import Any, Callable

import pytest

from graphcheck.capture import kernels
from graphcheck.capture.base import CaptureError, HostSyncInCapture

# --------------------------------------------------------------------------- kernels


@kernels.kernel
def add_into(out, a, b):
    out.copy_(a + b)


@kernels.kernel
def make_sum(a, b):
    return a + b


@kernels.kernel
def scale_(t, factor):
    t.mul_(factor)


@kernels.kernel
def item_kernel(a):
    return a.sum().item()


@kernels.kernel
def host_copy_kernel(a):
    kernels.host_sync("to_host")
    return a * 1


# --------------------------------------------------------------------------- buffers


@dataclass
class Bufs:
    """The buffers of a small graph: ``out = x + y`` (tensors of any framework)."""

    x: Any
    y: Any
    out: Any


def names_of(bufs: Bufs) -> dict[int, str]:
    """The capture's ``names`` for ``bufs``: each tensor under its field name."""
    return {id(bufs.x): "x", id(bufs.y): "y", id(bufs.out): "out"}


@dataclass(frozen=True)
class Framework:
    """What the shared emulated-runner checks need from one framework."""

    tensor: Callable[[list[float]], Any]  # a 1-D float tensor with these values
    host: Callable[[Any], list]  # a tensor's values, read on the host
    add_into: Callable[..., None]  # kernel: out <- a + b
    scale_: Callable[..., None]  # kernel: t <- t * factor
    sum_fields: Callable[[Bufs], None]  # kernel: bufs.out <- bufs.x + bufs.y

    def bufs(self) -> Bufs:
        """x = [1, 2, 3], y = [10, 20, 30], out = [0, 0, 0]."""
        return Bufs(self.tensor([1.0, 2.0, 3.0]), self.tensor([10.0, 20.0, 30.0]), self.tensor([0.0, 0.0, 0.0]))


# --------------------------------------------------------------------------- checks shared by torch and paddle


def rebound_buffer_is_read_stale_on_replay(runner: Any, fw: Framework) -> None:
    bufs = fw.bufs()
    graph = runner.capture(lambda: fw.add_into(bufs.out, bufs.x, bufs.y), names=names_of(bufs))
    old_ptr = bufs.x.data_ptr()
    bufs.x = fw.tensor([100.0, 200.0, 300.0])  # the old tensor is now unreferenced by the engine
    graph.replay()
    assert fw.host(bufs.out) == [11.0, 22.0, 33.0]  # old x, not the new one
    stale = graph.stale_inputs({"x": bufs.x, "y": bufs.y, "out": bufs.out})
    assert [(inp.name, inp.data_ptr, ptr) for inp, ptr in stale] == [("x", old_ptr, bufs.x.data_ptr())]


def rebound_dataclass_field_is_read_stale(runner: Any, fw: Framework) -> None:
    bufs = fw.bufs()
    graph = runner.capture(lambda: fw.sum_fields(bufs), names=names_of(bufs))
    bufs.y = fw.tensor([5.0, 5.0, 5.0])
    graph.replay()
    assert fw.host(bufs.out) == [11.0, 22.0, 33.0]
    assert [inp.name for inp, _ in graph.stale_inputs({"y": bufs.y})] == ["y"]


def failed_capture_restores_state_and_allows_the_next_capture(runner: Any, fw: Framework) -> None:
    bufs = fw.bufs()

    def region():
        fw.scale_(bufs.x, 2.0)
        item_kernel(bufs.x)

    with pytest.raises(HostSyncInCapture):
        runner.capture(region)
    assert fw.host(bufs.x) == [1.0, 2.0, 3.0]
    graph = runner.capture(lambda: fw.scale_(bufs.x, 2.0))
    graph.replay()
    assert fw.host(bufs.x) == [2.0, 4.0, 6.0]


def state_mutated_in_capture_is_restored_and_replay_mutates_it(runner: Any, fw: Framework) -> None:
    bufs = fw.bufs()

    def region():
        fw.scale_(bufs.x, 3.0)
        fw.add_into(bufs.out, bufs.x, bufs.y)

    graph = runner.capture(region)
    assert fw.host(bufs.x) == [1.0, 2.0, 3.0]
    assert fw.host(bufs.out) == [0.0, 0.0, 0.0]
    graph.replay()
    assert fw.host(bufs.x) == [3.0, 6.0, 9.0]
    assert fw.host(bufs.out) == [13.0, 26.0, 39.0]
    graph.replay()  # the recorded scalar 3.0 is replayed too
    assert fw.host(bufs.x) == [9.0, 18.0, 27.0]


def kernel_returning_a_different_shape_on_replay_fails(runner: Any, ones3: Any) -> None:
    """``ones3``: a tensor of three ones."""

    class Meta:  # not a dataclass: passed by identity, so its later state leaks into replay
        n = 3

    @kernels.kernel
    def dynamic(a, meta):
        return a[: meta.n] * 1

    meta = Meta()
    graph = runner.capture(lambda: dynamic(ones3, meta))
    meta.n = 2
    with pytest.raises(CaptureError, match="dynamic"):
        graph.replay()


def dead_inputs_report_a_freed_static_input(runner: Any, fw: Framework) -> None:
    bufs = fw.bufs()
    graph = runner.capture(lambda: fw.add_into(bufs.out, bufs.x, bufs.y), names=names_of(bufs))
    assert graph.dead_inputs() == []
    bufs.y = fw.tensor([0.0, 0.0, 0.0])  # drops the only engine reference to the captured y
    gc.collect()
    assert [inp.name for inp in graph.dead_inputs()] == ["y"]
    graph.replay()  # the graph still reads the freed memory, as a GPU would until it is reused
    assert fw.host(bufs.out) == [11.0, 22.0, 33.0]


def memory_bytes_counts_graph_owned_storage(runner: Any, ones256: Any) -> None:
    """``ones256``: a float32 tensor of 256 ones."""
    assert runner.memory_bytes() == 0
    graph = runner.capture(lambda: make_sum(ones256, ones256))
    assert runner.memory_bytes() == 256 * 4
    for _ in range(3):
        graph.replay()
    assert runner.memory_bytes() == 256 * 4
    del graph
    gc.collect()
    assert runner.memory_bytes() == 0
