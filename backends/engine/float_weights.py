"""The float model's weights (``EngineConfig.model`` ``float32`` / ``bfloat16``): seeded, in the model dtype.

Drawn on the host from ``PCG64(config.model_seed)`` in ``_draw_plan`` order:
matrices ``normal(0, gain / sqrt(fan_in))``, embeddings and the position table
``normal(0, 1)``, RMSNorm gains ones. Values are rounded to bfloat16 on the
host (round to nearest even) before upload for a bfloat16 model, so every
framework holds the same bits whatever its own cast rounds like.

Shapes (``V`` vocab, ``H`` hidden, ``F = 2H`` MLP width, ``L`` max_model_len):
``embed`` / ``draft_embed`` [V, H]; ``pos`` [L, H], a learned absolute
position table shared by both models (position p uses row ``p mod L``); per
decoder block (target: no prefix, draft: ``draft_``) ``attn_norm`` [H], ``wq``
``wk`` ``wv`` ``wo`` [H, H], ``mlp_norm`` [H], ``w_up`` [H, F], ``w_down`` [F,
H]; ``final_norm`` / ``draft_final_norm`` [H]; the shared ``lm_head`` [H, V];
the MTP combiner ``draft_embed_norm`` / ``draft_hidden_norm`` [H] and
``draft_proj`` [2H, H].
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from graphcheck.scenario import EngineConfig

FLOAT_MODELS = ("float32", "bfloat16")
#: MLP width in units of the hidden size.
MLP_RATIO = 2
#: Standard deviation of a projection is ``_GAIN / sqrt(fan_in)``; the lm_head's ``_HEAD_GAIN / sqrt(H)``
#: (its input is RMS-normalised, so logits have about that spread: peaked, rarely tied).
_GAIN = 1.0
_HEAD_GAIN = 2.0

_BLOCK = ("attn_norm", "wq", "wk", "wv", "wo", "mlp_norm", "w_up", "w_down")


@dataclass(frozen=True)
class Block:
    """One decoder block's weights (a view of ``FloatWeights`` fields; holds no tensor of its own)."""

    attn_norm: Any
    wq: Any
    wk: Any
    wv: Any
    wo: Any
    mlp_norm: Any
    w_up: Any
    w_down: Any


@dataclass
class FloatWeights:
    embed: Any
    pos: Any
    attn_norm: Any
    wq: Any
    wk: Any
    wv: Any
    wo: Any
    mlp_norm: Any
    w_up: Any
    w_down: Any
    final_norm: Any
    lm_head: Any
    draft_embed: Any
    draft_embed_norm: Any
    draft_hidden_norm: Any
    draft_proj: Any
    draft_attn_norm: Any
    draft_wq: Any
    draft_wk: Any
    draft_wv: Any
    draft_wo: Any
    draft_mlp_norm: Any
    draft_w_up: Any
    draft_w_down: Any
    draft_final_norm: Any

    @classmethod
    def for_config(cls, xp, config: EngineConfig) -> FloatWeights:
        """The weights of ``config.model`` (float32 or bfloat16) on ``xp``'s device."""
        dtype = model_dtype(xp, config.model)
        arrays = make_float_arrays(config)
        return cls(**{name: xp.astype(xp.from_numpy(a), dtype) for name, a in arrays.items()})

    @property
    def dtype(self) -> Any:
        return self.embed.dtype

    def target_block(self) -> Block:
        return Block(*(getattr(self, n) for n in _BLOCK))

    def draft_block(self) -> Block:
        return Block(*(getattr(self, f"draft_{n}") for n in _BLOCK))

    def named_tensors(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def model_dtype(xp, model: str) -> Any:
    """The facade's dtype handle of a float model name."""
    if model not in FLOAT_MODELS:
        raise ValueError(f"not a float model: {model!r} (have: {', '.join(FLOAT_MODELS)})")
    return xp.float32 if model == "float32" else xp.bfloat16


def _draw_plan(config: EngineConfig) -> list[tuple[str, tuple[int, ...], float | None]]:
    """(name, shape, standard deviation; None for a norm gain of ones) in the order the generator is consumed."""
    V, H, L = config.vocab_size, config.hidden_size, config.max_model_len
    F = MLP_RATIO * H

    def block(prefix: str) -> list[tuple[str, tuple[int, ...], float | None]]:
        proj = _GAIN / np.sqrt(H)
        return [
            (f"{prefix}attn_norm", (H,), None),
            (f"{prefix}wq", (H, H), proj),
            (f"{prefix}wk", (H, H), proj),
            (f"{prefix}wv", (H, H), proj),
            (f"{prefix}wo", (H, H), proj),
            (f"{prefix}mlp_norm", (H,), None),
            (f"{prefix}w_up", (H, F), proj),
            (f"{prefix}w_down", (F, H), _GAIN / np.sqrt(F)),
        ]

    return [
        ("embed", (V, H), 1.0),
        ("pos", (L, H), 1.0),
        *block(""),
        ("final_norm", (H,), None),
        ("lm_head", (H, V), _HEAD_GAIN / np.sqrt(H)),
        ("draft_embed", (V, H), 1.0),
        ("draft_embed_norm", (H,), None),
        ("draft_hidden_norm", (H,), None),
        ("draft_proj", (2 * H, H), _GAIN / np.sqrt(2 * H)),
        *block("draft_"),
        ("draft_final_norm", (H,), None),
    ]


def round_to_bfloat16(a: np.ndarray) -> np.ndarray:
    """float32 values rounded to the nearest bfloat16 (ties to even), still as float32 (finite inputs)."""
    bits = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    rounded = (bits + (np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1)))) & np.uint32(0xFFFF0000)
    return rounded.view(np.float32)


def make_float_arrays(config: EngineConfig) -> dict[str, np.ndarray]:
    """The host weights of ``config.model``: float32 arrays (bfloat16-exact for a bfloat16 model)."""
    gen = np.random.Generator(np.random.PCG64(config.model_seed))
    arrays: dict[str, np.ndarray] = {}
    for name, shape, std in _draw_plan(config):
        a = np.ones(shape, np.float32) if std is None else (gen.standard_normal(shape) * std).astype(np.float32)
        arrays[name] = round_to_bfloat16(a) if config.model == "bfloat16" else a
    return arrays


def draw_shapes(config: EngineConfig) -> dict[str, tuple[int, ...]]:
    """Every float weight's shape, by name, in draw order (``weights.weight_layout`` in the model dtype)."""
    return {name: shape for name, shape, _ in _draw_plan(config)}


__all__ = [
    "FLOAT_MODELS",
    "Block",
    "FloatWeights",
    "draw_shapes",
    "make_float_arrays",
    "model_dtype",
    "round_to_bfloat16",
]
