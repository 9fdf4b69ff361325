"""The torch implementation of the array facade (CPU or CUDA)."""

from __future__ import annotations

import numpy as np
import torch

from graphcheck.backends.xp.base import ArrayOps, Tensor
from graphcheck.capture.kernels import host_sync


def _numpy_able(x: torch.Tensor) -> torch.Tensor:
    """``x``, or its exact float32 upcast when NumPy has no dtype for it (bfloat16)."""
    return x.float() if x.dtype == torch.bfloat16 else x


_NUMPY_DTYPES: dict[torch.dtype, np.dtype] = {}


def _numpy_dtype(dtype: torch.dtype) -> np.dtype:
    """NumPy's dtype for a torch dtype NumPy has (looked up once per dtype)."""
    found = _NUMPY_DTYPES.get(dtype)
    if found is None:
        found = _NUMPY_DTYPES[dtype] = torch.empty(0, dtype=dtype).numpy().dtype
    return found


def _host_view(x: torch.Tensor) -> np.ndarray:
    """``_numpy_able(x.detach()).numpy()`` of a CPU tensor: a view of its memory (float32 copy for bfloat16).

    ``x.numpy()`` gives the same view directly where it can (no grad, a dtype NumPy has): the
    detach costs as much as the view, on every buffer of every state snapshot.
    """
    try:
        return x.numpy()
    except (RuntimeError, TypeError):  # requires grad, or bfloat16
        return _numpy_able(x.detach()).numpy()


def _broadcasts_to(shape: torch.Size, target: torch.Size) -> bool:
    """Whether ``shape`` broadcasts to ``target`` without growing it."""
    if shape == target:
        return True
    return len(shape) <= len(target) and all(s in (1, t) for s, t in zip(reversed(shape), reversed(target)))


def _selects_into(view: torch.Tensor, cond: torch.Tensor, src: torch.Tensor, fill) -> bool:
    """Whether ``where(cond, src, fill)`` has ``view``'s dtype and shape (``out=view`` writes it as it is)."""
    dtype, shape = view.dtype, view.shape
    if src.dtype != dtype or src.shape != shape or not _broadcasts_to(cond.shape, shape):
        return False
    if isinstance(fill, torch.Tensor):
        return fill.dtype == dtype and _broadcasts_to(fill.shape, shape)
    if isinstance(fill, bool):
        return dtype == torch.bool
    if isinstance(fill, int):
        return dtype != torch.bool
    return dtype.is_floating_point


class TorchArrayOps(ArrayOps):
    framework = "torch"

    def __init__(self, device: str = "cpu"):
        self.device = device
        self._device = torch.device(device)
        self.int64 = torch.int64
        self.float64 = torch.float64
        self.float32 = torch.float32
        self.bfloat16 = torch.bfloat16
        self.bool = torch.bool

    def __repr__(self) -> str:
        return f"TorchArrayOps({self.device!r})"

    # -- creation ------------------------------------------------------
    def zeros(self, shape, dtype):
        return torch.zeros(tuple(shape), dtype=dtype, device=self._device)

    def full(self, shape, value, dtype):
        return torch.full(tuple(shape), value, dtype=dtype, device=self._device)

    def arange(self, n, dtype=None):
        return torch.arange(n, dtype=dtype or torch.int64, device=self._device)

    def from_numpy(self, array: np.ndarray) -> Tensor:
        return torch.from_numpy(np.array(array, copy=True, order="C")).to(self._device)

    # -- host transfer -------------------------------------------------
    def to_host(self, x):
        host_sync("to_host")
        return _numpy_able(x.detach()).cpu().numpy().copy()

    def to_host_many(self, xs, *, copy=True):
        """One transfer for all of ``xs`` on a GPU (their bytes concatenated); copies or views on the CPU.

        bfloat16 tensors come back as float32 (a copy, also with ``copy=False``).
        """
        if self._device.type == "cpu":
            if copy:
                return [self.to_host(x) for x in xs]
            host_sync("to_host")
            return [_host_view(x) for x in xs]
        if len(xs) < 2:
            return [self.to_host(x) for x in xs]
        host_sync("to_host")
        xs = [_numpy_able(x.detach()) for x in xs]
        # reshape(-1) is contiguous (a view, or a copy of a strided tensor): its bytes can be viewed
        flat = [x.reshape(-1).view(torch.uint8) for x in xs]
        data = torch.cat(flat).cpu().numpy()  # a fresh host array: views of it alias no device memory
        out, start = [], 0
        for x, f in zip(xs, flat):
            n = f.numel()
            part = data[start : start + n].view(_numpy_dtype(x.dtype)).reshape(x.shape)
            out.append(part.copy() if copy else part)
            start += n
        return out

    # -- dtype and shape -----------------------------------------------
    def astype(self, x, dtype):
        return x.to(dtype)

    def reshape(self, x, shape):
        return x.reshape(tuple(shape))

    def transpose(self, x, perm):
        return x.permute(*perm)

    def unsqueeze(self, x, axis):
        return x.unsqueeze(axis)

    def broadcast_to(self, x, shape):
        return x.expand(*shape)

    def concat(self, xs, axis=0):
        return torch.cat(list(xs), dim=axis)

    def stack(self, xs, axis=0):
        return torch.stack(list(xs), dim=axis)

    # -- elementwise ---------------------------------------------------
    def floor_div(self, x, d):
        return torch.div(x, d, rounding_mode="floor")

    def mod(self, x, d):
        return torch.remainder(x, d)

    def minimum(self, x, y):
        if not isinstance(y, torch.Tensor):
            return torch.clamp(x, max=y)
        return torch.minimum(x, y)

    def maximum(self, x, y):
        if not isinstance(y, torch.Tensor):
            return torch.clamp(x, min=y)
        return torch.maximum(x, y)

    def clip(self, x, lo, hi):
        return torch.clamp(x, lo, hi)

    def eq(self, x, y):
        return torch.eq(x, y)

    def ne(self, x, y):
        return torch.ne(x, y)

    def lt(self, x, y):
        return torch.lt(x, y)

    def le(self, x, y):
        return torch.le(x, y)

    def gt(self, x, y):
        return torch.gt(x, y)

    def ge(self, x, y):
        return torch.ge(x, y)

    def logical_and(self, x, y):
        return torch.logical_and(x, y)

    def logical_or(self, x, y):
        return torch.logical_or(x, y)

    def logical_not(self, x):
        return torch.logical_not(x)

    def where(self, cond, x, y):
        return torch.where(cond, x, y)

    def bitwise_xor(self, x, y):
        return torch.bitwise_xor(x, y)

    def bitwise_and(self, x, y):
        return torch.bitwise_and(x, y)

    def shift_right_arithmetic(self, x, bits):
        return torch.bitwise_right_shift(x, bits)

    def exp(self, x):
        return torch.exp(x)

    def rsqrt(self, x):
        return torch.rsqrt(x)

    # -- reductions ------------------------------------------------------
    def sum(self, x, axis, keepdims=False):
        return torch.sum(x, dim=axis, keepdim=keepdims)

    def max(self, x, axis, keepdims=False):
        return torch.amax(x, dim=axis, keepdim=keepdims)

    def min(self, x, axis, keepdims=False):
        return torch.amin(x, dim=axis, keepdim=keepdims)

    def any(self, x, axis):
        return torch.any(x, dim=axis)

    def cumsum(self, x, axis):
        return torch.cumsum(x, dim=axis)

    # -- ordering --------------------------------------------------------
    def sort(self, x, axis=-1, descending=False, stable=True):
        values, indices = torch.sort(x, dim=axis, descending=descending, stable=stable)
        return values, indices

    def searchsorted(self, sorted_seq, values, right=False):
        return torch.searchsorted(sorted_seq.contiguous(), values.contiguous(), right=right)

    # -- indexing --------------------------------------------------------
    def index_select(self, x, index, axis=0):
        return torch.index_select(x, axis, index)

    def gather(self, x, index, axis):
        return torch.gather(x, axis, index)

    def index_put_(self, dst, index, values):
        dst.index_put_((index,), values)

    def put2d_(self, dst, rows, cols, values):
        dst.index_put_((rows, cols), values)

    def copy_(self, dst, src):
        dst.copy_(src)

    def assign_(self, dst, key, src):
        dst[key] = src

    def masked_assign_(self, dst, key, mask, src):
        # A torch slice is a view: write through it (one op, not read, where, then write back).
        view = dst[key]
        mask = self.mask_like(mask, view)
        if isinstance(src, torch.Tensor):
            torch.where(mask, src, view, out=view)
        else:
            view.masked_fill_(mask, src)

    def assign_where_(self, dst, key, cond, src, fill):
        # A torch slice is a view: select into it, when the select has the view's dtype and shape
        # (torch would resize a mismatched ``out``); else the select, then a copy, as assign_ does.
        view = dst[key]
        if not _selects_into(view, cond, src, fill):
            view.copy_(torch.where(cond, src, fill))
            return
        if not isinstance(fill, torch.Tensor):
            fill = torch.scalar_tensor(fill, dtype=view.dtype, device=view.device)
        torch.where(cond, src, fill, out=view)

    # -- float64 math ----------------------------------------------------
    def matmul(self, a, b):
        return torch.matmul(a, b)

    def round_to_int(self, x):
        return torch.round(x).to(torch.int64)

    # -- bookkeeping -----------------------------------------------------
    def nbytes(self, x):
        return x.nbytes  # numel() * element_size(), in one call

    def synchronize(self):
        if self._device.type == "cuda":
            torch.cuda.synchronize(self._device)
