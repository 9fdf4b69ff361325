"""Properties of the built-in engine, written with graphcheck's pytest plugin fixtures alone."""

from __future__ import annotations

from hypothesis import given

from graphcheck.search.builtin import demo_scenario
from graphcheck.strategies import engine_configs, scenarios

#: Small scenarios keep a CI run short; widen them for nightly runs.
small_scenarios = scenarios(max_requests=3, max_steps=8)


@given(scenario=small_scenarios)
def test_graph_replay_agrees_with_eager_and_reference(graphcheck_check, scenario):
    graphcheck_check(scenario)


@given(scenario=scenarios(configs=engine_configs(naive_mode=True, graph_scope="forward"), max_requests=2, max_steps=5))
def test_naive_mode_with_forward_graphs_is_clean(graphcheck_check, scenario):
    graphcheck_check(scenario)


def test_demo_scenario_replays_graphs(graphcheck_lockstep):
    outcome = graphcheck_lockstep(demo_scenario())
    assert outcome.clean
    assert {r.bucket for r in outcome.records["graph"] if r.used_graph}, "expected graph replays"


def test_an_injected_rebinding_is_caught(graphcheck_lockstep):
    outcome = graphcheck_lockstep(demo_scenario(), faults=["rebind-output-offsets"])
    assert outcome.first is not None
    assert (outcome.first.kind, outcome.first.tensor) == ("address", "cu_seqlens_out")


def test_stepping_a_lockstep_run_by_hand(graphcheck_lockstep):
    lockstep = graphcheck_lockstep.build(demo_scenario(num_steps=4))
    assert all(lockstep.step(t) for t in range(4))
    assert lockstep.outcome.clean
