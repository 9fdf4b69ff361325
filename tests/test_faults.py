"""Injected faults: each switch on a real engine code path is caught with its bug class's signal.

For every fault: with the fault on, ``check_scenario`` fails and its FIRST
failing divergence has the expected kind, step and tensor; with no fault the
same scenario is clean. Scenarios are fixed (graphcheck.search.builtin and the
literals of tests/_fault_scenarios.py), so steps are asserted exactly.
"""

from __future__ import annotations

import dataclasses

import pytest

from graphcheck.backends.engine import Engine, faults
from graphcheck.backends.engine.faults import FAULTS, NUM_BUG_CLASSES, Fault, UnknownFault, check_faults, fault_on
from graphcheck.capture.devices import resolve
from graphcheck.check.bindings import bindings_of
from graphcheck.check.checker import check_scenario
from graphcheck.check.lockstep import Lockstep
from graphcheck.reference import make_weights
from graphcheck.scenario import GRAPH_SCOPES, Scenario, validate
from graphcheck.search.builtin import BUILTIN, demo_scenario, late_joiner, shrinking_batch

from _fault_scenarios import (
    FAULT_SCENARIOS,
    demo,
    joiner,
    long_prompt,
    one_draft_substep,
    reasoning_from_step_1,
    with_scope,
)
from _layers import fast_first

#: Every graph scope in the whole suite; the fast layer checks each fault in the ``step`` scope.
LAYERED_SCOPES = fast_first(GRAPH_SCOPES, lambda scope: scope == "step")

#: Every fault and its bug class (docs/bug-classes.md): at least one per class.
REQUIRED = {
    faults.REBIND_OUTPUT_OFFSETS: 1,
    faults.CAPTURED_TEMPORARY_FREED: 2,
    faults.STALE_PADDING_ROWS: 3,
    faults.DRAFT_PADDING_WRITES_KV: 4,
    faults.UNSLICED_GRAPH_OUTPUT: 5,
    faults.PHANTOM_REQUEST_BUCKET: 6,
    faults.SLOTS_SIZED_BY_MAX_NUM_SEQS: 7,
    faults.NAIVE_SEED_FROZEN: 8,
    faults.SEED_ADVANCE_OUTSIDE_GRAPH: 9,
    faults.SEED_INDEXED_BY_TOKEN: 10,
    faults.OFFSETS_CUT_SHORT: 11,
    faults.HOST_MAX_SEQ_LEN_BAKED: 12,
    faults.DRAFT_SUBSTEPS_REPLAY_FIRST: 13,
    faults.CLONE_HELD_PER_STEP: 14,
    faults.WARMUP_STATE_LEAKS: 15,
    faults.REASONING_RULE_SKIPPED_IN_GRAPH: 16,
    faults.HOST_SYNC_IN_CAPTURE: 17,
}


@pytest.fixture(scope="module")
def cpu():
    return resolve("cpu")


#: Scenarios (as JSON, with the backend name) already seen clean without a fault: many faults share one.
_SEEN_CLEAN: set[tuple[str, str]] = set()


def first_failure(scenario: Scenario, backend, fault: str):
    """The headline divergence of ``scenario`` with ``fault`` on, after checking it is clean without."""
    key = (backend.name, scenario.to_json())
    if key not in _SEEN_CLEAN:
        clean = check_scenario(scenario, backend)
        assert clean.clean, [d.headline() for d in clean.failures]
        _SEEN_CLEAN.add(key)
    outcome = check_scenario(scenario, backend, faults=[fault])
    assert outcome.faults == (fault,)
    assert not outcome.clean, f"{fault} went undetected on {scenario.name}"
    return visible_first(outcome), outcome


def visible_first(outcome):
    """The first failing divergence that is not a ``state`` one: what the step returned, the graph
    audits, or the engine raising (the faults' state divergences have their own tests)."""
    visible = [d for d in outcome.failures if d.kind != "state"]
    return visible[0] if visible else outcome.first


def eager_divergences(outcome) -> list:
    """The divergences of the eager engine itself from the reference (not of the graph replays)."""
    return [d for d in outcome.failures if d.pair == "reference vs eager"]


# --------------------------------------------------------------------------- the registry


def test_registry_is_typed_and_documented() -> None:
    assert FAULTS, "the catalog must not be empty"
    for name, fault in FAULTS.items():
        assert isinstance(fault, Fault) and fault.name == name
        assert 1 <= fault.bug_class <= NUM_BUG_CLASSES
        for text in (fault.summary, fault.mirrors, fault.signal):
            assert isinstance(text, str) and text.strip()
    with pytest.raises(AttributeError):
        next(iter(FAULTS.values())).bug_class = 2  # frozen


def test_required_faults_and_their_classes() -> None:
    assert {name: FAULTS[name].bug_class for name in REQUIRED} == REQUIRED
    assert {f.bug_class for f in FAULTS.values()} == set(range(1, NUM_BUG_CLASSES + 1))
    assert faults.REBIND_OUTPUT_OFFSETS == "rebind-output-offsets" and faults.NAIVE_SEED_FROZEN == "naive-seed-frozen"


def test_every_fault_has_its_scenario() -> None:
    assert set(FAULT_SCENARIOS) == set(FAULTS)


def test_unknown_fault_names_the_known_ones(cpu) -> None:
    with pytest.raises(UnknownFault) as err:
        check_faults(["no-such-fault", faults.REBIND_OUTPUT_OFFSETS])
    message = str(err.value)
    assert "no-such-fault" in message
    assert all(name in message for name in FAULTS)
    with pytest.raises(UnknownFault):
        Engine(demo_scenario().config, make_weights(demo_scenario().config), device=cpu, faults=["nope"])


def test_check_faults_and_fault_on() -> None:
    assert check_faults([]) == frozenset()
    assert check_faults([faults.STALE_PADDING_ROWS, faults.STALE_PADDING_ROWS]) == frozenset(
        {faults.STALE_PADDING_ROWS}
    )
    assert fault_on(frozenset({faults.STALE_PADDING_ROWS}), faults.STALE_PADDING_ROWS)
    assert not fault_on(frozenset(), faults.STALE_PADDING_ROWS)
    with pytest.raises(UnknownFault):
        fault_on(frozenset(), "typo-in-engine-code")


def test_fault_scenarios_are_builtins() -> None:
    assert BUILTIN["shrinking_batch"]().name == "shrinking-batch-step"
    assert BUILTIN["late_joiner"]().name == "late-joiner-step"


# --------------------------------------------------------------------------- class 1


@pytest.mark.parametrize("scope", LAYERED_SCOPES)
def test_rebind_output_offsets_is_an_address_divergence(cpu, scope: str) -> None:
    """Step 0 (r0's prefill, eager) rebinds the offsets; step 1 replays bucket 1 on the old storage."""
    first, outcome = first_failure(late_joiner(scope), cpu, faults.REBIND_OUTPUT_OFFSETS)
    assert (first.kind, first.step, first.tensor) == ("address", 1, "cu_seqlens_out")
    at_first = {(d.kind, d.tensor) for d in outcome.failures if d.step == 1 and d.kind != "state"}
    assert at_first == {("address", "cu_seqlens_out"), ("address", "batch_ids_out")}


def test_rebind_output_offsets_then_token_where_the_graph_reads_them(cpu) -> None:
    """forward_sampling: once r1 runs in slot 1 (step 4), the graph's stale offsets misread its rows."""
    lockstep = Lockstep(late_joiner("forward_sampling"), cpu, faults=[faults.REBIND_OUTPUT_OFFSETS])
    for t in range(lockstep.scenario.num_steps):
        lockstep.step(t)  # keep going past the address divergence
    failures = lockstep.outcome.failures
    tokens = [d for d in failures if d.kind == "token" and d.pair == "eager vs graph"]
    assert failures[0].kind == "address" and failures[0].step == 1
    assert tokens and tokens[0].step == 4 and tokens[0].request_id == "r1"
    assert not [d for d in failures if d.kind not in ("address", "state") and d.step < 4]


@pytest.mark.parametrize("scope", LAYERED_SCOPES)
def test_rebind_output_offsets_on_the_demo(cpu, scope: str) -> None:
    """The demo's first replay (step 1) reports the rebinding, whatever else goes wrong there."""
    outcome = check_scenario(with_scope(demo_scenario(num_steps=4), scope), cpu, faults=[faults.REBIND_OUTPUT_OFFSETS])
    assert outcome.first.step == 1
    address = [d for d in outcome.failures if d.kind == "address"]
    assert address and address[0].step == 1 and address[0].tensor == "cu_seqlens_out"


# --------------------------------------------------------------------------- class 3


@pytest.mark.parametrize("verify", ["target_match", "greedy"])
@pytest.mark.parametrize("scope", LAYERED_SCOPES)
def test_stale_padding_rows_when_the_batch_shrinks_in_its_bucket(cpu, scope: str, verify: str) -> None:
    """shrinking_batch: r1 leaves at step 5, bucket 4 stays; rows 8..11 still map to r2's KV."""
    first, outcome = first_failure(shrinking_batch(verify, scope, num_steps=7), cpu, faults.STALE_PADDING_ROWS)
    assert first.kind in ("token", "value")
    assert (first.step, first.tensor, first.pair, first.request_id) == (5, "accept_tokens", "eager vs graph", "r2")
    graph = outcome.records["graph"]
    assert graph[5].bucket == graph[4].bucket == 4 and graph[5].num_running < graph[4].num_running


@pytest.mark.parametrize("scope", LAYERED_SCOPES)
def test_stale_padding_rows_on_the_demo(cpu, scope: str) -> None:
    """Demo step 1 replays bucket 2 (8 rows) with 6 real tokens; rows 6..7 keep the prefill's mapping."""
    first, _ = first_failure(with_scope(demo_scenario(num_steps=4), scope), cpu, faults.STALE_PADDING_ROWS)
    assert (first.kind, first.step, first.tensor, first.pair) == ("token", 1, "accept_tokens", "eager vs graph")


# --------------------------------------------------------------------------- class 8


@pytest.mark.parametrize("scope", LAYERED_SCOPES)
def test_naive_seed_frozen_is_a_seed_divergence(cpu, scope: str) -> None:
    naive = demo_scenario(naive_mode=True, num_steps=3)
    first, outcome = first_failure(with_scope(naive, scope), cpu, faults.NAIVE_SEED_FROZEN)
    assert (first.kind, first.step, first.tensor, first.pair) == ("seed", 0, "infer_seed", "reference vs eager")
    pairs = {d.pair for d in outcome.failures if d.kind == "seed" and d.step == 0}
    assert pairs == {"reference vs eager", "reference vs graph"}  # both paths lost the advance


def test_naive_seed_frozen_leaves_speculative_mode_alone(cpu) -> None:
    assert check_scenario(demo_scenario(num_steps=6), cpu, faults=[faults.NAIVE_SEED_FROZEN]).clean


# --------------------------------------------------------------------------- class 14


@pytest.mark.parametrize("scope", LAYERED_SCOPES)
def test_clone_held_per_step_is_a_memory_divergence(cpu, scope: str) -> None:
    """Demo: first replay at step 1 sets the baseline; step 2 is a prefill (eager); step 3 replays again."""
    first, outcome = first_failure(with_scope(demo_scenario(num_steps=5), scope), cpu, faults.CLONE_HELD_PER_STEP)
    assert (first.kind, first.step, first.tensor) == ("memory", 3, "memory_bytes")
    graph = outcome.records["graph"]
    one_clone = 8 * demo_scenario().config.max_padded_reqs  # seq_lens_this_time: [B] int64
    assert graph[3].memory_bytes - graph[1].memory_bytes == one_clone


def test_memory_bytes_counts_every_tensor_the_engine_holds(cpu) -> None:
    """The accounting is generic: a tensor held in any engine container is live memory."""
    config = demo_scenario().config
    engine = Engine(config, make_weights(config), device=cpu)
    base = engine.memory_bytes()
    extra = engine.xp.zeros((100,), engine.xp.int64)
    engine.kept_inputs.append(extra)
    assert engine.memory_bytes() == base + 800
    engine.some_cache = {"a": (extra, engine.xp.zeros((10,), engine.xp.int64))}  # same tensor counted once
    assert engine.memory_bytes() == base + 880
    engine.kept_inputs.clear()
    del engine.some_cache
    assert engine.memory_bytes() == base


# --------------------------------------------------------------------------- class 2


@pytest.mark.parametrize("scope", LAYERED_SCOPES)
def test_captured_temporary_freed_is_a_freed_static_input(cpu, scope: str) -> None:
    """The block-table copy each capture read died with the capture (reported before step 0); step 1 replays through it."""
    first, outcome = first_failure(joiner(scope), cpu, faults.CAPTURED_TEMPORARY_FREED)
    assert (first.kind, first.step, first.tensor) == ("address", 0, "<unnamed int64[3, 8]>")
    assert first.actual is None and "captured storage was freed" in first.detail
    tokens = [d for d in outcome.failures if d.kind == "token" and d.pair == "eager vs graph"]
    assert tokens and tokens[0].step == 1  # it attends through the capture-time tables (the sink)


@pytest.mark.parametrize("scope", LAYERED_SCOPES)
def test_a_clean_engine_has_no_unnamed_static_input(cpu, scope: str) -> None:
    """bindings_of reports unnamed inputs once dead; the clean engine names every input it captures."""
    config = with_scope(demo_scenario(), scope).config
    engine = Engine(config, make_weights(config), device=cpu)
    for graphs in engine.graphs.values():
        for graph in graphs.all():
            assert all(inp.name is not None for inp in graph.static_inputs)
            assert not graph.dead_inputs()
        assert not any(b.name.startswith("<unnamed") for b in bindings_of(engine, graphs.size))


def test_memoised_bindings_see_a_rebound_and_a_freed_buffer(cpu) -> None:
    """bindings_of with a memo gives what it gives without one, after a buffer is rebound and after it dies."""
    import weakref

    config = demo_scenario().config
    engine = Engine(config, make_weights(config), device=cpu)
    size = next(iter(engine.graphs))
    memo: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
    clean = bindings_of(engine, size, memo)
    assert clean == bindings_of(engine, size, memo) == bindings_of(engine, size) and not any(b.stale for b in clean)
    old = engine.buffers.cu_seqlens_out
    engine.buffers.cu_seqlens_out = engine.xp.zeros(tuple(old.shape), engine.xp.int64)  # rebound
    rebound = bindings_of(engine, size, memo)
    assert rebound == bindings_of(engine, size)
    assert [b.name for b in rebound if b.stale and b.alive] == ["cu_seqlens_out"] * len(engine.graphs[size].all())
    engine._pristine = None  # reset()'s copy of the old tensor: let it die
    del old
    freed = bindings_of(engine, size, memo)
    assert freed == bindings_of(engine, size)
    assert [b.name for b in freed if not b.alive] == ["cu_seqlens_out"] * len(engine.graphs[size].all())


# --------------------------------------------------------------------------- class 4


@pytest.mark.parametrize("scope", LAYERED_SCOPES)
def test_draft_padding_writes_kv_corrupts_slot_0(cpu, scope: str) -> None:
    """Step 1 packs r0's drafts into bucket 1's 3 rows; padding rows write r0's draft KV position 0."""
    first, outcome = first_failure(joiner(scope), cpu, faults.DRAFT_PADDING_WRITES_KV)
    assert (first.kind, first.step, first.tensor, first.pair, first.request_id) == (
        "token",
        1,
        "draft_tokens",
        "eager vs graph",
        "r0",
    )
    assert not eager_divergences(outcome)  # eager packs have no padding


# --------------------------------------------------------------------------- class 5


@pytest.mark.parametrize("scope", fast_first(["forward", "forward_sampling"]))
def test_unsliced_graph_output_hands_on_the_padded_rows(cpu, scope: str) -> None:
    """Demo step 1: 6 real tokens in bucket 2 (8 rows); the outputs go on with all 8."""
    first, outcome = first_failure(demo(scope), cpu, faults.UNSLICED_GRAPH_OUTPUT)
    assert (first.kind, first.step, first.tensor, first.pair) == ("shape", 1, "real_tokens", "eager vs graph")
    assert (first.expected, first.actual) == (6, 8)


def test_unsliced_graph_output_has_no_slice_in_scope_step(cpu) -> None:
    assert check_scenario(demo("step"), cpu, faults=[faults.UNSLICED_GRAPH_OUTPUT]).clean


# --------------------------------------------------------------------------- class 6


@pytest.mark.parametrize("scope", fast_first(["step", "forward"]))
def test_phantom_request_bucket_is_a_shape_divergence(cpu, scope: str) -> None:
    """Step 1: r0 alone (R = 1) must replay bucket 1; the phantom request makes it 2."""
    first, _ = first_failure(joiner(scope), cpu, faults.PHANTOM_REQUEST_BUCKET)
    assert (first.kind, first.step, first.tensor, first.expected, first.actual) == ("shape", 1, "bucket", 1, 2)


# --------------------------------------------------------------------------- class 7


def test_slots_sized_by_max_num_seqs_is_a_capacity_divergence(cpu) -> None:
    """Demo: max_num_seqs 3, largest bucket 4: 5 slots needed, 4 allocated."""
    first, _ = first_failure(demo(num_steps=2), cpu, faults.SLOTS_SIZED_BY_MAX_NUM_SEQS)
    assert (first.kind, first.step, first.tensor, first.expected, first.actual) == (
        "shape",
        0,
        "buffer capacity (slots)",
        5,
        4,
    )


@pytest.mark.parametrize("scope", fast_first(["step", "forward"]))
def test_slots_sized_by_max_num_seqs_fails_the_capture_of_a_larger_bucket(cpu, scope: str) -> None:
    """max_num_seqs 2 with bucket 4: 3 slots for a 4-slot capture; the capture itself fails."""
    base = late_joiner(scope, num_steps=2)
    scenario = validate(dataclasses.replace(base, config=dataclasses.replace(base.config, capture_sizes=(1, 2, 4))))
    first, outcome = first_failure(scenario, cpu, faults.SLOTS_SIZED_BY_MAX_NUM_SEQS)
    assert (first.kind, first.step, first.tensor) == ("capture", 0, "engine construction")
    assert "size" in first.actual and outcome.steps_run == 0


# --------------------------------------------------------------------------- class 9


@pytest.mark.parametrize("scope", LAYERED_SCOPES)
def test_seed_advance_outside_graph_freezes_the_seed_of_replays(cpu, scope: str) -> None:
    first, outcome = first_failure(joiner(scope), cpu, faults.SEED_ADVANCE_OUTSIDE_GRAPH)
    assert (first.kind, first.step, first.tensor, first.pair, first.request_id) == (
        "seed",
        1,
        "infer_seed",
        "eager vs graph",
        "r0",
    )
    assert first.actual == outcome.records["graph"][0].result.by_id()["r0"].infer_seed  # no advance at all
    assert not eager_divergences(outcome)  # the eager advance is right


# --------------------------------------------------------------------------- class 10


def test_seed_indexed_by_token_swaps_random_streams(cpu) -> None:
    """Demo step 1, the first decode step: rows of r1 (slot 1) draw with other slots' seeds.

    Eager and graph paths share the bug, so the eager engine diverges first, whatever the scope.
    """
    first, outcome = first_failure(demo("step"), cpu, faults.SEED_INDEXED_BY_TOKEN)
    assert (first.kind, first.step, first.tensor, first.pair, first.request_id) == (
        "token",
        1,
        "accept_tokens",
        "reference vs eager",
        "r1",
    )
    assert not [d for d in outcome.failures if d.pair == "eager vs graph"]


def test_seed_indexed_by_token_leaves_greedy_alone(cpu) -> None:
    assert check_scenario(joiner("step", num_steps=6), cpu, faults=[faults.SEED_INDEXED_BY_TOKEN]).clean


# --------------------------------------------------------------------------- class 11


def test_offsets_cut_short_loses_the_last_slot(cpu) -> None:
    """Step 0 (eager, any scope): r0's prefill drafts with slot 0's end offset never written (0): no proposal."""
    first, _ = first_failure(one_draft_substep("step"), cpu, faults.OFFSETS_CUT_SHORT)
    assert (first.kind, first.step, first.tensor, first.pair, first.request_id) == (
        "token",
        0,
        "draft_tokens",
        "reference vs eager",
        "r0",
    )
    assert first.actual == (-1,)


def test_offsets_cut_short_crashes_a_second_substep(cpu) -> None:
    first, _ = first_failure(joiner("step"), cpu, faults.OFFSETS_CUT_SHORT)
    assert (first.kind, first.step, first.tensor) == ("crash", 0, "eager")


# --------------------------------------------------------------------------- class 12


@pytest.mark.parametrize("scope", LAYERED_SCOPES)
def test_host_max_seq_len_baked_cuts_attention_in_replays(cpu, scope: str) -> None:
    """A 12-token prompt spans two KV blocks; graphs captured with the idle value attend over one."""
    first, outcome = first_failure(long_prompt(scope), cpu, faults.HOST_MAX_SEQ_LEN_BAKED)
    assert (first.kind, first.step, first.tensor, first.pair, first.request_id) == (
        "token",
        1,
        "accept_tokens",
        "eager vs graph",
        "r0",
    )
    assert not eager_divergences(outcome)  # exact per step when eager


# --------------------------------------------------------------------------- class 13


@pytest.mark.parametrize("scope", LAYERED_SCOPES)
def test_draft_substeps_replay_first_repeats_substep_0(cpu, scope: str) -> None:
    first, _ = first_failure(joiner(scope), cpu, faults.DRAFT_SUBSTEPS_REPLAY_FIRST)
    assert (first.kind, first.step, first.tensor, first.pair, first.request_id) == (
        "token",
        1,
        "draft_tokens",
        "eager vs graph",
        "r0",
    )


def test_draft_substeps_replay_first_needs_two_substeps(cpu) -> None:
    assert check_scenario(one_draft_substep("forward"), cpu, faults=[faults.DRAFT_SUBSTEPS_REPLAY_FIRST]).clean


# --------------------------------------------------------------------------- class 15


@pytest.mark.parametrize("scope", LAYERED_SCOPES)
def test_warmup_state_leaks_into_the_first_replay(cpu, scope: str) -> None:
    """The leaked override is engine state from construction on: the state diff finds it at step 0,
    before any replay; the token it corrupts comes at the first replay (step 1)."""
    outcome = check_scenario(joiner(scope), cpu, faults=[faults.WARMUP_STATE_LEAKS])
    first = outcome.first
    assert (first.kind, first.step, first.tensor, first.pair, first.request_id) == (
        "state",
        0,
        "accept_override",
        "eager vs graph",
        "r0",
    )
    hygiene = [d for d in outcome.failures if d.pair == "slot hygiene (graph engine)"]
    assert hygiene and hygiene[0].tensor == "accept_override" and hygiene[0].step == 0
    assert not [d for d in outcome.failures if d.pair == "slot hygiene (eager engine)"]
    lockstep = Lockstep(joiner(scope), cpu, faults=[faults.WARMUP_STATE_LEAKS])
    for t in range(2):
        lockstep.step(t)  # keep going past the state divergence
    tokens = [d for d in lockstep.outcome.failures if d.kind == "token" and d.pair == "eager vs graph"]
    assert tokens and (tokens[0].step, tokens[0].tensor, tokens[0].request_id) == (1, "accept_tokens", "r0")
    assert lockstep.outcome.records["graph"][1].used_graph and not lockstep.outcome.records["graph"][0].used_graph


def test_warm_replay_puts_the_override_back(cpu) -> None:
    config = late_joiner().config
    host = lambda e: e.xp.to_host(e.buffers.accept_override).tolist()  # noqa: E731
    clean = Engine(config, make_weights(config), device=cpu)
    assert host(clean) == [-1] * clean.sizes.slots
    leaky = Engine(config, make_weights(config), device=cpu, faults=[faults.WARMUP_STATE_LEAKS])
    assert host(leaky) == [config.num_speculative_tokens] * leaky.sizes.slots
    assert leaky._override_host.tolist() == [-1] * leaky.sizes.slots  # the host mirror believes it is idle


# --------------------------------------------------------------------------- class 16


@pytest.mark.parametrize("scope", LAYERED_SCOPES)
def test_reasoning_rule_skipped_in_graph(cpu, scope: str) -> None:
    """Step 1: reasoning_status 1 and a forced accept; eager rejects the draft, the graph takes it."""
    first, outcome = first_failure(reasoning_from_step_1(scope), cpu, faults.REASONING_RULE_SKIPPED_IN_GRAPH)
    assert (first.kind, first.step, first.tensor, first.pair, first.request_id) == (
        "token",
        1,
        "accept_tokens",
        "eager vs graph",
        "r0",
    )
    assert (len(first.expected), len(first.actual)) == (1, 2)


# --------------------------------------------------------------------------- class 17


@pytest.mark.parametrize("scope", LAYERED_SCOPES)
def test_host_sync_in_capture_fails_the_capture(cpu, scope: str) -> None:
    first, outcome = first_failure(joiner(scope, num_steps=2), cpu, faults.HOST_SYNC_IN_CAPTURE)
    assert (first.kind, first.step, first.tensor) == ("capture", 0, "engine construction")
    assert first.actual.startswith("HostSyncInCapture") and outcome.steps_run == 0
