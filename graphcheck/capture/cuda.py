"""Torch CUDA graphs behind the :class:`GraphRunner` interface.

Capture follows the usual recipe: run the region ``warmup_iters`` times on a
side stream (lazy initialisation, allocator warm-up), then capture it on that
stream (``capture_begin``/``capture_end``, as ``torch.cuda.graph`` does, without its
cache emptying: :func:`capturing`). All captures of one runner share one private
memory pool, so they must be replayed in capture order and never concurrently,
exactly as the engine does with its capture buckets; after a failed capture the
next ones start a pool of their own.

Warmup runs the region for real. To keep the emulator's contract that a
capture leaves no side effects, the runner snapshots every pre-existing
storage a kernel touches during warmup (a kernel observer sees the arguments)
and copies the snapshots back after capture, then synchronises (the warm-up
and capture observers are shared with the other device runners:
:mod:`graphcheck.capture.warmup`).

During capture a kernel observer records each kernel's arguments for the
static-input table and refuses :func:`~graphcheck.capture.kernels.host_sync`; a
torch dispatch mode refuses host syncs (``.item()``, ``bool(t)``, device to
host copies, data-dependent sizes) *before* they reach CUDA and invalidate the
capture, and tracks which storages the capture allocated. Unlike the emulator
it does not reject work outside kernels: the GPU captures it all. The warm-up runs
go without that mode (``warmup.op_hooks_in_warm_up``), and eager steps and replays
never see it: on real CUDA only the capture itself has a Python dispatch mode.

For a kernel trace, ``CudaGraphRunner(per_kernel=True)`` captures each
outermost kernel call of a region into its own ``CUDAGraph`` (same pool,
same stream, in order) instead of one graph for the region: replaying the
segments in order does the same device work on the same frozen addresses and
host values, and lets a tracer look at every kernel's arguments in between
(:class:`PerKernelCudaGraph`). Device work in the region outside a kernel is
not captured then; the engine's regions have none (the emulator refuses it).

No torch.cuda API is called at import time.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import weakref
from typing import Any, Callable, Iterator, Mapping

from . import kernels
from .base import DeviceGraph, Graph, GraphRunner, StaticInputTable
from .capture_state import CaptureState
from .emulated import rebuild
from .torch_ops import TorchOps
from .warmup import ArgRecorder, op_hooks_in_warm_up, region_label, restore, warm_up


@contextlib.contextmanager
def capturing(torch: Any, graph: Any, pool: Any, stream: Any) -> Iterator[None]:
    """Capture the work issued inside into ``graph`` on ``stream``, allocating from ``pool``.

    ``torch.cuda.graph`` does the same after a device synchronisation and emptying both of the
    allocator's caches, meant to give one big capture room. Here captures come by the hundred,
    each a small region, and every emptying sends the eager steps that follow back to
    ``cudaMalloc`` (a synchronising call) for memory they had cached. The runner has already
    ordered ``stream`` after the current stream, synchronises after the capture, and gives up
    ``pool`` after a failed one (:meth:`CudaGraphRunner.capture`).
    """
    with torch.cuda.stream(stream):
        graph.capture_begin(pool=pool)
        try:
            yield
        finally:
            graph.capture_end()


class CudaGraph(DeviceGraph):
    """A captured ``torch.cuda.CUDAGraph``; holds no reference to its static inputs."""

    def __init__(self, graph: Any, outputs: Any, table: StaticInputTable, ops: TorchOps, label: str) -> None:
        from torch.multiprocessing.reductions import StorageWeakRef

        super().__init__(graph, outputs, table, ops, label)
        self._storage_refs = tuple(StorageWeakRef(root.untyped_storage()) for root in table.roots)

    def _input_alive(self, i: int) -> bool:
        return not self._storage_refs[i].expired()


class FreedTensor:
    """Stands for a captured tensor argument whose storage the engine let go of: its address,
    shape and dtype, no data (what a graph replaying it would read is gone)."""

    freed = True

    def __init__(self, ptr: int, shape: tuple[int, ...], dtype: Any) -> None:
        self._ptr, self.shape, self.dtype = ptr, shape, dtype

    def data_ptr(self) -> int:
        return self._ptr


class _WeakArg:
    def __init__(self, t: Any) -> None:
        self.ref = weakref.ref(t)
        self.stand_in = FreedTensor(t.data_ptr(), tuple(t.shape), t.dtype)

    def __call__(self) -> Any:
        alive = self.ref()
        return alive if alive is not None else self.stand_in


class _Segment:
    """One kernel call captured alone: its graph, the kernel, and weak references to its arguments."""

    def __init__(self, graph: Any, fn: Callable[..., Any], args: tuple, kwargs: dict, result: Any, ops: TorchOps):
        self.graph, self.fn, self.result = graph, fn, result
        self._args = rebuild((args, kwargs), ops, _WeakArg)

    def arguments(self) -> tuple[tuple, dict]:
        """The captured arguments; a tensor the engine has let go of reads as a :class:`FreedTensor`."""
        (args, kwargs) = _resolve(self._args)
        return args, kwargs

    def replay(self) -> Any:
        self.graph.replay()
        return self.result


def _resolve(obj: Any) -> Any:
    if isinstance(obj, _WeakArg):
        return obj()
    if isinstance(obj, tuple):
        return type(obj)(*(_resolve(o) for o in obj)) if hasattr(obj, "_fields") else tuple(_resolve(o) for o in obj)
    if isinstance(obj, list):
        return [_resolve(o) for o in obj]
    if isinstance(obj, dict):
        return {k: _resolve(v) for k, v in obj.items()}
    if hasattr(obj, "__dataclass_fields__") and not isinstance(obj, type):
        import copy

        clone = copy.copy(obj)
        for name in obj.__dataclass_fields__:
            object.__setattr__(clone, name, _resolve(getattr(obj, name)))
        return clone
    return obj


class _SegmentRecorder:
    """KernelObserver for a per-kernel capture: each outermost kernel call becomes its own CUDAGraph."""

    def __init__(self, runner: CudaGraphRunner, state: CaptureState, table: StaticInputTable, side: Any) -> None:
        self.runner, self.side = runner, side
        self.inner = ArgRecorder(runner.ops, state, table)
        self.segments: list[_Segment] = []

    def run_kernel(self, fn: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
        torch = self.runner.torch
        graph = torch.cuda.CUDAGraph()
        with capturing(torch, graph, self.runner._pool, self.side):
            result = self.inner.run_kernel(fn, args, kwargs)
        self.segments.append(_Segment(graph, fn, args, kwargs, result, self.runner.ops))
        return result

    def on_host_sync(self, what: str) -> None:
        self.inner.on_host_sync(what)


class PerKernelCudaGraph(Graph):
    """A region captured as one CUDAGraph per kernel call; replays them in order.

    Under a kernel tracer (``kernels.tracing``) each segment's replay is
    reported as a call of its kernel with the captured arguments.
    """

    def __init__(self, segments: list[_Segment], outputs: Any, table: StaticInputTable, ops: TorchOps, label: str):
        from torch.multiprocessing.reductions import StorageWeakRef

        self.label = label
        self._segments = segments
        self._ops = ops
        self.outputs = outputs
        self.static_inputs = tuple(table.inputs)
        self._root_refs = tuple(weakref.ref(root) for root in table.roots)
        self._storage_refs = tuple(StorageWeakRef(root.untyped_storage()) for root in table.roots)

    def _input_alive(self, i: int) -> bool:
        return not self._storage_refs[i].expired()

    def replay(self) -> None:
        tracer = kernels.current_tracer()
        for segment in self._segments:
            if tracer is None:
                segment.graph.replay()
                continue
            args, kwargs = segment.arguments()
            tracer.trace_call(
                functools.wraps(segment.fn)(lambda *a, _s=segment, **k: _s.replay()), args, kwargs, graph=self.label
            )

    def kernel_calls(self) -> list[tuple[Callable[..., Any], tuple, dict]]:
        """The captured kernel calls in replay order: ``(fn, args, kwargs)``."""
        return [(s.fn, *s.arguments()) for s in self._segments]


class CudaGraphRunner(GraphRunner):
    """Graph runner on ``torch.cuda.CUDAGraph`` with one shared memory pool."""

    name = "cuda"

    def __init__(self, warmup_iters: int = 2, device: Any = None, *, per_kernel: bool = False) -> None:
        """``per_kernel``: capture one graph per kernel call (:class:`PerKernelCudaGraph`), for kernel traces."""
        import torch

        if not torch.cuda.is_available():
            raise RuntimeError("CudaGraphRunner needs a CUDA device; torch.cuda.is_available() is False")
        self.torch = torch
        self.ops = TorchOps()
        self.warmup_iters = warmup_iters
        self.device = torch.device("cuda", torch.cuda.current_device()) if device is None else torch.device(device)
        self._pool: Any = None
        self._count = itertools.count(1)
        self.per_kernel = per_kernel

    def capture(
        self, fn: Callable[[], Any], *, names: Mapping[int, str] | None = None
    ) -> CudaGraph | PerKernelCudaGraph:
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
                if self.per_kernel:
                    recorder = _SegmentRecorder(self, state, table, side)
                    with torch.cuda.stream(side):
                        with kernels.observing(recorder), ops.capture_hooks(state):
                            outputs = fn()
                else:
                    graph = torch.cuda.CUDAGraph()
                    with capturing(torch, graph, self._pool, side):
                        with kernels.observing(ArgRecorder(ops, state, table)), ops.capture_hooks(state):
                            outputs = fn()
            except BaseException:
                # The failed graph may die before the next capture, leaving the pool with no user; the
                # allocator frees such a pool only when its cache is emptied, and asserts on a capture
                # into it before then. The captures that follow take a fresh pool.
                self._pool = None
                raise
            finally:
                restore(ops, snapshots)
                torch.cuda.synchronize()
        if self.per_kernel:
            return PerKernelCudaGraph(recorder.segments, outputs, table, ops, label)
        return CudaGraph(graph, outputs, table, ops, label)

    def _warm_up(self, fn: Callable[[], Any], side: Any, snapshots: dict[int, Any], label: str) -> None:
        torch = self.torch
        try:
            with torch.cuda.stream(side):
                warm_up(
                    fn, self.ops, self.warmup_iters, label, snapshots, op_hooks=op_hooks_in_warm_up(str(self.device))
                )
        finally:
            torch.cuda.current_stream().wait_stream(side)

    def memory_bytes(self) -> int:
        return self.torch.cuda.memory_allocated(self.device)

    def synchronize(self) -> None:
        self.torch.cuda.synchronize(self.device)
