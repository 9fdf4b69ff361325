"""The Paddle side of graph emulation: storage handles, poison, host-sync refusal.

:class:`PaddleOps` implements the ``FrameworkOps`` protocol of
:mod:`graphcheck.capture.emulated` for paddle tensors, so ``EmulatedRunner(PaddleOps())``
replays the engine's kernels on Paddle CPU tensors with the emulator's semantics.
Paddle has no dispatch mode, so three things work differently from ``TorchOps``:

* **Storage.** A storage is the allocation (holder) under a tensor; its key is
  ``data_ptr() - _offset()``, the holder's base address, shared by every view.
  "All of a tensor's storage" is ``paddle.as_strided(t, [n], [1], 0)`` over the
  holder (snapshot, restore, poison). An alias is a new tensor object made with
  ``_share_underline_tensor_to``: it shares the captured tensor's memory without
  referencing the engine's tensor object, so a replay keeps reading the captured
  storage after the engine rebinds its attribute (and the graph's weak reference
  to the engine's object still tells whether the engine let it go).
* **Host syncs** are refused at the framework level, not per op: the facade's
  ``to_host`` goes through ``kernels.host_sync`` (the runner's observer refuses it),
  and for the duration of a capture ``paddle.Tensor.numpy``, ``item``, ``tolist``,
  ``cpu``, ``__bool__``, ``__int__``, ``__float__``, ``__index__`` and ``__array__``
  are patched to raise :class:`HostSyncInCapture` on the capturing thread (process
  wide, reference counted, restored when the last capture ends).
* **No escaped-op detection.** Nothing sees individual paddle ops, so device work
  outside a kernel, or a kernel reading a tensor that is not its argument, is not
  rejected: the paddle emulation relies on the kernel registry for what it
  replays (the torch emulation, which checks both, runs the same engine code).
  Likewise only kernel results count as allocated by the region; a tensor made
  between kernels is treated as pre-existing (snapshotted and aliased, not poisoned).
  Poisoned tensors hold NaN / sentinel values until the first replay; reading one
  through ``xp.to_host`` raises :class:`PoisonedTensorError`, other reads only see
  the sentinel.

Importing this module does not import paddle.
"""

from __future__ import annotations

import itertools
import threading
import weakref
from contextlib import contextmanager
from typing import Any, Iterator

from .base import PoisonedTensorError
from .capture_state import CaptureState
from .host_reads import HostReadPatch


class _Tls(threading.local):
    def __init__(self) -> None:
        self.bookkeeping = 0  # >0: the runner's own tensor work runs unchecked
        self.capture: CaptureState | None = None  # the capture under way on this thread


_tls = _Tls()

# Poisoned storages of all paddle graphs: storage key -> (weak ref to the owner, graph label, token).
_POISONED: dict[int, tuple[weakref.ref, str, int]] = {}
_TOKENS = itertools.count(1)

# Tensor methods that read device data on the host (patched while a capture runs).
_HOST_READ_METHODS = (
    "numpy",
    "item",
    "tolist",
    "cpu",
    "__bool__",
    "__nonzero__",
    "__int__",
    "__float__",
    "__index__",
    "__array__",
)


def storage_key(t: Any) -> int:
    """The base address of ``t``'s allocation (shared by all views); ``-id(t)`` for an empty tensor."""
    ptr = t.data_ptr()
    if ptr == 0:
        return -id(t)
    return ptr - t._offset()


def check_not_poisoned(t: Any, what: str) -> None:
    """Raise PoisonedTensorError when ``t``'s storage is poisoned by a capture not yet replayed."""
    if not _POISONED or _tls.bookkeeping:
        return
    entry = _POISONED.get(storage_key(t))
    if entry is not None and entry[0]() is not None:
        raise PoisonedTensorError(
            f"{what} read a tensor allocated by the capture of {entry[1]} before that graph's first "
            "replay; a real capture leaves it uninitialised (replay the graph first)"
        )


def _capturing() -> CaptureState | None:
    """The capture that makes a host read raise on this thread, unless bookkeeping."""
    return None if _tls.bookkeeping else _tls.capture


_HOST_READS = HostReadPatch(_HOST_READ_METHODS, _capturing)


class PaddleOps:
    """Framework ops for paddle tensors (see the module docstring)."""

    framework = "paddle"

    def __init__(self) -> None:
        import paddle

        self.paddle = paddle

    # TensorOps ------------------------------------------------------------------------------
    def is_tensor(self, obj: Any) -> bool:
        return isinstance(obj, self.paddle.Tensor)

    def data_ptr(self, t: Any) -> int:
        return t.data_ptr()

    def shape(self, t: Any) -> tuple[int, ...]:
        return tuple(int(s) for s in t.shape)

    def dtype_name(self, t: Any) -> str:
        return str(t.dtype).removeprefix("paddle.")

    def storage_key(self, t: Any) -> int:
        return storage_key(t)

    def view_base(self, t: Any) -> Any | None:
        """Paddle exposes no view base; views are keyed to their storage instead."""
        return None

    # memory ----------------------------------------------------------------------------------
    @contextmanager
    def bookkeeping(self) -> Iterator[None]:
        """Run the runner's own tensor work past the host-read guard and the poison check."""
        _tls.bookkeeping += 1
        try:
            yield
        finally:
            _tls.bookkeeping -= 1

    def whole(self, t: Any) -> Any:
        """A flat tensor over all of ``t``'s allocation (``t`` itself may be a view into it)."""
        n = int(t._holder_size()) // int(t.element_size())
        if t.data_ptr() == 0 or n == 0 or (t._offset() == 0 and int(t._numel()) == n and t.is_contiguous()):
            return t  # empty, or already the whole allocation (every engine buffer)
        flat = self.paddle.as_strided(t, [n], [1], 0)
        if flat.data_ptr() != storage_key(t):
            raise RuntimeError("paddle.as_strided did not start at the allocation's base address")
        return flat

    def snapshot(self, t: Any) -> tuple[Any, Any]:
        """A copy of all of ``t``'s storage, for :meth:`restore`."""
        with self.bookkeeping():
            flat = self.whole(t)
            return flat, flat.clone()

    def restore(self, snap: tuple[Any, Any]) -> None:
        flat, saved = snap
        with self.bookkeeping():
            flat.copy_(saved, True)

    def alias(self, t: Any) -> Any:
        """A new tensor object on ``t``'s memory that keeps no reference to ``t`` itself."""
        with self.bookkeeping():
            handle = self.paddle.Tensor()
            t._share_underline_tensor_to(handle)
            return handle

    def copy_into(self, dst: Any, src: Any) -> None:
        dst.copy_(src, True)

    def storage_nbytes(self, t: Any) -> int:
        return int(t._holder_size())

    def poison_value(self, dtype: Any) -> Any:
        """NaN for floats, True for bools, 0x5A5A... (negated) or 0xA5A5... for integers."""
        paddle = self.paddle
        if dtype == paddle.bool:
            return True
        if dtype in (paddle.float16, paddle.bfloat16, paddle.float32, paddle.float64):
            return float("nan")
        nbytes = {paddle.int8: 1, paddle.uint8: 1, paddle.int16: 2, paddle.int32: 4, paddle.int64: 8}[dtype]
        return int("A5", 16) if dtype == paddle.uint8 else -int("5A" * nbytes, 16)

    def poison(self, t: Any) -> None:
        """Fill all of ``t``'s storage with the poison value of ``t``'s dtype (exact for int64)."""
        with self.bookkeeping():
            flat = self.whole(t)
            fill = self.paddle.full(list(flat.shape), self.poison_value(t.dtype), dtype=t.dtype, device=t.place)
            flat.copy_(fill, True)

    # poison registry -------------------------------------------------------------------------
    def mark_poisoned(self, tensors: list[Any], label: str) -> int:
        """Register these storages as poisoned until :meth:`clear_poison`; returns the token."""
        token = next(_TOKENS)
        for t in tensors:
            _POISONED[storage_key(t)] = (weakref.ref(t), label, token)
        return token

    def clear_poison(self, token: int) -> None:
        for key in [k for k, e in _POISONED.items() if e[2] == token or e[0]() is None]:
            del _POISONED[key]

    def is_poisoned(self, t: Any) -> bool:
        entry = _POISONED.get(storage_key(t))
        return entry is not None and entry[0]() is not None

    # capture hooks ---------------------------------------------------------------------------
    @contextmanager
    def capture_hooks(self, state: CaptureState) -> Iterator[None]:
        """While capturing on this thread: host reads of any paddle tensor raise.

        ``state.check_escapes`` cannot be honoured (no dispatch hook); see the module docstring.
        """
        _tls.capture = state
        try:
            with self._patched_host_reads():
                yield
        finally:
            _tls.capture = None

    @contextmanager
    def _patched_host_reads(self) -> Iterator[None]:
        with _HOST_READS.applied(self.paddle.Tensor):
            yield
