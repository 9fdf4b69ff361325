"""The torch side of graph emulation: dispatch modes, storage handles, poison.

:class:`TorchOps` implements the ``FrameworkOps`` protocol of
:mod:`graphcheck.capture.emulated` for torch tensors. During a capture its
dispatch mode refuses host syncs, tracks what the region allocates and, for
the emulator, rejects device work outside a kernel or on tensors a kernel was
not given. Importing this module does not import torch.
"""

from __future__ import annotations

import functools
import itertools
import sys
import threading
from collections.abc import ValuesView
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator

from .base import EscapedOpError, HostSyncInCapture, PoisonedTensorError
from .capture_state import CaptureState
from .host_reads import HostReadPatch


class _Tls(threading.local):
    def __init__(self) -> None:
        self.bookkeeping = 0  # >0: the runner's own tensor work runs unchecked
        # The captures under way on this thread, innermost last: a runner's own capture
        # state over the one of a software device it captures on (the emulated NPU).
        self.captures: list[CaptureState] = []
        self.guard: Any = None  # the poison guard pushed on this thread, if any
        self.scopes = 0  # >0: inside a guarding() scope, where owner-scoped poison counts too
        self.unguarded_replays = 0  # >0: replaying a graph whose kernels receive no poisoned storage


_tls = _Tls()


def in_bookkeeping() -> bool:
    """Whether a runner's own tensor work is under way on this thread (ops then go unchecked)."""
    return _tls.bookkeeping > 0


# Poisoned storages of all torch graphs: storage key -> (weak ref, graph label, token).
_POISONED: dict[int, tuple[Any, str, int]] = {}
_TOKENS = itertools.count(1)
# Tokens whose poison counts only inside a guarding() scope (its owner's own calls).
_SCOPED: set[int] = set()

# Ops that need device data on the host: a value (item, bool, equal) or an
# output size that depends on the data (nonzero, masked_select, unique).
_SYNC_OPS = frozenset(
    {
        "aten::_local_scalar_dense",
        "aten::equal",
        "aten::is_nonzero",
        "aten::nonzero",
        "aten::masked_select",
        "aten::_unique",
        "aten::_unique2",
        "aten::unique_dim",
        "aten::unique_consecutive",
        "aten::unique_dim_consecutive",
    }
)
# Allocation-only ops: fine outside a kernel (a real capture serves them from its pool).
_ALLOC_OPS = frozenset(
    {
        "aten::empty",
        "aten::empty_strided",
        "aten::empty_like",
        "aten::new_empty",
        "aten::new_empty_strided",
    }
)
_HOST_READ_METHODS = ("tolist", "numpy", "cpu")


def _op_tensors(values: Any, tensor_type: type) -> list[Any]:
    """The tensors among an op's arguments or results: a tensor, a flat sequence of values or
    of tensor lists (``Tensor[]`` / ``Tensor?[]``); aten schemas nest no deeper."""
    if isinstance(values, tensor_type):
        return [values]
    if not isinstance(values, (tuple, list, ValuesView)):
        return []  # a scalar result
    found = []
    for v in values:
        if isinstance(v, tensor_type):
            found.append(v)
        elif isinstance(v, (tuple, list)):
            found.extend(x for x in v if isinstance(x, tensor_type))
    return found


def _arg_tensors(args: tuple, kwargs: dict, tensor_type: type) -> list[Any]:
    """The tensors among an op's positional and keyword arguments."""
    found = _op_tensors(args, tensor_type)
    if kwargs:
        found += _op_tensors(kwargs.values(), tensor_type)
    return found


def _storage_key(t: Any) -> int:
    return t.untyped_storage()._cdata


# Ops whose host sync depends on their arguments (see _host_sync_reason).
_MAYBE_SYNC_OPS = frozenset({"aten::index", "aten::repeat_interleave", "aten::_to_copy", "aten::copy_"})


@dataclass(frozen=True)
class _OpInfo:
    """What the capture mode needs to know of an op, looked up once per overload."""

    name: str  # "aten::index", without the overload
    is_view: bool
    allocates_only: bool
    may_sync: bool
    written: tuple[tuple[int, str], ...]  # (position, name) of the arguments the op writes


_OP_INFO: dict[Any, _OpInfo] = {}


def _op_info(func: Any) -> _OpInfo:
    info = _OP_INFO.get(func)
    if info is None:
        name = func._schema.name
        may_sync = name in _SYNC_OPS or name in _MAYBE_SYNC_OPS
        written = tuple(
            (i, a.name)
            for i, a in enumerate(func._schema.arguments)
            if a.alias_info is not None and a.alias_info.is_write
        )
        info = _OP_INFO[func] = _OpInfo(name, bool(func.is_view), name in _ALLOC_OPS, may_sync, written)
    return info


def _written_tensors(op: _OpInfo, args: tuple, kwargs: dict, tensor_type: type) -> list[Any]:
    """The tensors ``op`` writes in place (or as ``out=``), from its schema."""
    found = []
    for i, name in op.written:
        value = args[i] if i < len(args) else kwargs.get(name)
        if value is not None:
            found.extend(_op_tensors((value,), tensor_type))
    return found


def _host_sync_reason(func: Any, args: tuple, kwargs: dict) -> str | None:
    """Why ``func(*args, **kwargs)`` would synchronise with the host, or None."""
    import torch

    name = func._schema.name
    if name in _SYNC_OPS:
        return f"op {func} reads device data on the host (.item(), bool(t), int(t), torch.equal, nonzero, ...)"
    if name == "aten::index" and any(t is not None and t.dtype in (torch.bool, torch.uint8) for t in args[1]):
        return f"op {func} with a boolean mask has a data-dependent output size"
    if name == "aten::repeat_interleave" and func._overloadname != "self_int" and kwargs.get("output_size") is None:
        return f"op {func} without output_size has a data-dependent output size"
    if name == "aten::_to_copy" and args[0].device.type != "cpu":
        if torch.device(kwargs.get("device") or args[0].device).type == "cpu":
            return f"op {func} copies device data to the host"
    if name == "aten::copy_" and args[0].device.type == "cpu" and args[1].device.type != "cpu":
        return f"op {func} copies device data to the host"
    return None


def _dynamo_disabled_when_loaded(raw: Callable[..., Any]) -> Callable[..., Any]:
    """``raw`` (a ``__torch_dispatch__``) run past TorchDynamo once something has loaded it.

    torch wraps a dispatch mode's ``__torch_dispatch__`` in ``torch._disable_dynamo``,
    which imports ``torch._dynamo`` (and with it sympy, torch.distributed's FSDP and
    the inductor's triton helpers, a second or more) at the mode's first op. That
    only matters where Dynamo may be evaluating frames: never before something imports
    ``torch._dynamo`` (``torch.compile`` does). So the modes opt out of torch's wrapping
    (``_should_skip_dynamo``) and use this one: plain calls until Dynamo is loaded,
    ``torch._dynamo.disable`` from then on, as torch's wrapper would.
    """
    disabled: Callable[..., Any] | None = None

    @functools.wraps(raw)
    def dispatch(self, func, types, args=(), kwargs=None):
        nonlocal disabled
        if disabled is None:
            dynamo = sys.modules.get("torch._dynamo")
            if dynamo is None or not hasattr(dynamo, "disable"):
                return raw(self, func, types, args, kwargs)
            disabled = dynamo.disable(raw, recursive=True)
        return disabled(self, func, types, args, kwargs)

    return dispatch


@functools.cache
def _dispatch_mode_base() -> type:
    """``TorchDispatchMode`` whose subclasses keep their ``__torch_dispatch__`` unwrapped
    (each wraps it in :func:`_dynamo_disabled_when_loaded` itself)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class LazyDynamoMode(TorchDispatchMode):
        @classmethod
        def _should_skip_dynamo(cls) -> bool:
            return False

    return LazyDynamoMode


@functools.cache
def _mode_classes() -> tuple[type, type]:
    """The torch dispatch modes, defined on first use so that importing needs no torch."""
    import torch

    if TYPE_CHECKING:  # the type checker sees torch's class; the base is its subclass of _dispatch_mode_base
        from torch.utils._python_dispatch import TorchDispatchMode as ModeBase
    else:
        ModeBase = _dispatch_mode_base()

    class CaptureMode(ModeBase):
        """During capture: refuse host syncs, track allocations and, if asked, escaped work."""

        def __init__(self, state: CaptureState) -> None:
            super().__init__()
            self.state = state

        @_dynamo_disabled_when_loaded
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if _tls.bookkeeping:
                return func(*args, **kwargs)
            state, op = self.state, _op_info(func)
            reason = _host_sync_reason(func, args, kwargs) if op.may_sync else None
            if reason:
                raise HostSyncInCapture(f"{reason}; not allowed inside graph capture ({state.label})")
            inputs = _arg_tensors(args, kwargs, torch.Tensor)
            in_keys = [_storage_key(t) for t in inputs]
            if state.check_escapes and not op.is_view and not op.allocates_only:
                self._check_escape(func, inputs, in_keys)
            if state.before_write is not None and op.written:
                for t in _written_tensors(op, args, kwargs, torch.Tensor):
                    state.before_write(t)
            out = func(*args, **kwargs)
            in_ids = {id(t) for t in inputs}
            for t in _op_tensors(out, torch.Tensor):
                if id(t) in in_ids:  # an in-place op returns its input
                    continue
                state.region.objects.add(id(t))
                key = _storage_key(t)
                if key not in in_keys:
                    state.region.storages.add(key)
                    if state.kernel is not None:
                        state.kernel_storages.add(key)
            return out

        def _check_escape(self, func: Any, inputs: list[Any], keys: list[int]) -> None:
            state = self.state
            if state.kernel is None:
                raise EscapedOpError(
                    f"op {func} ran in the captured region outside any kernel; replay would drop it "
                    f"({state.label}; move it into a @kernel function)"
                )
            for t, key in zip(inputs, keys):
                if key not in state.kernel_storages:
                    raise EscapedOpError(
                        f"kernel {state.kernel} read a tensor that is not one of its arguments "
                        f"(self.attr? a global?): op {func} on a {tuple(t.shape)} {t.dtype} tensor "
                        f"({state.label}; pass every tensor a kernel touches as an argument)"
                    )

    class PoisonGuard(ModeBase):
        """Outside captures: raise on any non-view op touching a poisoned storage."""

        @_dynamo_disabled_when_loaded
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if _POISONED and not _tls.bookkeeping and not _tls.captures and not func.is_view:
                for t in _arg_tensors(args, kwargs, torch.Tensor):
                    entry = _POISONED.get(_storage_key(t))
                    if entry is not None and _counts(entry[2]):
                        raise PoisonedTensorError(
                            f"op {func} read a tensor allocated by the capture of {entry[1]} before "
                            "that graph's first replay; a real capture leaves it uninitialised "
                            "(replay the graph first)"
                        )
            return func(*args, **kwargs)

    return CaptureMode, PoisonGuard


@functools.cache
def _forwarding_mode_class() -> type:
    if TYPE_CHECKING:  # as in _mode_classes
        from torch.utils._python_dispatch import TorchDispatchMode as ModeBase
    else:
        ModeBase = _dispatch_mode_base()

    class ForwardingMode(ModeBase):
        """Hands every op to ``handler(func, args, kwargs)``, except the runners' own bookkeeping."""

        def __init__(self, handler: Callable[[Any, tuple, dict], Any]) -> None:
            super().__init__()
            self.handler = handler

        @_dynamo_disabled_when_loaded
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if _tls.bookkeeping:
                return func(*args, **kwargs)
            return self.handler(func, args, kwargs)

    return ForwardingMode


def forwarding_mode(handler: Callable[[Any, tuple, dict], Any]) -> Any:
    """A torch dispatch mode (enter it as a context manager) that gives every op of this thread to
    ``handler``, which runs it; the op-level recorder and the capture observer are such handlers."""
    return _forwarding_mode_class()(handler)


def _counts(token: int) -> bool:
    """Whether poison of ``token`` is enforced here: always, or only in a guarding() scope when owner-scoped."""
    return _tls.scopes > 0 or token not in _SCOPED


def _update_guard() -> None:
    """Keep the poison guard pushed on this thread exactly while a live storage is poisoned
    (poison scoped to its owner: only inside a :meth:`TorchOps.guarding` scope) and no
    capture is under way.

    The guard is popped only when it is the innermost mode; otherwise it stays
    (a no-op while nothing it enforces is poisoned) until a later capture or replay.
    """
    from torch.utils._python_dispatch import _get_current_dispatch_mode

    for key in [k for k, e in _POISONED.items() if e[0].expired()]:
        del _POISONED[key]
    # During a capture the guard enforces nothing (it skips captures) and would only put
    # a second Python dispatch on every captured op.
    wanted = not (_tls.captures or _tls.unguarded_replays) and any(_counts(e[2]) for e in _POISONED.values())
    if wanted and _tls.guard is None:
        _tls.guard = _mode_classes()[1]()
        _tls.guard.__enter__()
    elif not wanted and _tls.guard is not None and _get_current_dispatch_mode() is _tls.guard:
        guard, _tls.guard = _tls.guard, None
        guard.__exit__(None, None, None)


def _capturing() -> CaptureState | None:
    """The capture that makes a host read raise on this thread: the innermost emulator capture, unless bookkeeping."""
    if _tls.bookkeeping:
        return None
    return next((s for s in reversed(_tls.captures) if s.check_escapes), None)


_HOST_READS = HostReadPatch(_HOST_READ_METHODS, _capturing)


class TorchOps:
    """Framework ops for torch tensors: the emulator's only torch-specific part.

    Storage identity is the StorageImpl address (``untyped_storage()._cdata``),
    shared by every view; the poison registry holds a ``StorageWeakRef`` per
    entry, which also keeps that address from being reused while registered.
    """

    framework = "torch"
    tracks_writes = True  # the capture mode calls CaptureState.before_write

    def __init__(self) -> None:
        import torch

        self.torch = torch

    # TensorOps ------------------------------------------------------------------------------
    def is_tensor(self, obj: Any) -> bool:
        return isinstance(obj, self.torch.Tensor)

    def data_ptr(self, t: Any) -> int:
        return t.data_ptr()

    def shape(self, t: Any) -> tuple[int, ...]:
        return tuple(t.shape)

    def dtype_name(self, t: Any) -> str:
        return str(t.dtype).removeprefix("torch.")

    def storage_key(self, t: Any) -> int:
        return _storage_key(t)

    def view_base(self, t: Any) -> Any | None:
        return t._base

    # memory ----------------------------------------------------------------------------------
    @contextmanager
    def bookkeeping(self) -> Iterator[None]:
        """Run the runner's own tensor work past the capture checks and the poison guard."""
        _tls.bookkeeping += 1
        try:
            yield
        finally:
            _tls.bookkeeping -= 1

    def snapshot(self, t: Any) -> tuple[Any, Any]:
        """A copy of all of ``t``'s storage, for :meth:`restore`."""
        with self.bookkeeping():
            storage = t.untyped_storage()
            return storage, storage.clone()

    def restore(self, snap: tuple[Any, Any]) -> None:
        storage, saved = snap
        with self.bookkeeping():
            storage.copy_(saved)

    def alias(self, t: Any) -> Any:
        """A new tensor object over ``t``'s memory that keeps no reference to ``t`` itself."""
        with self.bookkeeping():
            return self.torch.empty(0, dtype=t.dtype, device=t.device).set_(
                t.untyped_storage(), t.storage_offset(), t.shape, t.stride()
            )

    def copy_into(self, dst: Any, src: Any) -> None:
        dst.copy_(src)

    def storage_nbytes(self, t: Any) -> int:
        return t.untyped_storage().nbytes()

    def poison_value(self, dtype: Any) -> Any:
        """NaN for floats, True for bools, 0x5A5A... (negated) or 0xA5A5... for integers."""
        torch = self.torch
        if dtype == torch.bool:
            return True
        if dtype.is_floating_point or dtype.is_complex:
            return float("nan")
        info = torch.iinfo(dtype)
        nbytes = info.bits // 8
        return -int("5A" * nbytes, 16) if info.min < 0 else int("A5" * nbytes, 16)

    def poison(self, t: Any) -> None:
        """Fill all of ``t``'s storage with the poison value of ``t``'s dtype."""
        with self.bookkeeping():
            storage = t.untyped_storage()
            n = storage.nbytes() // t.element_size()
            flat = self.torch.empty(0, dtype=t.dtype, device=t.device).set_(storage, 0, (n,), (1,))
            flat.fill_(self.poison_value(t.dtype))

    # poison registry -------------------------------------------------------------------------
    def mark_poisoned(self, tensors: list[Any], label: str) -> int:
        """Make non-view ops on these storages raise until :meth:`clear_poison`; returns the token."""
        from torch.multiprocessing.reductions import StorageWeakRef

        token = next(_TOKENS)
        for t in tensors:
            _POISONED[_storage_key(t)] = (StorageWeakRef(t.untyped_storage()), label, token)
        _update_guard()
        return token

    def clear_poison(self, token: int) -> None:
        for key in [k for k, e in _POISONED.items() if e[2] == token]:
            del _POISONED[key]
        _SCOPED.discard(token)
        _update_guard()

    def clear_poison_of(self, tensors: Iterable[Any]) -> None:
        """Lift the poison of these tensors' storages, whichever capture set it (a replay writes them)."""
        for t in tensors:
            _POISONED.pop(_storage_key(t), None)
        _update_guard()

    def scope_poison(self, token: int) -> None:
        """Enforce ``token``'s poison only inside :meth:`guarding` scopes from now on.

        For a runner whose graphs only its owner can reach (an engine's): nothing
        else holds the storages, so checking every op of the harness in between
        (a Python dispatch per op) would only cost time.
        """
        _SCOPED.add(token)
        _update_guard()

    @contextmanager
    def guarding(self) -> Iterator[None]:
        """A scope in which owner-scoped poison is enforced too (the owner's own calls)."""
        _tls.scopes += 1
        try:
            _update_guard()
            yield
        finally:
            _tls.scopes -= 1
            _update_guard()

    def any_poisoned(self) -> bool:
        """Whether any storage is poisoned now (cheap: lets a replay skip lifting when none is)."""
        return bool(_POISONED)

    def is_poisoned(self, t: Any) -> bool:
        return _storage_key(t) in _POISONED

    @contextmanager
    def replaying(self, kernel_inputs: Callable[[], Iterable[Any]]) -> Iterator[None]:
        """Around an emulated replay whose kernels receive the tensors ``kernel_inputs()``.

        Kernels touch only their arguments (the capture refused anything else), so when
        none of these storages is poisoned where poison counts, no op of the replay can
        read poison: the guard is lifted for it (a Python dispatch per op saved, the
        warm-up replays of a fresh engine mostly). Otherwise the guard checks every op.
        """
        if not _POISONED or any(
            (e := _POISONED.get(_storage_key(t))) is not None and _counts(e[2]) for t in kernel_inputs()
        ):
            yield
            return
        _tls.unguarded_replays += 1
        try:
            _update_guard()
            yield
        finally:
            _tls.unguarded_replays -= 1
            _update_guard()

    # capture hooks ---------------------------------------------------------------------------
    @contextmanager
    def capture_hooks(self, state: CaptureState) -> Iterator[None]:
        """Install the capture dispatch mode for ``state`` on this thread.

        With ``state.check_escapes`` (the emulator), ``t.tolist()``,
        ``t.numpy()`` and ``t.cpu()`` raise too: on a CPU tensor they dispatch
        no op, so the methods are patched for the capture's duration (process
        wide, but they only refuse on the capturing thread). Hooks nest: each
        capture state gets its own dispatch mode, innermost first.
        """
        with self.capturing(state), _mode_classes()[0](state):
            yield

    @contextmanager
    def capturing(self, state: CaptureState) -> Iterator[None]:
        """Mark a capture under way on this thread: the poison guard is off, and with
        ``state.check_escapes`` the host-read methods refuse (see :meth:`capture_hooks`).
        The op-level recorder uses this with its own dispatch mode."""
        _tls.captures.append(state)
        try:
            _update_guard()  # off while capturing
            with self._patched_host_reads(state.check_escapes):
                yield
        finally:
            _tls.captures.remove(state)
            _update_guard()

    @contextmanager
    def _patched_host_reads(self, enabled: bool) -> Iterator[None]:
        if not enabled:
            yield
            return
        with _HOST_READS.applied(self.torch.Tensor):
            yield
