"""Paddle's CUDAGraph on a Kunlun XPU place behind the :class:`GraphRunner` interface.

On a Paddle-XPU build, ``paddle.device.cuda.graphs.CUDAGraph(place=paddle.XPUPlace(i))``
captures XPU graphs (docs/bug-classes.md covers the traps): ``capture_begin()``, the region,
``capture_end()``, then ``replay()``; ``reset()`` frees the graph. The recipe follows
FastDeploy's XPU capture loop and :mod:`graphcheck.backends.graphs.cuda`:

* warm up: run the region ``warmup_iters`` times for real, with a kernel observer
  that snapshots every pre-existing storage a kernel touches before its first touch;
* synchronise, capture the region once with an observer that records each kernel's
  arguments for the static-input table (kernel results count as the region's own
  allocations: paddle has no op hook) and refuses ``kernels.host_sync``; while it
  runs, paddle tensor host reads (``.numpy()``, ``.item()``, ``bool(t)``, ...) raise
  :class:`HostSyncInCapture` before they reach the device and invalidate the capture;
* restore the snapshots and synchronise, so the capture leaves no side effects.

The warm-up and capture observers are shared with the other device runners
(:mod:`graphcheck.backends.graphs.warmup`).

Default memory pool and ``thread_local`` mode, as FastDeploy uses them. Paddle is
imported only when a runner is made; the runner is used only when paddle reports
an XPU (``graphcheck.backends.devices``). It cannot run on machines without one.
"""

from __future__ import annotations

import contextlib
import itertools
from typing import Any, Callable, Mapping

from . import kernels
from .base import DeviceGraph, GraphRunner, StaticInputTable
from .capture_state import CaptureState
from .paddle_ops import PaddleOps
from .warmup import ArgRecorder, region_label, restore, warm_up


class XpuGraph(DeviceGraph):
    """A captured paddle CUDAGraph on an XPU place; holds no reference to its static inputs."""

    def reset(self) -> None:
        """Free the captured graph (it cannot be replayed afterwards)."""
        self._graph.reset()


class XpuGraphRunner(GraphRunner):
    """Graph runner on ``paddle.device.cuda.graphs.CUDAGraph`` with an XPU place."""

    name = "xpu"

    def __init__(self, device: str = "xpu:0", warmup_iters: int = 2) -> None:
        import paddle
        from paddle.device.cuda.graphs import CUDAGraph

        if not paddle.device.is_compiled_with_xpu() or paddle.device.xpu.device_count() == 0:
            raise RuntimeError("XpuGraphRunner needs a Kunlun XPU and a Paddle build with XPU support")
        self.paddle = paddle
        self._graph_cls = CUDAGraph
        self.ops = PaddleOps()
        self.warmup_iters = warmup_iters
        self.device = device
        self.place = paddle.XPUPlace(int(device.partition(":")[2] or 0))
        self._count = itertools.count(1)

    def capture(self, fn: Callable[[], Any], *, names: Mapping[int, str] | None = None) -> XpuGraph:
        ops = self.ops
        label = region_label(next(self._count), fn)
        snapshots: dict[int, Any] = {}
        try:
            warm_up(fn, ops, self.warmup_iters, label, snapshots)
            state = CaptureState(label, check_escapes=False)
            table = StaticInputTable(ops, state.region, names)
            graph = self._graph_cls(place=self.place, mode="thread_local")
            self.synchronize()
            graph.capture_begin()
            try:
                with kernels.observing(ArgRecorder(ops, state, table)), ops.capture_hooks(state):
                    outputs = fn()
            except BaseException:
                with contextlib.suppress(Exception):  # leave capture mode, then report the failure
                    graph.capture_end()
                    graph.reset()
                raise
            graph.capture_end()
        finally:
            restore(ops, snapshots)
            self.synchronize()
        return XpuGraph(graph, outputs, table, ops, label)

    def memory_bytes(self) -> int:
        return int(self.paddle.device.xpu.memory_allocated(self.place))

    def synchronize(self) -> None:
        self.paddle.device.synchronize(self.place)
