"""Turning one row of integer logits into a token (README §4).

Rank order always comes from the integer logits (exact, identical in every
library); only the probabilities are floats. Every function also says whether
its result hinged on a float comparison closer than AMBIGUITY_EPS to its
threshold: such a row may legitimately differ in another float library, so a
mismatch there is reported apart instead of failing a run.

A near-threshold comparison only counts when flipping it could change the
result. For the top_p cut this is checked by redoing the cut with the threshold
moved by +-AMBIGUITY_EPS (every cut another library could make lies in that
window); for the draw, r must not sit near a boundary it is compared with.
Without this, every top_p == 1.0 row would be flagged (its last cumulative sum
is 1.0 +- 1 ulp), and so would most low-temperature rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from graphcheck.reference.rng import uniform, uniform_open0
from graphcheck.step_result import AMBIGUITY_EPS as EPS


def as_scores(logits: np.ndarray) -> np.ndarray:
    """Sampling scores in float64: integer logits of the exact model are divided by 8 (exactly);
    float scores (an engine's own model, graphcheck.model_report) are taken as they are."""
    arr = np.asarray(logits)
    if np.issubdtype(arr.dtype, np.integer):
        return arr.astype(np.int64) / 8.0
    return arr.astype(np.float64)


def rank_order(logits: np.ndarray) -> np.ndarray:
    """Token ids by descending logit (or score), ties by lower id (a stable sort)."""
    arr = np.asarray(logits)
    if np.issubdtype(arr.dtype, np.integer):
        return np.argsort(-arr.astype(np.int64), kind="stable")
    return np.argsort(-arr.astype(np.float64), kind="stable")


def probabilities(logits: np.ndarray, temperature: float) -> np.ndarray:
    """softmax(scores / temperature) in float64, scores = ``as_scores(logits)`` (logits / 8 is exact)."""
    z = as_scores(logits) / float(temperature)
    e = np.exp(z - z.max())
    return e / e.sum()


def _near(values: np.ndarray, threshold: float, eps: float = EPS) -> bool:
    """True when any compared float (a float64 array) sits within ``eps`` of its threshold."""
    return bool((np.abs(values - threshold) < eps).any())


def _first_at_least(c: np.ndarray, threshold: float) -> int | None:
    hits = np.nonzero(c >= threshold)[0]
    return int(hits[0]) if hits.size else None


def greedy(logits: np.ndarray) -> tuple[int, bool]:
    """argmax, lowest id on ties; never ambiguous (both sides compare the same numbers)."""
    return int(np.argmax(np.asarray(logits))), False


# -- sample (TARGET_MATCH, NAIVE) -----------------------------------------


def _kept_prefix(c: np.ndarray, threshold: float) -> int:
    """m: the shortest prefix with c[m-1] >= threshold, K if none (c[K-1] needs no test)."""
    idx = _first_at_least(c[:-1], threshold)
    return len(c) if idx is None else idx + 1


def _walk(c: np.ndarray, m: int, u: float, eps: float = EPS) -> tuple[int, bool]:
    """Index of the first kept i with r < c[i], r = u c[m-1]; and whether r sat near a tested c[i].

    r vs c[m-1] is no decision (failing it falls back to the same last kept token).
    """
    r = u * c[m - 1]
    hits = np.nonzero(r < c[:m])[0]
    chosen = int(hits[0]) if hits.size else m - 1
    return chosen, _near(c[: min(chosen + 1, m - 1)], r, eps)


def sample_u(
    logits: np.ndarray, temperature: float, top_p: float, top_k: int, u: float, *, eps: float = EPS
) -> tuple[int, bool]:
    """sample() with the uniform number u given explicitly (for hand-made tests).

    The chosen index never decreases as m grows, and m never decreases as the
    threshold grows, so the cuts at top_p +- EPS bound every cut in the window.
    The walk depends on the threshold only through m, so it runs once per distinct cut.
    """
    order = rank_order(logits)
    k = len(order) if top_k <= 0 else min(top_k, len(order))
    kept = order[:k]
    p = probabilities(logits, temperature)[kept]
    c = np.cumsum(p / p.sum())
    cuts = [_kept_prefix(c, th) for th in (top_p, top_p - eps, top_p + eps)]
    walks = {m: _walk(c, m, u, eps) for m in set(cuts)}
    picks = [walks[m] for m in cuts]
    chosen = picks[0][0]
    ambiguous = picks[1][0] != picks[2][0] or any(amb for _, amb in picks)
    return int(kept[chosen]), ambiguous


def sample(
    logits: np.ndarray, temperature: float, top_p: float, top_k: int, row_seed: int, *, eps: float = EPS
) -> tuple[int, bool]:
    """top_k, then top_p, then one draw from uniform(row_seed) (TARGET_MATCH, NAIVE)."""
    return sample_u(logits, temperature, top_p, top_k, uniform(row_seed), eps=eps)


# -- candidates and topp_sample (TOPP) --------------------------------------


@dataclass(frozen=True)
class Candidates:
    """The first C tokens in rank order with their (not renormalised) probabilities.

    ``length`` is how many of them the TOPP verify accepts. ``alt_lengths`` are
    the other lengths a different float library could compute (cumulative sums
    within EPS of top_p); empty when the length is clear-cut.
    """

    ids: tuple[int, ...]
    probs: tuple[float, ...]
    length: int
    alt_lengths: tuple[int, ...] = ()

    @property
    def accepted(self) -> tuple[int, ...]:
        return self.ids[: self.length]

    @property
    def ambiguous(self) -> bool:
        return bool(self.alt_lengths)

    @property
    def lengths(self) -> tuple[int, ...]:
        return (self.length, *self.alt_lengths)

    @property
    def unsure(self) -> tuple[int, ...]:
        """Tokens accepted under some possible length but not under all."""
        return self.ids[min(self.lengths) : max(self.lengths)]


def _cand_len(cum: np.ndarray, top_p: float, threshold: float) -> int:
    idx = _first_at_least(cum, threshold)
    if idx is not None:
        return idx + 1
    return len(cum) if top_p == 1.0 else 0  # top_p == 1.0 tests the parameter, not a sum


def candidates(logits: np.ndarray, temperature: float, top_p: float, max_len: int, *, eps: float = EPS) -> Candidates:
    """TOPP candidate set: len = first i+1 with cumsum >= top_p, else C (top_p == 1) or 0."""
    order = rank_order(logits)[:max_len]
    p = probabilities(logits, temperature)[order]
    cum = np.cumsum(p)
    length = _cand_len(cum, top_p, top_p)
    # The length only changes where the threshold crosses a cumsum: try each one in the window.
    window = [top_p - eps, top_p + eps, *cum[np.abs(cum - top_p) < eps]]
    alts = sorted({_cand_len(cum, top_p, th) for th in window} - {length})
    return Candidates(tuple(int(t) for t in order), tuple(float(x) for x in p), length, tuple(alts))


def _topp_walk(cands: Candidates, length: int, r: float, eps: float = EPS) -> tuple[int, bool]:
    cum = np.cumsum(np.asarray(cands.probs[:length], dtype=np.float64))
    hits = np.nonzero(r <= cum)[0]
    if hits.size:
        return cands.ids[int(hits[0])], _near(cum[: int(hits[0]) + 1], r, eps)
    return cands.ids[0], _near(cum, r, eps)  # no hit (or len 0): the first candidate


def topp_sample_u(cands: Candidates, top_p: float, u: float, *, eps: float = EPS) -> tuple[int, bool]:
    """topp_sample() with u in (0, 1] given explicitly; ambiguous also when another
    possible candidate length would draw a different token."""
    picks = [_topp_walk(cands, n, u * top_p, eps) for n in cands.lengths]
    token = picks[0][0]
    return token, any(amb or tok != token for tok, amb in picks)


def topp_sample(cands: Candidates, top_p: float, row_seed: int, *, eps: float = EPS) -> tuple[int, bool]:
    """r = uniform_open0(row_seed) * top_p; first of the first len candidates with r <= cumsum."""
    return topp_sample_u(cands, top_p, uniform_open0(row_seed), eps=eps)


__all__ = [
    "Candidates",
    "as_scores",
    "candidates",
    "greedy",
    "probabilities",
    "rank_order",
    "sample",
    "sample_u",
    "topp_sample",
    "topp_sample_u",
]
