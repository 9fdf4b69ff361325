"""The engine (eager, and graph-replayed through the emulated runner) against reference.decode.

Every StepResult must be equal to the reference's, and every decode step whose
slot high-water mark fits a capture size must have replayed that bucket's graph.
"""

from __future__ import annotations

import pytest

from graphcheck.capture.devices import resolve
from graphcheck.check.threads import single_threaded

from _engine_scenarios import (
    ALL,
    SCOPES,
    assert_graph_policy,
    engine_for,
    run_against_reference,
    run_engine,
)
from _layers import fast_first

torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    with single_threaded(resolve("cpu")):
        yield


@pytest.mark.parametrize("name", ALL)
def test_eager_engine_matches_reference(name):
    scenario, engine = engine_for(name, use_graphs=False)
    assert engine.graphs == {}
    run = run_against_reference(engine, scenario, name, "eager")
    assert all(not info.used_graph and info.padded_tokens == info.real_tokens for info in run.infos)


@pytest.mark.parametrize("scope", fast_first(SCOPES, lambda scope: scope == "step"))
@pytest.mark.parametrize("name", ALL)
def test_graph_engine_matches_reference(name, scope):
    scenario, engine = engine_for(name, scope, device=resolve("cpu"))
    assert sorted(engine.graphs) == sorted(scenario.config.capture_sizes)
    run = run_against_reference(engine, scenario, name, f"graphs/{scope}")
    assert assert_graph_policy(run, scenario.config) > 0, "no decode step replayed a graph"


def test_buckets_scenario_covers_every_bucket_and_falls_back():
    """The fixed scenarios really exercise what they claim: all four buckets, R moving both
    ways, eager decode above the largest bucket, max_num_seqs below it."""
    scenario, engine = engine_for("buckets", "step")
    run = run_engine(engine, scenario)
    buckets = [i.bucket for i in run.infos]
    assert {1, 2, 4, 8} <= set(buckets)
    rs = [i.real_bsz for i in run.infos]
    assert any(b < a for a, b in zip(rs, rs[1:])) and any(b > a for a, b in zip(rs, rs[1:]))

    above, engine = engine_for("eager_above")
    run = run_engine(engine, above)
    assert any(not i.used_graph and not i.has_prefill and i.real_bsz > 2 for i in run.infos)

    small, engine = engine_for("small_seqs")
    assert small.config.max_num_seqs < max(small.config.capture_sizes)
    assert int(engine.buffers.stop_flags.shape[0]) == max(small.config.capture_sizes) + 1
    assert engine.graphs[8].target is not None


def test_graphs_are_captured_in_descending_order():
    scenario, engine = engine_for("buckets")
    assert engine.capture_order == [8, 4, 2, 1]
    assert scenario.config.graph_scope == "step"
    for size, graphs in engine.graphs.items():  # scope "step": the draft substeps live in the step graph
        assert graphs.size == size and graphs.draft is None
    forward, engine = engine_for("buckets", "forward")
    assert engine.capture_order == [8, 4, 2, 1]
    assert all(g.draft is not None and g.draft is not g.target for g in engine.graphs.values())
