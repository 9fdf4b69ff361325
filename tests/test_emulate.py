"""graphcheck.emulate: torch.cuda graph code on the CPU, one test per semantic point, and the capture observer."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest
import torch

import graphcheck.emulate as emulate
from graphcheck.capture.base import CaptureError, HostSyncInCapture, PoisonedTensorError
from graphcheck.capture.op_graphs import FreedInputRead

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).name


def _capture(body, **kwargs):
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, **kwargs):
        out = body()
    return g, out


@pytest.fixture
def cuda():
    with emulate.cuda_graphs() as module:
        yield module


# --------------------------------------------------------------------------- patching


def test_the_stand_ins_are_installed_only_inside():
    real = torch.cuda.CUDAGraph, torch.cuda.graph, torch.cuda.synchronize
    with emulate.cuda_graphs() as module:
        assert torch.cuda.CUDAGraph is module.CUDAGraph is not real[0]
        assert torch.cuda.graphs.CUDAGraph is module.CUDAGraph
        assert torch.cuda.graph is module.graph
    assert (torch.cuda.CUDAGraph, torch.cuda.graph, torch.cuda.synchronize) == real


def test_modules_that_imported_torch_cuda_objects_are_swapped_too():
    mod = types.ModuleType("engine_under_test")
    mod.CUDAGraph = torch.cuda.CUDAGraph
    with emulate.cuda_graphs(modules=(mod,)) as module:
        assert mod.CUDAGraph is module.CUDAGraph
    assert mod.CUDAGraph is torch.cuda.CUDAGraph


def test_hooks_point_an_engines_own_helpers_at_the_emulator(monkeypatch):
    mod = types.ModuleType("engine_helpers")
    mod.create_graph = lambda: "a real device graph"
    monkeypatch.setitem(sys.modules, "engine_helpers", mod)
    with emulate.cuda_graphs(hooks={"engine_helpers:create_graph": lambda: torch.cuda.CUDAGraph()}) as module:
        assert isinstance(mod.create_graph(), module.CUDAGraph)
    assert mod.create_graph() == "a real device graph"


def test_a_hook_that_does_not_resolve_is_one_clear_error():
    with pytest.raises(CaptureError, match="cannot import"):
        with emulate.cuda_graphs(hooks={"no_such_module_xyz:helper": None}):
            pass


def test_a_python_c_program_runs_without_a_gpu():
    program = textwrap.dedent(
        """
        import torch, graphcheck.emulate as emulate
        with emulate.cuda_graphs():
            x = torch.zeros(3)
            g = torch.cuda.CUDAGraph()
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                with torch.cuda.graph(g, pool=torch.cuda.graph_pool_handle(), stream=s):
                    y = x + 1
            torch.cuda.current_stream().wait_stream(s)
            x.fill_(4)
            g.replay()
            torch.cuda.synchronize()
            print(y.tolist())
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, cwd=ROOT, env=_env(), timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[5.0, 5.0, 5.0]"


def _env():
    import os

    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


# --------------------------------------------------------------------------- capture and replay


def test_replay_reads_the_captured_storage_not_the_rebound_name(cuda):
    state = types.SimpleNamespace(x=torch.ones(2))
    g, y = _capture(lambda: state.x * 3)
    keep = state.x
    state.x = torch.full((2,), 7.0)
    g.replay()
    assert y.tolist() == [3.0, 3.0]
    keep.copy_(torch.tensor([2.0, 5.0]))
    g.replay()
    assert y.tolist() == [6.0, 15.0]
    del keep


def test_host_values_are_frozen_at_capture(cuda):
    x = torch.arange(6.0)
    n, scale = int(torch.tensor(4).item()), 0.5
    g, y = _capture(lambda: x[:n] * scale + x.shape[0])
    x.fill_(2.0)
    g.replay()
    assert y.tolist() == [7.0, 7.0, 7.0, 7.0]


def test_outputs_keep_their_address_and_are_poisoned_until_the_first_replay(cuda):
    x = torch.ones(3)
    g, y = _capture(lambda: x * 2)
    ptr = y.data_ptr()
    with pytest.raises(PoisonedTensorError, match="before that graph's first replay"):
        y + 1
    g.replay()
    assert y.data_ptr() == ptr and y.tolist() == [2.0, 2.0, 2.0]


def test_capture_leaves_pre_existing_storages_and_the_rng_as_they_were(cuda):
    buf = torch.zeros(4)
    gen = torch.Generator().manual_seed(3)
    torch.manual_seed(11)
    expected_default = torch.get_rng_state()
    expected_gen = gen.get_state()
    g, _ = _capture(lambda: (buf.add_(torch.rand(4)), buf.mul_(torch.rand(4, generator=gen))))
    assert buf.tolist() == [0.0] * 4
    assert torch.equal(torch.get_rng_state(), expected_default)
    assert torch.equal(gen.get_state(), expected_gen)
    g.replay()
    first = buf.clone()
    buf.zero_()
    g.replay()
    assert not torch.equal(first, buf), "each replay draws fresh random numbers"


def test_a_replay_that_reads_a_freed_input_is_detected(cuda):
    held = [torch.ones(2)]
    g, _ = _capture(lambda: held[0] * 2)
    held.clear()
    assert [inp.shape for inp in g.graph.dead_inputs()] == [(2,)]
    with pytest.raises(FreedInputRead, match=r"freed after capture: an unnamed tensor \(2,\) float32"):
        g.replay()


def test_on_freed_keep_replays_the_kept_memory():
    with emulate.cuda_graphs(on_freed="keep"):
        held = [torch.ones(2)]
        g, y = _capture(lambda: held[0] * 2)
        held.clear()
        g.replay()
        assert y.tolist() == [2.0, 2.0]


@pytest.mark.parametrize(
    "body, what",
    [
        (lambda x: x.sum().item(), "_local_scalar_dense"),
        (lambda x: bool(x.any()), "_local_scalar_dense"),
        (lambda x: x.tolist(), "tensor.tolist()"),
        (lambda x: x.cpu(), "tensor.cpu()"),
        (lambda x: x.numpy(), "tensor.numpy()"),
        (lambda x: torch.nonzero(x), "nonzero"),
        (lambda x: x[x > 0], "boolean mask"),
        (lambda x: x.repeat_interleave(x.long()), "repeat_interleave"),
    ],
)
def test_a_host_sync_in_capture_names_the_op_and_the_source_line(cuda, body, what):
    x = torch.tensor([1.0, 0.0, 2.0])
    with pytest.raises(HostSyncInCapture) as info:
        _capture(lambda: body(x))
    message = str(info.value)
    assert what in message and HERE in message and "not allowed inside graph capture" in message
    assert not torch.cuda.is_current_stream_capturing()


def test_stream_rules_hold_during_capture(cuda):
    assert not torch.cuda.is_current_stream_capturing()
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    with torch.cuda.graph(g, stream=s):
        assert torch.cuda.is_current_stream_capturing()
        assert torch.cuda.current_stream() == s
        with pytest.raises(CaptureError, match="cannot be synchronised"):
            torch.cuda.synchronize()
        with pytest.raises(CaptureError, match="cannot be synchronised"):
            s.synchronize()
    assert not torch.cuda.is_current_stream_capturing()
    torch.cuda.synchronize()


def test_graph_lifecycle_errors(cuda):
    g = torch.cuda.CUDAGraph()
    with pytest.raises(CaptureError, match="holds no captured graph"):
        g.replay()
    x = torch.ones(1)
    with torch.cuda.graph(g):
        _ = x + 1
    with pytest.raises(CaptureError, match="already holds a captured graph"):
        g.capture_begin()
    g.reset()
    with pytest.raises(CaptureError, match="holds no captured graph"):
        g.replay()
    inner = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        with pytest.raises(CaptureError, match="while .* is being captured"):
            inner.capture_begin()


def test_an_exception_in_the_region_undoes_the_capture(cuda):
    buf = torch.zeros(2)
    g = torch.cuda.CUDAGraph()
    with pytest.raises(ZeroDivisionError):
        with torch.cuda.graph(g):
            buf.add_(1)
            raise ZeroDivisionError
    assert buf.tolist() == [0.0, 0.0] and not torch.cuda.is_current_stream_capturing()
    with pytest.raises(CaptureError, match="holds no captured graph"):
        g.replay()


def test_manual_capture_begin_end_and_shared_pools(cuda):
    x = torch.ones(256)
    g1 = torch.cuda.CUDAGraph()
    g1.capture_begin()
    h = x * 2
    out1 = h + 1
    del h
    g1.capture_end()
    g2 = torch.cuda.CUDAGraph()
    g2.capture_begin(pool=g1.pool())
    out2 = x * 5
    g2.capture_end()
    g2.replay()
    g1.replay()
    assert out1[0].item() == 3.0 and out2[0].item() == 2.0, "g2 sits on g1's freed intermediate"


def test_a_graph_that_already_replayed_lifts_a_later_captures_poison_from_its_blocks(cuda):
    # Lazy capture (one graph per key, mid-run): g1 replays, then g2 is captured onto g1's freed
    # intermediate; g1's next replay writes that block before reading it, as on a GPU.
    x = torch.ones(256)
    g1 = torch.cuda.CUDAGraph()
    g1.capture_begin()
    h = x * 2
    out1 = h + 1
    del h
    g1.capture_end()
    g1.replay()
    g2 = torch.cuda.CUDAGraph()
    g2.capture_begin(pool=g1.pool())
    out2 = x * 5
    g2.capture_end()
    g1.replay()
    assert out1[0].item() == 3.0
    g2.replay()
    assert out2[0].item() == 5.0


def test_a_live_output_of_an_earlier_graph_is_never_reused(cuda):
    x = torch.ones(256)
    g1, out1 = _capture(lambda: x * 2)
    g2, out2 = _capture(lambda: x * 5, pool=g1.pool())
    g2.replay()
    g1.replay()
    assert out1[0].item() == 2.0 and out2[0].item() == 5.0


def test_static_inputs_are_named_from_the_buffer_map_and_views_fold_into_their_base():
    class Engine:
        def __init__(self):
            self.tokens = torch.zeros(8)
            self.weights = torch.nn.Linear(4, 4)

    engine = Engine()
    names = emulate.tensor_paths(engine, "engine")
    with emulate.cuda_graphs(names=names):
        g, _ = _capture(lambda: engine.weights(engine.tokens[:4]) + engine.tokens[4:])
    assert sorted(inp.name for inp in g.graph.static_inputs) == [
        "engine.tokens",
        "engine.weights.bias",
        "engine.weights.weight",
    ]


def test_a_named_view_read_first_still_names_the_input_by_its_named_base():
    """The table records the base (its address, its shape); naming it by the view made the address
    audit compare the base's address with the view's and report a rebind that never happened."""

    class Engine:
        def __init__(self):
            self.bulk = torch.zeros(3, 8)
            self.row = self.bulk[2]  # a named view at an offset, read before the base

    engine = Engine()
    names = emulate.tensor_paths(engine, "engine")
    with emulate.cuda_graphs(names=names):
        g, _ = _capture(lambda: engine.row * 2 + engine.bulk.sum())
    (inp,) = g.graph.static_inputs
    assert (inp.name, inp.data_ptr) == ("engine.bulk", engine.bulk.data_ptr())
    assert g.graph.stale_inputs(emulate.named_tensors(engine, "engine")) == []
    with emulate.observe_capture(names) as seen:
        engine.row * 2
    (row,) = seen.inputs
    assert (row.name, row.data_ptr) == ("engine.bulk", engine.bulk.data_ptr())


def test_op_sites_name_the_module_path_and_the_source_line():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    x = torch.ones(3, 4)
    with emulate.cuda_graphs(module_names=emulate.module_paths(model, "model")):
        g, _ = _capture(lambda: model(x))
    sites = {(r.site.module, r.name) for r in g.graph.records if not r.is_view}
    assert ("model.0", "aten.addmm.default") in sites
    assert ("model.1", "aten.relu.default") in sites
    assert ("model.2", "aten.addmm.default") in sites
    assert all(r.site.file is not None for r in g.graph.records)


# --------------------------------------------------------------------------- the observer


def test_the_observer_lists_pre_existing_storages_with_names_and_writes():
    a, b, out = torch.ones(4), torch.full((8,), 2.0), torch.zeros(4)
    with emulate.observe_capture({id(a): "a", id(b): "b", id(out): "out"}) as seen:
        tmp = a * b[:4]  # b through a view: the row is b
        out.copy_(tmp + 1)  # tmp is the region's own
    rows = {r.name: r for r in seen.inputs}
    assert set(rows) == {"a", "b", "out"}
    assert rows["b"].shape == (8,) and rows["b"].data_ptr == b.data_ptr()
    assert rows["out"].written and not rows["a"].written
    assert all(r.alive() for r in rows.values())
    del a
    assert not rows["a"].alive()


def test_the_observer_refuses_a_host_sync_before_the_device_sees_it():
    x = torch.ones(2)
    with pytest.raises(HostSyncInCapture, match=HERE):
        with emulate.observe_capture():
            x.sum().item()


def test_a_view_of_a_dropped_tensor_keeps_its_pool_block(cuda):
    # CUDA's allocator frees a storage, not a tensor object: the view the engine keeps of a dropped
    # intermediate holds the block, so a later capture in the pool is never placed on it.
    x = torch.ones(256)
    g1 = torch.cuda.CUDAGraph()
    g1.capture_begin()
    h = x * 2
    kept = h[:128]
    del h
    g1.capture_end()
    g2, out2 = _capture(lambda: x * 5, pool=g1.pool())
    g1.replay()
    g2.replay()
    assert kept[0].item() == 2.0 and out2[0].item() == 5.0


def test_an_op_that_may_alias_but_made_a_copy_is_replayed(cuda):
    # Under inference_mode ``aten.to`` reaches the recorder whole; its schema says it may alias, but a
    # dtype change copies, and replay must copy again (a skipped copy leaves the capture's poison).
    ids = torch.zeros(4, dtype=torch.int32)
    with torch.inference_mode():
        g, out = _capture(lambda: ids.to(torch.int64))
        ids.copy_(torch.arange(4, dtype=torch.int32))
        g.replay()
    assert out.tolist() == [0, 1, 2, 3]


def test_unreplayed_outputs_read_as_uninitialised_memory_when_asked():
    x = torch.ones(4)
    with emulate.cuda_graphs(on_unreplayed="uninitialised"):
        g, out = _capture(lambda: x * 2)
        assert torch.isnan(out).all()  # what a GPU would read: memory no kernel has written yet
        g.replay()
        assert out.tolist() == [2.0] * 4
    with emulate.cuda_graphs(on_unreplayed="ignore"), pytest.raises(ValueError, match="on_unreplayed"):
        _capture(lambda: x * 2)


def test_an_input_whose_storage_lives_on_in_a_view_is_not_freed(cuda):
    # What a GPU frees is the storage: the captured tensor object may go (``weight.data`` makes a new one
    # at every access) while the engine still holds its memory through another tensor.
    weight = torch.ones(4)
    held = [weight.data]
    g, out = _capture(lambda: held[0] * 2)
    held.clear()
    assert g.graph.dead_inputs() == []
    weight.fill_(3.0)
    g.replay()
    assert out.tolist() == [6.0] * 4


def test_an_output_of_an_earlier_graph_in_the_pool_is_not_a_freed_input(cuda):
    # Graphs captured in segments (vLLM's breakable capture) read what the pool's earlier graph wrote.
    x = torch.ones(4)
    g1 = torch.cuda.CUDAGraph()
    g1.capture_begin()
    held = [x * 2]
    g1.capture_end()
    g2, out = _capture(lambda: held[0] + 1, pool=g1.pool())
    held.clear()
    assert g2.graph.dead_inputs() == []
    g1.replay()
    g2.replay()
    assert out.tolist() == [3.0] * 4
