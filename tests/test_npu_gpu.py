"""The npu runner on an NVIDIA GPU: ``tests/npu_shim.py`` maps torch.npu's graph API onto torch.cuda.

``resolve("npu")`` goes through the npu seam to the shim, so the NPUGraph
runner captures real CUDA graphs (side stream, shared pool, replay) for the
engine: against the reference, graph against eager bit for bit, and one fault
caught with the cuda backend's headline. Host-parameter regions need task
updates, which CUDA lacks: the shim refuses them before any CUDA work.

Marked ``gpu``: skipped without CUDA (tests/conftest.py). On a GPU machine:
``python3 -m pytest tests -m gpu`` (or this file alone).
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from graphcheck.capture import kernels  # noqa: E402
from graphcheck.capture.kernels import HostParam  # noqa: E402

import npu_shim  # noqa: E402
from _engine_scenarios import (  # noqa: E402
    ALL,
    SCOPES,
    assert_graph_policy,
    engine_for,
    lockstep,
    run_against_reference,
    scenario_for,
)
from _graph_harness import add_into, make_sum  # noqa: E402

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


@pytest.fixture(scope="module")
def npu_on_cuda():
    """``resolve("npu")`` with the seam mapped onto torch.cuda (for this module only)."""
    from graphcheck.capture.devices import resolve

    with pytest.MonkeyPatch.context() as patch:
        npu_shim.install(patch, npu_shim.cuda_binding)
        yield resolve("npu")


@kernels.kernel
def prefix_sums(out, x, seq_lens):
    for i, n in enumerate(seq_lens):
        torch.sum(x[i, :n], dim=0, out=out[i])


def cuda(values):
    return torch.tensor(values, dtype=torch.float32, device="cuda")


def test_npu_resolves_to_the_npu_runner_on_cuda(npu_on_cuda):
    from graphcheck.capture.npu import NpuGraphRunner

    assert (npu_on_cuda.name, npu_on_cuda.framework, npu_on_cuda.emulated) == ("npu", "torch", False)
    assert npu_on_cuda.device.startswith("cuda:")
    runner = npu_on_cuda.runner_factory()
    assert isinstance(runner, NpuGraphRunner) and runner.name == "npu-on-cuda"


def test_runner_captures_replays_and_reads_rebound_buffers_stale(npu_on_cuda):
    runner = npu_on_cuda.runner_factory()
    x, y, out = cuda([1.0, 2.0, 3.0]), cuda([10.0, 20.0, 30.0]), cuda([0.0, 0.0, 0.0])
    bufs = {"x": x, "y": y, "out": out}
    graph = runner.capture(
        lambda: add_into(bufs["out"], bufs["x"], bufs["y"]), names={id(x): "x", id(y): "y", id(out): "out"}
    )
    assert out.tolist() == [0.0, 0.0, 0.0], "warm-up and capture leave no side effects"
    old = bufs["x"]  # kept alive so the allocator cannot hand its block to the new tensor
    bufs["x"] = cuda([100.0, 200.0, 300.0])
    graph.replay()
    runner.synchronize()
    assert out.tolist() == [11.0, 22.0, 33.0]
    assert [(inp.name, inp.data_ptr) for inp, _ in graph.stale_inputs(bufs)] == [("x", old.data_ptr())]
    g1 = runner.capture(lambda: make_sum(y, y))
    g2 = runner.capture(lambda: make_sum(g1.outputs, y))  # one pool: g2 reads g1's output address
    for k in range(3):
        y.fill_(float(k))
        g1.replay()
        g2.replay()
        runner.synchronize()
        assert g2.outputs.tolist() == [3.0 * k] * 3
    assert runner.memory_bytes() > 0


def test_a_host_param_region_is_refused_on_the_shim_and_the_runner_stays_usable(npu_on_cuda):
    runner = npu_on_cuda.runner_factory()
    x, out = torch.arange(12, dtype=torch.float32, device="cuda").reshape(2, 6), cuda([0.0, 0.0])
    with pytest.raises(NotImplementedError, match="no task update"):
        runner.capture(lambda: prefix_sums(out, x, HostParam("seq_lens", lambda: (2, 3))))
    graph = runner.capture(lambda: make_sum(out, out))
    graph.replay()
    runner.synchronize()
    assert graph.outputs.tolist() == [0.0, 0.0]


@pytest.mark.parametrize("scope", SCOPES)
@pytest.mark.parametrize("name", ALL)
def test_npu_runner_on_cuda_matches_the_reference(npu_on_cuda, name, scope):
    scenario, engine = engine_for(name, scope, device=npu_on_cuda)
    assert engine.runner.name == "npu-on-cuda" and engine.xp.device.startswith("cuda")
    run = run_against_reference(engine, scenario, name, f"npu-on-cuda/{scope}")
    assert assert_graph_policy(run, scenario.config) > 0


@pytest.mark.parametrize("scope", SCOPES)
@pytest.mark.parametrize("name", ["buckets", "demo-topp", "demo-naive"])
def test_npu_runner_on_cuda_matches_eager_bit_for_bit(npu_on_cuda, name, scope):
    assert lockstep(scenario_for(name, scope), device=npu_on_cuda) > 0


def test_a_fault_is_caught_as_on_the_cuda_backend(npu_on_cuda):
    from graphcheck.capture.devices import resolve
    from graphcheck.check.checker import check_scenario
    from graphcheck.search.builtin import late_joiner

    scenario = late_joiner("forward_sampling")
    assert check_scenario(scenario, npu_on_cuda).clean
    outcome = check_scenario(scenario, npu_on_cuda, faults=["rebind-output-offsets"])
    assert not outcome.clean and outcome.runner == "npu-on-cuda"
    first = outcome.first
    assert (first.kind, first.tensor) == ("address", "cu_seqlens_out")
    on_cuda = check_scenario(scenario, resolve("cuda"), faults=["rebind-output-offsets"]).first
    assert (first.kind, first.step, first.tensor) == (on_cuda.kind, on_cuda.step, on_cuda.tensor)
