"""The engine on a CUDA device (torch CUDA graphs) against the reference, and graph vs eager.

Skipped without CUDA (tests/conftest.py skips every ``gpu``-marked test).
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
    lockstep,
    run_engine,
    with_scope,
)

pytestmark = pytest.mark.gpu

ALL = [f"demo-{m}" for m in DEMO_MODES] + list(EXTRA)


def scenario_for(name: str):
    return demo(name.removeprefix("demo-")) if name.startswith("demo-") else EXTRA[name]()


@functools.cache
def reference_run(name: str):
    from reference import decode, make_weights

    scenario = scenario_for(name)
    return decode(scenario), make_weights(scenario.config)


@functools.cache
def cuda_device():
    from backends.devices import resolve

    return resolve("cuda")


@pytest.mark.parametrize("name", ALL)
def test_cuda_eager_matches_reference(name):
    from backends.engine import Engine

    scenario = scenario_for(name)
    expected, weights = reference_run(name)
    engine = Engine(scenario.config, weights, device=cuda_device(), use_graphs=False)
    assert engine.xp.device == "cuda"
    assert_same_results(expected, run_engine(engine, scenario).results, f"{name} cuda eager")


@pytest.mark.parametrize("scope", SCOPES)
@pytest.mark.parametrize("name", ALL)
def test_cuda_graphs_match_reference(name, scope):
    from backends.engine import Engine

    scenario = with_scope(scenario_for(name), scope)
    expected, weights = reference_run(name)
    engine = Engine(scenario.config, weights, device=cuda_device())
    assert engine.runner.name == "cuda"
    run = run_engine(engine, scenario)
    assert_same_results(expected, run.results, f"{name} cuda graphs/{scope}")
    assert assert_graph_policy(run, scenario.config) > 0


@pytest.mark.parametrize("scope", SCOPES)
@pytest.mark.parametrize("name", ["buckets", "demo-topp", "demo-naive"])
def test_cuda_graph_matches_eager_bit_for_bit(name, scope):
    assert lockstep(with_scope(scenario_for(name), scope), device="cuda") > 0
