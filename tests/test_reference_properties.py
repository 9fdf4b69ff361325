"""Hypothesis properties of the reference decoder over small random scenarios."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from graphcheck.driver import iter_steps
from graphcheck.reference import ReferenceDecoder, decode, reasoning_status_at
from graphcheck.scenario import (
    SEED_MODULUS as M,
)
from graphcheck.scenario import (
    VERIFY_STRATEGIES,
    AcceptOverride,
    EngineConfig,
    ReasoningChange,
    RequestSpec,
    Scenario,
    validate,
)
from graphcheck.step_result import StepResult


@st.composite
def configs(draw: st.DrawFn) -> EngineConfig:
    k = draw(st.integers(1, 3))
    vocab = draw(st.sampled_from([16, 32]))
    return EngineConfig(
        max_num_seqs=draw(st.integers(1, 3)),
        num_speculative_tokens=k,
        num_model_steps=draw(st.integers(1, k)),
        vocab_size=vocab,
        hidden_size=draw(st.sampled_from([4, 8])),
        max_model_len=64,
        verify_strategy=draw(st.sampled_from(VERIFY_STRATEGIES)),
        accept_policy=draw(st.sampled_from(["normal", "normal", "accept_all", "reject_all"])),
        max_candidate_len=draw(st.integers(1, 5)),
        naive_mode=draw(st.booleans()),
        model_seed=draw(st.integers(0, 2**32)),
    )


@st.composite
def requests(draw: st.DrawFn, rid: str, cfg: EngineConfig, num_steps: int) -> RequestSpec:
    tok = st.integers(0, cfg.vocab_size - 1)
    arrival = draw(st.integers(0, num_steps - 1))
    changes = draw(st.lists(st.builds(ReasoningChange, st.integers(0, num_steps), st.integers(0, 3)), max_size=2))
    return RequestSpec(
        request_id=rid,
        arrival_step=arrival,
        prompt=tuple(draw(st.lists(tok, min_size=1, max_size=6))),
        max_dec_len=draw(st.integers(1, 12)),
        eos_token_ids=tuple(draw(st.lists(tok, min_size=1, max_size=2))),
        temperature=draw(st.sampled_from([0.05, 0.3, 1.0, 2.5]) | st.floats(0.05, 10.0)),
        top_p=draw(st.sampled_from([1.0, 0.9, 0.5]) | st.floats(0.01, 1.0)),
        top_k=draw(st.sampled_from([0, 1]) | st.integers(0, cfg.vocab_size)),
        seed=draw(st.integers(0, M - 1) | st.integers(M - 64, M - 1)),
        reasoning=tuple(changes),
        abort_step=draw(st.none() | st.integers(arrival + 1, num_steps)),
    )


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    cfg = draw(configs())
    num_steps = draw(st.integers(1, 10))
    ids = [f"q{i}" for i in range(draw(st.integers(1, 3)))]
    reqs = tuple(draw(requests(rid, cfg, num_steps)) for rid in ids)
    keys = draw(st.lists(st.tuples(st.integers(0, num_steps - 1), st.sampled_from(ids)), max_size=6, unique=True))
    k = cfg.num_speculative_tokens
    accepts = tuple(AcceptOverride(t, rid, draw(st.integers(0, k))) for t, rid in keys)
    return validate(Scenario(cfg, reqs, accepts, num_steps))


def _trace(sc: Scenario) -> tuple[list[StepResult], ReferenceDecoder]:
    dec = ReferenceDecoder(sc.config)
    return list(iter_steps(dec, sc)), dec


@given(scenarios())
def test_accept_num_and_token_ranges(sc: Scenario) -> None:
    results, dec = _trace(sc)
    cfg, seen = sc.config, set()
    for res in results:
        for out in res.requests:
            decode_step = out.request_id in seen
            seen.add(out.request_id)
            hi = cfg.num_speculative_tokens + 1 if decode_step and not cfg.naive_mode else 1
            assert 1 <= out.accept_num <= hi
            assert out.accept_num <= cfg.num_model_steps + 1
            if cfg.accept_policy == "reject_all":
                assert out.accept_num == 1
            assert all(0 <= t < cfg.vocab_size for t in out.accept_tokens + out.draft_tokens)
            assert len(out.draft_tokens) in ((0,) if cfg.naive_mode else (0, cfg.num_model_steps))
    for spec in sc.requests:
        if spec.request_id in seen:
            assert all(0 <= t < cfg.vocab_size for t in dec.tokens(spec.request_id))


@given(scenarios(), st.data())
def test_forced_accept_count_is_met(sc: Scenario, data: st.DataObject) -> None:
    cfg = replace(sc.config, accept_policy="normal", naive_mode=False)
    # An override on every (step, request), so every decode step is checked.
    pairs = [(t, r.request_id) for t in range(sc.num_steps) for r in sc.requests]
    counts = data.draw(st.lists(st.integers(0, cfg.num_speculative_tokens), min_size=len(pairs), max_size=len(pairs)))
    accepts = tuple(AcceptOverride(t, rid, a) for (t, rid), a in zip(pairs, counts))
    sc = validate(replace(sc, config=cfg, accepts=accepts))
    results, _ = _trace(sc)
    drafts: dict[str, tuple[int, ...]] = {}
    for res in results:
        overrides = sc.accept_overrides_at(res.step)
        for out in res.requests:
            spec, offered = sc.request(out.request_id), drafts.get(out.request_id)
            forced = overrides.get(out.request_id)
            if offered is not None and forced is not None and reasoning_status_at(spec, res.step) != 1:
                a = min(forced, len(offered))
                toks = out.accept_tokens
                if out.stopped and out.accept_num <= a:  # ended on EOS / max_dec_len inside the drafts
                    assert toks[:-1] == offered[: len(toks) - 1]
                    assert toks[-1] in (offered[len(toks) - 1], spec.eos_token_ids[0])
                    assert toks[-1] in spec.eos_token_ids
                else:
                    assert out.accept_num == a + 1 and toks[:a] == offered[:a]
            drafts[out.request_id] = out.draft_tokens


@given(scenarios())
def test_same_scenario_same_tokens(sc: Scenario) -> None:
    first, dec1 = _trace(sc)
    second, dec2 = _trace(sc)
    assert first == second
    assert decode(validate(sc)) == first
    for spec in sc.requests:
        if any(spec.request_id in res.by_id() for res in first):
            assert dec1.tokens(spec.request_id) == dec2.tokens(spec.request_id)


@given(scenarios())
def test_seeds_follow_the_formula(sc: Scenario) -> None:
    results, _ = _trace(sc)
    inc = 4 if sc.config.naive_mode else 4 * (sc.config.num_speculative_tokens + 1)
    steps_run: dict[str, int] = {}
    for res in results:
        for out in res.requests:
            n = steps_run[out.request_id] = steps_run.get(out.request_id, 0) + 1
            assert out.infer_seed == (sc.request(out.request_id).seed + n * inc) % M


@given(scenarios(), st.integers(1, 5), st.data())
def test_speculation_never_changes_greedy_output(sc: Scenario, k: int, data: st.DataObject) -> None:
    """Greedy without overrides commits the same tokens whatever k, S or the policy."""
    base = replace(sc.config, verify_strategy="greedy", naive_mode=False, accept_policy="normal")
    other = replace(
        base,
        num_speculative_tokens=k,
        num_model_steps=data.draw(st.integers(1, k)),
        accept_policy=data.draw(st.sampled_from(["normal", "reject_all"])),
    )
    one = replace(sc, config=base, accepts=())
    two = replace(sc, config=other, accepts=())
    # No aborts (they depend on timing, which k changes); long enough to finish everything.
    reqs = tuple(replace(r, abort_step=None) for r in sc.requests)
    one, two = replace(one, requests=reqs, num_steps=64), replace(two, requests=reqs, num_steps=64)
    _, dec1 = _trace(one)
    _, dec2 = _trace(two)
    for spec in reqs:
        assert dec1.tokens(spec.request_id) == dec2.tokens(spec.request_id)
