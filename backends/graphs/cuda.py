"""Torch CUDA graphs behind the :class:`GraphRunner` interface.

Capture follows the usual recipe: run the region ``warmup_iters`` times on a
side stream (lazy initialisation, allocator warm-up), then capture it on that
stream with ``torch.cuda.graph``. All captures of one runner share one private
memory pool, so they must be replayed in capture order and never concurrently,
exactly as the engine does with its capture buckets.

Warmup runs the region for real. To keep the emulator's contract that a
capture leaves no side effects, the runner snapshots every pre-existing
storage a kernel touches during warmup (a kernel observer sees the arguments)
and copies the snapshots back after capture, then synchronises (the warm-up
and capture observers are shared with the other device runners:
:mod:`graphcheck.backends.graphs.warmup`).

During capture a kernel observer records each kernel's arguments for the
static-input table and refuses :func:`~graphcheck.backends.graphs.kernels.host_sync`; a
torch dispatch mode refuses host syncs (``.item()``, ``bool(t)``, device to
host copies, data-dependent sizes) *before* they reach CUDA and invalidate the
capture, and tracks which storages the capture allocated. Unlike the emulator
it does not reject work outside kernels: the GPU captures it all.

No torch.cuda API is called at import time.
"""

from __future__ import annotations

import itertools
from typing import Any, Callable, Mapping

from . import kernels
from .base import DeviceGraph, GraphRunner, StaticInputTable
from .capture_state import CaptureState
from .torch_ops import TorchOps
from .warmup import ArgRecorder, region_label, restore, warm_up


class CudaGraph(DeviceGraph):
    """A captured ``torch.cuda.CUDAGraph``; holds no reference to its static inputs."""

    def __init__(self, graph: Any, outputs: Any, table: StaticInputTable, ops: TorchOps, label: str) -> None:
        from torch.multiprocessing.reductions import StorageWeakRef

        super().__init__(graph, outputs, table, ops, label)
        self._storage_refs = tuple(StorageWeakRef(root.untyped_storage()) for root in table.roots)

    def _input_alive(self, i: int) -> bool:
        return not self._storage_refs[i].expired()


class CudaGraphRunner(GraphRunner):
    """Graph runner on ``torch.cuda.CUDAGraph`` with one shared memory pool."""

    name = "cuda"

    def __init__(self, warmup_iters: int = 2, device: Any = None) -> None:
        import torch

        if not torch.cuda.is_available():
            raise RuntimeError("CudaGraphRunner needs a CUDA device; torch.cuda.is_available() is False")
        self.torch = torch
        self.ops = TorchOps()
        self.warmup_iters = warmup_iters
        self.device = torch.device("cuda", torch.cuda.current_device()) if device is None else torch.device(device)
        self._pool: Any = None
        self._count = itertools.count(1)

    def capture(self, fn: Callable[[], Any], *, names: Mapping[int, str] | None = None) -> CudaGraph:
        torch, ops = self.torch, self.ops
        label = region_label(next(self._count), fn)
        with torch.cuda.device(self.device):
            if self._pool is None:
                self._pool = torch.cuda.graph_pool_handle()
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            snapshots: dict[int, Any] = {}
            try:
                self._warm_up(fn, side, snapshots, label)
                state = CaptureState(label, check_escapes=False)
                table = StaticInputTable(ops, state.region, names)
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph, pool=self._pool, stream=side):
                    with kernels.observing(ArgRecorder(ops, state, table)), ops.capture_hooks(state):
                        outputs = fn()
            finally:
                restore(ops, snapshots)
                torch.cuda.synchronize()
        return CudaGraph(graph, outputs, table, ops, label)

    def _warm_up(self, fn: Callable[[], Any], side: Any, snapshots: dict[int, Any], label: str) -> None:
        torch = self.torch
        try:
            with torch.cuda.stream(side):
                warm_up(fn, self.ops, self.warmup_iters, label, snapshots)
        finally:
            torch.cuda.current_stream().wait_stream(side)

    def memory_bytes(self) -> int:
        return self.torch.cuda.memory_allocated(self.device)

    def synchronize(self) -> None:
        self.torch.cuda.synchronize(self.device)
