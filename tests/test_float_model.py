"""The float model (``EngineConfig.model`` float32 / bfloat16) in the built-in engine.

* weights are drawn from ``model_seed`` (deterministic, in the model dtype, bfloat16-exact);
* float engines build and run in every graph scope and in NAIVE mode, with the
  activation buffers in the model dtype, on torch, on paddle (``xpu --emulate``)
  and on the emulated npu runner; their model report has the right shape;
* on the CPU, eager and graph float32 engines emit the same tokens;
* every injectable fault still switches its path: what it shows in the integer
  model (an error, a stale or freed graph input, memory growth, another bucket,
  changed results or state) it shows in the float model;
* the facade pieces the float model needs: bfloat16 host copies, float rank order
  with ties to the lower id, bfloat16 matmul and where (upcast where paddle's CPU
  build has no kernel).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from graphcheck.backends.engine import Engine, faults
from graphcheck.backends.engine.buffers import ACTIVATION_FIELDS, STATE_FIELDS
from graphcheck.backends.engine.float_weights import (
    FloatWeights,
    draw_shapes,
    make_float_arrays,
    round_to_bfloat16,
)
from graphcheck.capture.devices import resolve
from graphcheck.check.threads import single_threaded
from graphcheck.driver import apply_events
from graphcheck.reference import make_weights
from graphcheck.scenario import Scenario
from graphcheck.search.builtin import demo_scenario
from graphcheck.step_result import StepResult

from _engine_scenarios import SCOPES
from _fault_scenarios import FAULT_SCENARIOS
from _layers import fast_first

torch = pytest.importorskip("torch")

MODELS = ("float32", "bfloat16")


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    with single_threaded(resolve("cpu")):
        yield


def with_model(scenario: Scenario, model: str, **config: Any) -> Scenario:
    return dataclasses.replace(scenario, config=dataclasses.replace(scenario.config, model=model, **config))


def small(model: str, scope: str = "step", *, naive: bool = False, num_steps: int = 8) -> Scenario:
    """The demo (four requests, k = 3, S = 2, buckets 1/2/4), cut short, in ``model`` and ``scope``."""
    base = demo_scenario("target_match", naive_mode=naive, num_steps=num_steps)
    return with_model(base, model, graph_scope=scope)


def run(engine: Engine, scenario: Scenario, on_step=None) -> list[StepResult]:
    results = []
    for t in range(scenario.num_steps):
        apply_events(engine, scenario, t)
        results.append(engine.step(t, scenario.accept_overrides_at(t)))
        if on_step is not None:
            on_step(t, results[-1])
    return results


def build(scenario: Scenario, device: Any = "cpu", **kwargs: Any) -> Engine:
    return Engine(scenario.config, make_weights(scenario.config), device=device, **kwargs)


# --------------------------------------------------------------------------- weights


def test_weights_are_deterministic_per_model_seed() -> None:
    config = small("float32").config
    a, b = make_float_arrays(config), make_float_arrays(config)
    assert a.keys() == b.keys()
    assert all(np.array_equal(a[k], b[k]) and a[k].dtype == np.float32 for k in a)
    other = make_float_arrays(dataclasses.replace(config, model_seed=config.model_seed + 1))
    assert not np.array_equal(a["wq"], other["wq"])
    assert {k: x.shape for k, x in a.items()} == draw_shapes(config)
    assert np.array_equal(a["attn_norm"], np.ones_like(a["attn_norm"]))
    assert a["pos"].shape == (config.max_model_len, config.hidden_size)


def test_bfloat16_weights_are_bfloat16_exact_and_uploaded_bit_for_bit() -> None:
    config = small("bfloat16").config
    host = make_float_arrays(config)
    for name, array in host.items():
        assert np.array_equal(round_to_bfloat16(array), array), name
    weights = FloatWeights.for_config(_torch_xp(), config)
    assert weights.dtype == torch.bfloat16
    np.testing.assert_array_equal(weights.embed.float().numpy(), host["embed"])
    # float32 draws are the same numbers before the rounding
    f32 = make_float_arrays(dataclasses.replace(config, model="float32"))
    np.testing.assert_array_equal(round_to_bfloat16(f32["lm_head"]), host["lm_head"])


def test_round_to_bfloat16_rounds_to_nearest_even() -> None:
    values = np.array([1.0, 1.0 + 2**-8, 1.0 + 3 * 2**-8, -2.5, 1e-3], dtype=np.float32)
    np.testing.assert_array_equal(
        round_to_bfloat16(values), torch.from_numpy(values).to(torch.bfloat16).float().numpy()
    )


def _torch_xp():
    from graphcheck.backends.xp import make_ops

    return make_ops("torch", "cpu")


# --------------------------------------------------------------------------- engines on torch


def _check_run(engine: Engine, scenario: Scenario, replayed: list[bool] | None = None) -> list[StepResult]:
    """Run ``scenario``; check each step's model report against the step's rows and drafts
    (``replayed`` gets whether each step replayed graphs)."""
    config = scenario.config
    drafts: dict[str, int] = {}
    seen: set[str] = set()

    def check(t: int, result: StepResult) -> None:
        if replayed is not None:
            replayed.append(engine.last_step_info.used_graph)
        report = engine.model_report()
        assert set(report) == {r.request_id for r in result.requests}
        for step in result.requests:
            rid = step.request_id
            rows = 1 if rid not in seen or config.naive_mode else 1 + drafts[rid]
            scores = report[rid].scores
            assert scores.shape == (rows, config.vocab_size) and scores.dtype == np.float64, (t, rid)
            assert np.isfinite(scores).all(), (t, rid)
            margins = report[rid].draft_margins
            assert len(margins) == len(step.draft_tokens) and all(m >= 0 for m in margins), (t, rid)
            assert all(0 <= tok < config.vocab_size for tok in step.accept_tokens + step.draft_tokens)
            seen.add(rid)
            drafts[rid] = len(step.draft_tokens)

    return run(engine, scenario, check)


CASES = [(m, s, n) for m in MODELS for s in SCOPES for n in (False, True)]


@pytest.mark.parametrize(
    "model,scope,naive", fast_first(CASES, lambda c: c in (("float32", "step", False), ("bfloat16", "forward", True)))
)
def test_float_engines_run_in_every_scope(model: str, scope: str, naive: bool) -> None:
    scenario = small(model, scope, naive=naive)
    for use_graphs in (False, True):
        engine = build(scenario, use_graphs=use_graphs)
        dtype = torch.float32 if model == "float32" else torch.bfloat16
        for name in ACTIVATION_FIELDS:
            assert getattr(engine.buffers, name).dtype == dtype, name
        assert engine.buffers.step_scores.dtype == torch.float64
        replayed: list[bool] = []
        results = _check_run(engine, scenario, replayed)
        assert sum(len(r.requests) for r in results) > 0
        assert any(replayed) == use_graphs
        values = engine.state_snapshot().by_name()
        assert values["k_cache"].values.dtype == np.float32
        hidden = values["draft_last_hidden"]
        assert hidden.idle_value == 0 and (hidden.idle_values == 0.0).all()


@pytest.mark.parametrize("scope", SCOPES)
@pytest.mark.parametrize("naive", [False, True])
def test_float32_eager_and_graph_emit_the_same_tokens(scope: str, naive: bool) -> None:
    scenario = small("float32", scope, naive=naive, num_steps=12)
    eager = run(build(scenario, use_graphs=False), scenario)
    graph_engine = build(scenario)
    replayed = []
    graph = run(graph_engine, scenario, lambda t, r: replayed.append(graph_engine.last_step_info.used_graph))
    assert any(replayed)
    assert graph == eager


def test_state_snapshot_of_a_float_engine_has_float_values() -> None:
    scenario = small("bfloat16", "forward_sampling")
    engine = build(scenario)
    run(engine, scenario)
    state = engine.state_snapshot(during_step=True).by_name()
    for name in ACTIVATION_FIELDS:
        assert state[name].values.dtype == np.float32, name  # bfloat16 comes back as float32
    assert state["seq_lens_decoder"].values.dtype == np.int64
    assert set(STATE_FIELDS) <= set(state)


def test_a_float_engine_draws_its_own_weights() -> None:
    """A float engine draws its own weights: the reference weights handed to it do not matter."""
    scenario = small("float32", num_steps=4)
    a = run(Engine(scenario.config, make_weights(scenario.config)), scenario)
    other = make_weights(dataclasses.replace(scenario.config, model_seed=99))
    b = run(Engine(scenario.config, other), scenario)
    assert a == b
    seeded = with_model(scenario, "float32", model_seed=99)
    assert run(build(seeded), seeded) != a


# --------------------------------------------------------------------------- faults


def _observe(scenario: Scenario, use_graphs: bool, fault: str | None) -> dict[str, Any]:
    """What an engine shows through ``scenario``: results, step infos, memory, stale or freed graph
    inputs, state buffers per step, and where it raised (construction or a step)."""
    seen: dict[str, Any] = {"results": [], "infos": [], "memory": [], "inputs": 0, "state": [], "error": None}
    try:
        engine = build(scenario, use_graphs=use_graphs, faults=[fault] if fault else [])
    except Exception as exc:  # a capture the fault breaks
        seen["error"] = ("construction", type(exc).__name__)
        return seen
    for t in range(scenario.num_steps):
        apply_events(engine, scenario, t)
        try:
            seen["results"].append(engine.step(t, scenario.accept_overrides_at(t)))
        except Exception as exc:
            seen["error"] = (t, type(exc).__name__)
            return seen
        info = engine.last_step_info
        seen["infos"].append((info.bucket, info.real_tokens, info.padded_tokens))
        seen["memory"].append(engine.memory_bytes())
        current = engine.buffer_tensors()
        graphs = [g for bucket in engine.graphs.values() for g in bucket.all()]
        seen["inputs"] += sum(len(g.stale_inputs(current)) + len(g.dead_inputs()) for g in graphs)
        seen["state"].append({n: engine.xp.to_host(getattr(engine.buffers, n)) for n in STATE_FIELDS})
    return seen


def fault_signals(scenario: Scenario, fault: str) -> set[str]:
    """``engine:what`` for each way the faulted eager / graph engine departs from the clean one."""
    signals = set()
    for use_graphs in (False, True):
        kind = "graph" if use_graphs else "eager"
        clean, bad = _observe(scenario, use_graphs, None), _observe(scenario, use_graphs, fault)
        n = len(bad["results"])
        if bad["error"] is not None:
            signals.add(f"{kind}:error@{bad['error'][0]}")
        if bad["results"] != clean["results"][:n]:
            signals.add(f"{kind}:results")
        if bad["infos"] != clean["infos"][:n]:
            signals.add(f"{kind}:info")
        if len(set(bad["memory"][1:])) > len(set(clean["memory"][1:])):
            signals.add(f"{kind}:memory")
        if bad["inputs"]:
            signals.add(f"{kind}:inputs")
        differs = (any(not np.array_equal(a[k], b[k]) for k in a) for a, b in zip(bad["state"], clean["state"]))
        if any(differs):
            signals.add(f"{kind}:state")
    return signals


#: Signals that are the fault's switch itself; results and state are what the model makes of it.
_PATH_SIGNALS = ("error", "inputs", "memory")


@pytest.mark.parametrize(
    "model,fault",
    fast_first(
        [(m, f) for m in MODELS for f in FAULT_SCENARIOS],
        lambda c: c
        in (
            ("float32", faults.HOST_SYNC_IN_CAPTURE),
            ("float32", faults.DRAFT_PADDING_WRITES_KV),
            ("bfloat16", faults.REBIND_OUTPUT_OFFSETS),
        ),
    ),
)
def test_every_fault_switches_its_path_in_the_float_model(model: str, fault: str) -> None:
    scenario = FAULT_SCENARIOS[fault]()
    exact = fault_signals(scenario, fault)
    floating = fault_signals(with_model(scenario, model), fault)
    assert floating, f"{fault} shows nothing in the {model} model"
    path = {s for s in exact if s.split(":")[1].split("@")[0] in _PATH_SIGNALS}
    assert path <= floating, (fault, sorted(exact), sorted(floating))
    for kind in ("eager", "graph"):
        touched = {f"{kind}:results", f"{kind}:state", f"{kind}:info"}
        if exact & touched:
            assert floating & touched, (fault, kind, sorted(exact), sorted(floating))


# --------------------------------------------------------------------------- other backends


@pytest.mark.parametrize("model", MODELS)
def test_paddle_float_engines_run_and_agree_eager_vs_graph(model: str) -> None:
    pytest.importorskip("paddle")
    device = resolve("xpu", emulate=True)
    scenario = small(model, "step", num_steps=10)
    eager = build(scenario, device, use_graphs=False)
    assert eager.xp.framework == "paddle"
    results = _check_run(eager, scenario)
    graph = build(scenario, device)
    assert _check_run(graph, scenario) == results
    state = graph.state_snapshot().by_name()
    assert state["k_cache"].values.dtype == np.float32


def test_npu_emulated_runs_the_bfloat16_model() -> None:
    device = resolve("npu", emulate=True)
    scenario = small("bfloat16", "forward", num_steps=6)
    engine = build(scenario, device)
    assert engine.runner is not None
    _check_run(engine, scenario)


@pytest.mark.gpu
@pytest.mark.parametrize("scope", SCOPES)
def test_cuda_bfloat16_engine_runs_and_reports(scope: str) -> None:
    device = resolve("cuda")
    scenario = small("bfloat16", scope, num_steps=10)
    eager = build(scenario, device, use_graphs=False)
    graph = build(scenario, device)
    assert graph.runner.name == "cuda" and graph.buffers.k_cache.dtype == torch.bfloat16
    first_eager = _check_run(eager, scenario)
    first_graph = _check_run(graph, scenario)
    assert first_eager[0] == first_graph[0]  # the prefill runs eagerly in both


# --------------------------------------------------------------------------- facade pieces


def _facade(framework: str) -> Any:
    """The CPU facade of ``framework``; skips when paddle is not installed."""
    from graphcheck.backends.xp import make_ops

    if framework == "paddle":
        pytest.importorskip("paddle")
    return make_ops(framework, "cpu")


@pytest.mark.parametrize("framework", ["torch", "paddle"])
def test_facade_bfloat16_host_copies_matmul_and_where(framework: str) -> None:
    xp = _facade(framework)
    a = np.array([[1.0, 2.0, 3.0], [0.5, -1.0, 1.0 + 2**-7]], dtype=np.float32)
    t = xp.astype(xp.from_numpy(a), xp.bfloat16)
    host = xp.to_host(t)
    assert host.dtype == np.float32
    np.testing.assert_array_equal(host, a)
    (many,) = xp.to_host_many([t], copy=False)
    assert many.dtype == np.float32
    eye = xp.astype(xp.from_numpy(np.eye(3, dtype=np.float32)), xp.bfloat16)
    product = xp.float_matmul(t, eye, xp.bfloat16)
    assert product.dtype == xp.bfloat16
    np.testing.assert_array_equal(xp.to_host(product), a)
    picked = xp.where(xp.from_numpy(np.array([[True], [False]])), t, 0.0)
    assert picked.dtype == xp.bfloat16
    np.testing.assert_array_equal(xp.to_host(picked), np.where([[True], [False]], a, 0.0))


@pytest.mark.parametrize("framework", ["torch", "paddle"])
def test_float_scores_rank_with_ties_to_the_lower_id(framework: str) -> None:
    from graphcheck.backends.engine.proposal import argmax_lowest
    from graphcheck.backends.engine.sampling import rank_order

    xp = _facade(framework)
    scores = np.array([[0.5, 2.25, -1.0, 2.25, 0.5, 2.25], [-0.0, 0.0, 1e-300, -3.0, 1e-300, 0.0]])
    order = xp.to_host(rank_order(xp, xp.from_numpy(scores)))
    np.testing.assert_array_equal(order, [[1, 3, 5, 0, 4, 2], [2, 4, 0, 1, 5, 3]])
    best = xp.to_host(argmax_lowest(xp, xp.astype(xp.from_numpy(scores), xp.float32)))
    np.testing.assert_array_equal(best, [1, 0])  # 1e-300 is 0.0 in float32: a tie at id 0
