"""Kernel registry: the unit of work a graph records.

Every engine kernel is a plain function decorated with :func:`kernel`. It
receives every tensor it touches as an argument (dataclasses of tensors are
fine) and either mutates them in place or returns new tensors (a tensor, a
tuple of tensors, or None). It never reads ``self.some_buffer``: a graph
replays the tensors it saw at capture, and an attribute read at replay time
would hide exactly the rebinding bugs graphcheck exists to find.

Outside a capture, a kernel call is a plain function call. While a
:class:`KernelObserver` is installed (by a graph runner during capture), the
outermost kernel call of each nesting is routed through
``observer.run_kernel(fn, args, kwargs)``; the observer runs it, records it,
or both. Host synchronisations go through :func:`host_sync`, which the
observer may refuse.

Two additions serve devices and ops that a CUDA-style capture does not cover:

* :class:`HostParam`: a host-side kernel argument (a Python value such as a
  list of sequence lengths) that a device graph bakes into the captured task.
  The kernel always receives its current value; an observer that defines
  ``run_host_param_kernel`` also learns which arguments were host parameters
  (the npu runner re-issues those tasks before every replay).
* :func:`launch`: how a runner's observer issues a kernel call. It is a plain
  call unless a software device (the emulated NPU module) installed a *device
  recorder* with :class:`device_recording`, because a CPU cannot capture device
  work on a stream the way ACL or CUDA do.
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass
from typing import Any, Callable, Protocol, TypeVar, Union

F = TypeVar("F", bound=Callable[..., Any])


class KernelObserver(Protocol):
    """Installed by a graph runner while it captures a region.

    An observer may also define ``run_host_param_kernel(fn, args, kwargs,
    slots)``: then kernel calls with :class:`HostParam` arguments go there
    instead, with the values already read and ``slots`` saying where they sat.
    """

    def run_kernel(self, fn: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
        """Run (and possibly record) one outermost kernel call; return its result."""

    def on_host_sync(self, what: str) -> None:
        """Called before a device-to-host transfer; raise to refuse it."""


@dataclass(frozen=True)
class HostParam:
    """A host-side kernel argument that a device graph bakes into the captured task.

    Some device ops take plain host values, not tensors (the fused attention
    of torch_npu takes ``actual_seq_lengths`` as a Python list). A captured
    graph keeps the value the op saw at capture: a CUDA graph and the emulated
    runner replay it stale; torch_npu can patch it through a task update,
    which the npu runner issues before every replay. Pass a ``HostParam`` as a
    top-level argument of a kernel call; the kernel receives ``read()``, the
    value now, eagerly and while being captured alike.
    """

    name: str
    read: Callable[[], Any]


#: Where a host parameter sat in a kernel call: (position or keyword, the parameter).
HostSlot = tuple[Union[int, str], HostParam]


class KernelTracer(Protocol):
    """Installed by a kernel trace (``graphcheck.check.trace``) while an engine runs outside capture.

    Sees every outermost kernel call made eagerly, and every kernel call a
    graph replays where the graph can replay call by call (``graph`` names
    it); a graph that replays as one opaque launch reports itself as one call.
    """

    def trace_call(self, fn: Callable[..., Any], args: tuple, kwargs: dict, *, graph: str | None) -> Any:
        """Run ``fn`` with :func:`run_nested` and return its result, recording what it read and wrote."""


class _State(threading.local):
    def __init__(self) -> None:
        self.observer: KernelObserver | None = None
        self.depth = 0
        self.device: KernelObserver | None = None  # a software device's recorder, see launch()
        self.tracer: KernelTracer | None = None


_state = _State()


def _host_slots(args: tuple, kwargs: dict) -> tuple[HostSlot, ...]:
    slots: list[HostSlot] = [(i, a) for i, a in enumerate(args) if isinstance(a, HostParam)]
    slots += [(k, v) for k, v in kwargs.items() if isinstance(v, HostParam)]
    return tuple(slots)


def with_host_values(
    args: tuple, kwargs: dict, slots: tuple[HostSlot, ...], values: dict[str, Any] | None = None
) -> tuple[tuple, dict]:
    """``args``/``kwargs`` with each host slot set to ``values[name]`` (default: ``read()`` now)."""
    new_args, new_kwargs = list(args), dict(kwargs)
    for where, param in slots:
        value = param.read() if values is None else values[param.name]
        if isinstance(where, int):
            new_args[where] = value
        else:
            new_kwargs[where] = value
    return tuple(new_args), new_kwargs


def kernel(fn: F) -> F:
    """Mark ``fn`` as an engine kernel: the unit a graph capture records."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        slots = _host_slots(args, kwargs)
        if slots:
            args, kwargs = with_host_values(args, kwargs, slots)
        observer = _state.observer
        if observer is None and _state.tracer is not None and _state.depth == 0:
            return _state.tracer.trace_call(fn, args, kwargs, graph=None)
        if observer is None or _state.depth > 0:
            return fn(*args, **kwargs)
        _state.depth += 1
        try:
            if slots and hasattr(observer, "run_host_param_kernel"):
                return observer.run_host_param_kernel(fn, args, kwargs, slots)
            return observer.run_kernel(fn, args, kwargs)
        finally:
            _state.depth -= 1

    wrapper.__graphcheck_kernel__ = fn  # type: ignore[attr-defined]
    return wrapper  # type: ignore[return-value]


def run_nested(fn: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
    """Call ``fn`` as an outermost kernel call: kernels it calls are part of it, not traced apart."""
    _state.depth += 1
    try:
        return fn(*args, **kwargs)
    finally:
        _state.depth -= 1


def current_tracer() -> KernelTracer | None:
    """The kernel tracer of this thread, or None (then graphs replay untraced)."""
    return _state.tracer if _state.observer is None else None


class tracing:
    """Context manager installing a :class:`KernelTracer` for the current thread (not re-entrant)."""

    def __init__(self, tracer: KernelTracer):
        self._tracer = tracer

    def __enter__(self) -> KernelTracer:
        if _state.tracer is not None:
            raise RuntimeError("a kernel trace is already under way on this thread")
        _state.tracer = self._tracer
        return self._tracer

    def __exit__(self, *exc: object) -> None:
        _state.tracer = None


def is_kernel(fn: Callable[..., Any]) -> bool:
    return hasattr(fn, "__graphcheck_kernel__")


def current_observer() -> KernelObserver | None:
    return _state.observer


def in_kernel() -> bool:
    """True while the body of an observed kernel runs."""
    return _state.depth > 0


class observing:
    """Context manager installing ``observer`` for the current thread (not re-entrant)."""

    def __init__(self, observer: KernelObserver):
        self._observer = observer

    def __enter__(self) -> KernelObserver:
        if _state.observer is not None:
            raise RuntimeError("a graph capture is already under way on this thread")
        _state.observer = self._observer
        _state.depth = 0
        return self._observer

    def __exit__(self, *exc: object) -> None:
        _state.observer = None
        _state.depth = 0


def launch(fn: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
    """Issue one kernel call on the device; runner observers run kernels through this.

    A plain call, unless a software device installed a recorder (see
    :class:`device_recording`): then the recorder runs (or records) the call.
    """
    device = _state.device
    if device is None:
        return fn(*args, **kwargs)
    return device.run_kernel(fn, args, kwargs)


class device_recording:
    """Context manager installing a software device's kernel recorder for this thread.

    The emulated NPU module uses it between ``capture_begin`` and
    ``capture_end`` (and during task updates): a real device records the work
    a runner launches on the capturing stream; on the CPU the recorder must
    see each kernel call instead. Not re-entrant.
    """

    def __init__(self, recorder: KernelObserver):
        self._recorder = recorder

    def __enter__(self) -> KernelObserver:
        if _state.device is not None:
            raise RuntimeError("a device recorder is already installed on this thread")
        _state.device = self._recorder
        return self._recorder

    def __exit__(self, *exc: object) -> None:
        _state.device = None


def host_sync(what: str) -> None:
    """Announce a device-to-host transfer; an active capture may refuse it."""
    observer = _state.observer
    if observer is not None:
        observer.on_host_sync(what)
