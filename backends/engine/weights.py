"""Model weights as device tensors: the integer model's (names as reference/README.md §1), or the
float model's (``float_weights``), picked by ``EngineConfig.model``.

``weight_layout(config)`` is their size table: every weight tensor's shape and dtype. A float
model's comes from its draw plan, which draws exactly those; the integer model's arrays come from
the caller (the reference's), and loading checks each against the table before uploading it.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from graphcheck.backends.engine.float_weights import FLOAT_MODELS, FloatWeights, draw_shapes
from graphcheck.backends.engine.layout import ACTIVATION_DTYPES, TensorSpec
from graphcheck.scenario import EngineConfig

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
# Matrices used in matmuls also get an exact float64 copy (integer matmul is float64, ``xp.int_matmul``).
_MATMUL_NAMES = ("lm_head", "draft_hidden")
#: Each layer's q, key and val projections as one float64 ``[H, 3H]`` matrix ``[wq | wk | wv]``
#: (``reference.weights.Weights.qkv``): one matmul projects all three (``forward._layer``).
_FUSED_QKV = {"qkv": ("wq", "wk", "wv"), "draft_qkv": ("draft_wq", "draft_wk", "draft_wv")}
#: Rows of the integer model's position table (reference README §1: position p uses row p mod 32).
POSITION_ROWS = 32


def _integer_shapes(config: EngineConfig) -> dict[str, tuple[int, ...]]:
    """The integer model's arrays (``WEIGHT_NAMES``) and their shapes (reference README §1)."""
    V, H = config.vocab_size, config.hidden_size
    square = (H, H)
    shapes = {"embed": (V, H), "pos": (POSITION_ROWS, H), "lm_head": (H, V), "draft_embed": (V, H)}
    return {name: shapes.get(name, square) for name in WEIGHT_NAMES}


def weight_layout(config: EngineConfig) -> dict[str, TensorSpec]:
    """Every weight tensor of ``config.model`` by name (``named_tensors()``'s names): its shape and dtype.

    ``exact``: the int64 arrays of ``WEIGHT_NAMES``, a float64 copy of each other matmul one
    (``<name>_f64``) and of each layer's fused q/key/val projection (``qkv_f64``,
    ``draft_qkv_f64``, ``[H, 3H]``); a float model: its draw plan (``float_weights``) in the
    model dtype.
    """
    if config.model in FLOAT_MODELS:
        dtype = ACTIVATION_DTYPES[config.model]
        return {name: TensorSpec(shape, dtype) for name, shape in draw_shapes(config).items()}
    shapes = _integer_shapes(config)
    H = config.hidden_size
    layout = {name: TensorSpec(shape, "int64") for name, shape in shapes.items()}
    layout.update({f"{name}_f64": TensorSpec(shapes[name], "float64") for name in _MATMUL_NAMES})
    layout.update({f"{name}_f64": TensorSpec((H, len(parts) * H), "float64") for name, parts in _FUSED_QKV.items()})
    return layout


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
    lm_head_f64: Any = None
    draft_hidden_f64: Any = None
    qkv_f64: Any = None  # [wq | wk | wv], float64
    draft_qkv_f64: Any = None  # [draft_wq | draft_wk | draft_wv], float64

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
        for name, parts in _FUSED_QKV.items():
            values[f"{name}_f64"] = xp.astype(xp.concat([values[p] for p in parts], 1), xp.float64)
        return cls(**values)

    def named_tensors(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def load_weights(xp, config: EngineConfig, source: Any) -> EngineWeights | FloatWeights:
    """The engine's weights for ``config.model``.

    ``exact``: the integer arrays of ``source`` (reference weights, or EngineWeights as they are).
    A float model draws its own from ``config.model_seed`` (``FloatWeights.for_config``):
    ``source`` is used only when it already is FloatWeights.
    """
    if config.model in FLOAT_MODELS:
        return source if isinstance(source, FloatWeights) else FloatWeights.for_config(xp, config)
    if isinstance(source, EngineWeights):
        return source
    weights = EngineWeights.from_arrays(xp, source)
    layout = weight_layout(config)
    for name, tensor in weights.named_tensors().items():
        if tuple(tensor.shape) != layout[name].shape:
            raise ValueError(
                f"weight {name} has shape {tuple(tensor.shape)}, but this config's model needs {layout[name].shape}"
            )
    return weights
