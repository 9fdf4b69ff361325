"""The engine (eager, and graph-replayed through the emulated runner) against reference.decode.

Every StepResult must be equal to the reference's, and every decode step whose
slot high-water mark fits a capture size must have replayed that bucket's graph.
"""

from __future__ import annotations

import functools

import pytest

from _engine_scenarios import (
    DEMO_MODES,
    EXTRA,
    SCOPES,
    assert_graph_policy,
    assert_same_results,
    demo,
    run_engine,
    with_scope,
)
from backends.devices import resolve
from backends.engine import Engine
from reference import decode, make_weights

torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """Tiny tensors: intra-op threads only add overhead (and stall on a busy 2-core box)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def scenario_for(name: str):
    return demo(name.removeprefix("demo-")) if name.startswith("demo-") else EXTRA[name]()


@functools.cache
def reference_run(name: str):
    scenario = scenario_for(name)
    return decode(scenario), make_weights(scenario.config)


ALL = [f"demo-{m}" for m in DEMO_MODES] + list(EXTRA)


@pytest.mark.parametrize("name", ALL)
def test_eager_engine_matches_reference(name):
    scenario = scenario_for(name)
    expected, weights = reference_run(name)
    engine = Engine(scenario.config, weights, use_graphs=False)
    assert engine.graphs == {}
    run = run_engine(engine, scenario)
    assert_same_results(expected, run.results, f"{name} eager")
    assert all(not info.used_graph and info.padded_tokens == info.real_tokens for info in run.infos)


@pytest.mark.parametrize("scope", SCOPES)
@pytest.mark.parametrize("name", ALL)
def test_graph_engine_matches_reference(name, scope):
    scenario = with_scope(scenario_for(name), scope)
    expected, weights = reference_run(name)
    engine = Engine(scenario.config, weights, device=resolve("cpu"))
    assert sorted(engine.graphs) == sorted(scenario.config.capture_sizes)
    run = run_engine(engine, scenario)
    assert_same_results(expected, run.results, f"{name} graphs/{scope}")
    assert assert_graph_policy(run, scenario.config) > 0, "no decode step replayed a graph"


def test_buckets_scenario_covers_every_bucket_and_falls_back():
    """The fixed scenarios really exercise what they claim: all four buckets, R moving both
    ways, eager decode above the largest bucket, max_num_seqs below it."""
    name = "buckets"
    scenario = with_scope(scenario_for(name), "step")
    engine = Engine(scenario.config, reference_run(name)[1])
    run = run_engine(engine, scenario)
    buckets = [i.bucket for i in run.infos]
    assert {1, 2, 4, 8} <= set(buckets)
    rs = [i.real_bsz for i in run.infos]
    assert any(b < a for a, b in zip(rs, rs[1:])) and any(b > a for a, b in zip(rs, rs[1:]))

    above = scenario_for("eager_above")
    run = run_engine(Engine(above.config, reference_run("eager_above")[1]), above)
    assert any(not i.used_graph and not i.has_prefill and i.real_bsz > 2 for i in run.infos)

    small = scenario_for("small_seqs")
    engine = Engine(small.config, reference_run("small_seqs")[1])
    assert small.config.max_num_seqs < max(small.config.capture_sizes)
    assert int(engine.buffers.stop_flags.shape[0]) == max(small.config.capture_sizes) + 1
    assert engine.graphs[8].target is not None


def test_graphs_are_captured_in_descending_order():
    scenario = scenario_for("buckets")
    engine = Engine(scenario.config, reference_run("buckets")[1])
    assert engine.capture_order == [8, 4, 2, 1]
    assert scenario.config.graph_scope == "step"
    for size, graphs in engine.graphs.items():  # scope "step": the draft substeps live in the step graph
        assert graphs.size == size and graphs.draft is None
    forward = with_scope(scenario, "forward")
    engine = Engine(forward.config, reference_run("buckets")[1])
    assert engine.capture_order == [8, 4, 2, 1]
    assert all(g.draft is not None and g.draft is not g.target for g in engine.graphs.values())
