"""reference.verify: hand-made verify tables for every strategy and switch (README §5.3)."""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import pytest

from graphcheck.reference.rng import add_mod, uniform
from graphcheck.reference.verify import RowVerdict, VerifyInput, VerifyRule, judge_row, naive_step, verify

V = 8
EOS = (7, 6)
STRATEGIES = ("greedy", "target_match", "topp")


def peaked(*tokens: int, height: int = 400) -> np.ndarray:
    """Integer logits with all the mass (to ~1e-22) spread evenly over `tokens`."""
    row = np.zeros(V, dtype=np.int64)
    row[list(tokens)] = height
    return row


def rows_for(strategy: str, targets: Sequence[int], seed: int = 11, top_p: float = 0.9) -> Callable[[int], RowVerdict]:
    """Row callback over peaked rows: every strategy agrees the target of row i is targets[i]."""
    logits = [peaked(t) for t in targets]

    def row(i: int) -> RowVerdict:
        return judge_row(VerifyRule(strategy, 3), logits[i], 1.0, top_p, 0, add_mod(seed, 4 * i))

    return row


def run(strategy: str, targets: Sequence[int], drafts: Sequence[int], **kw) -> tuple[tuple[int, ...], bool]:
    kw.setdefault("step_idx", 0)
    kw.setdefault("max_dec_len", 100)
    kw.setdefault("eos", EOS)
    res = verify(VerifyInput(drafts=tuple(drafts), **kw), rows_for(strategy, targets))
    assert res.accept_num == len(res.tokens)
    assert res.step_idx == kw["step_idx"] + res.accept_num
    return res.tokens, res.stopped


T = (1, 2, 3, 4)  # target tokens of rows 0..3
X = 5  # a token no row wants


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_full_partial_zero_accept(strategy: str) -> None:
    assert run(strategy, T, (1, 2, 3)) == ((1, 2, 3, 4), False)
    assert run(strategy, T, (1, 2, X)) == ((1, 2, 3), False)
    assert run(strategy, T, (1, X, 3)) == ((1, 2), False)
    assert run(strategy, T, (X, 2, 3)) == ((1,), False)
    assert run(strategy, T, ()) == ((1,), False)  # drafter skipped: phase 2 only


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_eos_inside_accepted_drafts_stops_without_bonus(strategy: str) -> None:
    targets = (1, 7, 3, 4)
    assert run(strategy, targets, (1, 7, 3)) == ((1, 7), True)
    # EOS as the phase-2 token also stops.
    assert run(strategy, (6, 2, 3, 4), (X, 2, 3)) == ((6,), True)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_max_dec_len_truncation(strategy: str) -> None:
    # step_idx 10, max 12: the second emitted token reaches 12 and becomes eos[0].
    assert run(strategy, T, (1, 2, 3), step_idx=10, max_dec_len=12) == ((1, 7), True)
    # On the phase-2 token.
    assert run(strategy, T, (X, 2, 3), step_idx=11, max_dec_len=12) == ((7,), True)
    # An EOS that lands exactly on max_dec_len stays itself.
    assert run(strategy, (6, 2, 3, 4), (X,), step_idx=11, max_dec_len=12) == ((6,), True)
    # One short of the limit: nothing happens.
    assert run(strategy, T, (1, X), step_idx=8, max_dec_len=12) == ((1, 2), False)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_reasoning_one_and_reject_all_and_prefill_reject_every_draft(strategy: str) -> None:
    assert run(strategy, T, (1, 2, 3), reasoning_status=1) == ((1,), False)
    for status in (0, 2, 3):
        assert run(strategy, T, (1, 2, 3), reasoning_status=status) == ((1, 2, 3, 4), False)
    assert run(strategy, T, (1, 2, 3), accept_policy="reject_all") == ((1,), False)
    assert run(strategy, T, (), prefill=True) == ((1,), False)
    # reject_all and reasoning 1 win over an override.
    assert run(strategy, T, (X, X), accept_policy="reject_all", override=2) == ((1,), False)
    assert run(strategy, T, (X, X), reasoning_status=1, override=2) == ((1,), False)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_accept_all(strategy: str) -> None:
    assert run(strategy, T, (X, X, 0), accept_policy="accept_all") == ((X, X, 0, 4), False)
    # No EOS->5 substitution: an EOS draft is emitted and stops the request.
    assert run(strategy, T, (X, 7, 0), accept_policy="accept_all") == ((X, 7), True)
    assert run(strategy, T, (X, X, X), accept_policy="accept_all", step_idx=1, max_dec_len=3) == ((X, 7), True)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_override_is_exact(strategy: str) -> None:
    assert run(strategy, T, (X, 0, X), override=2) == ((X, 0, 3), False)
    assert run(strategy, T, (1, 2, 3), override=0) == ((1,), False)
    assert run(strategy, T, (X, 0, X), override=3) == ((X, 0, X, 4), False)
    assert run(strategy, T, (X,), override=3) == ((X, 2), False)  # A above the drafts offered
    # The override beats accept_all.
    assert run(strategy, T, (X, X, X), override=1, accept_policy="accept_all") == ((X, 2), False)
    # A forced draft may still stop the request.
    assert run(strategy, T, (X, 6, X), override=3) == ((X, 6), True)


def test_greedy_vs_topp_vs_target_match_on_a_two_way_tie() -> None:
    tie = peaked(2, 3)  # p(2) = p(3) = 1/2
    drafts = (3,)

    def row_of(strategy: str, seed: int) -> Callable[[int], RowVerdict]:
        rows = [tie, peaked(4)]
        return lambda i: judge_row(VerifyRule(strategy, 3), rows[i], 1.0, 0.9, 0, add_mod(seed, 4 * i))

    inp = VerifyInput(drafts=drafts, step_idx=0, max_dec_len=100, eos=EOS)
    # GREEDY wants the lower id only.
    assert verify(inp, row_of("greedy", 0)).tokens == (2,)
    # TOPP: both tied tokens are candidates (cumsum 0.5 < 0.9 <= 1.0), so 3 is accepted.
    assert verify(inp, row_of("topp", 0)).tokens == (3, 4)
    # TARGET_MATCH: the draw decides. r = u * 1.0; token 2 when r < 0.5.
    for seed in range(40):
        u = uniform(seed)
        if abs(u - 0.5) < 1e-6:
            continue
        want = (2,) if u < 0.5 else (3, 4)
        assert verify(inp, row_of("target_match", seed)).tokens == want


def test_row_seeds_are_per_row() -> None:
    """TARGET_MATCH row i draws from add_mod(seed, 4 i), not from row 0's seed."""
    tie = peaked(2, 3)
    seed = next(s for s in range(100) if uniform(s) < 0.4 and uniform(s + 4) > 0.6)
    rows = [peaked(1), tie]
    row = lambda i: judge_row(VerifyRule("target_match", 3), rows[i], 1.0, 1.0, 0, add_mod(seed, 4 * i))  # noqa: E731
    res = verify(VerifyInput(drafts=(1, 2), step_idx=0, max_dec_len=100, eos=EOS), row)
    assert res.tokens == (1, 3)  # row 1 drew u > 0.6 -> token 3, rejecting draft 2


def test_only_consulted_rows_make_a_step_ambiguous() -> None:
    verdicts = [RowVerdict((1,), 1), RowVerdict((2,), 2, True, True), RowVerdict((3,), 3)]
    asked: list[int] = []

    def row(i: int) -> RowVerdict:
        asked.append(i)
        return verdicts[i]

    inp = VerifyInput(drafts=(X, 2), step_idx=0, max_dec_len=100, eos=EOS)
    assert verify(inp, row).ambiguous is False and asked == [0]  # each row judged once
    asked.clear()
    res = verify(VerifyInput(drafts=(1, 2), step_idx=0, max_dec_len=100, eos=EOS), row)
    assert res.tokens == (1, 2, 3) and res.ambiguous is True
    # An override never consults the rows it accepts.
    asked.clear()
    res = verify(VerifyInput(drafts=(X, X), step_idx=0, max_dec_len=100, eos=EOS, override=2), row)
    assert asked == [2] and res.ambiguous is False


def test_topp_accept_and_token_ambiguity_are_separate() -> None:
    # Accepting through row 0 uses only its candidate length; the draw is never made.
    verdicts = [RowVerdict((1, 2), 1, False, True), RowVerdict((3,), 3)]
    res = verify(VerifyInput(drafts=(2,), step_idx=0, max_dec_len=100, eos=EOS), lambda i: verdicts[i])
    assert res.tokens == (2, 3) and res.ambiguous is False
    res = verify(VerifyInput(drafts=(X,), step_idx=0, max_dec_len=100, eos=EOS), lambda i: verdicts[i])
    assert res.tokens == (1,) and res.ambiguous is True


def test_naive_step() -> None:
    res = naive_step(3, step_idx=0, max_dec_len=10, eos=EOS)
    assert (res.tokens, res.step_idx, res.stopped) == ((3,), 1, False)
    assert naive_step(6, 0, 10, EOS).stopped is True
    res = naive_step(3, step_idx=9, max_dec_len=10, eos=EOS)
    assert (res.tokens, res.stopped) == ((7,), True)
    assert naive_step(3, 0, 10, EOS, ambiguous=True).ambiguous is True


def test_judge_row_rejects_unknown_strategy() -> None:
    with pytest.raises(ValueError):
        judge_row(VerifyRule("bogus", 3), peaked(1), 1.0, 1.0, 0, 0)


def test_topp_unsure_tokens_taint_only_their_own_decision() -> None:
    # Row 0 accepts (1, 2); whether 3 is a candidate is unsure.
    verdicts = [RowVerdict((1, 2), 1, unsure=(3,)), RowVerdict((4,), 4)]
    inp = lambda d: VerifyInput(drafts=(d,), step_idx=0, max_dec_len=100, eos=EOS)  # noqa: E731
    assert verify(inp(2), lambda i: verdicts[i]).ambiguous is False
    assert verify(inp(X), lambda i: verdicts[i]).ambiguous is False
    res = verify(inp(3), lambda i: verdicts[i])
    assert res.tokens == (1,) and res.ambiguous is True
