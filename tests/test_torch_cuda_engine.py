"""An engine that captures with torch.cuda itself (``--engine builtin-torch-cuda``): on the CPU graphcheck runs
it inside ``graphcheck.emulate.cuda_graphs()``, and its verdicts equal the built-in engine's on every fault."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from graphcheck.backends.engine.faults import FAULTS
from graphcheck.capture.devices import resolve
from graphcheck.check.checker import Checker
from graphcheck.check.engines import resolve_engine
from graphcheck.check.setup import CheckSetup
from graphcheck.search.builtin import builtin_scenarios

NAME = "builtin-torch-cuda"  # the entry point (installed with the package)
SPEC = "graphcheck.engines.torch_cuda:Engine"  # the same engine by module path (works from a bare checkout)
#: One fault per kind of evidence: a rebound address, stale padding rows, a seed, a host sync, a freed input.
FAST_FAULTS = (
    "rebind-output-offsets",
    "stale-padding-rows",
    "seed-advance-outside-graph",
    "host-sync-in-capture",
    "captured-temporary-freed",
)


@functools.cache
def _checker(spec: str, backend: str = "cpu") -> Checker:
    return Checker(resolve(backend), resolve_engine(spec), CheckSetup())


def _first(spec: str, scenario, faults=(), backend: str = "cpu"):
    first = _checker(spec, backend).run(scenario, faults=faults).first
    return None if first is None else (first.kind, first.step, first.tensor)


def test_the_engine_is_registered_and_declares_its_graph_api():
    pyproject = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
    assert f'{NAME} = "{SPEC}"' in pyproject
    choice = resolve_engine(SPEC)
    assert choice.capabilities.graph_api == "torch.cuda"
    assert "graphs captured through: torch.cuda" in choice.capabilities.describe()
    assert choice.capabilities.fault_names == resolve_engine("builtin").capabilities.fault_names


def test_its_graphs_are_op_level_emulated_and_run_clean():
    import torch

    scenario = builtin_scenarios(8)[0]
    checker = _checker(SPEC)
    lockstep = None
    with checker.graph_api():
        assert torch.cuda.CUDAGraph.__name__ == "EmulatedCUDAGraph"
        lockstep = checker.build(scenario)
        graphs = [g for b in lockstep.graph.graphs.values() for g in b.all()]
        assert graphs and all(type(g).__name__ == "OpGraph" for g in graphs)
        assert any(inp.name == "infer_seed" for g in graphs for inp in g.static_inputs)
        lockstep.release()
    assert torch.cuda.CUDAGraph.__name__ == "CUDAGraph"
    assert _checker(SPEC).run(scenario).clean


@pytest.mark.parametrize("fault", FAST_FAULTS)
def test_a_fault_diverges_where_it_does_on_the_builtin_engine(fault):
    scenario = builtin_scenarios(8)[1]
    expected = _first("builtin", scenario, (fault,))
    assert expected is not None
    assert _first(SPEC, scenario, (fault,)) == expected


@pytest.mark.slow
@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_every_fault_gives_the_builtin_engines_first_divergence(fault):
    for scenario in builtin_scenarios(12):
        assert _first(SPEC, scenario, (fault,)) == _first("builtin", scenario, (fault,))


@pytest.mark.gpu
@pytest.mark.parametrize("fault", (None,) + FAST_FAULTS)
def test_on_a_gpu_real_graphs_and_the_observer_give_the_same_verdicts(fault):
    faults = () if fault is None else (fault,)
    for scenario in builtin_scenarios(8)[:2]:
        assert _first(SPEC, scenario, faults, "cuda") == _first("builtin", scenario, faults, "cuda")


def test_the_peer_style_baseline_runs_it_inside_the_emulator_too():
    from graphcheck.catalog.baseline import run_baseline

    clean = run_baseline(resolve("cpu"), engine=resolve_engine(SPEC), batch_sizes=(1, 3), modes=("greedy",))
    assert all(case.passed for case in clean.cases), [case.reason for case in clean.cases]
