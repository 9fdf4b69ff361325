"""A ``torch.npu``-like graph API on the CPU emulator, for the npu runner without an Ascend device.

``--backend npu --emulate`` (and CI) run :class:`~graphcheck.capture.npu.NpuGraphRunner`
unchanged over :class:`EmulatedNpu`, so the runner's own wiring (shared pool,
side-stream capture, task groups, ExternalEvent ordering, the update hook,
replay) runs on every CPU. Captures are the emulator's
(:class:`~graphcheck.capture.emulated.EmulatedCapture`, installed as the *device
recorder* that the runner's observer launches kernels through), so replays have
the emulator's semantics: frozen arguments, stale reads of rebound buffers,
outputs poisoned until the first replay, escaped ops and host syncs refused.

Where torch_npu would fail or hang, this module raises
:class:`~graphcheck.capture.base.CaptureError`:

* ``capture_begin`` on the default stream, or while another capture is under way;
* ``graph_task_group_begin``/``_end`` outside a capture on the capturing stream,
  nested, or around no kernel; the handle names the kernel calls recorded between them;
* ``graph_task_update_begin``/``_end`` during a capture or with a handle of an
  uncaptured graph; kernels launched between them are recorded, not run, and must
  re-issue the group's calls one for one (same kernel, same tensors): their host
  values replace the captured ones (:meth:`EmulatedGraph.reissue`);
* a replay whose captured ``ExternalEvent`` wait has no record since the
  graph's last replay (the device would wait forever); the captured reset
  clears the record again;
* ``synchronize`` during a capture.

What it does not check: on an Ascend device only some ops' tasks can be
updated (fused and paged attention, MLA: torch_npu's graph handlers) and a
re-issued op must keep its task count; here any kernel may be re-issued.

Streams are tokens: CPU work is synchronous, so work on two streams is ordered
by program order. :attr:`EmulatedNpu.log` lists the graph API calls in order,
for tests of the runner's wiring. ``memory_allocated`` is the storage the
module's graphs hold (as :meth:`EmulatedRunner.memory_bytes`).
"""

from __future__ import annotations

import itertools
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from . import kernels
from .base import CaptureError, HostSyncInCapture
from .emulated import EmulatedCapture, EmulatedGraph, EmulatedRunner
from .npu import NpuBinding


@dataclass(eq=False)
class EmulatedStream:
    """A stream token: ``wait_stream`` is logged, work is synchronous."""

    module: EmulatedNpu
    name: str

    def wait_stream(self, other: EmulatedStream) -> None:
        self.module._log("wait_stream", f"{self.name} waits for {other.name}")

    def synchronize(self) -> None:
        self.module.synchronize()


@dataclass(eq=False)
class EmulatedEvent:
    """``torch.npu.ExternalEvent``: a wait or reset issued during a capture goes into the graph."""

    module: EmulatedNpu
    name: str
    recorded: bool = False

    def record(self, stream: EmulatedStream | None = None) -> None:
        if self.module._capturing is not None:
            raise CaptureError("ExternalEvent.record inside a capture is not emulated")
        self.recorded = True
        self.module._log("event_record", self.name)

    def wait(self, stream: EmulatedStream | None = None) -> None:
        graph = self.module._capturing
        if graph is not None:
            graph._waits.append(self)
        elif not self.recorded:
            raise CaptureError(f"{self.name}.wait() outside a capture would block: it was never recorded")

    def reset(self, stream: EmulatedStream | None = None) -> None:
        graph = self.module._capturing
        if graph is not None:
            graph._resets.append(self)
        else:
            self.recorded = False


@dataclass(frozen=True, eq=False)
class TaskGroup:
    """A task-group handle: the kernel calls ``start`` to ``stop`` of one graph's recording."""

    graph: EmulatedNpuGraph
    start: int
    stop: int


@dataclass
class _Update:
    handle: TaskGroup
    stream: EmulatedStream
    calls: list[tuple[Callable[..., Any], tuple, dict]] = field(default_factory=list)
    stack: ExitStack = field(default_factory=ExitStack)


class _UpdateRecorder:
    """Device recorder during a task update: keep each launched kernel call, run none."""

    def __init__(self, update: _Update) -> None:
        self.update = update

    def run_kernel(self, fn: Callable[..., Any], args: tuple, kwargs: dict) -> None:
        self.update.calls.append((fn, args, kwargs))

    def on_host_sync(self, what: str) -> None:
        raise HostSyncInCapture(f"host sync '{what}' inside a task update")


class EmulatedNpuGraph:
    """``torch.npu.NPUGraph`` over an emulated capture."""

    traces_calls = True  # replays through EmulatedGraph, which a kernel trace sees call by call

    def kernel_calls(self) -> list[tuple[Any, tuple, dict]]:
        """The captured graph's recorded kernel calls (none before capture_end)."""
        return self.graph.kernel_calls() if self.graph is not None else []

    def persistent_tensors(self) -> list[Any]:
        """What the captured graph keeps between replays (``EmulatedGraph.persistent_tensors``)."""
        return self.graph.persistent_tensors() if self.graph is not None else []

    def __init__(self, module: EmulatedNpu, label: str) -> None:
        self.module, self.label = module, label
        self.graph: EmulatedGraph | None = None  # set by capture_end
        self._capture: EmulatedCapture | None = None
        self._stack = ExitStack()
        self._stream: EmulatedStream | None = None
        self._pool: int | None = None
        self._waits: list[EmulatedEvent] = []
        self._resets: list[EmulatedEvent] = []

    def capture_begin(self, pool: int | None = None, capture_error_mode: str = "global") -> None:
        m = self.module
        if m._current is m._default:
            raise CaptureError(f"{self.label}: cannot capture on the default stream; capture on a side stream")
        if m._capturing is not None:
            raise CaptureError(f"{self.label}: {m._capturing.label} is being captured; one capture at a time")
        if self.graph is not None or self._capture is not None:
            raise CaptureError(f"{self.label} is already captured; reset() it first")
        self._pool = pool if pool is not None else m.graph_pool_handle()
        self._stream = m._current
        self._capture = m.runner.open_capture(self.label)
        self._stack.enter_context(self._capture.recording(as_device=True))
        m._capturing = self
        m._log("capture_begin", f"{self.label} on {self._stream.name}, pool {self._pool}")

    def capture_end(self) -> None:
        m = self.module
        if m._capturing is not self or self._capture is None:
            raise CaptureError(f"{self.label}: capture_end without capture_begin")
        open_group = m._group_start is not None
        self._close()
        if open_group:
            raise CaptureError(f"{self.label}: graph_task_group_begin without graph_task_group_end")
        self.graph = self._capture.finish(None)
        self._capture = None  # it holds the static inputs strongly; the graph does not
        m._log("capture_end", self.label)

    def _close(self) -> None:
        """Leave capture mode (restoring what the region touched); idempotent."""
        m = self.module
        try:
            self._stack.close()
        finally:
            if m._capturing is self:
                m._capturing, m._group_start = None, None

    def replay(self) -> None:
        m = self.module
        if self.graph is None:
            raise CaptureError(f"replay of {self.label}, which was not captured")
        if m._capturing is not None:
            raise CaptureError(f"replay of {self.label} while {m._capturing.label} is being captured")
        for event in self._waits:
            if not event.recorded:
                raise CaptureError(
                    f"replay of {self.label} would block: {event.name}, waited on inside the graph, was not "
                    "recorded since the graph's last replay (no task update was issued)"
                )
        for event in self._resets:
            event.recorded = False
        self.graph.replay()
        m._log("replay", self.label)

    def reset(self) -> None:
        self._close()
        self.graph, self._capture = None, None
        self._waits, self._resets = [], []

    def pool(self) -> int | None:
        return self._pool


class EmulatedNpu:
    """The ``torch.npu`` names the npu runner uses, on the CPU emulator (see the module docstring)."""

    def __init__(self, ops: Any = None) -> None:
        self.runner = EmulatedRunner(ops)
        self._default = EmulatedStream(self, "default stream")
        self._current = self._default
        self._capture_stream: EmulatedStream | None = None
        self._capturing: EmulatedNpuGraph | None = None
        self._group_start: int | None = None
        self._update: _Update | None = None
        self._numbers = {kind: itertools.count(1) for kind in ("stream", "pool", "graph", "event")}
        self.log: list[tuple[str, str]] = []  # (what, detail), in call order

    def _log(self, what: str, detail: str) -> None:
        self.log.append((what, detail))

    # device and memory ---------------------------------------------------------------------
    def is_available(self) -> bool:
        return True

    def device_count(self) -> int:
        return 1

    def current_device(self) -> int:
        return 0

    def synchronize(self, device: Any = None) -> None:
        if self._capturing is not None:
            raise CaptureError(f"synchronize() while {self._capturing.label} is being captured")

    def memory_allocated(self, device: Any = None) -> int:
        return self.runner.memory_bytes()

    # streams and events ----------------------------------------------------------------------
    def Stream(self, device: Any = None, priority: int = 0) -> EmulatedStream:  # noqa: N802 (torch's name)
        return EmulatedStream(self, f"stream {next(self._numbers['stream'])}")

    def current_stream(self, device: Any = None) -> EmulatedStream:
        return self._current

    def default_stream(self, device: Any = None) -> EmulatedStream:
        return self._default

    @contextmanager
    def stream(self, stream: EmulatedStream | None) -> Iterator[None]:
        previous = self._current
        if stream is not None:
            self._current = stream
        try:
            yield
        finally:
            self._current = previous

    def ExternalEvent(self) -> EmulatedEvent:  # noqa: N802
        return EmulatedEvent(self, f"ExternalEvent #{next(self._numbers['event'])}")

    # graphs ----------------------------------------------------------------------------------
    def NPUGraph(self) -> EmulatedNpuGraph:  # noqa: N802
        return EmulatedNpuGraph(self, f"NPUGraph #{next(self._numbers['graph'])}")

    def graph_pool_handle(self) -> int:
        return next(self._numbers["pool"])

    def is_current_stream_capturing(self) -> bool:
        return self._capturing is not None and self._capturing._stream is self._current

    @contextmanager
    def graph(
        self,
        npu_graph: EmulatedNpuGraph,
        pool: int | None = None,
        stream: EmulatedStream | None = None,
        capture_error_mode: str = "global",
    ) -> Iterator[None]:
        """``torch.npu.graph``: synchronise, switch to ``stream`` (or a side stream), capture."""
        self.synchronize()
        if stream is None:
            if self._capture_stream is None:
                self._capture_stream = self.Stream()
            stream = self._capture_stream
        with self.stream(stream):
            npu_graph.capture_begin(pool=pool, capture_error_mode=capture_error_mode)
            try:
                yield
            except BaseException:
                npu_graph.reset()
                raise
            npu_graph.capture_end()

    # task groups and task updates --------------------------------------------------------------
    def _capturing_on(self, stream: EmulatedStream, what: str) -> EmulatedNpuGraph:
        graph = self._capturing
        if graph is None or graph._stream is not stream or graph._capture is None:
            raise CaptureError(f"{what} outside a capture on the capturing stream")
        return graph

    def graph_task_group_begin(self, stream: EmulatedStream) -> None:
        graph = self._capturing_on(stream, "graph_task_group_begin")
        if self._group_start is not None:
            raise CaptureError("graph_task_group_begin inside an open task group")
        self._group_start = graph._capture.calls_recorded  # type: ignore[union-attr]

    def graph_task_group_end(self, stream: EmulatedStream) -> TaskGroup:
        graph = self._capturing_on(stream, "graph_task_group_end")
        start, self._group_start = self._group_start, None
        if start is None:
            raise CaptureError("graph_task_group_end without graph_task_group_begin")
        stop = graph._capture.calls_recorded  # type: ignore[union-attr]
        if stop == start:
            raise CaptureError(f"empty task group in {graph.label}")
        self._log("task_group", f"{graph.label} calls {start}..{stop - 1}")
        return TaskGroup(graph, start, stop)

    def graph_task_update_begin(self, stream: EmulatedStream, handle: TaskGroup) -> None:
        if self._capturing is not None:
            raise CaptureError(f"task update while {self._capturing.label} is being captured")
        if self._update is not None:
            raise CaptureError("graph_task_update_begin inside an open task update")
        if not isinstance(handle, TaskGroup) or handle.graph.graph is None:
            raise CaptureError("graph_task_update_begin needs the handle of a task group of a captured graph")
        update = _Update(handle, stream)
        update.stack.enter_context(kernels.device_recording(_UpdateRecorder(update)))
        self._update = update

    def graph_task_update_end(self, stream: EmulatedStream) -> None:
        update = self._update
        if update is None or update.stream is not stream:
            raise CaptureError("graph_task_update_end without graph_task_update_begin on that stream")
        update.stack.close()
        self._update = None
        handle = update.handle
        if len(update.calls) != handle.stop - handle.start:
            raise CaptureError(
                f"task update of {handle.graph.label} issued {len(update.calls)} kernel calls; "
                f"its task group holds {handle.stop - handle.start}"
            )
        for index, (fn, args, kwargs) in zip(range(handle.start, handle.stop), update.calls):
            handle.graph.graph.reissue(index, fn, args, kwargs)  # type: ignore[union-attr]
        self._log("task_update", f"{handle.graph.label} calls {handle.start}..{handle.stop - 1} on {stream.name}")


def emulated_npu_binding(ops: Any = None) -> NpuBinding:
    """A fresh emulated NPU module as the npu runner's binding (torch tensors on the CPU)."""
    return NpuBinding(EmulatedNpu(ops), "cpu", "npu-emulated", "the emulated NPU device module (CPU)")
