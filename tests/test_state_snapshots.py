"""Engine state snapshots: what the built-in engine declares, the eager-vs-graph state diff, slot hygiene."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from graphcheck.adapter import engine_extras
from graphcheck.backends.engine import Engine
from graphcheck.backends.engine.buffers import SLOT_IDLE
from graphcheck.capture.devices import resolve
from graphcheck.check.checker import Checker, check_scenario
from graphcheck.check.engines import engine_from_factory
from graphcheck.check.lockstep import Lockstep
from graphcheck.check.state_diff import check_hygiene, diff_states
from graphcheck.reference import make_weights
from graphcheck.scenario import EngineConfig, RequestSpec, Scenario, validate
from graphcheck.search.builtin import demo_scenario
from graphcheck.state import CACHE, SLOT, TOKEN, BufferState, EngineState

from _fault_scenarios import with_scope
from _layers import fast_first

SCOPES = fast_first(("step", "forward", "forward_sampling"), lambda s: s == "step")


@pytest.fixture(scope="module")
def cpu():
    return resolve("cpu")


def reuse_scenario(scope: str = "step") -> Scenario:
    """r0 runs two steps and stops on max_dec_len; r1 arrives later and takes the same slot 0."""
    config = EngineConfig(max_num_seqs=1, capture_sizes=(1,), max_model_len=32, graph_scope=scope)
    requests = (
        RequestSpec("r0", 0, (3, 4, 5), max_dec_len=2, eos_token_ids=(63,)),
        RequestSpec("r1", 3, (7, 8), max_dec_len=3, eos_token_ids=(63,)),
    )
    return validate(Scenario(config=config, requests=requests, num_steps=6, name="slot-reuse"))


# --------------------------------------------------------------------------- what the engine declares


def test_the_snapshot_names_every_buffer_with_its_kind(cpu) -> None:
    scenario = demo_scenario(num_steps=2)
    engine = Engine(scenario.config, make_weights(scenario.config), device=cpu, use_graphs=False)
    for spec in scenario.requests:
        engine.submit(spec)
    engine.step(0, {})
    state = engine.state_snapshot()
    kinds = {b.name: b.kind for b in state.buffers}
    assert {n for n, k in kinds.items() if k == SLOT} == set(SLOT_IDLE)
    assert kinds["k_cache"] == CACHE and kinds["ids"] == TOKEN and kinds["cu_seqlens_q"] == TOKEN
    assert "d_ids" not in kinds  # draft scratch only during a step (see Engine.state_snapshot)
    assert "d_ids" in {b.name for b in engine.state_snapshot(during_step=True).buffers}
    by = state.by_name()
    running = sorted(slot for _, slot in engine.last_step_info.slots)
    assert by["seq_lens_decoder"].rows.tolist() == running
    assert by["seq_lens_decoder"].owners.tolist() == running
    free = by["stop_flags"]
    assert set(free.idle_rows.tolist()) == set(range(engine.sizes.slots)) - set(running)
    assert free.idle_values.all() and free.idle_value is True
    # the packed target rows are the real tokens of the step, owned by their slots
    ids = by["ids"]
    assert len(ids.rows) == engine.last_step_info.real_tokens and set(ids.owners.tolist()) == set(running)
    # cache rows: whole blocks of running requests, a multiple of the block size, never the sink
    cache = by["k_cache"]
    assert len(cache.rows) % scenario.config.block_size == 0 and cache.rows.min() >= scenario.config.block_size


def test_the_state_diff_compares_bytes_and_names_the_row() -> None:
    def state(values) -> EngineState:
        rows = np.array([0, 2])
        buf = BufferState("top_p", SLOT, rows, np.array(values), rows, np.array([1]), np.array([1.0]), 1.0)
        return EngineState((buf,))

    assert diff_states(state([0.5, 0.25]), state([0.5, 0.25]), 3, "eager vs graph", {}) == []
    found = diff_states(state([0.5, 0.25]), state([0.5, 0.25 + 1e-17 + 2**-54]), 3, "eager vs graph", {2: "r7"})
    assert len(found) == 1
    d = found[0]
    assert (d.kind, d.step, d.tensor, d.slot, d.request_id) == ("state", 3, "top_p", 2, "r7")
    assert "row 2" in d.detail
    nan = diff_states(state([np.nan, 0.0]), state([np.nan, 0.0]), 0, "eager vs graph", {})
    assert nan == []  # the same bytes are the same state, NaN included


def test_hygiene_fast_path_never_hides_a_value() -> None:
    """The idle-bytes shortcut only skips free rows that hold the idle value; anything else is compared."""

    def hygiene(values, idle) -> list:
        rows = np.array([], dtype=np.int64)
        free = np.arange(len(values))
        buf = BufferState("top_p", SLOT, rows, np.zeros(0), rows, free, np.array(values), idle)
        return check_hygiene(EngineState((buf,)), 0, "graph engine", {})

    assert hygiene([1.0, 1.0], 1.0) == []
    assert len(hygiene([1.0, 1.0 + 2**-52], 1.0)) == 1  # the cached idle bytes of the same shape are reused
    assert hygiene([-0.0, 0.0], 0.0) == []  # other bytes, same value: not dirty, as before
    assert hygiene([np.nan, np.nan], np.nan) == []  # rows are judged by their bytes, as before
    assert len(hygiene([np.nan, 1.0], np.nan)) == 1
    assert len(hygiene([True, False], True)) == 1


def test_hygiene_reports_a_dirty_free_slot_and_who_left_it() -> None:
    rows = np.array([], dtype=np.int64)
    dirty = BufferState("accept_override", SLOT, rows, np.zeros(0), rows, np.array([0, 1]), np.array([-1, 3]), -1)
    found = check_hygiene(EngineState((dirty,)), 5, "graph engine", {1: "r2"})
    assert len(found) == 1
    d = found[0]
    assert (d.kind, d.step, d.tensor, d.pair, d.slot, d.request_id) == (
        "state",
        5,
        "accept_override",
        "slot hygiene (graph engine)",
        1,
        "r2",
    )
    assert (d.expected, d.actual) == (-1, 3)


# --------------------------------------------------------------------------- in the lockstep


@pytest.mark.parametrize("scope", SCOPES)
def test_clean_runs_stay_clean_with_the_state_diff(cpu, scope: str) -> None:
    for scenario in (with_scope(demo_scenario(), scope), reuse_scenario(scope)):
        lockstep = Lockstep(scenario, cpu)
        assert lockstep.snapshots
        outcome = lockstep.run()
        assert outcome.clean, [d.headline() for d in outcome.failures]


class LeavesStepIdxBehind(Engine):
    """A release that forgets one per-slot field (step_idx): the next occupant's admission overwrites
    it, so every output stays correct; only the free slot's state shows it."""

    def _release(self, requests):
        kept = self.xp.to_host(self.buffers.step_idx)
        slots = [r.slot for r in requests]
        super()._release(requests)
        if slots:
            restored = self.xp.to_host(self.buffers.step_idx)
            restored[slots] = kept[slots]
            self.buffers.step_idx.copy_(self.xp.from_numpy(restored))


class WithoutSnapshots:
    """The same engine, hiding ``state_snapshot`` (an adapter without the optional protocol)."""

    def __init__(self, *args, **kwargs):
        self._engine = LeavesStepIdxBehind(*args, **kwargs)

    def __getattr__(self, name):
        if name == "state_snapshot":
            raise AttributeError(name)
        return getattr(self._engine, name)


def test_a_field_surviving_a_slots_reuse_is_found_the_step_it_is_left(cpu) -> None:
    scenario = reuse_scenario()
    outcome = Checker(cpu, engine_from_factory(LeavesStepIdxBehind))(scenario)
    first = outcome.first
    assert first is not None
    assert (first.kind, first.tensor, first.slot, first.request_id) == ("state", "step_idx", 0, "r0")
    assert first.pair in ("slot hygiene (eager engine)", "slot hygiene (graph engine)")
    r0_done = next(r.step for r in outcome.records["reference"] if any(s.stopped for s in r.result.requests))
    assert first.step == r0_done < 3  # the step r0 leaves, before r1 arrives and takes the slot
    # every output is still correct: without snapshots the same engine runs clean to the end
    blind = Checker(cpu, engine_from_factory(WithoutSnapshots))(scenario)
    assert blind.clean and blind.steps_run == scenario.num_steps


def test_the_snapshot_protocol_is_optional(cpu) -> None:
    scenario = demo_scenario(num_steps=3)
    lockstep = Lockstep(scenario, cpu, engine_factory=WithoutSnapshots)
    assert not lockstep.snapshots and not engine_extras(lockstep.graph).snapshots
    assert lockstep.run().steps_run == 3


def test_state_timing_is_its_own_phase(cpu) -> None:
    from graphcheck.check.timings import STEP_PHASES, LockstepTimings

    timings = LockstepTimings()
    Lockstep(demo_scenario(num_steps=3), cpu, timings=timings).run()
    assert "state" in STEP_PHASES and timings.state > 0


def test_scenario_with_faults_reports_state_before_tokens(cpu) -> None:
    """seed-advance-outside-graph: infer_seed's state differs at the first replay, ordered before the seed."""
    from _fault_scenarios import joiner

    outcome = check_scenario(joiner(), cpu, faults=["seed-advance-outside-graph"])
    kinds = [d.kind for d in outcome.failures if d.step == outcome.first.step]
    assert kinds[0] == "state" and outcome.first.tensor == "infer_seed"
    assert "seed" in kinds and kinds.index("seed") > 0


def test_a_snapshot_copies_values(cpu) -> None:
    """Values are host copies: a later step does not change a snapshot already taken."""
    scenario = demo_scenario(num_steps=2)
    engine = Engine(scenario.config, make_weights(scenario.config), device=cpu, use_graphs=False)
    for spec in scenario.requests:
        engine.submit(spec)
    engine.step(0, {})
    before = engine.state_snapshot().by_name()["step_idx"].values.copy()
    snap = engine.state_snapshot()
    engine.step(1, {})
    assert np.array_equal(snap.by_name()["step_idx"].values, before)
    assert dataclasses.is_dataclass(snap)


def test_layout_violations_name_offsets_and_rows_that_disagree() -> None:
    from graphcheck.backends.engine.state import layout_violations

    good = {"cu_seqlens_q": np.array([0, 2, 3, 3]), "batch_ids": np.array([0, 0, 1, -1, 5])}
    assert layout_violations(good, 3) == ()
    shuffled = dict(good, batch_ids=np.array([0, 1, 1, -1, 5]))
    (message,) = layout_violations(shuffled, 3)
    assert message.startswith("batch_ids[1] = 1") and "slot 0" in message
    falling = dict(good, cu_seqlens_q=np.array([0, 2, 1, 3]))
    (message,) = layout_violations(falling, 3)
    assert message.startswith("cu_seqlens_q[2] = 1")
    assert layout_violations(good, 0) == ()
