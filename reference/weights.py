"""The tiny integer model's weights (README §1).

Every backend loads these same arrays, so the draw order and ranges below are
part of the contract: changing either changes every token of every run.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import cached_property

import numpy as np

from graphcheck.scenario import EngineConfig

#: Rows of the position table; absolute position i uses row i % NPOS.
NPOS = 32


@dataclass(frozen=True)
class Weights:
    """All model arrays, int64 and read-only (shapes in README §1)."""

    embed: np.ndarray
    pos: np.ndarray
    wq: np.ndarray
    wk: np.ndarray
    wv: np.ndarray
    lm_head: np.ndarray
    draft_embed: np.ndarray
    draft_hidden: np.ndarray
    draft_wq: np.ndarray
    draft_wk: np.ndarray
    draft_wv: np.ndarray

    @cached_property
    def lm_head_f64(self) -> np.ndarray:
        """lm_head as float64, for exact BLAS logits (see reference.model.logits_of)."""
        return self.lm_head.astype(np.float64)

    @cached_property
    def qkv(self) -> np.ndarray:
        """[wq | wk | wv] side by side: one matmul projects q, key and val (reference.model)."""
        return np.concatenate([self.wq, self.wk, self.wv], axis=1)

    @cached_property
    def draft_qkv(self) -> np.ndarray:
        """[draft_wq | draft_wk | draft_wv] side by side, as ``qkv``."""
        return np.concatenate([self.draft_wq, self.draft_wk, self.draft_wv], axis=1)

    def arrays(self) -> dict[str, np.ndarray]:
        """Name -> array, in draw order (handy for backends that upload them)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


def _draw_plan(vocab: int, hidden: int) -> list[tuple[str, tuple[int, int], int, int]]:
    """(name, shape, lo, hi) in the order the generator is consumed."""
    vh, hh = (vocab, hidden), (hidden, hidden)
    return [
        ("embed", vh, -8, 7),
        ("pos", (NPOS, hidden), -8, 7),
        ("wq", hh, -2, 2),
        ("wk", hh, -2, 2),
        ("wv", hh, -2, 2),
        ("lm_head", (hidden, vocab), -1, 1),
        ("draft_embed", vh, -8, 7),
        ("draft_hidden", hh, -1, 1),
        ("draft_wq", hh, -2, 2),
        ("draft_wk", hh, -2, 2),
        ("draft_wv", hh, -2, 2),
    ]


def make_weights(config: EngineConfig) -> Weights:
    """Draw the weights from PCG64(model_seed), inclusive ranges, in README order."""
    gen = np.random.Generator(np.random.PCG64(config.model_seed))
    arrays: dict[str, np.ndarray] = {}
    for name, shape, lo, hi in _draw_plan(config.vocab_size, config.hidden_size):
        arr = gen.integers(lo, hi + 1, size=shape, dtype=np.int64)
        arr.flags.writeable = False
        arrays[name] = arr
    return Weights(**arrays)


__all__ = ["NPOS", "Weights", "make_weights"]
