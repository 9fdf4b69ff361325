"""Paddle's XPU graph API on the CPU emulator, for the xpu runner without a Kunlun device.

``--backend xpu --emulate`` (and CI) run :class:`~graphcheck.capture.xpu.XpuGraphRunner`
unchanged over :class:`EmulatedXpu`, so the runner's own code path runs on paddle
CPU tensors: warm-up with snapshots, the synchronise before capture,
``CUDAGraph(place=..., mode="thread_local")``, ``capture_begin``, the region under
the runner's observer, ``capture_end`` (also on the failure path, then ``reset``),
restoring the snapshots, replay. Captures are the emulator's
(:class:`~graphcheck.capture.emulated.EmulatedCapture` over
:class:`~graphcheck.capture.paddle_ops.PaddleOps`, installed as the *device
recorder* that the runner's observer launches kernels through), so replays have the
emulator's semantics: frozen arguments, stale reads of rebound buffers, outputs
poisoned until the first replay (checked on ``xp.to_host``), host syncs refused.

Where Paddle on an XPU would fail, this module raises
:class:`~graphcheck.capture.base.CaptureError`:

* ``capture_begin`` while a capture is under way: the same graph's (twice) or
  another's (captures do not nest); or on a graph already captured and not reset;
* ``capture_end`` without ``capture_begin`` on that graph;
* ``replay`` of a graph that was never captured or was reset since, or while a
  capture is under way;
* ``synchronize`` during a capture;
* a graph made with a mode paddle does not know (paddle asserts) or, a wiring
  check of the runner, for another place than the device's.

What this proves: the runner's wiring, and the graph-semantic bugs the emulator
models (docs/bug-classes.md). What it does not: Kunlun kernels (paddle's CPU
kernels run), the XPU memory pool (``memory_allocated`` is the storage the
module's graphs hold, as :meth:`EmulatedRunner.memory_bytes`), ``thread_local``
mode semantics (the mode is checked and logged; captures are per module and CPU
work is synchronous), nor anything an XPU graph records beyond kernel calls.
:attr:`EmulatedXpu.log` lists the graph API calls in order, for tests of the
runner's wiring. Importing this module does not import paddle.
"""

from __future__ import annotations

import itertools
from contextlib import ExitStack
from typing import Any

from .base import CaptureError
from .emulated import EmulatedCapture, EmulatedGraph, EmulatedRunner
from .xpu import XpuBinding

#: ``paddle.device.cuda.graphs.ALL_MODES``.
MODES = ("global", "thread_local", "relaxed")


class EmulatedXpuGraph:
    """``paddle.device.cuda.graphs.CUDAGraph`` over an emulated capture."""

    traces_calls = True  # replays through EmulatedGraph, which a kernel trace sees call by call

    def __init__(self, module: EmulatedXpu, label: str, mode: str) -> None:
        self.module, self.label, self.mode = module, label, mode
        self.graph: EmulatedGraph | None = None  # set by capture_end
        self._capture: EmulatedCapture | None = None
        self._stack = ExitStack()
        self._was_reset = False

    def kernel_calls(self) -> list[tuple[Any, tuple, dict]]:
        """The captured graph's recorded kernel calls (none before capture_end)."""
        return self.graph.kernel_calls() if self.graph is not None else []

    def persistent_tensors(self) -> list[Any]:
        """What the captured graph keeps between replays (``EmulatedGraph.persistent_tensors``)."""
        return self.graph.persistent_tensors() if self.graph is not None else []

    def capture_begin(self) -> None:
        m = self.module
        if m._capturing is self:
            raise CaptureError(f"capture_begin of {self.label} twice: it is being captured")
        if m._capturing is not None:
            raise CaptureError(
                f"capture_begin of {self.label} while {m._capturing.label} is being captured; captures do not nest"
            )
        if self.graph is not None:
            raise CaptureError(f"{self.label} is already captured; reset() it first")
        capture = m.runner.open_capture(self.label)
        self._stack.enter_context(capture.recording(as_device=True))
        self._capture, self._was_reset = capture, False
        m._capturing = self
        m._log("capture_begin", f"{self.label}, mode {self.mode}")

    def capture_end(self) -> None:
        m = self.module
        capture = self._capture
        if m._capturing is not self or capture is None:
            raise CaptureError(f"capture_end of {self.label} without capture_begin")
        self._capture = None  # it holds the static inputs strongly; the graph does not
        self._close()
        self.graph = capture.finish(None)
        m._log("capture_end", self.label)

    def _close(self) -> None:
        """Leave capture mode (restoring what the region touched); idempotent."""
        try:
            self._stack.close()
        finally:
            if self.module._capturing is self:
                self.module._capturing = None

    def replay(self) -> None:
        m = self.module
        if self.graph is None:
            raise CaptureError(
                f"replay of {self.label}, which {'was reset' if self._was_reset else 'was not captured'}"
            )
        if m._capturing is not None:
            raise CaptureError(f"replay of {self.label} while {m._capturing.label} is being captured")
        self.graph.replay()
        m._log("replay", self.label)

    def reset(self) -> None:
        """Free the graph; during its own capture, leave capture mode first."""
        held = self.graph is not None or self._capture is not None
        self._close()
        self.graph, self._capture = None, None
        self._was_reset = self._was_reset or held
        self.module._log("reset", self.label)


class EmulatedXpu:
    """The paddle graph API names the xpu runner uses, on the CPU emulator (see the module docstring)."""

    def __init__(self, ops: Any = None) -> None:
        import paddle

        from .paddle_ops import PaddleOps

        self.runner = EmulatedRunner(ops if ops is not None else PaddleOps())
        self.place = paddle.CPUPlace()
        self._capturing: EmulatedXpuGraph | None = None
        self._numbers = itertools.count(1)
        self.log: list[tuple[str, str]] = []  # (what, detail), in call order

    def _log(self, what: str, detail: str) -> None:
        self.log.append((what, detail))

    def CUDAGraph(self, place: Any = None, mode: str = "thread_local", pool_id: Any = None) -> EmulatedXpuGraph:  # noqa: N802 (paddle's name)
        """A new graph on ``place`` (the device's own; None means it too)."""
        if place is not None and str(place) != str(self.place):
            raise CaptureError(f"CUDAGraph on {place}, but the emulated device is {self.place}")
        if mode not in MODES:
            raise CaptureError(f"CUDAGraph mode {mode!r}: paddle knows {', '.join(MODES)}")
        graph = EmulatedXpuGraph(self, f"CUDAGraph #{next(self._numbers)}", mode)
        self._log("graph", f"{graph.label} on {self.place}, mode {mode}")
        return graph

    def synchronize(self, place: Any = None) -> None:
        if self._capturing is not None:
            raise CaptureError(f"synchronize() while {self._capturing.label} is being captured")
        self._log("synchronize", str(self.place if place is None else place))

    def memory_allocated(self, place: Any = None) -> int:
        return self.runner.memory_bytes()

    def binding(self) -> XpuBinding:
        """This module as the xpu runner's binding (paddle tensors on the CPU)."""
        return XpuBinding(
            graph_cls=self.CUDAGraph,
            place=self.place,
            device="cpu",
            synchronize=self.synchronize,
            memory_allocated=self.memory_allocated,
            runner_name="xpu-emulated",
            source="the emulated Paddle XPU graph API (CPU)",
        )


def emulated_xpu_binding(ops: Any = None) -> XpuBinding:
    """A fresh emulated XPU graph API as the xpu runner's binding."""
    return EmulatedXpu(ops).binding()
