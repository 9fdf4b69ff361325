"""The PaddlePaddle implementation of the array facade (CPU, or a Kunlun XPU place).

Paddle traps this module absorbs, so the kernels stay framework-neutral:

* ``paddle.where`` with a Python scalar of another kind than the tensor side
  (``where(mask, int64_tensor, 1.0)``, ``where(mask, bool_tensor, True)``) raises a
  type-promotion error: scalars are made 0-d tensors of the other side's dtype
  (promoting the tensor to the facade's int64 / float64 when the scalar is of a
  higher kind; two scalars: the higher kind of their Python types) before the call.
* ``paddle.full_like`` rounds int64 fill values above 2**53; every constant is
  made with ``paddle.full(shape, value, dtype="int64")``, which is exact.
* ``int64_tensor & python_int`` raises and shift amounts must be tensors: the
  shift count is made a one-element int64 tensor here.
* ``==`` / ``!=`` on float tensors compare within a tolerance (``1 - 2**-53 == 1.0`` is
  True in paddle 3.3); ``<=`` and ``>=`` are exact: a float :meth:`eq` is both.
* ``paddle.sort`` returns no indices: ``argsort`` (stable) and a gather.
* creation ops default to the global expected place (a GPU build picks
  ``gpu:0``): every creation passes this facade's place explicitly.
* bfloat16 on the CPU has no ``matmul``, ``where``, ``add``, ``max`` or ``exp``
  kernel (paddle 3.3): :meth:`float_matmul` multiplies in float32 and rounds
  the result to bfloat16, :meth:`where` selects in float32 and casts back
  (exact); the float model does its elementwise math in float32 anyway.
  ``Tensor.numpy()`` of bfloat16 gives raw uint16 bits: :meth:`to_host`
  upcasts to float32 first.

``to_host`` announces itself through ``kernels.host_sync`` and refuses a
storage an emulated capture poisoned (paddle has no dispatch hook that could
refuse every read; see ``graphcheck.capture.paddle_ops``).
"""

from __future__ import annotations

import numpy as np
import paddle

from graphcheck.backends.xp.base import ArrayOps, Tensor
from graphcheck.capture.kernels import host_sync
from graphcheck.capture.paddle_ops import check_not_poisoned


def _place(device: str):
    kind, _, index = device.partition(":")
    if kind == "cpu":
        return paddle.CPUPlace()
    if kind == "xpu":
        return paddle.XPUPlace(int(index or 0))
    raise ValueError(f"PaddleArrayOps supports 'cpu' and 'xpu[:N]', not {device!r}")


class PaddleArrayOps(ArrayOps):
    framework = "paddle"

    def __init__(self, device: str = "cpu"):
        self.device = device
        self.place = _place(device)
        self.int64 = paddle.int64
        self.float64 = paddle.float64
        self.float32 = paddle.float32
        self.bfloat16 = paddle.bfloat16
        self.bool = paddle.bool

    def __repr__(self) -> str:
        return f"PaddleArrayOps({self.device!r})"

    # -- helpers -------------------------------------------------------
    def _lacks_bf16(self, *tensors) -> bool:
        """Whether an op on these tensors needs the float32 detour (bfloat16 on the CPU)."""
        return self.device == "cpu" and any(
            isinstance(t, paddle.Tensor) and t.dtype == paddle.bfloat16 for t in tensors
        )

    def _scalar_dtype(self, value):
        if isinstance(value, (bool, np.bool_)):
            return paddle.bool
        if isinstance(value, (int, np.integer)):
            return paddle.int64
        return paddle.float64

    def _kind(self, dtype) -> int:
        if dtype == paddle.bool:
            return 0
        return 2 if dtype in (paddle.float16, paddle.bfloat16, paddle.float32, paddle.float64) else 1

    def _scalar_pair(self, tensor: Tensor, value) -> tuple[Tensor, Tensor]:
        """``(tensor, value)`` with ``value`` a 0-d tensor of a common dtype.

        The scalar takes the tensor's dtype, unless it is of a higher kind (a float
        with an integer tensor, an int with a bool tensor): then both become the
        scalar's dtype (int64 / float64).
        """
        dtype = self._scalar_dtype(value)
        if self._kind(dtype) > self._kind(tensor.dtype):
            tensor = tensor.astype(dtype)
        return tensor, paddle.full([], value, dtype=tensor.dtype, device=self.place)

    # -- creation ------------------------------------------------------
    def zeros(self, shape, dtype):
        return paddle.zeros([int(s) for s in shape], dtype=dtype, device=self.place)

    def full(self, shape, value, dtype):
        return paddle.full([int(s) for s in shape], value, dtype=dtype, device=self.place)

    def arange(self, n, dtype=None):
        return paddle.arange(int(n), dtype=dtype or paddle.int64, device=self.place)

    def from_numpy(self, array: np.ndarray) -> Tensor:
        return paddle.to_tensor(np.array(array, copy=True, order="C"), place=self.place)

    # -- host transfer -------------------------------------------------
    def to_host(self, x):
        host_sync("to_host")
        check_not_poisoned(x, "to_host")
        if x.dtype == paddle.bfloat16:
            x = x.astype(paddle.float32)
        return np.array(x.numpy(), copy=True)

    # -- dtype and shape -----------------------------------------------
    def astype(self, x, dtype):
        return x.astype(dtype)

    def reshape(self, x, shape):
        return paddle.reshape(x, [int(s) for s in shape])

    def transpose(self, x, perm):
        return paddle.transpose(x, list(perm))

    def unsqueeze(self, x, axis):
        return paddle.unsqueeze(x, axis)

    def broadcast_to(self, x, shape):
        return paddle.broadcast_to(x, [int(s) for s in shape])

    def concat(self, xs, axis=0):
        return paddle.concat(list(xs), axis=axis)

    def stack(self, xs, axis=0):
        return paddle.stack(list(xs), axis=axis)

    # -- elementwise ---------------------------------------------------
    def floor_div(self, x, d):
        return paddle.floor_divide(x, d)

    def mod(self, x, d):
        return x % d  # floor modulo (sign of d), like Python and NumPy

    def minimum(self, x, y):
        if not isinstance(y, paddle.Tensor):
            return paddle.clip(x, max=y)
        return paddle.minimum(x, y)

    def maximum(self, x, y):
        if not isinstance(y, paddle.Tensor):
            return paddle.clip(x, min=y)
        return paddle.maximum(x, y)

    def clip(self, x, lo, hi):
        return paddle.clip(x, lo, hi)

    def eq(self, x, y):
        # Paddle's equal is approximate on floats (1 - 1 ulp == 1.0 is True in paddle 3.3);
        # <= and >= are exact, so a float equality is both.
        if self._is_float(x) or self._is_float(y):
            return paddle.logical_and(x <= y, x >= y)
        return x == y

    def ne(self, x, y):
        return paddle.logical_not(self.eq(x, y))

    def _is_float(self, x) -> bool:
        return self._kind(x.dtype if isinstance(x, paddle.Tensor) else self._scalar_dtype(x)) == 2

    def lt(self, x, y):
        return x < y

    def le(self, x, y):
        return x <= y

    def gt(self, x, y):
        return x > y

    def ge(self, x, y):
        return x >= y

    def logical_and(self, x, y):
        return paddle.logical_and(x, y)

    def logical_or(self, x, y):
        return paddle.logical_or(x, y)

    def logical_not(self, x):
        return paddle.logical_not(x)

    def where(self, cond, x, y):
        x_t, y_t = isinstance(x, paddle.Tensor), isinstance(y, paddle.Tensor)
        if not x_t and not y_t:  # two scalars: the higher kind of the two
            x = paddle.full(
                [], x, dtype=max(self._scalar_dtype(x), self._scalar_dtype(y), key=self._kind), device=self.place
            )
            x_t = True
        if not x_t:
            y, x = self._scalar_pair(y, x)
        elif not y_t:
            x, y = self._scalar_pair(x, y)
        if self._lacks_bf16(x, y):  # no bfloat16 where on the CPU: select in float32, exact
            return paddle.where(cond, x.astype(paddle.float32), y.astype(paddle.float32)).astype(paddle.bfloat16)
        return paddle.where(cond, x, y)

    def bitwise_xor(self, x, y):
        return paddle.bitwise_xor(x, y)

    def bitwise_and(self, x, y):
        return paddle.bitwise_and(x, y)

    def shift_right_arithmetic(self, x, bits):
        return paddle.bitwise_right_shift(x, self.full((1,), bits, x.dtype), is_arithmetic=True)

    def exp(self, x):
        return paddle.exp(x)

    def rsqrt(self, x):
        return paddle.rsqrt(x)

    # -- reductions ------------------------------------------------------
    def sum(self, x, axis, keepdims=False):
        return paddle.sum(x, axis=axis, keepdim=keepdims)

    def max(self, x, axis, keepdims=False):
        return paddle.max(x, axis=axis, keepdim=keepdims)

    def min(self, x, axis, keepdims=False):
        return paddle.min(x, axis=axis, keepdim=keepdims)

    def any(self, x, axis):
        return paddle.any(x, axis=axis)

    def cumsum(self, x, axis):
        return paddle.cumsum(x, axis=axis)

    # -- ordering --------------------------------------------------------
    def sort(self, x, axis=-1, descending=False, stable=True):
        indices = paddle.argsort(x, axis=axis, descending=descending, stable=stable)
        return paddle.take_along_axis(x, indices, axis, broadcast=False), indices

    def searchsorted(self, sorted_seq, values, right=False):
        return paddle.searchsorted(sorted_seq, values, right=right)

    # -- indexing --------------------------------------------------------
    def index_select(self, x, index, axis=0):
        return paddle.index_select(x, index, axis=axis)

    def gather(self, x, index, axis):
        return paddle.take_along_axis(x, index, axis, broadcast=False)

    def index_put_(self, dst, index, values):
        paddle.index_put_(dst, (index,), values)

    def put2d_(self, dst, rows, cols, values):
        paddle.index_put_(dst, (rows, cols), values)

    def copy_(self, dst, src):
        dst.copy_(src, True)

    def assign_(self, dst, key, src):
        dst[key] = src

    # -- float64 math ----------------------------------------------------
    def matmul(self, a, b):
        return paddle.matmul(a, b)

    def float_matmul(self, a, b, dtype):
        """Matmul in ``dtype``; bfloat16 on the CPU (no kernel) multiplies in float32 and rounds the result."""
        if dtype == paddle.bfloat16 and self.device == "cpu":
            f32 = paddle.float32
            return paddle.matmul(a.astype(f32), b.astype(f32)).astype(dtype)
        return paddle.matmul(a.astype(dtype), b.astype(dtype))

    def round_to_int(self, x):
        return paddle.round(x).astype(paddle.int64)

    # -- bookkeeping -----------------------------------------------------
    def nbytes(self, x):
        return int(x._numel()) * int(x.element_size())

    def synchronize(self):
        if self.device != "cpu":
            paddle.device.synchronize(self.device)
