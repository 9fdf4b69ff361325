"""The op-level graph emulator's replay cost against eager, on the CPU.

Two groups (``graphcheck bench -k op_graphs``; torch on the CPU, whatever the bench backend):

* **op-level, decode step**: one steady decode step of the built-in engine (8 running, k = 3,
  graph scope ``step``: the whole step is one captured region), eager, replayed by the kernel
  emulator (``EmulatedRunner``) and replayed by the op-level one (``OpGraphRunner``).
* **op-level, transformer layer**: ``torch.nn.TransformerEncoderLayer`` (d_model 64, 2 heads,
  batch 4 x seq 16) eager and as a ``torch.cuda.CUDAGraph`` replayed under
  ``graphcheck.emulate.cuda_graphs()``; ``no_grad`` takes torch's fused fast path (one op),
  ``grad`` the composite forward (46 ops).
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("pytest_benchmark")
torch = pytest.importorskip("torch")

from bench_decode_step import ROUNDS, _restore, _snapshot, _steady_engine  # noqa: E402

from graphcheck.capture.devices import resolve  # noqa: E402

RUNNING = 8
STEP_MODES = ("eager", "graph-kernel", "graph-ops")


@pytest.mark.parametrize("mode", STEP_MODES)
def test_op_level_decode_step(benchmark: Any, mode: str) -> None:
    device = resolve("cpu", emulator="ops" if mode == "graph-ops" else "kernel")
    engine, t = _steady_engine("eager" if mode == "eager" else "graph-step", RUNNING, device)
    saved = _snapshot(engine)
    benchmark.group = f"op-level, decode step, {RUNNING} running"
    benchmark.extra_info.update(kind="op_graphs", mode=mode, runner=getattr(engine.runner, "name", "none"))
    benchmark.pedantic(
        engine.step, args=(t, {}), setup=lambda: _restore(engine, saved), rounds=ROUNDS, warmup_rounds=3, iterations=1
    )
    assert engine.last_step_info.used_graph == (mode != "eager")


def _layer() -> Any:
    torch.manual_seed(0)
    return torch.nn.TransformerEncoderLayer(64, 2, dim_feedforward=128, dropout=0.0, batch_first=True).eval()


@pytest.mark.parametrize("grad", ("no_grad", "grad"))
@pytest.mark.parametrize("mode", ("eager", "graph-ops"))
def test_op_level_transformer_layer(benchmark: Any, mode: str, grad: str) -> None:
    import graphcheck.emulate as emulate

    layer = _layer()
    benchmark.group = f"op-level, transformer layer, {grad}"
    benchmark.extra_info.update(kind="op_graphs", mode=mode)
    context = torch.no_grad if grad == "no_grad" else torch.enable_grad
    with emulate.cuda_graphs(), context():
        x = torch.randn(4, 16, 64)
        expected = layer(x)
        if mode == "eager":
            benchmark.pedantic(layer, args=(x,), rounds=ROUNDS, warmup_rounds=3, iterations=10)
            return
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            y = layer(x)
        benchmark.extra_info["ops"] = len(graph.graph.records)
        benchmark.pedantic(graph.replay, rounds=ROUNDS, warmup_rounds=3, iterations=10)
        assert torch.allclose(y, expected)
