"""Checked steps per second of the lockstep runner, and its checking overhead.

Run: ``graphcheck bench`` (or ``python3 -m pytest benchmarks/bench_lockstep.py``;
the backend comes from ``GRAPHCHECK_BENCH_BACKEND``, see benchmarks/conftest.py).

A fixed scenario set: ``steady-b{N}`` keeps N requests decoding in the
smallest bucket >= N (one more arrives at step 8 and waits for a slot, so
prefill steps mix in), at the fuzzing suites' model size (vocab 64, hidden 16,
k = 3, S = 2, TARGET_MATCH with top_p 0.9); ``demo`` is the built-in demo
scenario (queueing, abort, reasoning excursion, forced accepts, seed wrap).

Each round builds a fresh ``Lockstep`` outside the timed region (engines and
graph captures) and times ``run()``, the step loop. The runner's timing hook
(graphcheck.check.timings) splits that loop into reference, eager engine, graph
engine, record and diff time; ``extra_info`` carries the sums over all rounds
and the checking overhead = loop wall / (eager + graph engine time), which
``graphcheck bench`` checks against its target.
"""

from __future__ import annotations

import os
from typing import Any, Callable

import pytest

pytest.importorskip("pytest_benchmark")

from graphcheck.check.lockstep import Lockstep  # noqa: E402
from graphcheck.check.timings import LockstepTimings, overhead_target  # noqa: E402
from graphcheck.scenario import EngineConfig, RequestSpec, Scenario, validate  # noqa: E402
from graphcheck.search.builtin import demo_scenario  # noqa: E402

QUICK = os.environ.get("GRAPHCHECK_BENCH_QUICK") == "1"  # see benchmarks/conftest.py
BATCHES = (1, 4) if QUICK else (1, 4, 8, 16)
ROUNDS = 1 if QUICK else 3
STEPS = 12 if QUICK else 24
LATE_ARRIVAL = 8


def steady_scenario(batch: int, num_steps: int = STEPS) -> Scenario:
    """``batch`` requests from step 0 plus one arriving at step 8; capture sizes 1, 2, 4, ... up to ``batch``."""
    config = EngineConfig(
        max_num_seqs=batch,
        num_speculative_tokens=3,
        num_model_steps=2,
        capture_sizes=tuple(s for s in (1, 2, 4, 8, 16, 32, 64) if s <= batch),
        vocab_size=64,
        hidden_size=16,
        block_size=8,
        max_model_len=128,
        verify_strategy="target_match",
        graph_scope="step",
        model_seed=11,
    )
    requests = tuple(
        RequestSpec(
            f"r{i:02d}",
            0 if i < batch else LATE_ARRIVAL,
            tuple((5 * i + j) % 64 for j in range(6)),
            max_dec_len=90,
            eos_token_ids=(63,),
            temperature=1.0,
            top_p=0.9,
            seed=100 + i,
        )
        for i in range(batch + 1)
    )
    return validate(Scenario(config, requests, (), num_steps, f"steady-b{batch}"))


SCENARIOS: dict[str, Callable[[], Scenario]] = {f"steady-b{b}": (lambda b=b: steady_scenario(b)) for b in BATCHES}
if not QUICK:
    SCENARIOS["demo"] = lambda: demo_scenario("target_match", num_steps=STEPS)


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_lockstep(benchmark: Any, bench_checker: Any, name: str) -> None:
    bench_device = bench_checker.backend
    scenario = bench_checker.prepare(SCENARIOS[name]())
    warm = bench_checker.run(scenario)  # untimed: first-use costs (imports, allocator, kernels)
    assert warm.clean, [d.headline() for d in warm.failures]
    timings = LockstepTimings()
    outcomes = []

    def setup() -> tuple[tuple[Lockstep], dict]:
        return (bench_checker.build(scenario, timings=timings),), {}

    def run(lockstep: Lockstep) -> None:
        outcomes.append(lockstep.run())

    benchmark.group = "lockstep"
    benchmark.pedantic(run, setup=setup, rounds=ROUNDS, iterations=1)
    assert all(o.clean for o in outcomes), [d.headline() for o in outcomes for d in o.failures]
    assert all(o.steps_run == scenario.num_steps for o in outcomes)
    benchmark.extra_info.update(
        kind="lockstep",
        scenario=name,
        batch=scenario.config.max_num_seqs,
        backend=bench_device.name,
        device=bench_device.device,
        runner=warm.runner,
        engine=bench_checker.engine.spec,
        overhead_target=overhead_target(bench_device.device),
        timings=timings.as_dict(),
    )
