"""The draft proposal: the argmax of the draft's scores (ties to the lowest id), its margin and runner-up."""

from __future__ import annotations


def _lowest_at(xp, scores, best, ids):
    """Per row, the lowest id whose score equals the row's ``best`` ([rows, 1]); the width where none does."""
    return xp.min(xp.where(xp.eq(scores, best), ids, int(scores.shape[-1])), -1)


def argmax_lowest(xp, logits):
    """Index of the row maximum; ties go to the lowest index."""
    ids = xp.broadcast_to(xp.arange(int(logits.shape[-1])), tuple(logits.shape))
    return _lowest_at(xp, logits, xp.max(logits, -1, keepdims=True), ids)


def propose(xp, scores, active, scale: float = 1.0):
    """``(proposals, margins, runners_up)`` per row of ``scores`` [G, V]: argmax, its margin / ``scale``
    and the second-best id; -1, 0.0 and -1 where ``active`` is False.

    The margin is the best score minus the second best, the maximum over the other ids (float64,
    0.0 on a tie); the runner-up is the lowest id among equal second bests. Both argmaxes run on
    one float64 copy of ``scores``: exact (int64 logits are small integers, float32 and bfloat16
    widen exactly), so the proposal is the argmax of ``scores`` themselves.
    """
    s = xp.astype(scores, xp.float64)
    ids = xp.broadcast_to(xp.arange(int(s.shape[-1])), tuple(s.shape))
    best = xp.max(s, -1, keepdims=True)
    proposals = _lowest_at(xp, s, best, ids)
    others = xp.where(xp.eq(ids, xp.unsqueeze(proposals, 1)), float("-inf"), s)
    second_best = xp.max(others, -1, keepdims=True)
    second = _lowest_at(xp, others, second_best, ids)
    margins = xp.reshape(best - second_best, (-1,))
    if scale != 1.0:
        margins = margins / scale
    return xp.where(active, proposals, -1), xp.where(active, margins, 0.0), xp.where(active, second, -1)
