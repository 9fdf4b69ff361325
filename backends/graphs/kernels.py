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
"""

from __future__ import annotations

import functools
import threading
from typing import Any, Callable, Protocol, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


class KernelObserver(Protocol):
    """Installed by a graph runner while it captures a region."""

    def run_kernel(self, fn: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
        """Run (and possibly record) one outermost kernel call; return its result."""

    def on_host_sync(self, what: str) -> None:
        """Called before a device-to-host transfer; raise to refuse it."""


class _State(threading.local):
    def __init__(self) -> None:
        self.observer: KernelObserver | None = None
        self.depth = 0


_state = _State()


def kernel(fn: F) -> F:
    """Mark ``fn`` as an engine kernel: the unit a graph capture records."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        observer = _state.observer
        if observer is None or _state.depth > 0:
            return fn(*args, **kwargs)
        _state.depth += 1
        try:
            return observer.run_kernel(fn, args, kwargs)
        finally:
            _state.depth -= 1

    wrapper.__graphcheck_kernel__ = fn  # type: ignore[attr-defined]
    return wrapper  # type: ignore[return-value]


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


def host_sync(what: str) -> None:
    """Announce a device-to-host transfer; an active capture may refuse it."""
    observer = _state.observer
    if observer is not None:
        observer.on_host_sync(what)
