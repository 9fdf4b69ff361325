"""Built-in scenarios: small scripts that touch every feature of a step.

``demo_scenario`` is the one to run first: a queue that fills up, a request
that ends on max_dec_len, an abort, a reasoning_status excursion to 1, forced
accept counts and a seed that wraps around SEED_MODULUS within the run.
``builtin_scenarios`` is the demo scenario once per verify mode
(``BUILTIN_MODES``): what ``graphcheck run`` checks after fuzzing the suites.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

from graphcheck.scenario import (
    SEED_MODULUS,
    AcceptOverride,
    EngineConfig,
    ReasoningChange,
    RequestSpec,
    Scenario,
    validate,
)


def _demo_requests() -> tuple[RequestSpec, ...]:
    return (
        # Short-lived: ends on max_dec_len long before the run does.
        RequestSpec(
            "r0",
            0,
            (3, 14, 15, 9, 26),
            max_dec_len=7,
            eos_token_ids=(1,),
            temperature=0.7,
            top_p=0.9,
            top_k=0,
            seed=12345,
        ),
        # Aborted mid-way; its seed wraps around SEED_MODULUS after a few steps.
        RequestSpec(
            "r1",
            0,
            (2, 7, 18, 28),
            max_dec_len=40,
            eos_token_ids=(1, 2),
            temperature=1.3,
            top_p=1.0,
            top_k=8,
            seed=SEED_MODULUS - 37,
            abort_step=9,
        ),
        # Goes through reasoning_status 1 (drafts all rejected) and back.
        RequestSpec(
            "r2",
            2,
            (5, 5, 5, 31, 62, 40),
            max_dec_len=40,
            eos_token_ids=(0,),
            temperature=0.4,
            top_p=0.8,
            top_k=20,
            seed=7,
            reasoning=(ReasoningChange(4, 1), ReasoningChange(7, 2)),
        ),
        # Arrives while all three slots are busy: waits in the queue.
        RequestSpec(
            "r3",
            3,
            (60, 1, 33),
            max_dec_len=30,
            eos_token_ids=(63,),
            temperature=2.0,
            top_p=0.95,
            top_k=0,
            seed=2**40 + 3,
        ),
    )


def demo_scenario(verify_strategy: str = "target_match", naive_mode: bool = False, num_steps: int = 20) -> Scenario:
    """Four requests, k = 3, S = 2, three slots, vocab 64, hidden 16."""
    config = EngineConfig(
        max_num_seqs=3,
        num_speculative_tokens=3,
        num_model_steps=2,
        capture_sizes=(1, 2, 4),
        vocab_size=64,
        hidden_size=16,
        max_model_len=128,
        verify_strategy=verify_strategy,
        naive_mode=naive_mode,
        model_seed=2024,
    )
    accepts = (
        AcceptOverride(step=2, request_id="r1", accepted=2),
        AcceptOverride(step=3, request_id="r0", accepted=0),
        AcceptOverride(step=6, request_id="r2", accepted=3),  # reasoning 1 wins: accept_num 1
        AcceptOverride(step=8, request_id="r2", accepted=1),
        AcceptOverride(step=10, request_id="r3", accepted=3),
    )
    name = f"demo-{'naive' if naive_mode else verify_strategy}"
    return _fit(Scenario(config, _demo_requests(), accepts, num_steps, name))


def _fit(scenario: Scenario) -> Scenario:
    """Drop the scripted events that fall beyond ``num_steps`` so any length is valid."""
    n = scenario.num_steps
    requests = tuple(
        dataclasses.replace(
            r,
            abort_step=r.abort_step if r.abort_step is not None and r.abort_step <= n else None,
            reasoning=tuple(c for c in r.reasoning if c.step <= n),
        )
        for r in scenario.requests
        if r.arrival_step < n
    )
    kept = {r.request_id for r in requests}
    accepts = tuple(a for a in scenario.accepts if a.step < n and a.request_id in kept)
    return validate(dataclasses.replace(scenario, requests=requests, accepts=accepts))


def shrinking_batch(verify_strategy: str = "target_match", graph_scope: str = "step", num_steps: int = 10) -> Scenario:
    """Three requests decode in bucket 4; at step 5 the middle one is aborted.

    k = 3 and S = 3, so every decode step feeds 4 tokens per request, and the
    prompts are 4 tokens long: the prefill batch (12 tokens) is no larger than
    the decode batches that follow, and nothing is padded until step 5. There
    the batch shrinks from 3 to 2 requests (12 to 8 tokens) while R stays 3 and
    the bucket stays 4: token rows 8..11 are padding again, and what an earlier,
    larger batch left in them belongs to r2, still running (its rows moved down
    to 4..7). Padding rows that are not reset (stale-padding-rows) write into
    r2's KV cache at step 5, so r2's tokens go wrong at once.
    """
    config = EngineConfig(
        max_num_seqs=3,
        num_speculative_tokens=3,
        num_model_steps=3,
        capture_sizes=(2, 4),
        vocab_size=64,
        hidden_size=16,
        max_model_len=96,
        verify_strategy=verify_strategy,
        graph_scope=graph_scope,
        model_seed=77,
    )
    requests = (
        RequestSpec(
            "r0", 0, (11, 4, 29, 50), max_dec_len=60, eos_token_ids=(63,), temperature=0.8, top_p=0.9, seed=101
        ),
        RequestSpec(
            "r1",
            0,
            (7, 7, 23, 2),
            max_dec_len=60,
            eos_token_ids=(63,),
            temperature=1.2,
            top_k=10,
            seed=202,
            abort_step=5,
        ),
        RequestSpec("r2", 0, (40, 18, 3, 9), max_dec_len=60, eos_token_ids=(63,), temperature=0.5, top_p=0.7, seed=303),
    )
    return _fit(Scenario(config, requests, (), num_steps, f"shrinking-batch-{graph_scope}"))


def late_joiner(graph_scope: str = "step", num_steps: int = 8) -> Scenario:
    """Greedy; r0 runs alone in slot 0 from step 0, r1 joins (slot 1) at step 3.

    Step 0 is r0's prefill (eager), step 1 the first replay (bucket 1), step 3
    r1's prefill (eager), step 4 the first replay in bucket 2. While r0 runs
    alone, output offsets that a graph reads from a stale buffer (all rows
    padding) still give slot 0 the right rows and greedy ignores the per-row
    seeds, so a rebinding shows only as an address divergence at step 1; once
    r1 runs, its rows are misread (scope forward_sampling): tokens diverge.
    """
    config = EngineConfig(
        max_num_seqs=2,
        num_speculative_tokens=2,
        num_model_steps=2,
        capture_sizes=(1, 2),
        vocab_size=64,
        hidden_size=16,
        max_model_len=64,
        verify_strategy="greedy",
        graph_scope=graph_scope,
        model_seed=5,
    )
    requests = (
        RequestSpec("r0", 0, (9, 33, 12), max_dec_len=40, eos_token_ids=(63,), seed=1),
        RequestSpec("r1", 3, (21, 4, 4, 60, 17), max_dec_len=40, eos_token_ids=(63,), seed=2),
    )
    return _fit(Scenario(config, requests, (), num_steps, f"late-joiner-{graph_scope}"))


BUILTIN: dict[str, Callable[..., Scenario]] = {
    "demo": demo_scenario,
    "shrinking_batch": shrinking_batch,
    "late_joiner": late_joiner,
}


def builtin(name: str) -> Scenario:
    """A built-in scenario by name, with its default arguments."""
    try:
        return BUILTIN[name]()
    except KeyError:
        raise KeyError(f"no built-in scenario {name!r}; known: {', '.join(sorted(BUILTIN))}") from None


#: The verify modes ``builtin_scenarios`` runs the demo scenario in.
BUILTIN_MODES = ("greedy", "target_match", "topp", "naive")


def builtin_scenarios(steps: int) -> list[Scenario]:
    """The demo scenario once per verify mode: a fixed, deterministic smoke check."""
    picked = []
    for mode in BUILTIN_MODES:
        naive = mode == "naive"
        scenario = demo_scenario(verify_strategy="target_match" if naive else mode, naive_mode=naive, num_steps=steps)
        picked.append(dataclasses.replace(scenario, name=f"builtin/demo-{mode}"))
    return picked


__all__ = [
    "BUILTIN",
    "BUILTIN_MODES",
    "builtin",
    "builtin_scenarios",
    "demo_scenario",
    "late_joiner",
    "shrinking_batch",
]
