"""reference.decoder: scheduling, seeds, the drafter and a from-scratch model cross-check."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from graphcheck.reference import (
    ReferenceDecoder,
    VerifyRule,
    add_mod,
    decode,
    judge_row,
    make_weights,
    reasoning_status_at,
)
from graphcheck.reference.weights import NPOS, Weights
from graphcheck.scenario import (
    SEED_MODULUS as M,
)
from graphcheck.scenario import AcceptOverride, EngineConfig, ReasoningChange, RequestSpec, Scenario, validate
from graphcheck.search.builtin import BUILTIN, demo_scenario
from graphcheck.step_result import StepResult

# ---------------------------------------------------------------------------
# A slow, independent restatement of README §1 (plain loops over positions).
# ---------------------------------------------------------------------------


def _w(a):  # wrap
    return ((a + 8) % 16) - 8


def _layer(xs: list[np.ndarray], wq, wk, wv) -> list[np.ndarray]:
    q = [_w(x @ wq) for x in xs]
    k = [_w(x @ wk) for x in xs]
    v = [_w(x @ wv) for x in xs]
    out = []
    for i, x in enumerate(xs):
        a = np.zeros_like(x)
        for j in range(i + 1):
            score = (int(q[i] @ k[j]) % 7) - 3
            a = a + score * v[j]
        out.append(_w(x + a))
    return out


def slow_target_hidden(w: Weights, tokens: list[int]) -> list[np.ndarray]:
    xs = [_w(w.embed[t] + w.pos[i % NPOS]) for i, t in enumerate(tokens)]
    return _layer(xs, w.wq, w.wk, w.wv)


def slow_drafts(w: Weights, committed: list[int], s_count: int) -> tuple[int, ...]:
    """d_1..d_S from scratch: draft position j pairs t_{j+1} with h_j."""
    n = len(committed) - 1
    h = slow_target_hidden(w, committed[:n])
    toks, gs = list(committed[1 : n + 1]), list(h)
    proposals: list[int] = []
    for _ in range(s_count):
        xs = [_w(w.draft_embed[t] + _w(g @ w.draft_hidden) + w.pos[i % NPOS]) for i, (t, g) in enumerate(zip(toks, gs))]
        hd = _layer(xs, w.draft_wq, w.draft_wk, w.draft_wv)
        d = int(np.argmax(hd[-1] @ w.lm_head))
        proposals.append(d)
        toks.append(d)
        gs.append(hd[-1])
    return tuple(proposals)


def slow_greedy_next(w: Weights, committed: list[int]) -> int:
    return int(np.argmax(slow_target_hidden(w, committed)[-1] @ w.lm_head))


# ---------------------------------------------------------------------------


def _cfg(**kw) -> EngineConfig:
    # Greedy with top_k = 1 (NAIVE) keeps token paths seed-independent, so a request
    # with the default prompt and eos runs its full max_dec_len (checked in tests).
    base = dict(
        max_num_seqs=4,
        num_speculative_tokens=3,
        num_model_steps=2,
        vocab_size=64,
        hidden_size=8,
        model_seed=5,
        verify_strategy="greedy",
    )
    base.update(kw)
    return EngineConfig(**base)


def _req(rid: str, arrival: int = 0, max_dec_len: int = 30, **kw) -> RequestSpec:
    kw.setdefault("eos_token_ids", (63,))
    kw.setdefault("prompt", (3, 1, 4, 1, 5))
    kw.setdefault("top_k", 1)
    return RequestSpec(request_id=rid, arrival_step=arrival, max_dec_len=max_dec_len, **kw)


def _ids(res: StepResult) -> list[str]:
    return [r.request_id for r in res.requests]


@pytest.mark.parametrize("naive", [False, True])
def test_greedy_output_equals_plain_autoregressive_greedy(naive: bool) -> None:
    """Speculation must not change greedy output; drafts match a from-scratch drafter."""
    cfg = _cfg(verify_strategy="greedy", naive_mode=naive, accept_policy="normal")
    # NAIVE samples: top_k = 1 makes the sample the argmax.
    spec = _req("a", max_dec_len=14, prompt=(7, 2, 9), eos_token_ids=(0,), top_k=1 if naive else 0)
    sc = validate(Scenario(cfg, (spec,), num_steps=16))
    w = make_weights(cfg)
    dec = ReferenceDecoder(cfg, w)
    committed = list(spec.prompt)
    for t in range(sc.num_steps):
        if t == 0:
            dec.submit(spec)
        res = dec.step(t, {})
        if not res.requests:
            break
        (out,) = res.requests
        for tok in out.accept_tokens:
            nxt = slow_greedy_next(w, committed)
            committed.append(nxt)
            if out.stopped and tok == out.accept_tokens[-1] and nxt not in spec.eos_token_ids:
                committed[-1] = spec.eos_token_ids[0]  # max_dec_len truncation
            assert tok == committed[-1]
        assert list(dec.tokens("a")) == committed
        if out.draft_tokens:
            assert out.draft_tokens == slow_drafts(w, committed, cfg.num_model_steps)
    assert len(committed) > len(spec.prompt) + 1


def test_drafts_after_prefill_match_slow_drafter_for_all_strategies() -> None:
    for strategy in ("greedy", "target_match", "topp"):
        cfg = _cfg(verify_strategy=strategy, num_model_steps=3)
        w = make_weights(cfg)
        dec = ReferenceDecoder(cfg, w)
        dec.submit(_req("a", prompt=tuple(range(1, 12))))
        (out,) = dec.step(0, {}).requests
        assert out.draft_tokens == slow_drafts(w, list(dec.tokens("a")), 3)


@pytest.mark.parametrize("k,naive", [(1, False), (3, False), (5, False), (3, True)])
def test_seed_advances_per_step_and_wraps(k: int, naive: bool) -> None:
    cfg = _cfg(num_speculative_tokens=k, num_model_steps=1, naive_mode=naive, verify_strategy="greedy")
    inc = 4 if naive else 4 * (k + 1)
    for seed in (0, 12345, M - 1, M - 3 * inc + 2):
        dec = ReferenceDecoder(cfg)
        dec.submit(_req("a", seed=seed, max_dec_len=50))
        for n in range(1, 9):
            (out,) = dec.step(n - 1, {}).requests
            assert out.infer_seed == (seed + n * inc) % M
            assert 0 <= out.infer_seed < M


def test_greedy_still_advances_seed_and_on_the_stop_step() -> None:
    cfg = _cfg(verify_strategy="greedy")
    dec = ReferenceDecoder(cfg)
    dec.submit(_req("a", seed=100, max_dec_len=1))
    (out,) = dec.step(0, {}).requests
    assert out.stopped and out.accept_tokens == (63,) and out.infer_seed == 100 + 16
    assert dec.step(1, {}).requests == ()  # nothing runs: nothing advances


@pytest.mark.parametrize(
    "strategy,naive", [("greedy", False), ("target_match", False), ("topp", False), ("target_match", True)]
)
def test_demo_is_valid_and_deterministic(strategy: str, naive: bool) -> None:
    sc = demo_scenario(strategy, naive)
    assert validate(sc) == sc
    first, second = decode(sc), decode(sc, make_weights(sc.config))
    assert first == second
    assert len(first) == sc.num_steps
    ran = {r.request_id for res in first for r in res.requests}
    assert ran == {"r0", "r1", "r2", "r3"}


def test_demo_features() -> None:
    sc = demo_scenario()
    results = decode(sc)
    # r3 arrives at step 3 but waits: three slots are busy until r0 ends.
    first_r3 = min(res.step for res in results if "r3" in _ids(res))
    assert first_r3 > 3
    r0_end = [r for res in results for r in res.requests if r.request_id == "r0" and r.stopped]
    assert r0_end and r0_end[0].step_idx == sc.request("r0").max_dec_len
    assert first_r3 == results.index(next(res for res in results if any(r.stopped for r in res.requests))) + 1
    # r1 is aborted at step 9; its seed wrapped before that.
    assert all("r1" not in _ids(res) for res in results[9:])
    r1_seeds = [r.infer_seed for res in results for r in res.requests if r.request_id == "r1"]
    assert any(b < a for a, b in zip(r1_seeds, r1_seeds[1:]))
    # Reasoning 1 at steps 4..6: r2 accepts one token, even with the override at step 6.
    for t in (4, 5, 6):
        assert results[t].by_id()["r2"].accept_num == 1
    assert results[8].by_id()["r2"].accept_num >= 2  # override A = 1
    assert "demo" in BUILTIN and BUILTIN["demo"]() == sc


def test_fifo_admission_and_join_leave() -> None:
    cfg = _cfg(max_num_seqs=2)
    dec = ReferenceDecoder(cfg)
    dec.submit(_req("a", max_dec_len=1))  # ends on its prefill step
    dec.submit(_req("b"))
    dec.submit(_req("c"))
    assert _ids(dec.step(0, {})) == ["a", "b"]
    dec.submit(_req("d"))
    # a's slot, freed at the end of step 0, goes to the oldest waiter c; d waits.
    assert _ids(dec.step(1, {})) == ["b", "c"]
    assert dec.queued_ids() == ("d",)
    assert _ids(dec.step(2, {})) == ["b", "c"]


def test_abort_queued_and_running() -> None:
    cfg = _cfg(max_num_seqs=1)
    dec = ReferenceDecoder(cfg)
    for rid in ("a", "b", "c"):
        dec.submit(_req(rid))
    assert _ids(dec.step(0, {})) == ["a"]
    dec.abort("b")  # queued
    assert dec.queued_ids() == ("c",)
    assert _ids(dec.step(1, {})) == ["a"]
    before = dec.tokens("a")
    dec.abort("a")  # running: its slot is free for this very step
    assert _ids(dec.step(2, {})) == ["c"]
    assert dec.tokens("a") == before and dec.generated("b") == ()
    dec.abort("a")  # already gone: a no-op
    dec.abort("zzz")
    assert _ids(dec.step(3, {})) == ["c"]


def test_results_sorted_and_only_running_requests() -> None:
    cfg = _cfg()
    dec = ReferenceDecoder(cfg)
    assert dec.step(0, {}) == StepResult(0, ())
    for rid in ("zeta", "alpha", "mid"):
        dec.submit(_req(rid))
    res = dec.step(1, {})
    assert _ids(res) == ["alpha", "mid", "zeta"] and res.step == 1


@pytest.mark.parametrize("strategy", ["greedy", "target_match", "topp"])
@pytest.mark.parametrize("policy", ["normal", "accept_all"])
def test_step_shapes_accept_num_drafts_seq_len(strategy: str, policy: str) -> None:
    cfg = _cfg(num_speculative_tokens=4, num_model_steps=3, accept_policy=policy, verify_strategy=strategy)
    reqs = tuple(_req(f"r{i}", arrival=i, max_dec_len=12 + 3 * i, seed=i, top_k=0) for i in range(3))
    sc = validate(Scenario(cfg, reqs, num_steps=15))
    dec = ReferenceDecoder(cfg)
    prefilled: set[str] = set()
    for t in range(sc.num_steps):
        for spec in reqs:
            if spec.arrival_step == t:
                dec.submit(spec)
        for out in dec.step(t, {}).requests:
            spec = sc.request(out.request_id)
            limit = cfg.num_model_steps + 1 if out.request_id in prefilled else 1
            assert 1 <= out.accept_num <= limit
            prefilled.add(out.request_id)
            assert len(out.draft_tokens) in (0, cfg.num_model_steps)
            skip = out.stopped or out.step_idx + cfg.num_model_steps >= spec.max_dec_len
            assert (out.draft_tokens == ()) == skip
            assert out.seq_len == len(dec.tokens(out.request_id)) - 1
            assert out.step_idx == len(dec.generated(out.request_id)) <= spec.max_dec_len
            assert out.stopped == (out.step_idx == spec.max_dec_len or out.accept_tokens[-1] in spec.eos_token_ids)
            assert all(0 <= tok < cfg.vocab_size for tok in out.accept_tokens + out.draft_tokens)
    assert prefilled == {"r0", "r1", "r2"}


def test_accept_all_accepts_every_draft() -> None:
    cfg = _cfg(accept_policy="accept_all", num_speculative_tokens=3, num_model_steps=3)
    dec = ReferenceDecoder(cfg)
    spec = _req("a", max_dec_len=40, eos_token_ids=(63,))
    dec.submit(spec)
    prev, full = dec.step(0, {}).requests[0], 0
    for t in range(1, 12):
        if prev.stopped:
            break
        (out,) = dec.step(t, {}).requests
        if prev.draft_tokens:
            n = len(prev.draft_tokens)
            if out.stopped:  # an EOS draft (no EOS->5 swap) or max_dec_len ends it early
                assert out.accept_tokens[-1] in spec.eos_token_ids
            else:
                assert out.accept_num == n + 1 and out.accept_tokens[:n] == prev.draft_tokens
                full += 1
        prev = out
    assert full >= 1


def test_override_forces_accept_count() -> None:
    cfg = _cfg(num_speculative_tokens=3, num_model_steps=3)
    dec = ReferenceDecoder(cfg)
    dec.submit(_req("a", max_dec_len=40, eos_token_ids=(63,)))
    prev = dec.step(0, {}).requests[0]
    for t, a in enumerate((3, 0, 2, 1, 3), start=1):
        (out,) = dec.step(t, {"a": a}).requests
        assert out.accept_tokens[:a] == prev.draft_tokens[:a]
        if not out.stopped:
            assert out.accept_num == a + 1
        prev = out


def test_reasoning_status_at() -> None:
    spec = _req("a", reasoning=(ReasoningChange(2, 1), ReasoningChange(5, 2), ReasoningChange(5, 3)))
    assert [reasoning_status_at(spec, t) for t in range(7)] == [0, 0, 1, 1, 1, 3, 3]
    assert reasoning_status_at(_req("b"), 9) == 0


def test_reasoning_one_rejects_every_draft_in_decoder() -> None:
    cfg = _cfg(accept_policy="accept_all")
    spec = _req("a", max_dec_len=40, eos_token_ids=(63,), reasoning=(ReasoningChange(2, 1), ReasoningChange(4, 0)))
    sc = Scenario(cfg, (spec,), (AcceptOverride(3, "a", 2),), num_steps=6)
    nums = [res.requests[0].accept_num for res in decode(sc)]
    assert nums[2] == nums[3] == 1 and nums[1] == nums[4] == 3


@pytest.mark.parametrize("strategy", ["greedy", "target_match", "topp", "naive"])
def test_every_emitted_token_is_justified_by_the_slow_model(strategy: str) -> None:
    """Replay each step against the from-scratch model: accepted drafts pass their row's
    test, the last token is its row's draw with row seed add_mod(infer_seed, 4 i)
    (NAIVE: the one row sampled with infer_seed itself)."""
    naive = strategy == "naive"
    strategy = "target_match" if naive else strategy
    cfg = _cfg(
        verify_strategy=strategy, num_speculative_tokens=3, num_model_steps=3, max_candidate_len=4, naive_mode=naive
    )
    spec = _req("a", max_dec_len=30, top_k=0, top_p=0.9, temperature=0.5, seed=M - 41)
    overrides = {2: 3, 4: 1, 5: 2, 7: 3}
    w = make_weights(cfg)
    dec = ReferenceDecoder(cfg, w)
    dec.submit(spec)
    steps = []
    seed, drafts = spec.seed, ()
    for t in range(12):
        before = len(dec.tokens("a"))
        res = dec.step(t, {"a": overrides[t]} if t in overrides else {})
        if not res.requests:
            break
        (out,) = res.requests
        steps.append((t, before, seed, drafts, out))
        seed, drafts = out.infer_seed, out.draft_tokens
    committed = list(dec.tokens("a"))
    logits = [h @ w.lm_head for h in slow_target_hidden(w, committed)]
    checked = 0
    for t, before, seed, drafts, out in steps:
        first_row = before - 1  # position of the step's input token 0

        def verdict(i: int, first_row: int = first_row, seed: int = seed) -> Any:
            return judge_row(
                VerifyRule(strategy, 4),
                logits[first_row + i],
                spec.temperature,
                spec.top_p,
                spec.top_k,
                add_mod(seed, 4 * i),
            )

        *accepted, last = out.accept_tokens
        amb = False
        for i, tok in enumerate(accepted):
            assert tok == drafts[i]
            if t not in overrides:
                assert tok in verdict(i).accepts
                amb |= verdict(i).unsure_about(tok)
        i = len(accepted)
        if out.stopped and i < len(drafts) and last == drafts[i]:
            continue  # stopped on a draft (EOS / max_dec_len)
        if t not in overrides and i < len(drafts):
            amb |= verdict(i).unsure_about(drafts[i])  # the rejection decision
        want = verdict(i).token
        assert last == (spec.eos_token_ids[0] if out.stopped and want not in spec.eos_token_ids else want)
        assert out.ambiguous == (amb or verdict(i).token_ambiguous)
        checked += 1
    assert checked >= 8


@pytest.mark.parametrize("naive", [False, True])
def test_row_ambiguity_reaches_the_step_result(naive: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    import graphcheck.reference.rules as decoder_module

    real_judge, real_sample = decoder_module.judge_row, decoder_module.sample

    def judge(*args, **kw):
        v = real_judge(*args, **kw)
        return type(v)(v.accepts, v.token, accept_ambiguous=True, token_ambiguous=True)

    monkeypatch.setattr(decoder_module, "judge_row", judge)
    monkeypatch.setattr(decoder_module, "sample", lambda *a, **k: (real_sample(*a, **k)[0], True))
    cfg = _cfg(verify_strategy="target_match", naive_mode=naive)
    sc = Scenario(cfg, (_req("a"), _req("b", arrival=2)), (AcceptOverride(3, "a", 2),), num_steps=6)
    outs = [r for res in decode(sc) for r in res.requests]
    # Every step consults at least one row (an override still draws the phase-2 token).
    assert outs and all(r.ambiguous for r in outs)
    monkeypatch.undo()
    assert not any(r.ambiguous for res in decode(sc) for r in res.requests)


def test_reference_imports_no_engine_framework() -> None:
    import subprocess
    import sys
    from pathlib import Path

    code = (
        "import sys, graphcheck.reference, graphcheck.search.builtin\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('torch', 'paddle') or m.startswith('graphcheck.backends')]\n"
        "print(bad)\n"
    )
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root)
    assert out.stdout.strip() == "[]"
