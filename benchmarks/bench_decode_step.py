"""One steady decode step, eager vs graph replay, at 1 / 8 / 32 / 64 running requests, k = 3.

Run: ``python3 -m pytest benchmarks/bench_decode_step.py`` (pytest-benchmark).
Skipped without CUDA unless ``GRAPHCHECK_BENCH_CPU=1`` (then the CPU with the
emulated runner, which replays kernel calls and so measures little).

Each round restores the engine to the same steady state (all requests decoding,
drafts pending) outside the timed region, then times one ``Engine.step``: the
same decode step every round, so no request finishes mid-benchmark.
"""

from __future__ import annotations

import copy
import os

import pytest

pytest.importorskip("pytest_benchmark")
torch = pytest.importorskip("torch")

from backends.engine import Engine  # noqa: E402
from graphcheck.scenario import EngineConfig, RequestSpec  # noqa: E402
from reference import make_weights  # noqa: E402

RUNNING = (1, 8, 32, 64)
MODES = ("eager", "graph-step", "graph-forward")


def _device() -> str:
    if torch.cuda.is_available():
        return "cuda"
    if os.environ.get("GRAPHCHECK_BENCH_CPU") == "1":
        return "cpu"
    pytest.skip("needs a CUDA device (or GRAPHCHECK_BENCH_CPU=1 for the CPU)")


def _config(scope: str) -> EngineConfig:
    return EngineConfig(
        max_num_seqs=64, num_speculative_tokens=3, num_model_steps=3,
        capture_sizes=(1, 2, 4, 8, 16, 32, 64), vocab_size=512, hidden_size=32,
        block_size=16, max_model_len=256, verify_strategy="target_match", graph_scope=scope, model_seed=1,
    )


WARM_STEPS = 3  # prefill, then two decode steps; the timed step is the fourth


def _requests(config: EngineConfig, running: int, eos: int) -> list[RequestSpec]:
    return [
        RequestSpec(f"r{i:02d}", 0, tuple((7 * i + j) % config.vocab_size for j in range(8)), max_dec_len=200,
                    eos_token_ids=(eos,), temperature=1.0, top_p=0.9, seed=1000 + i)
        for i in range(running)
    ]


def _quiet_eos(config: EngineConfig, running: int) -> int:
    """An eos id no request emits in the warm-up and timed steps, so none stops.

    The eos id changes no token before a stop, so a dry eager run shows which ids to avoid.
    """
    eos = config.vocab_size - 1
    for _ in range(8):
        dry = Engine(config, make_weights(config), device=_device(), use_graphs=False)
        for spec in _requests(config, running, eos):
            dry.submit(spec)
        seen = set()
        for t in range(WARM_STEPS + 1):
            for r in dry.step(t, {}).requests:
                seen.update(r.accept_tokens)
        if eos not in seen:
            return eos
        eos = max(set(range(config.vocab_size)) - seen)
    raise RuntimeError("no quiet eos id found")


def _steady_engine(mode: str, running: int) -> tuple[Engine, int]:
    scope = "step" if mode == "eager" else mode.removeprefix("graph-")
    config = _config(scope)
    eos = _quiet_eos(config, running)
    engine = Engine(config, make_weights(config), device=_device(), use_graphs=mode != "eager")
    for spec in _requests(config, running, eos):
        engine.submit(spec)
    for t in range(WARM_STEPS):
        engine.step(t, {})
    assert engine.last_step_info.num_running == running
    return engine, WARM_STEPS


def _snapshot(engine: Engine):
    tensors = {name: t.clone() for name, t in engine.buffers.named_tensors().items()}
    return tensors, copy.deepcopy(engine.scheduler), engine._override_host.copy()


def _restore(engine: Engine, saved) -> None:
    tensors, scheduler, overrides = saved
    for name, t in engine.buffers.named_tensors().items():
        t.copy_(tensors[name])
    engine.scheduler = copy.deepcopy(scheduler)
    engine._override_host = overrides.copy()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("running", RUNNING)
def test_decode_step(benchmark, running, mode):
    if _device() == "cpu":
        torch.set_num_threads(1)  # tiny tensors: intra-op threads only add overhead
    engine, t = _steady_engine(mode, running)
    saved = _snapshot(engine)

    def setup():
        _restore(engine, saved)
        if engine.xp.device != "cpu":
            torch.cuda.synchronize()

    benchmark.group = f"decode step, {running} running"
    benchmark.extra_info.update(running=running, mode=mode, device=engine.xp.device)
    benchmark.pedantic(engine.step, args=(t, {}), setup=setup, rounds=30, warmup_rounds=3, iterations=1)
    info = engine.last_step_info
    assert info.num_running == running and info.real_bsz == running
    assert info.used_graph == (mode != "eager")
    if info.used_graph:
        assert info.bucket == min(s for s in engine.graphs if s >= running)
