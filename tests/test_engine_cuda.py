"""The engine on a CUDA device (torch CUDA graphs) against the reference, and graph vs eager.

Skipped without CUDA (tests/conftest.py skips every ``gpu``-marked test).
"""

from __future__ import annotations

import functools

import pytest

from _engine_scenarios import (
    ALL,
    SCOPES,
    assert_graph_policy,
    engine_for,
    lockstep,
    run_against_reference,
    scenario_for,
)

pytestmark = pytest.mark.gpu


@functools.cache
def cuda_device():
    from graphcheck.capture.devices import resolve

    return resolve("cuda")


@pytest.mark.parametrize("name", ALL)
def test_cuda_eager_matches_reference(name):
    scenario, engine = engine_for(name, device=cuda_device(), use_graphs=False)
    assert engine.xp.device == "cuda"
    run_against_reference(engine, scenario, name, "cuda eager")


@pytest.mark.parametrize("scope", SCOPES)
@pytest.mark.parametrize("name", ALL)
def test_cuda_graphs_match_reference(name, scope):
    scenario, engine = engine_for(name, scope, device=cuda_device())
    assert engine.runner.name == "cuda"
    run = run_against_reference(engine, scenario, name, f"cuda graphs/{scope}")
    assert assert_graph_policy(run, scenario.config) > 0


@pytest.mark.parametrize("scope", SCOPES)
@pytest.mark.parametrize("name", ["buckets", "demo-topp", "demo-naive"])
def test_cuda_graph_matches_eager_bit_for_bit(name, scope):
    assert lockstep(scenario_for(name, scope), device="cuda") > 0
