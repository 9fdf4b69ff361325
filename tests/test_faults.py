"""Injected faults: each switch on a real engine code path is caught with its bug class's signal.

For every fault: with the fault on, ``check_scenario`` fails and its FIRST
failing divergence has the expected kind, step and tensor; with no fault the
same scenario is clean. Scenarios are fixed (graphcheck.examples), so steps
are asserted exactly.
"""

from __future__ import annotations

import pytest

from backends.devices import resolve
from backends.engine import Engine
from backends.engine.faults import (
    CLONE_HELD_PER_STEP,
    FAULTS,
    NAIVE_SEED_FROZEN,
    NUM_BUG_CLASSES,
    REBIND_OUTPUT_OFFSETS,
    STALE_PADDING_ROWS,
    Fault,
    UnknownFault,
    check_faults,
    fault_on,
)
from graphcheck.examples import BUILTIN, demo_scenario, late_joiner, shrinking_batch
from graphcheck.lockstep import Lockstep, check_scenario
from graphcheck.scenario import GRAPH_SCOPES, Scenario
from reference import make_weights


@pytest.fixture(scope="module")
def cpu():
    return resolve("cpu")


def with_scope(scenario: Scenario, scope: str) -> Scenario:
    import dataclasses

    return dataclasses.replace(scenario, config=dataclasses.replace(scenario.config, graph_scope=scope))


def first_failure(scenario: Scenario, backend, fault: str):
    """The headline divergence of ``scenario`` with ``fault`` on, after checking it is clean without."""
    clean = check_scenario(scenario, backend)
    assert clean.clean, [d.headline() for d in clean.failures]
    outcome = check_scenario(scenario, backend, faults=[fault])
    assert outcome.faults == (fault,)
    assert not outcome.clean, f"{fault} went undetected on {scenario.name}"
    return outcome.first, outcome


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
    expected = {REBIND_OUTPUT_OFFSETS: 1, STALE_PADDING_ROWS: 3, NAIVE_SEED_FROZEN: 8, CLONE_HELD_PER_STEP: 14}
    assert {name: FAULTS[name].bug_class for name in expected} == expected
    assert REBIND_OUTPUT_OFFSETS == "rebind-output-offsets" and NAIVE_SEED_FROZEN == "naive-seed-frozen"


def test_unknown_fault_names_the_known_ones(cpu) -> None:
    with pytest.raises(UnknownFault) as err:
        check_faults(["no-such-fault", REBIND_OUTPUT_OFFSETS])
    message = str(err.value)
    assert "no-such-fault" in message
    assert all(name in message for name in FAULTS)
    with pytest.raises(UnknownFault):
        Engine(demo_scenario().config, make_weights(demo_scenario().config), device=cpu, faults=["nope"])


def test_check_faults_and_fault_on() -> None:
    assert check_faults([]) == frozenset()
    assert check_faults([STALE_PADDING_ROWS, STALE_PADDING_ROWS]) == frozenset({STALE_PADDING_ROWS})
    assert fault_on(frozenset({STALE_PADDING_ROWS}), STALE_PADDING_ROWS)
    assert not fault_on(frozenset(), STALE_PADDING_ROWS)
    with pytest.raises(UnknownFault):
        fault_on(frozenset(), "typo-in-engine-code")


def test_fault_scenarios_are_builtins() -> None:
    assert BUILTIN["shrinking_batch"]().name == "shrinking-batch-step"
    assert BUILTIN["late_joiner"]().name == "late-joiner-step"


# --------------------------------------------------------------------------- class 1


@pytest.mark.parametrize("scope", GRAPH_SCOPES)
def test_rebind_output_offsets_is_an_address_divergence(cpu, scope: str) -> None:
    """Step 0 (r0's prefill, eager) rebinds the offsets; step 1 replays bucket 1 on the old storage."""
    first, outcome = first_failure(late_joiner(scope), cpu, REBIND_OUTPUT_OFFSETS)
    assert (first.kind, first.step, first.tensor) == ("address", 1, "cu_seqlens_out")
    at_first = {(d.kind, d.tensor) for d in outcome.failures if d.step == 1}
    assert at_first == {("address", "cu_seqlens_out"), ("address", "batch_ids_out")}


def test_rebind_output_offsets_then_token_where_the_graph_reads_them(cpu) -> None:
    """forward_sampling: once r1 runs in slot 1 (step 4), the graph's stale offsets misread its rows."""
    lockstep = Lockstep(late_joiner("forward_sampling"), cpu, faults=[REBIND_OUTPUT_OFFSETS])
    for t in range(lockstep.scenario.num_steps):
        lockstep.step(t)  # keep going past the address divergence
    failures = lockstep.outcome.failures
    tokens = [d for d in failures if d.kind == "token" and d.pair == "eager vs graph"]
    assert failures[0].kind == "address" and failures[0].step == 1
    assert tokens and tokens[0].step == 4 and tokens[0].request_id == "r1"
    assert not [d for d in failures if d.kind != "address" and d.step < 4]


@pytest.mark.parametrize("scope", GRAPH_SCOPES)
def test_rebind_output_offsets_on_the_demo(cpu, scope: str) -> None:
    """The demo's first replay (step 1) reports the rebinding, whatever else goes wrong there."""
    outcome = check_scenario(with_scope(demo_scenario(num_steps=4), scope), cpu, faults=[REBIND_OUTPUT_OFFSETS])
    assert outcome.first.step == 1
    address = [d for d in outcome.failures if d.kind == "address"]
    assert address and address[0].step == 1 and address[0].tensor == "cu_seqlens_out"


# --------------------------------------------------------------------------- class 3


@pytest.mark.parametrize("verify", ["target_match", "greedy"])
@pytest.mark.parametrize("scope", GRAPH_SCOPES)
def test_stale_padding_rows_when_the_batch_shrinks_in_its_bucket(cpu, scope: str, verify: str) -> None:
    """shrinking_batch: r1 leaves at step 5, bucket 4 stays; rows 8..11 still map to r2's KV."""
    first, outcome = first_failure(shrinking_batch(verify, scope, num_steps=7), cpu, STALE_PADDING_ROWS)
    assert first.kind in ("token", "value")
    assert (first.step, first.tensor, first.pair, first.request_id) == (5, "accept_tokens", "eager vs graph", "r2")
    graph = outcome.records["graph"]
    assert graph[5].bucket == graph[4].bucket == 4 and graph[5].num_running < graph[4].num_running


@pytest.mark.parametrize("scope", GRAPH_SCOPES)
def test_stale_padding_rows_on_the_demo(cpu, scope: str) -> None:
    """Demo step 1 replays bucket 2 (8 rows) with 6 real tokens; rows 6..7 keep the prefill's mapping."""
    first, _ = first_failure(with_scope(demo_scenario(num_steps=4), scope), cpu, STALE_PADDING_ROWS)
    assert (first.kind, first.step, first.tensor, first.pair) == ("token", 1, "accept_tokens", "eager vs graph")


# --------------------------------------------------------------------------- class 8


@pytest.mark.parametrize("scope", GRAPH_SCOPES)
def test_naive_seed_frozen_is_a_seed_divergence(cpu, scope: str) -> None:
    naive = demo_scenario(naive_mode=True, num_steps=3)
    first, outcome = first_failure(with_scope(naive, scope), cpu, NAIVE_SEED_FROZEN)
    assert (first.kind, first.step, first.tensor, first.pair) == ("seed", 0, "infer_seed", "reference vs eager")
    pairs = {d.pair for d in outcome.failures if d.kind == "seed" and d.step == 0}
    assert pairs == {"reference vs eager", "reference vs graph"}  # both paths lost the advance


def test_naive_seed_frozen_leaves_speculative_mode_alone(cpu) -> None:
    assert check_scenario(demo_scenario(num_steps=6), cpu, faults=[NAIVE_SEED_FROZEN]).clean


# --------------------------------------------------------------------------- class 14


@pytest.mark.parametrize("scope", GRAPH_SCOPES)
def test_clone_held_per_step_is_a_memory_divergence(cpu, scope: str) -> None:
    """Demo: first replay at step 1 sets the baseline; step 2 is a prefill (eager); step 3 replays again."""
    first, outcome = first_failure(with_scope(demo_scenario(num_steps=5), scope), cpu, CLONE_HELD_PER_STEP)
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
