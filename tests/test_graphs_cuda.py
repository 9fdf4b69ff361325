"""The CUDA graph runner keeps the emulator's contract on real CUDA graphs."""

from __future__ import annotations

import gc

import pytest

torch = pytest.importorskip("torch")

from graphcheck.capture import kernels  # noqa: E402
from graphcheck.capture.base import HostSyncInCapture  # noqa: E402

from _graph_harness import add_into, host_copy_kernel, item_kernel, make_sum, scale_  # noqa: E402

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


@kernels.kernel
def to_host_kernel(a):
    return a.cpu()


def cuda(values, dtype=torch.float32):
    return torch.tensor(values, dtype=dtype, device="cuda")


@pytest.fixture
def runner():
    from graphcheck.capture.cuda import CudaGraphRunner

    return CudaGraphRunner()


def test_rebound_buffer_is_read_stale_on_replay(runner):
    x, y, out = cuda([1.0, 2.0, 3.0]), cuda([10.0, 20.0, 30.0]), cuda([0.0, 0.0, 0.0])
    bufs = {"x": x, "y": y, "out": out}
    graph = runner.capture(
        lambda: add_into(bufs["out"], bufs["x"], bufs["y"]), names={id(x): "x", id(y): "y", id(out): "out"}
    )
    old = bufs["x"]  # kept alive so the allocator cannot hand its block to the new tensor
    bufs["x"] = cuda([100.0, 200.0, 300.0])
    graph.replay()
    runner.synchronize()
    assert out.tolist() == [11.0, 22.0, 33.0]
    stale = graph.stale_inputs(bufs)
    assert [(inp.name, inp.data_ptr, ptr) for inp, ptr in stale] == [("x", old.data_ptr(), bufs["x"].data_ptr())]


def test_warmup_and_capture_leave_no_side_effects(runner):
    x, y, out = cuda([1.0, 2.0, 3.0]), cuda([10.0, 20.0, 30.0]), cuda([0.0, 0.0, 0.0])

    def region():
        scale_(x, 3.0)
        add_into(out, x, y)

    graph = runner.capture(region)
    assert x.tolist() == [1.0, 2.0, 3.0]  # warmup ran region twice; the runner restored x
    assert out.tolist() == [0.0, 0.0, 0.0]
    graph.replay()
    runner.synchronize()
    assert x.tolist() == [3.0, 6.0, 9.0]
    assert out.tolist() == [13.0, 26.0, 39.0]


def test_region_views_are_recorded_against_their_named_buffers(runner):
    x, out = cuda([1.0, 2.0, 3.0, 4.0]), cuda([0.0, 0.0, 0.0, 0.0])
    graph = runner.capture(lambda: add_into(out[:2], x[:2], x[2:]), names={id(x): "x", id(out): "out"})
    assert {inp.name for inp in graph.static_inputs} == {"x", "out"}
    assert graph.stale_inputs({"x": x, "out": out}) == []
    graph.replay()
    runner.synchronize()
    assert out.tolist() == [4.0, 6.0, 0.0, 0.0]


def test_outputs_refresh_and_graphs_share_the_pool(runner):
    x, y = cuda([1.0, 2.0]), cuda([10.0, 20.0])
    g1 = runner.capture(lambda: make_sum(x, y))
    g2 = runner.capture(lambda: make_sum(g1.outputs, x))  # reads g1's output address
    for k in range(3):
        x.fill_(float(k))
        g1.replay()
        g2.replay()
        runner.synchronize()
        assert g1.outputs.tolist() == [k + 10.0, k + 20.0]
        assert g2.outputs.tolist() == [2 * k + 10.0, 2 * k + 20.0]
    assert runner.memory_bytes() > 0


def test_static_input_table_and_dead_inputs(runner):
    engine = {"x": cuda([1.0, 2.0, 3.0]), "idx": cuda([0, 2], dtype=torch.int64)}

    @kernels.kernel
    def gather(src, index):
        return src.index_select(0, index)

    def region():
        s = make_sum(engine["x"], engine["x"])  # allocated in the capture: not a static input
        return gather(s, engine["idx"])

    graph = runner.capture(region, names={id(t): name for name, t in engine.items()})
    table = {inp.name: inp for inp in graph.static_inputs}
    assert set(table) == {"x", "idx"}
    assert table["idx"].shape == (2,) and table["idx"].dtype == "int64"
    assert table["idx"].data_ptr == engine["idx"].data_ptr() and table["x"].data_ptr == engine["x"].data_ptr()
    graph.replay()
    runner.synchronize()
    assert graph.outputs.tolist() == [2.0, 6.0]
    assert graph.dead_inputs() == []
    del engine["idx"]
    gc.collect()
    assert [inp.name for inp in graph.dead_inputs()] == ["idx"]


@pytest.mark.parametrize("warmup_iters", [0, 2])
@pytest.mark.parametrize("kernel_fn", [item_kernel, host_copy_kernel, to_host_kernel], ids=["item", "host_sync", "cpu"])
def test_host_sync_in_capture_raises_and_the_runner_stays_usable(warmup_iters, kernel_fn):
    from graphcheck.capture.cuda import CudaGraphRunner

    runner = CudaGraphRunner(warmup_iters=warmup_iters)
    x = cuda([1.0, 2.0])
    with pytest.raises(HostSyncInCapture):
        runner.capture(lambda: kernel_fn(x))
    graph = runner.capture(lambda: make_sum(x, x))
    graph.replay()
    runner.synchronize()
    assert graph.outputs.tolist() == [2.0, 4.0]
