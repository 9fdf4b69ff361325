"""The draft proposal: the argmax of the draft's scores (ties to the lowest id), its margin and runner-up."""

from __future__ import annotations


def argmax_lowest(xp, logits):
    """Index of the row maximum; ties go to the lowest index."""
    width = int(logits.shape[-1])
    best = xp.max(logits, -1, keepdims=True)
    ids = xp.broadcast_to(xp.arange(width), tuple(logits.shape))
    return xp.min(xp.where(xp.eq(logits, best), ids, width), -1)


def runner_up(xp, scores, best_ids):
    """Per row: ``(best score minus the second best, the second best's id)``; float64 margin
    (0.0 on a tie), lowest id among equal runners-up.

    ``best_ids``: each row's argmax; the second best is the maximum over the other ids.
    """
    width = int(scores.shape[-1])
    s = xp.astype(scores, xp.float64)
    ids = xp.broadcast_to(xp.arange(width), tuple(s.shape))
    best = xp.max(s, -1)
    others = xp.where(xp.eq(ids, xp.unsqueeze(best_ids, 1)), float("-inf"), s)
    return best - xp.max(others, -1), argmax_lowest(xp, others)


def propose(xp, scores, active, scale: float = 1.0):
    """``(proposals, margins, runners_up)`` per row of ``scores`` [G, V]: argmax, its margin / ``scale``
    and the second-best id; -1, 0.0 and -1 where ``active`` is False."""
    proposals = argmax_lowest(xp, scores)
    margins, second = runner_up(xp, scores, proposals)
    if scale != 1.0:
        margins = margins / scale
    return xp.where(active, proposals, -1), xp.where(active, margins, 0.0), xp.where(active, second, -1)
