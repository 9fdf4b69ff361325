"""A graph runner that captures through ``torch.cuda``'s public API, as third-party engines do.

:class:`TorchCudaApiRunner` calls ``torch.cuda.CUDAGraph()`` and ``torch.cuda.graph(g,
pool=...)`` by name and nothing of graphcheck's, so the same code path is

* on a GPU: a real capture after two warm-up runs on a side stream (their writes undone), with a :class:`~.capture_observer.CaptureObserver`
  inside it for the static-input table (an :class:`~.capture_observer.ObservedGraph`);
* on the CPU inside ``graphcheck.emulate.cuda_graphs()``: the op-level emulator
  (the graph is the :class:`~.op_graphs.OpGraph` the emulated ``CUDAGraph`` holds).

It exists to prove that path end to end: the built-in engine on this runner is an
engine that captures with ``torch.cuda`` directly (``graph_api="torch.cuda"``).
"""

from __future__ import annotations

import itertools
import weakref
from typing import Any, Callable, Mapping

from . import kernels
from .base import CaptureError, Graph, GraphRunner, HostSyncInCapture, bytes_held_by
from .torch_ops import TorchOps
from .warmup import region_label, restore, warm_up


class _Launcher:
    """Kernel observer while capturing: kernels run as plain calls (not through a kernel trace,
    whose host copies a capture refuses), and ``host_sync`` is refused."""

    def __init__(self, label: str) -> None:
        self.label = label

    def run_kernel(self, fn: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
        return kernels.launch(fn, args, kwargs)

    def on_host_sync(self, what: str) -> None:
        raise HostSyncInCapture(f"host sync '{what}' inside graph capture ({self.label})")


class TorchCudaApiRunner(GraphRunner):
    """Captures each region with ``torch.cuda.graph`` into one shared pool (see the module docstring)."""

    name = "torch.cuda"

    def __init__(self) -> None:
        import torch

        self.torch = torch
        self.ops = TorchOps()
        self._pool: Any = None
        self._count = itertools.count(1)
        self._emulated: weakref.WeakSet[Any] = weakref.WeakSet()  # OpGraphs, when captured under the emulator

    def capture(self, fn: Callable[[], Any], *, names: Mapping[int, str] | None = None) -> Graph:
        from .capture_observer import CaptureObserver, ObservedGraph
        from .cuda_emulation import EmulatedCUDAGraph

        torch = self.torch
        label = region_label(next(self._count), fn)
        if self._pool is None:
            self._pool = torch.cuda.graph_pool_handle()
        g = torch.cuda.CUDAGraph()
        if isinstance(g, EmulatedCUDAGraph):
            with torch.cuda.graph(g, pool=self._pool), kernels.observing(_Launcher(label)):
                outputs = fn()
            graph = g.graph
            if graph is None:  # capture_end sets it; an error in the region raised above
                raise CaptureError(f"the emulated capture of {label} ended without a graph")
            graph.outputs, graph.label = outputs, label
            graph.name_inputs(names or {})
            self._emulated.add(graph)
            return graph
        # As engines do (and torch's docs ask): warm up on a side stream first, so lazy
        # initialisation (library handles, allocator growth) happens outside the capture.
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        snapshots: dict[int, Any] = {}
        try:
            with torch.cuda.stream(side):
                warm_up(fn, self.ops, 2, label, snapshots)
            torch.cuda.current_stream().wait_stream(side)
            with torch.cuda.graph(g, pool=self._pool, stream=side):
                with CaptureObserver(names, label=label) as seen, kernels.observing(_Launcher(label)):
                    outputs = fn()
        finally:
            restore(self.ops, snapshots)
            torch.cuda.synchronize()
        return ObservedGraph(g, seen.inputs, outputs=outputs, label=label)

    def memory_bytes(self) -> int:
        """Allocator bytes on a GPU; under the emulator, the storage its graphs alone keep alive."""
        if not self._emulated and self.torch.cuda.is_available():
            return self.torch.cuda.memory_allocated()
        return bytes_held_by(list(self._emulated), lambda t: t.untyped_storage().nbytes())

    def synchronize(self) -> None:
        self.torch.cuda.synchronize()
