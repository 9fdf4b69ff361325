"""Paddle's CUDAGraph on a Kunlun XPU place behind the :class:`GraphRunner` interface.

On a Paddle-XPU build, ``paddle.device.cuda.graphs.CUDAGraph(place=paddle.XPUPlace(i))``
captures XPU graphs (docs/bug-classes.md covers the traps): ``capture_begin()``, the region,
``capture_end()``, then ``replay()``; ``reset()`` frees the graph. The recipe follows
FastDeploy's XPU capture loop and :mod:`graphcheck.capture.cuda`:

* warm up: run the region ``warmup_iters`` times for real, with a kernel observer
  that snapshots every pre-existing storage a kernel touches before its first touch;
* synchronise, capture the region once with an observer that records each kernel's
  arguments for the static-input table (kernel results count as the region's own
  allocations: paddle has no op hook) and refuses ``kernels.host_sync``; while it
  runs, paddle tensor host reads (``.numpy()``, ``.item()``, ``bool(t)``, ...) raise
  :class:`HostSyncInCapture` before they reach the device and invalidate the capture;
* restore the snapshots and synchronise, so the capture leaves no side effects.

The warm-up and capture observers are shared with the other device runners
(:mod:`graphcheck.capture.warmup`).

Default memory pool and ``thread_local`` mode, as FastDeploy uses them.

**Where the graph API comes from.** The runner uses only the names listed on
:class:`XpuBinding`. :func:`load_xpu_binding` builds the real one from paddle (imported
then, and only when paddle reports an XPU: ``graphcheck.capture.devices``);
:mod:`graphcheck.capture.xpu_emulated` builds a stand-in on the CPU for
``--backend xpu --emulate``, so this same capture and replay code runs without a
Kunlun device. A graph that can replay call by call (the stand-in's) is replayed
that way under a kernel trace; a real one is one opaque launch.
"""

from __future__ import annotations

import contextlib
import itertools
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from . import kernels
from .base import DeviceGraph, GraphRunner, StaticInputTable
from .capture_state import CaptureState
from .paddle_ops import PaddleOps
from .warmup import ArgRecorder, op_hooks_in_warm_up, region_label, restore, warm_up


@dataclass(frozen=True)
class XpuBinding:
    """The graph API the xpu runner drives, and the place its graphs run on.

    ``graph_cls(place=, mode=)`` is ``paddle.device.cuda.graphs.CUDAGraph`` or a
    stand-in with its methods (``capture_begin``, ``capture_end``, ``replay``,
    ``reset``); ``synchronize(place)`` and ``memory_allocated(place)`` are
    ``paddle.device.synchronize`` and ``paddle.device.xpu.memory_allocated``.
    """

    graph_cls: Callable[..., Any]
    place: Any  # paddle.XPUPlace(i) on a Kunlun device
    device: str  # paddle device string of the tensors: "xpu:0"
    synchronize: Callable[[Any], None]
    memory_allocated: Callable[[Any], int]
    runner_name: str  # what reports call the runner: "xpu"; stand-ins say what they are
    source: str  # one line for descriptions: "paddle 3.3.1 on xpu:0"


def load_xpu_binding(device: str = "xpu:0") -> XpuBinding:
    """Paddle's CUDAGraph on the XPU place of ``device``, paddle imported now.

    Raises RuntimeError when paddle was built without XPU support or sees no XPU.
    """
    import paddle
    from paddle.device.cuda.graphs import CUDAGraph

    if not paddle.device.is_compiled_with_xpu() or paddle.device.xpu.device_count() == 0:
        raise RuntimeError("XpuGraphRunner needs a Kunlun XPU and a Paddle build with XPU support")
    place = paddle.XPUPlace(int(device.partition(":")[2] or 0))
    return XpuBinding(
        graph_cls=CUDAGraph,
        place=place,
        device=device,
        synchronize=paddle.device.synchronize,
        memory_allocated=paddle.device.xpu.memory_allocated,
        runner_name="xpu",
        source=f"paddle {paddle.__version__} on {device}",
    )


class XpuGraph(DeviceGraph):
    """A captured paddle CUDAGraph on an XPU place; holds no reference to its static inputs."""

    @property
    def device_graph(self) -> Any:
        """The graph API's own graph object (replaying it directly is what :meth:`replay` does)."""
        return self._graph

    def replay(self) -> None:
        if getattr(self._graph, "traces_calls", False):
            self._graph.replay()  # it reports each kernel call to a tracer itself
        else:
            super().replay()

    def persistent_tensors(self) -> list[Any]:
        """The outputs, plus what the device graph keeps between replays where it can say (the stand-in)."""
        inner = getattr(self._graph, "persistent_tensors", None)
        return super().persistent_tensors() + (inner() if callable(inner) else [])

    def kernel_calls(self) -> list[tuple[Any, tuple, dict]]:
        """The recorded kernel calls where the device graph can list them (the stand-in); else []."""
        calls = getattr(self._graph, "kernel_calls", None)
        return calls() if callable(calls) else []

    def reset(self) -> None:
        """Free the captured graph (it cannot be replayed afterwards)."""
        self._graph.reset()


class XpuGraphRunner(GraphRunner):
    """Graph runner on ``paddle.device.cuda.graphs.CUDAGraph`` with an XPU place.

    ``binding`` is an :class:`XpuBinding`, or a device string (``"xpu:1"``) to load
    the real one for with :func:`load_xpu_binding`.
    """

    name = "xpu"

    def __init__(self, binding: XpuBinding | str = "xpu:0", warmup_iters: int = 2) -> None:
        self.binding = load_xpu_binding(binding) if isinstance(binding, str) else binding
        self.name = self.binding.runner_name
        self.ops = PaddleOps()
        self.warmup_iters = warmup_iters
        self.device = self.binding.device
        self.place = self.binding.place
        self._count = itertools.count(1)
        #: the host-read hooks during warm-up runs: on the emulated XPU (CPU) only, see ``warmup.op_hooks_in_warm_up``
        self.warm_up_hooks = op_hooks_in_warm_up(self.device)

    def capture(self, fn: Callable[[], Any], *, names: Mapping[int, str] | None = None) -> XpuGraph:
        ops = self.ops
        label = region_label(next(self._count), fn)
        snapshots: dict[int, Any] = {}
        try:
            warm_up(fn, ops, self.warmup_iters, label, snapshots, op_hooks=self.warm_up_hooks)
            state = CaptureState(label, check_escapes=False)
            table = StaticInputTable(ops, state.region, names)
            graph = self.binding.graph_cls(place=self.place, mode="thread_local")
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
        return int(self.binding.memory_allocated(self.place))

    def synchronize(self) -> None:
        self.binding.synchronize(self.place)
