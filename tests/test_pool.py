"""Engine reuse: ``Engine.reset()``, the engine pool, and checks on pooled engines.

A reset engine must be indistinguishable from a new one: every buffer (name,
dtype, shape, values bit for bit, and the very storage it had after capture),
the scheduler, the host fields, the graphs' static-input tables and their dead
and stale inputs, and what the graphs keep between replays. A scenario run on
reused engines must give the same records and divergences as on new ones,
clean and with every fault injected.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from typing import Any

import numpy as np
import pytest

from graphcheck.backends.engine import Engine
from graphcheck.backends.engine import faults as fault
from graphcheck.backends.engine.restore import EngineNotRestorable
from graphcheck.capture.devices import resolve
from graphcheck.check.checker import check_scenario
from graphcheck.check.lockstep import Lockstep
from graphcheck.check.pool import EnginePool
from graphcheck.check.records import CheckOutcome
from graphcheck.reference import make_weights
from graphcheck.scenario import Scenario

from _engine_scenarios import apply_events, buckets_scenario, demo
from _fault_scenarios import FAULT_SCENARIOS, joiner, with_scope
from _layers import fast_first

#: Faults whose engine cannot be built (the capture itself fails).
CAPTURE_FAILS = {fault.HOST_SYNC_IN_CAPTURE}
#: Faults that let a buffer bound at construction die: reset() may refuse (the pool then rebuilds).
DROPS_BUFFERS = {fault.REBIND_OUTPUT_OFFSETS}


def _plain(obj: Any, is_tensor: Any) -> Any:
    """A comparable picture of host-side state (tensors left out: they are compared apart)."""
    if is_tensor(obj):
        return "<tensor>"
    if isinstance(obj, np.ndarray):
        return (str(obj.dtype), obj.tolist())
    if isinstance(obj, (list, tuple, deque)):
        return [_plain(x, is_tensor) for x in obj]
    if isinstance(obj, dict):
        return {k: _plain(v, is_tensor) for k, v in obj.items()}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return (type(obj).__name__, {f.name: _plain(getattr(obj, f.name), is_tensor) for f in dataclasses.fields(obj)})
    if hasattr(obj, "__dict__") and type(obj).__module__.startswith("graphcheck.backends.engine"):
        return (type(obj).__name__, {k: _plain(v, is_tensor) for k, v in vars(obj).items()})
    return obj


def _host(engine: Engine) -> dict[str, Any]:
    is_tensor = type(engine.buffers.ids).__instancecheck__
    skip = {"xp", "device", "runner", "graphs", "weights", "buffers", "_pristine", "_inert_attrs"}
    return {k: _plain(v, is_tensor) for k, v in vars(engine).items() if k not in skip}


def _buffers(engine: Engine) -> dict[str, tuple[str, tuple[int, ...], bytes]]:
    ops = engine.runner.ops
    return {
        name: (ops.dtype_name(t), ops.shape(t), engine.xp.to_host(t).tobytes())
        for name, t in engine.buffer_tensors().items()
    }


def _pointers(engine: Engine) -> dict[str, tuple[int, int]]:
    ops = engine.runner.ops
    return {name: (id(t), ops.data_ptr(t)) for name, t in engine.buffer_tensors().items()}


def _graphs(engine: Engine, *, pointers: bool) -> dict[str, Any]:
    """Per graph: its static-input table, dead and stale inputs, and the contents of what it keeps."""
    xp, seen = engine.xp, {}
    current = engine.buffer_tensors()
    for size, bucket in engine.graphs.items():
        for kind, graph in (("target", bucket.target), ("draft", bucket.draft)):
            if graph is None:
                continue
            table = [(i.name, i.data_ptr if pointers else None, i.shape, i.dtype) for i in graph.static_inputs]
            seen[f"{kind}[{size}]"] = (
                table,
                sorted(str(i.name) for i in graph.dead_inputs()),
                sorted(str(i.name) for i, _ in graph.stale_inputs(current)),
                [xp.to_host(t).tobytes() for t in graph.persistent_tensors()],
                {name: getattr(graph, name) for name in graph.counters},
            )
    return seen


def _run(engine: Engine, scenario: Scenario) -> None:
    """Every step of ``scenario`` (a fault may make one raise: the engine is then as the step left it)."""
    for t in range(scenario.num_steps):
        apply_events(engine, scenario, t)
        try:
            engine.step(t, scenario.accept_overrides_at(t))
        except Exception:
            return


def _assert_reset_is_new(scenario: Scenario, backend: Any, faults: tuple[str, ...] = ()) -> None:
    config, weights = scenario.config, make_weights(scenario.config)
    engine = Engine(config, weights, device=backend, use_graphs=True, faults=faults)
    after_capture = _pointers(engine)
    tables = _graphs(engine, pointers=True)
    _run(engine, scenario)
    try:
        engine.reset()
    except EngineNotRestorable:
        assert set(faults) & DROPS_BUFFERS, "only a fault that drops a buffer may make reset() impossible"
        return
    new = Engine(config, weights, device=backend, use_graphs=True, faults=faults)
    assert _pointers(engine) == after_capture  # the same objects, the same storage
    assert _buffers(engine) == _buffers(new)
    assert _host(engine) == _host(new)
    assert _graphs(engine, pointers=False) == _graphs(new, pointers=False)
    assert _graphs(engine, pointers=True) == tables  # frozen addresses still the engine's
    # And it runs the scenario again exactly as a new engine does.
    for t in range(scenario.num_steps):
        apply_events(engine, scenario, t)
        apply_events(new, scenario, t)
        overrides = scenario.accept_overrides_at(t)
        try:
            got = engine.step(t, overrides)
        except Exception as exc:
            with pytest.raises(type(exc)):
                new.step(t, overrides)
            return
        assert got == new.step(t, overrides)
        assert engine.last_step_info == new.last_step_info
    assert _buffers(engine) == _buffers(new)


CPU = resolve("cpu")


@pytest.mark.parametrize("scope", fast_first(("step", "forward", "forward_sampling")))
def test_a_reset_engine_is_a_new_one_in_every_scope(scope: str) -> None:
    _assert_reset_is_new(with_scope(buckets_scenario(), scope), CPU)


def test_a_reset_engine_is_a_new_one_in_naive_mode() -> None:
    _assert_reset_is_new(demo("naive"), CPU)


RESETTABLE_FAULTS = sorted(set(FAULT_SCENARIOS) - CAPTURE_FAILS)


@pytest.mark.parametrize("name", fast_first(RESETTABLE_FAULTS, fast=lambda f: f in DROPS_BUFFERS))
def test_a_reset_engine_is_a_new_one_with_every_fault(name: str) -> None:
    _assert_reset_is_new(FAULT_SCENARIOS[name](), CPU, (name,))


@pytest.mark.parametrize("backend", fast_first(("xpu", "npu")))
def test_a_reset_engine_is_a_new_one_on_the_emulated_device_paths(backend: str) -> None:
    _assert_reset_is_new(with_scope(buckets_scenario(), "forward"), resolve(backend, emulate=True))


# ---------------------------------------------------------------------------- the pool and the lockstep


def _records(outcome: CheckOutcome) -> dict[str, list[Any]]:
    """Every StepRecord, with the addresses of its bindings left out (two engines, two allocations)."""
    pictured = {}
    for source, records in outcome.records.items():
        pictured[source] = [
            dataclasses.replace(
                r, bindings=tuple(dataclasses.replace(b, captured_ptr=0, current_ptr=None) for b in r.bindings)
            )
            for r in records
        ]
    return pictured


def _same(a: CheckOutcome, b: CheckOutcome) -> None:
    assert _records(a) == _records(b)
    assert [(d.kind, d.step, d.tensor, d.pair, d.ambiguous) for d in a.divergences] == [
        (d.kind, d.step, d.tensor, d.pair, d.ambiguous) for d in b.divergences
    ]
    assert [d.headline() for d in a.divergences if d.kind != "address"] == [
        d.headline() for d in b.divergences if d.kind != "address"
    ]
    assert (a.steps_run, a.clean, a.runner) == (b.steps_run, b.clean, b.runner)


def _other(scenario: Scenario) -> Scenario:
    """Another scenario of the same config, to leave the pooled engines in another state."""
    first = scenario.requests[0]
    again = dataclasses.replace(first, request_id="other", arrival_step=0, seed=first.seed + 7)
    return dataclasses.replace(scenario, requests=(again,), accepts=(), num_steps=max(2, scenario.num_steps - 1))


def test_a_pooled_run_reuses_the_engines_and_matches_a_new_one() -> None:
    scenario, pool = joiner("forward", num_steps=4), EnginePool()
    new = check_scenario(scenario, CPU)
    first = check_scenario(scenario, CPU, pool=pool)
    check_scenario(_other(scenario), CPU, pool=pool)
    again = check_scenario(scenario, CPU, pool=pool)
    assert pool.reused == 4 and len(pool) == 2
    for outcome in (first, again):
        _same(outcome, new)


@pytest.mark.parametrize("name", fast_first(sorted(FAULT_SCENARIOS), fast=2))
def test_a_fault_is_caught_the_same_on_reused_engines(name: str) -> None:
    scenario, pool = FAULT_SCENARIOS[name](), EnginePool()
    new = check_scenario(scenario, CPU, faults=[name])
    assert not new.clean
    check_scenario(_other(scenario), CPU, faults=[name], pool=pool)
    again = check_scenario(scenario, CPU, faults=[name], pool=pool)
    _same(again, new)
    assert again.first is not None and new.first is not None
    first = (again.first.kind, again.first.step, again.first.tensor, again.first.pair)
    assert first == (new.first.kind, new.first.step, new.first.tensor, new.first.pair)
    if name in CAPTURE_FAILS:
        assert len(pool) == 0  # an engine whose construction failed is never kept


def test_an_engine_whose_step_raised_is_not_given_back() -> None:
    scenario, pool = joiner(), EnginePool()
    lockstep = Lockstep(scenario, CPU, pool=pool)

    def boom(t: int, overrides: Any) -> Any:
        raise RuntimeError("boom")

    lockstep.graph.step = boom  # type: ignore[method-assign]
    outcome = lockstep.run()
    assert outcome.first is not None and outcome.first.kind == "crash"
    assert len(pool) == 1  # the eager engine only


def test_an_engine_without_reset_is_built_every_time() -> None:
    class NoReset(Engine):
        reset = None  # type: ignore[assignment]

    pool = EnginePool()
    scenario = joiner()
    for _ in range(2):
        assert Lockstep(scenario, CPU, engine_factory=NoReset, pool=pool).run().clean
    assert len(pool) == 0 and pool.reused == 0


def test_the_pool_keeps_a_few_configs() -> None:
    pool = EnginePool(capacity=2)
    base = joiner(num_steps=2)
    for seed in range(4):
        config = dataclasses.replace(base.config, model_seed=seed)
        check_scenario(dataclasses.replace(base, config=config), CPU, pool=pool)
    assert len(pool) == 4  # two configs, an eager and a graph engine each
    assert {k.config.model_seed for k in pool._idle} == {2, 3}


# ---------------------------------------------------------------------------- real CUDA graphs (skipped without a GPU)


@pytest.mark.gpu
@pytest.mark.parametrize("scope", ("step", "forward", "forward_sampling"))
def test_a_reset_engine_is_a_new_one_on_cuda(scope: str) -> None:
    _assert_reset_is_new(with_scope(buckets_scenario(), scope), resolve("cuda"))


@pytest.mark.gpu
@pytest.mark.parametrize("scope", ("step", "forward"))
def test_a_pooled_cuda_run_matches_a_new_one(scope: str) -> None:
    cuda, pool = resolve("cuda"), EnginePool()
    scenario = joiner(scope, num_steps=4)
    new = check_scenario(scenario, cuda)
    check_scenario(_other(scenario), cuda, pool=pool)  # leaves the pooled engines in another state
    again = check_scenario(scenario, cuda, pool=pool)
    assert new.clean
    _same(new, again)


def test_an_engines_unreplayed_graphs_slow_nothing_outside_its_own_calls() -> None:
    """Poison of graphs not yet replayed is checked in the owner's calls only: an idle (pooled)
    engine leaves no dispatch mode behind to tax the harness, the eager engine or Hypothesis."""
    from torch.utils._python_dispatch import _get_current_dispatch_mode

    scenario = with_scope(joiner(), "step")
    engine = Engine(scenario.config, make_weights(scenario.config), device=CPU, use_graphs=True)
    assert engine.runner is not None and engine.runner._owner_scoped
    assert _get_current_dispatch_mode() is None
    _run(engine, scenario)
    assert _get_current_dispatch_mode() is None
