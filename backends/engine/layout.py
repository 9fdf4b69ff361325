"""Tensor specs: the shape, dtype and fill of a tensor the engine allocates, before it exists.

The engine's size tables are written in these terms: ``buffers.buffer_layout``
(every persistent buffer, from which ``allocate_buffers`` allocates) and
``weights.weight_layout`` (every weight tensor, against which loading checks
what it uploads). The memory estimate (``memory.engine_memory``) sums the same
tables, so the bytes it counts are the bytes the engine allocates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

#: Bytes per element of every dtype the engine's tables name (``xp.<name>`` is the handle).
DTYPE_BYTES = {"bool": 1, "int64": 8, "float64": 8, "float32": 4, "bfloat16": 2}

#: The dtype of the buffers holding model activations (``buffers.ACTIVATION_FIELDS``) and of a
#: float model's weights, by ``EngineConfig.model``: int64 for the integer model.
ACTIVATION_DTYPES = {"exact": "int64", "float32": "float32", "bfloat16": "bfloat16"}


@dataclass(frozen=True)
class TensorSpec:
    """One tensor: ``shape``, ``dtype`` (a key of ``DTYPE_BYTES``) and the value it starts with."""

    shape: tuple[int, ...]
    dtype: str
    fill: int | float | bool = 0

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * DTYPE_BYTES[self.dtype]

    def allocate(self, xp: Any) -> Any:
        """A new tensor of this spec on ``xp``'s device, every element ``fill``."""
        return xp.full(self.shape, self.fill, dtype_handle(xp, self.dtype))


def dtype_handle(xp: Any, name: str) -> Any:
    """The array facade's dtype handle of a ``DTYPE_BYTES`` name."""
    if name not in DTYPE_BYTES:
        raise ValueError(f"unknown dtype {name!r} (have: {', '.join(DTYPE_BYTES)})")
    return getattr(xp, name)


def total_bytes(specs: Any) -> int:
    """Bytes of every spec of ``specs`` (an iterable of TensorSpec, or a mapping to them)."""
    values = specs.values() if hasattr(specs, "values") else specs
    return sum(spec.nbytes for spec in values)


__all__ = ["ACTIVATION_DTYPES", "DTYPE_BYTES", "TensorSpec", "dtype_handle", "total_bytes"]
