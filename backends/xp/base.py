"""The array facade every engine kernel is written against.

Kernels never call a framework directly: they receive an ``ArrayOps`` instance
(``xp``) and use only the operations below, plus basic slicing to *read*
(``x[:n]``, ``x[:, j]``) and ``+ - *`` between tensors or with small Python
numbers, which torch and PaddlePaddle both support with the same meaning.
Partial writes go through :meth:`assign_` / :meth:`masked_assign_`, never through a
slice (a paddle slice need not be a view).

Rules that keep the facade portable (PaddlePaddle traps included):

* Constants that may exceed 2**53 or that feed bitwise ops are made with
  :meth:`full` / :meth:`const_like` (a fill with an exact int64), never with
  ``full_like`` and never mixed as a Python int into ``&`` / ``^``.
* Bitwise ops take tensors on both sides.
* Index ops take int64 index tensors; masks are bool tensors.
* Integer matmuls go through :meth:`int_matmul` (float64 matmul, then a cast to
  int64): exact because every operand in this project is a small integer, and it
  works where int64 matmul does not (CUDA).
* The float model (``float32`` / ``bfloat16``) multiplies through
  :meth:`float_matmul` and does its elementwise math in float32; a framework
  without a bfloat16 kernel for an op on its device upcasts inside the facade
  (paddle on the CPU: matmul, where), so kernels never test for it.
* :meth:`to_host` returns NumPy arrays; a bfloat16 tensor comes back as float32
  (NumPy has no bfloat16), exactly.
* No operation here caches tensors: a kernel may only touch its arguments and
  what it creates itself (the emulated graph runner checks this).
* :meth:`to_host` is the only device-to-host path and announces itself through
  ``graphcheck.capture.kernels.host_sync`` (a capture refuses it).
"""

from __future__ import annotations

import abc
from typing import Any, Sequence

import numpy as np

Tensor = Any
DType = Any


class ArrayOps(abc.ABC):
    """Abstract array facade. ``int64``, ``float64``, ``float32``, ``bfloat16`` and ``bool`` are dtype handles."""

    framework: str
    device: str
    int64: DType
    float64: DType
    float32: DType
    bfloat16: DType
    bool: DType

    # -- creation ------------------------------------------------------
    @abc.abstractmethod
    def zeros(self, shape: Sequence[int], dtype: DType) -> Tensor: ...

    @abc.abstractmethod
    def full(self, shape: Sequence[int], value: int | float | bool, dtype: DType) -> Tensor:
        """A tensor filled with ``value`` exactly (int64 values up to 2**63 - 1)."""

    @abc.abstractmethod
    def arange(self, n: int, dtype: DType | None = None) -> Tensor: ...

    @abc.abstractmethod
    def from_numpy(self, array: np.ndarray) -> Tensor:
        """Copy a host array to the device (int64, float64 or bool)."""

    def const_like(self, x: Tensor, value: int | float | bool) -> Tensor:
        """``full(x.shape, value, x.dtype)``: exact, unlike paddle's full_like for big ints."""
        return self.full(tuple(x.shape), value, x.dtype)

    def scalar(self, value: int | float | bool, dtype: DType) -> Tensor:
        """A one-element tensor, for broadcasting exact constants."""
        return self.full((1,), value, dtype)

    # -- host transfer -------------------------------------------------
    @abc.abstractmethod
    def to_host(self, x: Tensor) -> np.ndarray:
        """Device-to-host copy; calls ``kernels.host_sync`` first."""

    def to_host_many(self, xs: Sequence[Tensor], *, copy: bool = True) -> list[np.ndarray]:
        """Host copies of several tensors; a device framework may batch them into one transfer.

        ``copy=False``: a CPU framework may return views of the tensors' memory
        instead (read them before the tensors change).
        """
        return [self.to_host(x) for x in xs]

    # -- dtype and shape -----------------------------------------------
    @abc.abstractmethod
    def astype(self, x: Tensor, dtype: DType) -> Tensor: ...

    @abc.abstractmethod
    def reshape(self, x: Tensor, shape: Sequence[int]) -> Tensor: ...

    @abc.abstractmethod
    def transpose(self, x: Tensor, perm: Sequence[int]) -> Tensor: ...

    @abc.abstractmethod
    def unsqueeze(self, x: Tensor, axis: int) -> Tensor: ...

    @abc.abstractmethod
    def broadcast_to(self, x: Tensor, shape: Sequence[int]) -> Tensor: ...

    @abc.abstractmethod
    def concat(self, xs: Sequence[Tensor], axis: int = 0) -> Tensor: ...

    @abc.abstractmethod
    def stack(self, xs: Sequence[Tensor], axis: int = 0) -> Tensor: ...

    # -- elementwise ---------------------------------------------------
    @abc.abstractmethod
    def floor_div(self, x: Tensor, d: int | Tensor) -> Tensor: ...

    @abc.abstractmethod
    def mod(self, x: Tensor, d: int | Tensor) -> Tensor:
        """Floor modulo: result has the sign of ``d`` (Python / NumPy ``%``)."""

    @abc.abstractmethod
    def minimum(self, x: Tensor, y: Tensor | int) -> Tensor: ...

    @abc.abstractmethod
    def maximum(self, x: Tensor, y: Tensor | int) -> Tensor: ...

    @abc.abstractmethod
    def clip(self, x: Tensor, lo: int, hi: int) -> Tensor: ...

    @abc.abstractmethod
    def eq(self, x: Tensor, y: Tensor | int | float) -> Tensor: ...

    @abc.abstractmethod
    def ne(self, x: Tensor, y: Tensor | int | float) -> Tensor: ...

    @abc.abstractmethod
    def lt(self, x: Tensor, y: Tensor | int | float) -> Tensor: ...

    @abc.abstractmethod
    def le(self, x: Tensor, y: Tensor | int | float) -> Tensor: ...

    @abc.abstractmethod
    def gt(self, x: Tensor, y: Tensor | int | float) -> Tensor: ...

    @abc.abstractmethod
    def ge(self, x: Tensor, y: Tensor | int | float) -> Tensor: ...

    @abc.abstractmethod
    def logical_and(self, x: Tensor, y: Tensor) -> Tensor: ...

    @abc.abstractmethod
    def logical_or(self, x: Tensor, y: Tensor) -> Tensor: ...

    @abc.abstractmethod
    def logical_not(self, x: Tensor) -> Tensor: ...

    @abc.abstractmethod
    def where(self, cond: Tensor, x: Tensor | int | float, y: Tensor | int | float) -> Tensor: ...

    @abc.abstractmethod
    def bitwise_xor(self, x: Tensor, y: Tensor) -> Tensor: ...

    @abc.abstractmethod
    def bitwise_and(self, x: Tensor, y: Tensor) -> Tensor: ...

    @abc.abstractmethod
    def shift_right_arithmetic(self, x: Tensor, bits: int) -> Tensor: ...

    def shift_right_logical(self, x: Tensor, bits: int) -> Tensor:
        """``x >>> bits`` on int64: an arithmetic shift, then a mask of the low 64-bits bits."""
        if bits <= 0:
            return x
        mask = self.const_like(x, (1 << (64 - bits)) - 1)
        return self.bitwise_and(self.shift_right_arithmetic(x, bits), mask)

    @abc.abstractmethod
    def exp(self, x: Tensor) -> Tensor: ...

    @abc.abstractmethod
    def rsqrt(self, x: Tensor) -> Tensor:
        """``1 / sqrt(x)`` elementwise (float32 or float64)."""

    # -- reductions and scans ------------------------------------------
    @abc.abstractmethod
    def sum(self, x: Tensor, axis: int, keepdims: bool = False) -> Tensor: ...

    @abc.abstractmethod
    def max(self, x: Tensor, axis: int, keepdims: bool = False) -> Tensor: ...

    @abc.abstractmethod
    def min(self, x: Tensor, axis: int, keepdims: bool = False) -> Tensor: ...

    def any(self, x: Tensor, axis: int) -> Tensor:
        return self.gt(self.sum(self.astype(x, self.int64), axis), 0)

    @abc.abstractmethod
    def cumsum(self, x: Tensor, axis: int) -> Tensor: ...

    # -- ordering ------------------------------------------------------
    @abc.abstractmethod
    def sort(self, x: Tensor, axis: int = -1, descending: bool = False, stable: bool = True) -> tuple[Tensor, Tensor]:
        """(values, indices); stable keeps equal elements in index order."""

    @abc.abstractmethod
    def searchsorted(self, sorted_seq: Tensor, values: Tensor, right: bool = False) -> Tensor:
        """1-D ``sorted_seq``; int64 insertion points of ``values``."""

    # -- indexing ------------------------------------------------------
    @abc.abstractmethod
    def index_select(self, x: Tensor, index: Tensor, axis: int = 0) -> Tensor: ...

    @abc.abstractmethod
    def gather(self, x: Tensor, index: Tensor, axis: int) -> Tensor:
        """``take_along_axis``: ``index`` has ``x``'s rank."""

    @abc.abstractmethod
    def index_put_(self, dst: Tensor, index: Tensor, values: Tensor) -> None:
        """In place: ``dst[index] = values`` along axis 0 (rows)."""

    @abc.abstractmethod
    def put2d_(self, dst: Tensor, rows: Tensor, cols: Tensor, values: Tensor) -> None:
        """In place: ``dst[rows[i], cols[i]] = values[i]`` for a 2-D ``dst``."""

    @abc.abstractmethod
    def copy_(self, dst: Tensor, src: Tensor) -> None:
        """In place: ``dst[...] = src`` for a whole tensor of the same shape."""

    @abc.abstractmethod
    def assign_(self, dst: Tensor, key: Any, src: Tensor | int | float) -> None:
        """In place: ``dst[key] = src``; ``key`` is a slice, an int or a tuple of them.

        The one way kernels write part of a buffer: it never relies on a slice
        being a view (torch's are, paddle's need not be).
        """

    def masked_assign_(self, dst: Tensor, key: Any, mask: Tensor, src: Tensor | int) -> None:
        """In place: ``dst[key] = where(mask, src, dst[key])`` (mask broadcasts from the left)."""
        old = dst[key]
        self.assign_(dst, key, self.where(self.mask_like(mask, old), src, old))

    def assign_where_(self, dst: Tensor, key: Any, cond: Tensor, src: Tensor, fill: Tensor | int | float) -> None:
        """In place: ``dst[key] = where(cond, src, fill)`` for ``src`` of ``dst``'s dtype.

        ``fill`` is a tensor or a Python number; a framework whose slices are views may select
        straight into ``dst[key]`` (one op, not a select and a copy).
        """
        self.assign_(dst, key, self.where(cond, src, fill))

    def mask_like(self, mask: Tensor, target: Tensor) -> Tensor:
        """``mask`` with trailing axes of size 1 up to ``target``'s rank, so it broadcasts from the left."""
        while len(mask.shape) < len(target.shape):
            mask = self.unsqueeze(mask, len(mask.shape))
        return mask

    def take2d(self, x: Tensor, rows: Tensor, cols: Tensor) -> Tensor:
        """``x[rows, cols]`` elementwise for a contiguous 2-D ``x`` (flat index gather)."""
        width = int(x.shape[1])
        flat = self.reshape(x, (-1,))
        return self.index_select(flat, rows * width + cols, 0)

    # -- float math ----------------------------------------------------
    @abc.abstractmethod
    def matmul(self, a: Tensor, b: Tensor) -> Tensor:
        """(Batched) matmul in the operands' float dtype (float64 for the integer model)."""

    @abc.abstractmethod
    def round_to_int(self, x: Tensor) -> Tensor:
        """Round a float64 tensor to the nearest int64."""

    def float_matmul(self, a: Tensor, b: Tensor, dtype: DType) -> Tensor:
        """(Batched) matmul in ``dtype``: both operands cast to it, the result in it.

        A framework without a ``dtype`` matmul kernel on its device overrides this
        to multiply in float32 and round the result to ``dtype`` (what a bfloat16
        GEMM with float32 accumulation returns, up to summation order).
        """
        return self.matmul(self.astype(a, dtype), self.astype(b, dtype))

    def int_matmul(self, a: Tensor, b: Tensor) -> Tensor:
        """Exact integer matmul for small integer operands: float64 matmul, then a cast to int64.

        No rounding is needed: with integer-valued float64 operands every product and
        partial sum a GEMM forms (in any order, fused multiply-adds included) is an integer,
        exact below 2**53 (our sums stay far below), and a float64 at or above 2**53 is an
        integer too, so the product is integer-valued and the cast (which truncates) takes
        exactly the value :meth:`round_to_int` would.
        """
        fa = a if a.dtype == self.float64 else self.astype(a, self.float64)
        fb = b if b.dtype == self.float64 else self.astype(b, self.float64)
        return self.astype(self.matmul(fa, fb), self.int64)

    # -- bookkeeping -----------------------------------------------------
    @abc.abstractmethod
    def nbytes(self, x: Tensor) -> int: ...

    @abc.abstractmethod
    def synchronize(self) -> None: ...
