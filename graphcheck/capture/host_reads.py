"""Host-read refusal shared by the framework ops: tensor methods patched for a capture's duration.

Some host reads dispatch no device op (``t.tolist()`` on a CPU tensor, or any paddle
read: paddle has no op hook), so :class:`TorchOps` and :class:`PaddleOps` replace
those tensor methods while a capture runs. :class:`HostReadPatch` holds the
mechanism: the patch is process wide and reference counted (applied when the first
capture starts, the originals put back when the last one ends); each guard raises
:class:`HostSyncInCapture` only on a thread whose framework ops name a capture
state. Which methods, and which state, is each framework's business.
"""

from __future__ import annotations

import functools
import threading
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from .base import HostSyncInCapture
from .capture_state import CaptureState
from .sites import here


def host_read_guard(
    name: str,
    original: Callable[..., Any],
    capturing: Callable[[], CaptureState | None],
) -> Callable[..., Any]:
    """``original`` wrapped to raise while ``capturing()`` names a capture state (else it runs as is)."""

    @functools.wraps(original)
    def guarded(self: Any, *args: Any, **kwargs: Any) -> Any:
        state = capturing()
        if state is not None:
            raise HostSyncInCapture(
                f"tensor.{name}() reads device data on the host at {here()}; "
                f"not allowed inside graph capture ({state.label})"
            )
        return original(self, *args, **kwargs)

    return guarded


class HostReadPatch:
    """Reference-counted, process-wide replacement of a tensor class's host-read methods.

    ``capturing`` returns the capture state that makes a read on this thread
    raise, or None (no capture, or the runner's own bookkeeping). A method the
    tensor class lacks is left alone.
    """

    def __init__(self, methods: tuple[str, ...], capturing: Callable[[], CaptureState | None]) -> None:
        self.methods = methods
        self._capturing = capturing
        self._lock = threading.Lock()
        self.depth = 0
        self.originals: dict[str, Any] = {}  # name -> the class's own attribute, None where inherited

    @contextmanager
    def applied(self, tensor_type: type) -> Iterator[None]:
        with self._lock:
            if self.depth == 0:
                for name in self.methods:
                    original = getattr(tensor_type, name, None)
                    if original is None:
                        continue
                    self.originals[name] = tensor_type.__dict__.get(name)
                    setattr(tensor_type, name, host_read_guard(name, original, self._capturing))
            self.depth += 1
        try:
            yield
        finally:
            with self._lock:
                self.depth -= 1
                if self.depth == 0:
                    for name, original in self.originals.items():
                        if original is None:
                            delattr(tensor_type, name)
                        else:
                            setattr(tensor_type, name, original)
                    self.originals.clear()
