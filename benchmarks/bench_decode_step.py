"""One steady decode step, eager vs graph replay, at 1 / 8 / 32 / 64 running requests, k = 3.

Run: ``graphcheck bench`` (or ``python3 -m pytest benchmarks/bench_decode_step.py``).
The backend comes from ``GRAPHCHECK_BENCH_BACKEND`` (see benchmarks/conftest.py);
torch backends only. Left unset on a machine without CUDA, it is skipped unless
``GRAPHCHECK_BENCH_CPU=1``: the CPU with the emulated runner replays kernel calls
one by one, so graph vs eager measures little there. Each bucket (running count)
is one benchmark group: eager, and a graph replay per ``graph_scope``.

Each round restores the engine to the same steady state (all requests decoding,
drafts pending) outside the timed region, then times one ``Engine.step``: the
same decode step every round, so no request finishes mid-benchmark.
"""

from __future__ import annotations

import copy
import os
from typing import Any

import pytest

pytest.importorskip("pytest_benchmark")
torch = pytest.importorskip("torch")

from graphcheck.backends.engine import Engine  # noqa: E402
from graphcheck.bench.run import DECODE_MODES  # noqa: E402
from graphcheck.reference import make_weights  # noqa: E402
from graphcheck.scenario import EngineConfig, RequestSpec  # noqa: E402

QUICK = os.environ.get("GRAPHCHECK_BENCH_QUICK") == "1"  # see benchmarks/conftest.py
RUNNING = (1, 8) if QUICK else (1, 8, 32, 64)
MODES = DECODE_MODES  # the columns graphcheck bench reads back
ROUNDS = 5 if QUICK else 30


@pytest.fixture(scope="module")
def device(bench_device: Any, bench_checker: Any) -> Any:
    if not bench_checker.engine.builtin:
        pytest.skip(f"the decode-step benchmark times the built-in engine's internals, not {bench_checker.engine.spec}")
    if bench_device.framework != "torch":
        pytest.skip(
            f"the decode-step benchmark restores torch tensors; {bench_device.name} runs {bench_device.framework}"
        )
    asked = bool(os.environ.get("GRAPHCHECK_BENCH_BACKEND"))
    if bench_device.device == "cpu" and not asked and os.environ.get("GRAPHCHECK_BENCH_CPU") != "1":
        pytest.skip("needs a CUDA device (or GRAPHCHECK_BENCH_BACKEND=cpu / GRAPHCHECK_BENCH_CPU=1 for the CPU)")
    return bench_device


def _config(scope: str) -> EngineConfig:
    largest = max(RUNNING)
    return EngineConfig(
        max_num_seqs=largest,
        num_speculative_tokens=3,
        num_model_steps=3,
        capture_sizes=tuple(s for s in (1, 2, 4, 8, 16, 32, 64) if s <= largest),
        vocab_size=512,
        hidden_size=32,
        block_size=16,
        max_model_len=256,
        verify_strategy="target_match",
        graph_scope=scope,
        model_seed=1,
    )


WARM_STEPS = 3  # prefill, then two decode steps; the timed step is the fourth


def _requests(config: EngineConfig, running: int, eos: int) -> list[RequestSpec]:
    return [
        RequestSpec(
            f"r{i:02d}",
            0,
            tuple((7 * i + j) % config.vocab_size for j in range(8)),
            max_dec_len=200,
            eos_token_ids=(eos,),
            temperature=1.0,
            top_p=0.9,
            seed=1000 + i,
        )
        for i in range(running)
    ]


def _quiet_eos(config: EngineConfig, running: int, device: Any) -> int:
    """An eos id no request emits in the warm-up and timed steps, so none stops.

    The eos id changes no token before a stop, so a dry eager run shows which ids to avoid.
    """
    eos = config.vocab_size - 1
    for _ in range(8):
        dry = Engine(config, make_weights(config), device=device, use_graphs=False)
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


def _steady_engine(mode: str, running: int, device: Any) -> tuple[Engine, int]:
    scope = "step" if mode == "eager" else mode.removeprefix("graph-")
    config = _config(scope)
    eos = _quiet_eos(config, running, device)
    engine = Engine(config, make_weights(config), device=device, use_graphs=mode != "eager")
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
def test_decode_step(benchmark, device, running, mode):
    engine, t = _steady_engine(mode, running, device)
    saved = _snapshot(engine)

    def setup():
        _restore(engine, saved)
        if engine.xp.device != "cpu":
            torch.cuda.synchronize()

    benchmark.group = f"decode step, {running} running"
    benchmark.extra_info.update(
        kind="decode_step",
        running=running,
        mode=mode,
        backend=device.name,
        device=engine.xp.device,
        runner=engine.runner.name if engine.runner is not None else "none",
    )
    benchmark.pedantic(engine.step, args=(t, {}), setup=setup, rounds=ROUNDS, warmup_rounds=3, iterations=1)
    info = engine.last_step_info
    assert info.num_running == running and info.real_bsz == running
    assert info.used_graph == (mode != "eager")
    if info.used_graph:
        assert info.bucket == min(s for s in engine.graphs if s >= running)
        benchmark.extra_info["bucket"] = info.bucket
