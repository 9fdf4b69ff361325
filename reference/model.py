"""Target and draft layers of the integer model, one request at a time (README §1).

A forward call processes a run of consecutive positions of ONE request: it
writes their key/value entries into that request's cache and returns their
hidden states. Attention at position i reads cache rows 0..i only, so rows
beyond i (stale speculative entries, or later tokens of the same call) are
masked out. All arithmetic is int64 and exact; the largest intermediate is
about 8*8*H*positions, far from overflow.
"""

from __future__ import annotations

import numpy as np

from graphcheck.reference.weights import NPOS, Weights


def wrap(a: np.ndarray | int) -> np.ndarray | int:
    """Map any integer into -8..7 (floor mod), the model's only non-linearity.

    ``& 15`` is the floor mod 16 of any integer (two's complement, NumPy's int64 and Python's
    ints alike), at a fraction of ``% 16``'s cost on arrays.
    """
    return ((a + 8) & 15) - 8


class Cache:
    """Per-request attention cache: key, value (and hidden) rows per position.

    Rows are preallocated and grown by doubling, so appending a step costs
    O(new positions * H) and nothing is ever copied per step.
    """

    def __init__(self, hidden: int, capacity: int = 64):
        self.keys = np.zeros((capacity, hidden), dtype=np.int64)
        self.vals = np.zeros((capacity, hidden), dtype=np.int64)
        self.hidden = np.zeros((capacity, hidden), dtype=np.int64)

    def ensure(self, rows: int) -> None:
        """Make room for positions 0..rows-1."""
        cap = self.keys.shape[0]
        if rows <= cap:
            return
        new_cap = max(rows, 2 * cap)
        for name in ("keys", "vals", "hidden"):
            old = getattr(self, name)
            grown = np.zeros((new_cap, old.shape[1]), dtype=np.int64)
            grown[:cap] = old
            setattr(self, name, grown)


def _attend(cache: Cache, x: np.ndarray, wqkv: np.ndarray, start: int) -> np.ndarray:
    """Write K/V for positions start..start+n-1 and return wrap(x + attention).

    ``wqkv`` is [wq | wk | wv]: the three projections are column blocks of one matmul.
    """
    n, h = x.shape
    end = start + n
    cache.ensure(end)
    qkv = wrap(x @ wqkv)
    q = qkv[:, :h]
    cache.keys[start:end] = qkv[:, h : 2 * h]
    cache.vals[start:end] = qkv[:, 2 * h :]
    scores = (q @ cache.keys[:end].T) % 7 - 3
    causal = np.arange(end)[None, :] <= (start + np.arange(n))[:, None]
    attn = (scores * causal) @ cache.vals[:end]
    hid = wrap(x + attn)
    cache.hidden[start:end] = hid
    return hid


def _pos_rows(w: Weights, start: int, n: int) -> np.ndarray:
    return w.pos[np.arange(start, start + n) % NPOS]


def target_forward(w: Weights, cache: Cache, tokens: np.ndarray, start: int) -> np.ndarray:
    """Target hidden states of tokens at positions start.. (also kept in cache.hidden)."""
    tokens = np.asarray(tokens, dtype=np.int64)
    x = wrap(w.embed[tokens] + _pos_rows(w, start, len(tokens)))
    return _attend(cache, x, w.qkv, start)


def draft_forward(w: Weights, cache: Cache, tokens: np.ndarray, prev_hidden: np.ndarray, start: int) -> np.ndarray:
    """Draft hidden states: token t at draft position i paired with hidden g (README §1)."""
    tokens = np.asarray(tokens, dtype=np.int64)
    g = wrap(np.asarray(prev_hidden, dtype=np.int64) @ w.draft_hidden)
    x = wrap(w.draft_embed[tokens] + g + _pos_rows(w, start, len(tokens)))
    return _attend(cache, x, w.draft_qkv, start)


def _exact_lm_head(w: Weights, hidden: np.ndarray) -> np.ndarray:
    """hidden @ lm_head, done in float64 BLAS because integer matmul is slow at large V.

    Exact: |h| <= 8 and lm_head is in -1..1, so every partial sum is an integer of
    magnitude <= 8 H <= 1024, far below 2^53, whatever the summation order.
    """
    return (np.asarray(hidden, dtype=np.float64) @ w.lm_head_f64).astype(np.int64)


def logits_of(w: Weights, hidden: np.ndarray) -> np.ndarray:
    """Integer logits (rows x V) through the shared lm_head."""
    return _exact_lm_head(w, hidden)


def draft_proposal(w: Weights, hd: np.ndarray) -> int:
    """argmax of one draft hidden row's logits; np.argmax keeps the lowest id on ties."""
    return int(np.argmax(_exact_lm_head(w, hd)))


__all__ = ["Cache", "wrap", "target_forward", "draft_forward", "logits_of", "draft_proposal"]
