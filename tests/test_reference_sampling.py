"""reference.sampling: hand-computed tables for every rule of README §4."""

from __future__ import annotations

import math

import numpy as np
import pytest

from graphcheck.reference.rng import uniform, uniform_open0
from graphcheck.reference.sampling import (
    Candidates,
    candidates,
    greedy,
    probabilities,
    rank_order,
    sample,
    sample_u,
    topp_sample,
    topp_sample_u,
)

# Three tokens, ranked 1 > 2 > 0. With temperature 1, z = logits / 8 = [0, 2, 1].
ROW = np.array([0, 16, 8], dtype=np.int64)
_E = [1.0, math.e**2, math.e]
P = [x / sum(_E) for x in _E]  # p[0] ~ 0.0900, p[1] ~ 0.6652, p[2] ~ 0.2447
C0 = P[1]  # cumulative after the top token
C1 = P[1] + P[2]


def test_probabilities_by_hand() -> None:
    assert np.allclose(probabilities(ROW, 1.0), P, rtol=0, atol=1e-15)
    # Temperature 2 halves z: [0, 1, 0.5].
    e = [1.0, math.e, math.exp(0.5)]
    assert np.allclose(probabilities(ROW, 2.0), [x / sum(e) for x in e], rtol=0, atol=1e-15)


def test_rank_order_ties_go_to_lower_id() -> None:
    assert list(rank_order(np.array([5, 9, 9, 1, 9]))) == [1, 2, 4, 0, 3]


def test_greedy_ties_lowest_id() -> None:
    assert greedy(np.array([5, 9, 9, 1])) == (1, False)
    assert greedy(np.array([-3, -3, -3])) == (0, False)
    assert greedy(ROW) == (1, False)


@pytest.mark.parametrize(
    "u,want", [(0.0, 1), (0.5, 1), (C0 - 1e-6, 1), (C0 + 1e-6, 2), (0.8, 2), (0.95, 0), (0.999999, 0)]
)
def test_sample_full_distribution_buckets(u: float, want: int) -> None:
    assert sample_u(ROW, 1.0, 1.0, 0, u) == (want, False)


@pytest.mark.parametrize("u,want", [(0.5, 1), (0.70, 1), (0.75, 2), (0.99, 2), (0.999999, 2)])
def test_sample_top_p_cuts_the_tail(u: float, want: int) -> None:
    # top_p 0.8: c = [0.665, 0.910, 1.0] -> m = 2, r = u * 0.910; token 0 is never drawn.
    assert sample_u(ROW, 1.0, 0.8, 0, u) == (want, False)


@pytest.mark.parametrize("u,want", [(0.5, 1), (0.73, 1), (0.74, 2), (0.99, 2)])
def test_sample_top_k_renormalises(u: float, want: int) -> None:
    # top_k 2: q = [e/(e+1), 1/(e+1)] = [0.7311, 0.2689]; token 0 is cut.
    assert sample_u(ROW, 1.0, 1.0, 2, u) == (want, False)


def test_sample_renormalises_before_the_top_p_cut() -> None:
    # top_k 2, top_p 0.7: renormalised c[0] = 0.731 >= 0.7, so only the top token is kept
    # (un-normalised, c[0] = 0.665 would keep two).
    for u in (0.1, 0.9, 0.999):
        assert sample_u(ROW, 1.0, 0.7, 2, u) == (1, False)


def test_sample_walk_is_strict() -> None:
    # An exact two-way tie: c = [0.5, 1.0] exactly; r = 0.5 is not < c[0], so rank 1 wins.
    tie = np.array([3, 3], dtype=np.int64)
    assert sample_u(tie, 1.0, 1.0, 0, 0.5) == (1, True)
    assert sample_u(tie, 1.0, 1.0, 0, 0.25) == (0, False)


def test_sample_top_k_one_is_argmax() -> None:
    rng = np.random.default_rng(1)
    for _ in range(50):
        row = rng.integers(-40, 40, size=16)
        want = int(np.argmax(row))
        for seed in range(5):
            assert sample(row, 1.5, 1.0, 1, seed)[0] == want


def test_sample_tiny_top_p_is_argmax() -> None:
    rng = np.random.default_rng(2)
    for _ in range(50):
        row = rng.integers(-40, 40, size=16)
        want = int(np.argmax(row))
        for seed in range(5):
            assert sample(row, 3.0, 1e-6, 0, seed)[0] == want


def test_sample_uses_uniform_of_row_seed() -> None:
    for seed in (0, 1, 99, 2**62):
        assert sample(ROW, 1.0, 0.8, 0, seed) == sample_u(ROW, 1.0, 0.8, 0, uniform(seed))


def test_sample_ambiguous_when_r_is_near_a_boundary() -> None:
    c_last = probabilities(ROW, 1.0)[[1, 2, 0]].cumsum()[-1]
    near = (C0 - 5e-10) / c_last
    assert sample_u(ROW, 1.0, 1.0, 0, near) == (1, True)
    far = (C0 - 1e-6) / c_last
    assert sample_u(ROW, 1.0, 1.0, 0, far) == (1, False)
    # Just above the boundary: token 2, and the evaluated r-vs-c[0] comparison is close.
    assert sample_u(ROW, 1.0, 1.0, 0, (C0 + 5e-10) / c_last) == (2, True)


def test_sample_ambiguous_when_cumsum_is_near_top_p_and_it_matters() -> None:
    # c[0] within 1e-12 of top_p: keeping one token or two is a toss-up. With u = 0.9
    # the two cuts draw different tokens (1 vs 2), so the row is ambiguous.
    assert sample_u(ROW, 1.0, C0 + 1e-12, 0, 0.9) == (2, True)
    assert sample_u(ROW, 1.0, C0 - 1e-12, 0, 0.9) == (1, True)
    assert sample_u(ROW, 1.0, C0 + 1e-6, 0, 0.9) == (2, False)
    # With u = 0.1 both cuts draw the top token: the near tie does not matter.
    assert sample_u(ROW, 1.0, C0 + 1e-12, 0, 0.1) == (1, False)


def test_sample_low_temperature_top_p_one_is_clear_cut() -> None:
    # Cumulative sums reach 1.0 within 1e-9 after the first token, but every cut
    # draws the top token, so nothing is ambiguous.
    row = np.array([40, 16, 8, 0], dtype=np.int64)
    for u in (0.0, 0.3, 0.99):
        assert sample_u(row, 0.05, 1.0, 0, u) == (0, False)


def test_sample_top_p_one_is_not_ambiguous_by_itself() -> None:
    # c[K-1] ~ 1.0 == top_p, but that comparison cannot change the kept set.
    rng = np.random.default_rng(3)
    for _ in range(20):
        row = rng.integers(-40, 40, size=32)
        for seed in range(10):
            assert sample(row, 1.0, 1.0, 0, seed)[1] is False


def test_candidates_len_rules() -> None:
    c2 = candidates(ROW, 1.0, 0.5, 2)
    assert c2.ids == (1, 2) and np.allclose(c2.probs, [P[1], P[2]], rtol=0, atol=1e-15)
    assert c2.length == 1 and c2.accepted == (1,)
    assert candidates(ROW, 1.0, 0.8, 2).length == 2  # reached at i = 1
    assert candidates(ROW, 1.0, 0.95, 2).length == 0  # top_p < 1 never reached -> 0
    assert candidates(ROW, 1.0, 1.0, 2).length == 2  # top_p == 1 never reached -> C
    assert candidates(ROW, 1.0, 0.95, 3).length == 3
    assert candidates(ROW, 1.0, 0.95, 1).length == 0


def test_candidates_ambiguity_names_the_unsure_tokens() -> None:
    near = candidates(ROW, 1.0, C0 + 1e-12, 2)  # cum[0] just below top_p: len 2, or 1
    assert (near.length, near.alt_lengths, near.ambiguous, near.unsure) == (2, (1,), True, (2,))
    assert candidates(ROW, 1.0, C0 + 1e-6, 2).ambiguous is False
    # cum[1] just above top_p < 1: len 2, or (never reached) 0 -- both tokens unsure.
    edge = candidates(ROW, 1.0, C1 - 1e-12, 2)
    assert (edge.length, edge.alt_lengths, edge.unsure) == (2, (0,), (1, 2))
    # top_p == 1 with all mass inside C: every possible length is C.
    assert candidates(ROW, 1.0, 1.0, 3).ambiguous is False
    # Low temperature, top_p == 1: cumsum hits 1.0 (+- ulps) at once; len 1 or C.
    low = candidates(np.array([40, 16, 8, 0]), 0.05, 1.0, 3)
    assert (low.length, low.alt_lengths, low.unsure) == (1, (3,), (1, 2))


def test_topp_sample_walk() -> None:
    cands = candidates(ROW, 1.0, 0.8, 2)  # len 2
    assert topp_sample_u(cands, 0.8, 0.5) == (1, False)  # r = 0.4 <= 0.665
    assert topp_sample_u(cands, 0.8, 1.0) == (2, False)  # r = 0.8 in (0.665, 0.910]
    # r lands exactly on the first cumsum: r <= cumsum picks it (and it is ambiguous).
    assert topp_sample_u(cands, 1.0, cands.probs[0]) == (1, True)


def test_topp_sample_len_zero_and_no_hit_give_first_candidate() -> None:
    zero = Candidates(ids=(7, 3, 5), probs=(0.5, 0.3, 0.2), length=0)
    assert topp_sample_u(zero, 0.9, 0.2) == (7, False)
    one = Candidates(ids=(7, 3, 5), probs=(0.5, 0.3, 0.2), length=1)
    assert topp_sample_u(one, 1.0, 0.9) == (7, False)  # r = 0.9 > 0.5: no hit
    assert topp_sample_u(one, 1.0, 0.3) == (7, False)
    two = Candidates(ids=(7, 3, 5), probs=(0.5, 0.3, 0.2), length=2)
    assert topp_sample_u(two, 1.0, 0.7) == (3, False)
    assert topp_sample_u(two, 1.0, 0.9) == (7, False)  # beyond len: falls back to ids[0]


def test_topp_sample_ambiguity_flags() -> None:
    cands = Candidates(ids=(7, 3, 5), probs=(0.5, 0.3, 0.2), length=3)
    assert topp_sample_u(cands, 1.0, 0.5 + 5e-10) == (3, True)
    assert topp_sample_u(cands, 1.0, 0.5 + 1e-6) == (3, False)
    # Another possible length (1) matters only if it changes the draw.
    maybe = Candidates(ids=(7, 3), probs=(0.5, 0.3), length=2, alt_lengths=(1,))
    assert topp_sample_u(maybe, 1.0, 0.1) == (7, False)  # 7 under either length
    assert topp_sample_u(maybe, 1.0, 0.7) == (3, True)  # len 1 would fall back to 7


def test_topp_sample_uses_uniform_open0_of_row_seed() -> None:
    cands = candidates(ROW, 1.0, 0.8, 2)
    for seed in (0, 5, 2**61):
        assert topp_sample(cands, 0.8, seed) == topp_sample_u(cands, 0.8, uniform_open0(seed))
