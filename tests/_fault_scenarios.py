"""One fixed scenario per injectable fault (shared by the fault tests; not collected by pytest).

``FAULT_SCENARIOS[name](scope)`` is a short scenario on which the clean engine
is clean and the fault's first failing divergence is the one its catalog
entry names; tests/test_faults.py tells each story and asserts its step and
tensor. ``scope`` is the graph scope (each builder has a default).
"""

from __future__ import annotations

import dataclasses
from typing import Callable

from graphcheck.backends.engine import faults
from graphcheck.scenario import (
    AcceptOverride,
    EngineConfig,
    ReasoningChange,
    RequestSpec,
    Scenario,
    validate,
)
from graphcheck.search.builtin import demo_scenario, late_joiner, shrinking_batch


def with_scope(scenario: Scenario, scope: str) -> Scenario:
    return dataclasses.replace(scenario, config=dataclasses.replace(scenario.config, graph_scope=scope))


def demo(scope: str = "step", num_steps: int = 3, naive: bool = False) -> Scenario:
    """The demo, cut short: step 0 prefills r0 and r1 (eager), step 1 replays bucket 2 (6 of 8 rows real)."""
    return with_scope(demo_scenario(naive_mode=naive, num_steps=num_steps), scope)


def joiner(scope: str = "step", num_steps: int = 3) -> Scenario:
    """late_joiner, cut short: r0 alone in slot 0; step 0 its prefill (eager), step 1 the first replay (bucket 1)."""
    return late_joiner(scope, num_steps=num_steps)


def one_draft_substep(scope: str = "step") -> Scenario:
    """late_joiner with num_model_steps 1: step 0 is r0's prefill and its only draft substep."""
    base = late_joiner(scope, num_steps=2)
    return validate(
        dataclasses.replace(
            base, config=dataclasses.replace(base.config, num_model_steps=1), name=f"one-draft-substep-{scope}"
        )
    )


def _single(name: str, scope: str, prompt: tuple[int, ...], *, reasoning=(), accepts=()) -> Scenario:
    """One greedy request in one slot, k = 2, S = 1, bucket 1: step 0 prefills it, step 1 is the first replay."""
    config = EngineConfig(
        max_num_seqs=1,
        num_speculative_tokens=2,
        num_model_steps=1,
        capture_sizes=(1,),
        vocab_size=64,
        hidden_size=16,
        block_size=8,
        max_model_len=64,
        verify_strategy="greedy",
        graph_scope=scope,
        model_seed=11,
    )
    request = RequestSpec("r0", 0, prompt, max_dec_len=30, eos_token_ids=(63,), seed=5, reasoning=tuple(reasoning))
    return validate(Scenario(config, (request,), tuple(accepts), 3, f"{name}-{scope}"))


def long_prompt(scope: str = "step") -> Scenario:
    """A 12-token prompt: from step 1 on, the request's KV spans two blocks of 8."""
    return _single("long-prompt", scope, (4, 8, 15, 16, 23, 42, 7, 9, 11, 13, 17, 19))


def reasoning_from_step_1(scope: str = "step") -> Scenario:
    """reasoning_status 1 from step 1, where its one draft is forced accepted: the rule must win (accept_num 1)."""
    return _single(
        "reasoning-rule",
        scope,
        (3, 1, 4, 1, 5),
        reasoning=(ReasoningChange(1, 1),),
        accepts=(AcceptOverride(step=1, request_id="r0", accepted=2),),
    )


#: fault name -> scenario builder (graph scope -> Scenario).
FAULT_SCENARIOS: dict[str, Callable[..., Scenario]] = {
    faults.REBIND_OUTPUT_OFFSETS: lambda scope="forward_sampling": late_joiner(scope),
    faults.CAPTURED_TEMPORARY_FREED: joiner,
    faults.STALE_PADDING_ROWS: lambda scope="step": shrinking_batch("target_match", scope, num_steps=7),
    faults.DRAFT_PADDING_WRITES_KV: joiner,
    faults.UNSLICED_GRAPH_OUTPUT: lambda scope="forward": demo(scope),
    faults.PHANTOM_REQUEST_BUCKET: joiner,
    faults.SLOTS_SIZED_BY_MAX_NUM_SEQS: lambda scope="step": demo(scope, num_steps=2),
    faults.NAIVE_SEED_FROZEN: lambda scope="step": demo(scope, naive=True),
    faults.SEED_ADVANCE_OUTSIDE_GRAPH: joiner,
    faults.SEED_INDEXED_BY_TOKEN: lambda scope="step": demo(scope),
    faults.OFFSETS_CUT_SHORT: one_draft_substep,
    faults.HOST_MAX_SEQ_LEN_BAKED: long_prompt,
    faults.DRAFT_SUBSTEPS_REPLAY_FIRST: joiner,
    faults.CLONE_HELD_PER_STEP: lambda scope="step": demo(scope, num_steps=5),
    faults.WARMUP_STATE_LEAKS: joiner,
    faults.REASONING_RULE_SKIPPED_IN_GRAPH: reasoning_from_step_1,
    faults.HOST_SYNC_IN_CAPTURE: lambda scope="step": joiner(scope, num_steps=2),
}
