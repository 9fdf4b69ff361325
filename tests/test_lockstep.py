"""Lockstep runner: clean engines agree; broken ones are caught with the right kind."""

from __future__ import annotations

import dataclasses

import pytest

from graphcheck.capture.devices import resolve
from graphcheck.check.audits import MemoryWatch, expected_bucket
from graphcheck.check.checker import check_scenario
from graphcheck.check.lockstep import Lockstep
from graphcheck.search.builtin import demo_scenario

from _layers import fast_first


@pytest.fixture(scope="module")
def cpu():
    return resolve("cpu")


@pytest.mark.parametrize("mode", fast_first(["greedy", "naive", "target_match", "topp"], 2))
def test_clean_engine_has_no_divergence(cpu, mode: str) -> None:
    naive = mode == "naive"
    scenario = demo_scenario("target_match" if naive else mode, naive_mode=naive)
    outcome = check_scenario(scenario, cpu)
    assert outcome.clean, [d.headline() for d in outcome.failures]
    assert outcome.steps_run == scenario.num_steps
    graph_steps = [r for r in outcome.records["graph"] if r.used_graph]
    assert graph_steps, "the demo must replay graphs"
    assert all(r.bindings and not any(b.stale for b in r.bindings) for r in graph_steps)
    assert outcome.runner == "emulated"


def test_expected_bucket_policy() -> None:
    scenario = demo_scenario()
    assert expected_bucket(scenario, 1, False) == 1
    assert expected_bucket(scenario, 3, False) == 4
    assert expected_bucket(scenario, 5, False) is None
    assert expected_bucket(scenario, 1, True) is None
    assert expected_bucket(scenario, 0, False) is None  # an idle step replays nothing


def test_engine_crash_is_a_crash_divergence(cpu) -> None:
    from graphcheck.backends.engine import Engine

    class Exploding(Engine):
        def step(self, t, overrides):
            if self.use_graphs and t == 3:
                raise RuntimeError("boom")
            return super().step(t, overrides)

    outcome = Lockstep(demo_scenario(), cpu, engine_factory=Exploding).run()
    first = outcome.first
    assert first is not None and first.kind == "crash" and first.step == 3
    assert "boom" in first.detail and outcome.steps_run == 3


def test_rebound_buffer_is_an_address_divergence(cpu) -> None:
    from graphcheck.backends.engine import Engine

    class Rebinding(Engine):
        def step(self, t, overrides):
            if self.use_graphs and t == 4:
                self.buffers.infer_seed = self.buffers.infer_seed.clone()
            return super().step(t, overrides)

    outcome = Lockstep(demo_scenario(), cpu, engine_factory=Rebinding).run()
    address = [d for d in outcome.failures if d.kind == "address"]
    assert address and address[0].step == 4 and address[0].tensor == "infer_seed"


def test_ambiguous_rows_never_fail(cpu) -> None:
    from graphcheck.check.diff import DiffState, diff_steps
    from graphcheck.step_result import RequestStep, StepResult

    ref = StepResult(0, (RequestStep("a", (1,), (), 4, 1, 3, False, ambiguous=True),))
    got = StepResult(0, (RequestStep("a", (2,), (), 4, 1, 3, False),))
    state = DiffState()
    found = diff_steps(ref, got, "reference vs graph", state=state)
    assert found and all(d.ambiguous for d in found)
    assert state.tainted == {"a"}
    later = diff_steps(
        StepResult(1, (RequestStep("a", (5,), (), 8, 2, 4, False),)),
        StepResult(1, (RequestStep("a", (6,), (), 8, 2, 4, False),)),
        "reference vs graph",
        state=state,
    )
    assert later == []
    strict = diff_steps(ref, got, "eager vs graph")
    assert strict and not any(d.ambiguous for d in strict)


def test_capture_failure_is_a_capture_divergence(cpu) -> None:
    from graphcheck.backends.engine import Engine

    class BadCapture(Engine):
        def _capture_graphs(self):
            raise RuntimeError("capture exploded")

    outcome = Lockstep(demo_scenario(), cpu, engine_factory=BadCapture).run()
    assert outcome.first.kind == "capture" and outcome.steps_run == 0


def test_a_failed_capture_leaves_no_half_built_pair(cpu) -> None:
    """The pair is built whole or not at all: after a failed capture there is no engine to step."""
    from graphcheck.backends.engine import Engine

    class BadCapture(Engine):
        def _capture_graphs(self):
            raise RuntimeError("capture exploded")

    lockstep = Lockstep(demo_scenario(), cpu, engine_factory=BadCapture)
    assert lockstep.pair is None and lockstep.eager is None and lockstep.graph is None and not lockstep.snapshots
    assert [d.kind for d in lockstep.outcome.divergences] == ["capture"]
    with pytest.raises(RuntimeError, match="no engine pair"):
        lockstep.step(0)
    built = Lockstep(demo_scenario(), cpu)
    assert built.pair is not None and built.eager is built.pair.eager and built.graph is built.pair.graph


def test_memory_growth_is_a_memory_divergence(cpu) -> None:
    from graphcheck.backends.engine import Engine

    class Leaky(Engine):
        held: list

        def step(self, t, overrides):
            result = super().step(t, overrides)
            if self.use_graphs:
                self.__dict__.setdefault("held", []).append(1)
            return result

        def memory_bytes(self):
            return super().memory_bytes() + 1024 * len(self.__dict__.get("held", []))

    outcome = Lockstep(dataclasses.replace(demo_scenario()), cpu, engine_factory=Leaky).run()
    assert outcome.first.kind == "memory"


def test_the_memory_baseline_restarts_when_the_engine_holds_another_graph() -> None:
    """A pipelined engine reports a lazy capture with its batch, a call after the graph appeared: the
    replay reported in between already holds it, which is not growth of the graphs that existed."""
    from graphcheck.check.records import StepRecord
    from graphcheck.step_result import StepResult

    watch = MemoryWatch()
    graphs = {1: object()}

    def replay(t: int, nbytes: int) -> list:
        record = StepRecord("graph", t, StepResult(t, ()), used_graph=True, memory_bytes=nbytes)
        return watch.check(record, len(graphs), captured=False)

    assert replay(0, 100) == [] and replay(1, 100) == []
    graphs[2] = object()
    assert replay(2, 200) == [] and replay(3, 200) == []
    assert [d.kind for d in replay(4, 300)] == ["memory"]


def test_causes_come_before_consequences_within_a_step() -> None:
    from graphcheck.check.diff import Divergence, failing

    token = Divergence("token", 4, "accept_tokens", "eager vs graph", (1,), (2,))
    address = Divergence("address", 4, "cu_seqlens_out", "graph capture vs replay", "0x1", "0x2")
    earlier_value = Divergence("value", 3, "step_idx", "reference vs graph", 1, 2)
    assert failing([token, address, earlier_value]) == [earlier_value, address, token]
