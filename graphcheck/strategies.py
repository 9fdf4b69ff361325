"""Hypothesis strategies for scenarios: small, composable building blocks.

``engine_configs()`` draws an EngineConfig, ``request_specs(config, num_steps)``
one request of its script, ``accept_overrides(...)`` the forced accept counts,
and ``scenarios()`` puts them together. Every value drawn is valid by
construction (``graphcheck.scenario.validate`` accepts it), and every strategy
shrinks towards the smallest, most boring choice: one request, few steps,
greedy verification, no overrides.
"""

from __future__ import annotations

from hypothesis import strategies as st

from graphcheck.scenario import (
    GRAPH_SCOPES,
    SEED_MODULUS,
    VERIFY_STRATEGIES,
    AcceptOverride,
    EngineConfig,
    ReasoningChange,
    RequestSpec,
    Scenario,
)


@st.composite
def capture_size_sets(draw: st.DrawFn, max_size: int = 8) -> tuple[int, ...]:
    """Distinct request-batch capture sizes, possibly empty (no graphs)."""
    sizes = draw(st.sets(st.integers(1, max_size), max_size=4))
    return tuple(sorted(sizes))


@st.composite
def engine_configs(
    draw: st.DrawFn,
    *,
    max_num_seqs: int = 6,
    vocab_size: int = 64,
    hidden_size: int = 16,
    max_model_len: int = 96,
) -> EngineConfig:
    k = draw(st.integers(1, 4))
    return EngineConfig(
        max_num_seqs=draw(st.integers(1, max_num_seqs)),
        num_speculative_tokens=k,
        num_model_steps=draw(st.integers(1, k)),
        capture_sizes=draw(capture_size_sets()),
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        block_size=draw(st.sampled_from((4, 8, 16))),
        max_model_len=max_model_len,
        verify_strategy=draw(st.sampled_from(VERIFY_STRATEGIES)),
        accept_policy=draw(st.sampled_from(("normal", "normal", "accept_all", "reject_all"))),
        max_candidate_len=draw(st.integers(1, 6)),
        naive_mode=draw(st.booleans()),
        graph_scope=draw(st.sampled_from(GRAPH_SCOPES)),
        model_seed=draw(st.integers(0, 2**16)),
    )


def seeds() -> st.SearchStrategy[int]:
    """Request seeds, with extra weight near the modulus so wrapping gets exercised."""
    return st.one_of(
        st.integers(0, 1000),
        st.integers(SEED_MODULUS - 400, SEED_MODULUS - 1),
        st.integers(0, SEED_MODULUS - 1),
    )


@st.composite
def request_specs(draw: st.DrawFn, config: EngineConfig, num_steps: int, request_id: str) -> RequestSpec:
    room = config.max_model_len - config.tokens_per_request
    prompt_len = draw(st.integers(1, min(12, room - 1)))
    token = st.integers(0, config.vocab_size - 1)
    arrival = draw(st.integers(0, num_steps - 1))
    abort = draw(st.none() | st.integers(arrival + 1, num_steps))
    reasoning = draw(
        st.lists(st.builds(ReasoningChange, st.integers(0, num_steps), st.integers(0, 3)), max_size=2)
    )
    return RequestSpec(
        request_id=request_id,
        arrival_step=arrival,
        prompt=tuple(draw(st.lists(token, min_size=prompt_len, max_size=prompt_len))),
        max_dec_len=draw(st.integers(1, min(24, room - prompt_len))),
        eos_token_ids=tuple(draw(st.lists(token, min_size=1, max_size=2, unique=True))),
        temperature=draw(st.sampled_from((1.0, 0.5, 0.8, 1.5, 2.0))),
        top_p=draw(st.sampled_from((1.0, 0.9, 0.7, 0.3))),
        top_k=draw(st.sampled_from((0, 0, 1, 5, 20))),
        seed=draw(seeds()),
        reasoning=tuple(reasoning),
        abort_step=abort,
    )


@st.composite
def accept_overrides(
    draw: st.DrawFn, config: EngineConfig, request_ids: list[str], num_steps: int
) -> tuple[AcceptOverride, ...]:
    if not request_ids:
        return ()
    keys = draw(
        st.lists(
            st.tuples(st.integers(0, num_steps - 1), st.sampled_from(request_ids)),
            max_size=6,
            unique=True,
        )
    )
    return tuple(
        AcceptOverride(step, rid, draw(st.integers(0, config.num_speculative_tokens))) for step, rid in sorted(keys)
    )


@st.composite
def scenarios(
    draw: st.DrawFn,
    *,
    configs: st.SearchStrategy[EngineConfig] | None = None,
    max_requests: int = 5,
    max_steps: int = 16,
) -> Scenario:
    config = draw(configs if configs is not None else engine_configs())
    num_steps = draw(st.integers(1, max_steps))
    count = draw(st.integers(1, max_requests))
    requests = tuple(draw(request_specs(config, num_steps, f"r{i}")) for i in range(count))
    accepts = draw(accept_overrides(config, [r.request_id for r in requests], num_steps))
    return Scenario(config=config, requests=requests, accepts=accepts, num_steps=num_steps)
