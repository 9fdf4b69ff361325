"""Model weights as device tensors (names as reference/README.md §1)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np

WEIGHT_NAMES = (
    "embed",
    "pos",
    "wq",
    "wk",
    "wv",
    "lm_head",
    "draft_embed",
    "draft_hidden",
    "draft_wq",
    "draft_wk",
    "draft_wv",
)
# Matrices used in matmuls also get an exact float64 copy (integer matmul is float64 + round).
_MATMUL_NAMES = ("wq", "wk", "wv", "lm_head", "draft_hidden", "draft_wq", "draft_wk", "draft_wv")


@dataclass
class EngineWeights:
    embed: Any
    pos: Any
    wq: Any
    wk: Any
    wv: Any
    lm_head: Any
    draft_embed: Any
    draft_hidden: Any
    draft_wq: Any
    draft_wk: Any
    draft_wv: Any
    wq_f64: Any = None
    wk_f64: Any = None
    wv_f64: Any = None
    lm_head_f64: Any = None
    draft_hidden_f64: Any = None
    draft_wq_f64: Any = None
    draft_wk_f64: Any = None
    draft_wv_f64: Any = None

    @classmethod
    def from_arrays(cls, xp, source: Any) -> EngineWeights:
        """Build from any object with the numpy arrays named in WEIGHT_NAMES (or an EngineWeights)."""
        values: dict[str, Any] = {}
        for name in WEIGHT_NAMES:
            array = getattr(source, name) if not isinstance(source, dict) else source[name]
            if not isinstance(array, np.ndarray):  # already a device tensor
                array = xp.to_host(array)
            values[name] = xp.from_numpy(np.asarray(array, dtype=np.int64))
        for name in _MATMUL_NAMES:
            values[f"{name}_f64"] = xp.astype(values[name], xp.float64)
        return cls(**values)

    def named_tensors(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}
