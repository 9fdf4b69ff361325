"""Focused scenario strategies: ``graphcheck.strategies.scenarios`` with its knobs turned
towards one bug family each. One function per suite; each returns a fresh strategy.

Each suite's simplest example (what Hypothesis tries first and shrinks towards)
is a meaningful smoke test of its family: it decodes for at least two steps,
so at least one step replays a graph wherever graphs are captured.
"""

from __future__ import annotations

import dataclasses

from hypothesis import strategies as st

from graphcheck.scenario import AcceptOverride, EngineConfig, RequestSpec, Scenario, validate
from graphcheck.strategies import (
    ConfigSizes,
    any_order,
    capture_size_sets,
    engine_configs,
    sampling_params,
    scenarios,
    seeds,
    token_ids,
)


def _any_order(sizes: st.SearchStrategy[tuple[int, ...]]) -> st.SearchStrategy[tuple[int, ...]]:
    """Capture sizes in any order (the engine sorts them); shrinks to the order given."""
    return sizes.flatmap(any_order)


def address_scenarios() -> st.SearchStrategy[Scenario]:
    """Graphs always captured, requests that live long enough for replays of several buckets
    (static inputs rebound, freed or baked in show on the first replay that reads them)."""
    configs = engine_configs(sizes=ConfigSizes(capture_sizes=capture_size_sets(allow_empty=False)))
    return scenarios(
        configs=configs,
        max_requests=4,
        min_steps=2,
        max_steps=12,
        lifetimes=("long", "mixed"),
        max_accept_runs=1,
        name="addresses",
    )


def padding_scenarios() -> st.SearchStrategy[Scenario]:
    """Batches that shrink and grow across sparse buckets: padded rows after a larger batch,
    holes in slots, prefill mixed with decode, real token counts varied by accept overrides.
    The simplest example already pads: two requests in a bucket of four."""
    sparse = st.sampled_from(((4,), (2, 4), (2, 4, 8), (1, 4), (1, 8), (3, 6), (1, 2, 4, 8)))
    configs = engine_configs(
        sizes=ConfigSizes(
            capture_sizes=_any_order(st.one_of(sparse, capture_size_sets(allow_empty=False))),
            max_num_seqs=st.integers(2, 8),
        )
    )
    return scenarios(
        configs=configs,
        min_requests=2,
        max_requests=6,
        min_steps=3,
        max_steps=16,
        lifetimes=("long", "mixed", "short"),
        max_accept_runs=2,
        name="padding",
    )


def forcing_accepts_at_reasoning_changes(scenario: Scenario) -> Scenario:
    """Add an override accepting all k drafts wherever a request's reasoning_status changes
    (unless one is scripted there): a verify rule skipped on one path then shows as tokens."""
    k, n = scenario.config.num_speculative_tokens, scenario.num_steps
    taken = {(a.step, a.request_id) for a in scenario.accepts}
    extra = {
        (c.step, r.request_id): AcceptOverride(c.step, r.request_id, k)
        for r in scenario.requests
        for c in r.reasoning
        if c.step < n and (c.step, r.request_id) not in taken
    }
    accepts = sorted(scenario.accepts + tuple(extra.values()), key=lambda a: (a.step, a.request_id))
    return validate(dataclasses.replace(scenario, accepts=tuple(accepts)))


def accept_scenarios() -> st.SearchStrategy[Scenario]:
    """Speculative mode with many forced accept counts, every verify strategy and policy,
    reasoning_status excursions met by forced accepts (two times in three), eos and
    max_dec_len inside accepted drafts, S up to k."""
    configs = engine_configs(
        naive_mode=False,
        accept_policy=st.sampled_from(("normal", "accept_all", "normal", "reject_all")),
        sizes=ConfigSizes(
            k=st.integers(1, 4),
            num_model_steps=st.sampled_from((1, 2, 3, 4)),  # clamped to k
        ),
    )
    base = scenarios(
        configs=configs,
        max_requests=4,
        min_steps=2,
        max_steps=14,
        max_accept_runs=3,
        lifetimes=("long", "mixed", "short"),
        max_eos=3,
        name="accept",
    )
    forcing = st.sampled_from((False, True, True))  # shrinks to no extra overrides
    return st.tuples(base, forcing).map(lambda p: forcing_accepts_at_reasoning_changes(p[0]) if p[1] else p[0])


def seed_scenarios() -> st.SearchStrategy[Scenario]:
    """Stochastic sampling (target_match, topp, NAIVE half the time) at high entropy with seeds
    that wrap around SEED_MODULUS within the run; several requests so swapped streams show."""
    configs = engine_configs(
        verify_strategy=st.sampled_from(("target_match", "topp", "greedy")),
        naive_mode=st.sampled_from((False, True)),
        accept_policy=st.sampled_from(("normal", "reject_all")),  # every step samples
    )

    @st.composite
    def build(draw: st.DrawFn) -> Scenario:
        config = draw(configs)
        return draw(
            scenarios(
                configs=st.just(config),
                max_requests=4,
                min_steps=2,
                max_steps=14,
                lifetimes=("long", "mixed"),
                aborts=False,
                reasoning=False,
                seed=seeds(config, 14),
                sampling=sampling_params(config, spread="random"),
                max_accept_runs=1,
                name="seeds",
            )
        )

    return build()


def capacity_scenarios() -> st.SearchStrategy[Scenario]:
    """max_num_seqs 1..4 below buckets up to 16, queues longer than the slots, buckets missing 1
    or any size >= R (eager fallback), unsorted sizes, and no graphs at all. The simplest
    example has one request, max_num_seqs 1 and buckets (2, 8)."""
    presets = st.sampled_from(((2, 8), (8,), (2, 16), (1, 2, 4, 8, 16), (4, 8), (16,), (3,), ()))
    configs = engine_configs(
        sizes=ConfigSizes(
            capture_sizes=_any_order(st.one_of(presets, capture_size_sets(max_size=16))),
            max_num_seqs=st.integers(1, 4),
        )
    )
    return scenarios(
        configs=configs,
        min_requests=1,
        max_requests=7,
        min_steps=2,
        max_steps=14,
        lifetimes=("long", "short", "mixed"),
        max_accept_runs=1,
        name="capacity",
    )


def memory_scenarios() -> st.SearchStrategy[Scenario]:
    """Long decode-only stretches of replays (memory must stay flat after the first replay)."""
    configs = engine_configs(sizes=ConfigSizes(capture_sizes=capture_size_sets(allow_empty=False)))
    return scenarios(
        configs=configs,
        max_requests=3,
        min_steps=3,
        max_steps=20,
        max_bursts=1,
        lifetimes=("long",),
        aborts=False,
        max_accept_runs=1,
        name="memory",
    )


def lifecycle_scenarios() -> st.SearchStrategy[Scenario]:
    """Arrivals, aborts, exits on eos and max_dec_len, queueing and reasoning changes at any
    step; short lifetimes first, so slots free and are reused from the simplest example on."""
    configs = engine_configs(sizes=ConfigSizes(max_num_seqs=st.integers(1, 4)))
    return scenarios(
        configs=configs,
        min_requests=2,
        max_requests=7,
        min_steps=3,
        max_steps=16,
        lifetimes=("short", "mixed", "long"),
        max_bursts=4,
        max_eos=4,
        max_accept_runs=1,
        name="lifecycle",
    )


def pressure_scenarios() -> st.SearchStrategy[Scenario]:
    """Three to six requests arriving in the first steps with prompts of a few pages and long decodes, in
    scenarios long enough for a request the engine evicted to come back: with the cache drawn from what
    they need (an engine option sized from the requests, ``EngineOption.scale``), allocations fail,
    requests wait, are offloaded and prefilled again. For engines whose schedule reports their KV cache."""
    return _pressure_scenarios()


@st.composite
def _pressure_scenarios(draw: st.DrawFn) -> Scenario:
    config = draw(engine_configs(sizes=ConfigSizes(max_num_seqs=st.integers(2, 4))))
    num_steps = draw(st.integers(20, 32))
    requests = [draw(_pressure_request(config, num_steps, f"r{i}")) for i in range(draw(st.integers(3, 6)))]
    return validate(Scenario(config, tuple(requests), (), num_steps, "pressure"))


@st.composite
def _pressure_request(draw: st.DrawFn, config: EngineConfig, num_steps: int, rid: str) -> RequestSpec:
    room = config.max_model_len - config.tokens_per_request
    width = 1 if config.vocab_size <= 256 else 2
    length = draw(st.integers(4, min(16, room // 2)))
    prompt = token_ids(draw(st.binary(min_size=length * width, max_size=length * width)), config.vocab_size)
    max_dec_len = draw(st.integers(4, max(4, min(10, room - length))))
    eos = draw(st.lists(st.integers(0, config.vocab_size - 1), min_size=1, max_size=2, unique=True))
    return RequestSpec(rid, draw(st.integers(0, 2)), prompt, max_dec_len, tuple(eos))


def general_scenarios() -> st.SearchStrategy[Scenario]:
    """Every dimension at its default spread."""
    return scenarios(name="all")


__all__ = [
    "accept_scenarios",
    "address_scenarios",
    "capacity_scenarios",
    "pressure_scenarios",
    "forcing_accepts_at_reasoning_changes",
    "general_scenarios",
    "lifecycle_scenarios",
    "memory_scenarios",
    "padding_scenarios",
    "seed_scenarios",
]
