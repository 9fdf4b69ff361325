"""torch_npu ``NPUGraph`` (ACL graphs on Ascend) behind the :class:`GraphRunner` interface.

torch_npu's graph API mirrors torch.cuda's (see docs/bug-classes.md for the traps), so capture
follows :mod:`graphcheck.capture.cuda`: warm the region up on a side stream with
snapshots (:mod:`graphcheck.capture.warmup`), capture it on that stream inside
``torch.npu.graph(graph, pool=...)`` with a kernel observer that records the
static-input table and refuses host syncs, restore the snapshots, synchronise.
All captures of one runner share one pool (``graph_pool_handle()``), so they
replay in capture order and never concurrently, as the engine does.

**Host parameters and the update hook.** Some NPU ops take host-side values
that ACL bakes into the captured task (fused attention's ``actual_seq_lengths``
lists); vllm-ascend's full-graph mode re-issues those ops before each replay
through a task update. Here such a value is a kernel argument wrapped in
:class:`~graphcheck.capture.kernels.HostParam`. During capture each kernel call
with host parameters runs as vllm-ascend's attention does: an ``ExternalEvent``
wait and reset on the capture stream, then the call between
``graph_task_group_begin`` and ``graph_task_group_end``, whose handle the
runner keeps in a :class:`HostTask`. Before every replay, :meth:`NpuGraph.update`
(the update hook), on a dedicated update stream that first waits for the
current stream (the previous replay must be done with the old values), reads
each parameter's current value and re-issues the task between
``graph_task_update_begin`` and ``graph_task_update_end``, then records the
task's event; the replay's captured wait orders the patched task after it.
Without the update the replay would wait on the event forever or, with the
event recorded, run the task with its capture-time values.

A host-parameter kernel must not allocate: it writes into tensors it is given
(as FIA's ``.out`` variant with a preallocated workspace does), so re-issuing
it patches the captured tasks on the captured addresses. The runner refuses
one that allocates, at capture. A task keeps weak references to the
pre-existing tensors it was called with (vllm-ascend keeps weak ones too), so
it never keeps a buffer alive that the engine let go; updating a task whose
buffer is gone raises :class:`~graphcheck.capture.base.CaptureError`.

**Where torch.npu comes from.** torch_npu is imported only by
:func:`load_npu_binding`, the one seam through which the npu backend finds its
device module (never at import time: installing torch_npu without the Ascend
toolkit breaks ``import torch``). The runner uses only the ``torch.npu`` names
listed on :class:`NpuBinding`, so a stand-in can take its place: the emulated
NPU module (:mod:`graphcheck.capture.npu_emulated`, for ``--backend npu
--emulate``) and, in tests, a shim over ``torch.cuda``.
"""

from __future__ import annotations

import contextlib
import itertools
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from graphcheck.errors import BackendUnavailableError

from . import kernels
from .base import CaptureError, Graph, GraphRunner, StaticInputTable
from .capture_state import CaptureState
from .emulated import rebuild
from .torch_ops import TorchOps
from .warmup import ArgRecorder, op_hooks_in_warm_up, region_label, restore, warm_up


class NpuUnavailable(BackendUnavailableError, RuntimeError):
    """torch_npu cannot be loaded here; the message says why."""


@dataclass(frozen=True)
class NpuBinding:
    """The device module the npu runner drives, and where its tensors live.

    ``module`` is ``torch.npu`` or a stand-in with the same names: ``NPUGraph``
    (``capture_begin``/``capture_end`` through ``graph``, ``replay``),
    ``graph(g, pool=, stream=)``, ``graph_pool_handle``, ``Stream``,
    ``current_stream``, ``stream``, ``synchronize``, ``memory_allocated``,
    ``device_count``, ``ExternalEvent`` (``wait``/``reset``/``record``) and
    ``graph_task_group_begin``/``_end``, ``graph_task_update_begin``/``_end``.
    """

    module: Any
    device: str  # torch device of the tensors: "npu:0" with torch_npu
    runner_name: str  # what reports call the runner: "npu"; stand-ins say what they are
    source: str  # one line for descriptions: "torch_npu 2.5.1"


def load_npu_binding() -> NpuBinding:
    """The seam: torch_npu's ``torch.npu``, imported now (raises :class:`NpuUnavailable`)."""
    import importlib.util

    if importlib.util.find_spec("torch_npu") is None:
        raise NpuUnavailable("torch_npu is not installed")
    try:
        import torch
        import torch_npu
    except Exception as exc:  # typically libhccl.so / libascendcl.so missing: no CANN toolkit
        raise NpuUnavailable(f"importing torch_npu failed ({type(exc).__name__}: {exc})") from exc
    module = torch.npu  # type: ignore[attr-defined]  # torch_npu adds torch.npu at import; torch's types lack it
    index = module.current_device() if module.device_count() else 0
    return NpuBinding(module, f"npu:{index}", "npu", f"torch_npu {getattr(torch_npu, '__version__', '?')}")


class _TensorRef:
    """How a task keeps a tensor argument between capture and its updates.

    Strongly when the capture allocated its storage (graph memory); a view the
    region made of a pre-existing buffer (``buf[:n]``) as a weak reference to
    that buffer plus the view's geometry; any other tensor weakly. ``get()``
    gives the tensor (a fresh view on the same address for the second kind),
    or None once the engine let the buffer go.
    """

    __slots__ = ("_strong", "_weak", "_geometry")

    def __init__(self, t: Any, ops: TorchOps, region: Any) -> None:
        self._strong: Any = None
        self._weak: Any = None
        self._geometry: tuple | None = None
        base = ops.view_base(t)
        if region.owns_storage(ops, t):
            self._strong = t
        elif id(t) in region.objects and base is not None:
            self._weak = weakref.ref(base)
            self._geometry = (tuple(t.shape), t.stride(), t.storage_offset())
        else:
            self._weak = weakref.ref(t)

    def get(self) -> Any:
        if self._weak is None:
            return self._strong
        t = self._weak()
        if t is None or self._geometry is None:
            return t
        size, stride, offset = self._geometry
        return t.as_strided(size, stride, offset)


class _RefOps:
    """Lets :func:`~graphcheck.capture.emulated.rebuild` map a task's ``_TensorRef`` leaves."""

    @staticmethod
    def is_tensor(obj: Any) -> bool:
        return isinstance(obj, _TensorRef)


@dataclass
class HostTask:
    """One captured kernel call with host parameters: what the update hook re-issues."""

    name: str  # the kernel's qualified name
    handle: Any  # from graph_task_group_end
    event: Any  # the ExternalEvent the graph waits on before the task
    fn: Callable[..., Any]
    args: tuple  # tensors as _TensorRef, everything else frozen at capture
    kwargs: dict
    slots: tuple[kernels.HostSlot, ...]
    issued: dict[str, Any]  # host values of the last issue: at capture, then at each update

    def current_call(self) -> tuple[tuple, dict]:
        """The call to re-issue: the captured tensors and every host parameter read now."""

        def deref(ref: _TensorRef) -> Any:
            t = ref.get()
            if t is None:
                raise CaptureError(f"task {self.name}: a tensor it was captured with has been freed; cannot update it")
            return t

        args, kwargs = rebuild((self.args, self.kwargs), _RefOps, deref)  # type: ignore[arg-type]
        self.issued = {param.name: param.read() for _, param in self.slots}
        return kernels.with_host_values(args, kwargs, self.slots, self.issued)


class _TaskRecorder(ArgRecorder):
    """Capture observer: :class:`ArgRecorder`, plus a task group around each host-parameter kernel."""

    def __init__(self, ops: TorchOps, state: CaptureState, table: StaticInputTable, dev: Any, stream: Any) -> None:
        super().__init__(ops, state, table)
        self.dev, self.stream = dev, stream
        self.tasks: list[HostTask] = []

    def run_host_param_kernel(
        self, fn: Callable[..., Any], args: tuple, kwargs: dict, slots: tuple[kernels.HostSlot, ...]
    ) -> Any:
        dev, stream, region = self.dev, self.stream, self.state.region
        name = getattr(fn, "__qualname__", repr(fn))
        event = dev.ExternalEvent()
        event.wait(stream)
        event.reset(stream)
        allocated = len(region.storages)
        dev.graph_task_group_begin(stream)
        try:
            result = self.run_kernel(fn, args, kwargs)
        except BaseException:
            with contextlib.suppress(Exception):  # close the group, then report the kernel's failure
                dev.graph_task_group_end(stream)
            raise
        handle = dev.graph_task_group_end(stream)
        if len(region.storages) != allocated:
            raise CaptureError(
                f"host-parameter kernel {name} allocated memory inside its task group ({self.state.label}); "
                "a task update would re-issue it on fresh addresses freed right after the update. "
                "Write into preallocated tensors (like FIA's .out with a max workspace)"
            )
        frozen = rebuild((args, kwargs), self.ops, lambda t: _TensorRef(t, self.ops, region))
        issued = {param.name: value for (_, param), value in zip(slots, _values_at(args, kwargs, slots))}
        self.tasks.append(HostTask(name, handle, event, fn, frozen[0], frozen[1], slots, issued))
        return result


def _values_at(args: tuple, kwargs: dict, slots: tuple[kernels.HostSlot, ...]) -> list[Any]:
    return [args[where] if isinstance(where, int) else kwargs[where] for where, _ in slots]


class NpuGraph(Graph):
    """A captured ``NPUGraph`` and its host-parameter tasks; holds no reference to its static inputs.

    A static input is alive while the engine still holds the tensor object
    captured and its storage exists.
    """

    def __init__(
        self,
        graph: Any,
        outputs: Any,
        table: StaticInputTable,
        ops: TorchOps,
        label: str,
        tasks: list[HostTask],
        dev: Any,
        update_stream: Any,
    ) -> None:
        from torch.multiprocessing.reductions import StorageWeakRef

        self.label = label
        self.device_graph = graph  # the NPUGraph itself: replaying it directly skips the update hook
        self._ops = ops
        self.outputs = outputs
        self.static_inputs = tuple(table.inputs)
        self._root_refs = tuple(weakref.ref(root) for root in table.roots)
        self._storage_refs = tuple(StorageWeakRef(root.untyped_storage()) for root in table.roots)
        self.tasks = tuple(tasks)
        self._dev = dev
        self._update_stream = update_stream
        self.updates = 0  # how often the update hook re-issued the tasks

    #: The tasks' ``issued`` host values are not state: the hook re-issues every task before every replay.
    counters = ("updates",)

    def persistent_tensors(self) -> list[Any]:
        """The outputs, plus what the device graph keeps between replays where it can say (the emulated module)."""
        inner = getattr(self.device_graph, "persistent_tensors", None)
        return super().persistent_tensors() + (inner() if callable(inner) else [])

    def update(self) -> None:
        """The update hook: re-issue every host-parameter task with its parameters' values now."""
        if not self.tasks:
            return
        dev, stream = self._dev, self._update_stream
        stream.wait_stream(dev.current_stream())
        with dev.stream(stream):
            for task in self.tasks:
                args, kwargs = task.current_call()
                dev.graph_task_update_begin(stream, task.handle)
                try:
                    kernels.launch(task.fn, args, kwargs)
                finally:
                    dev.graph_task_update_end(stream)
                task.event.record(stream)
        self.updates += 1

    def replay(self) -> None:
        self.update()
        tracer = kernels.current_tracer()
        if tracer is not None and not getattr(self.device_graph, "traces_calls", False):
            tracer.trace_call(self.device_graph.replay, (), {}, graph=self.label)  # one opaque launch
        else:
            self.device_graph.replay()

    def _input_alive(self, i: int) -> bool:
        return self._root_refs[i]() is not None and not self._storage_refs[i].expired()

    def kernel_calls(self) -> list[tuple[Any, tuple, dict]]:
        """The recorded kernel calls where the device graph can list them (the emulated module); else []."""
        calls = getattr(self.device_graph, "kernel_calls", None)
        return calls() if callable(calls) else []


class NpuGraphRunner(GraphRunner):
    """Graph runner on torch_npu's ``NPUGraph`` with one shared pool and task-group updates."""

    def __init__(self, binding: NpuBinding | None = None, warmup_iters: int = 2) -> None:
        self.binding = binding if binding is not None else load_npu_binding()
        self.name = self.binding.runner_name
        self.dev = self.binding.module
        self.ops = TorchOps()
        self.warmup_iters = warmup_iters
        self._pool: Any = None
        self._update_stream: Any = None
        self._count = itertools.count(1)
        #: the op hooks during warm-up runs: on the emulated NPU (CPU) only, see ``warmup.op_hooks_in_warm_up``
        self.warm_up_hooks = op_hooks_in_warm_up(self.binding.device)

    def capture(self, fn: Callable[[], Any], *, names: Mapping[int, str] | None = None) -> NpuGraph:
        dev, ops = self.dev, self.ops
        label = region_label(next(self._count), fn)
        if self._pool is None:
            self._pool = dev.graph_pool_handle()
            self._update_stream = dev.Stream()
        side = dev.Stream()
        side.wait_stream(dev.current_stream())
        snapshots: dict[int, Any] = {}
        try:
            try:
                with dev.stream(side):
                    warm_up(fn, ops, self.warmup_iters, label, snapshots, op_hooks=self.warm_up_hooks)
            finally:
                dev.current_stream().wait_stream(side)
            state = CaptureState(label, check_escapes=False)
            table = StaticInputTable(ops, state.region, names)
            recorder = _TaskRecorder(ops, state, table, dev, side)
            graph = dev.NPUGraph()
            with dev.graph(graph, pool=self._pool, stream=side):
                with kernels.observing(recorder), ops.capture_hooks(state):
                    outputs = fn()
        finally:
            restore(ops, snapshots)
            self.synchronize()
        return NpuGraph(graph, outputs, table, ops, label, recorder.tasks, dev, self._update_stream)

    def memory_bytes(self) -> int:
        return int(self.dev.memory_allocated(self.binding.device))

    def synchronize(self) -> None:
        self.dev.synchronize(self.binding.device)
