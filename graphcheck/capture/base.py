"""The graph-runner interface every device backend implements.

A :class:`GraphRunner` captures a region (a zero-argument callable made of
:func:`~graphcheck.capture.kernels.kernel` calls) into a :class:`Graph`; replaying
the graph re-runs the region's device work on the tensors it saw at capture.

The part of a capture graphcheck audits is its *static-input table*: every
tensor argument of a kernel call in the region whose storage existed before
capture began (tensors the region allocated itself belong to the graph). A
graph reads those addresses on every replay, whatever the engine's attributes
point to by then, so :meth:`Graph.stale_inputs` compares them with the
engine's current bindings and :meth:`Graph.dead_inputs` reports the ones whose
memory the engine has let go.

Framework specifics (what a tensor is, its storage, its view base) come from a
small ``ops`` object; see :class:`TensorOps`.
"""

from __future__ import annotations

import dataclasses
import functools
import weakref
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Mapping, Protocol

from graphcheck.errors import EngineError

from . import kernels


class CaptureError(EngineError, RuntimeError):
    """The region cannot be captured as written."""


class HostSyncInCapture(CaptureError):
    """The region reads device data on the host (``.item()``, ``bool(t)``, ...)."""


class EscapedOpError(CaptureError):
    """Device work in the region that the graph would not contain on replay."""


class PoisonedTensorError(EngineError, RuntimeError):
    """A tensor the capture allocated was read before the graph's first replay."""


@dataclass(frozen=True)
class StaticInput:
    """A tensor the graph read at capture that existed before capture."""

    name: str | None  # the engine's buffer name, where ``names`` gave one
    tensor_id: int  # id() of the tensor object
    data_ptr: int
    shape: tuple[int, ...]
    dtype: str


class TensorOps(Protocol):
    """What the framework-neutral code here needs to know about a tensor."""

    def is_tensor(self, obj: Any) -> bool: ...

    def data_ptr(self, t: Any) -> int: ...

    def shape(self, t: Any) -> tuple[int, ...]: ...

    def dtype_name(self, t: Any) -> str: ...

    def storage_key(self, t: Any) -> int:
        """An identity of ``t``'s storage, shared by all views of it."""

    def view_base(self, t: Any) -> Any | None:
        """The tensor ``t`` is a view of, or None."""


def iter_tensors(obj: Any, is_tensor: Callable[[Any], bool]) -> Iterator[Any]:
    """The tensors in ``obj``: itself, tuple/list/dict items, dataclass fields (recursively).

    Collected in one eager walk, not a generator per container: the walk runs on
    every kernel call of a capture and every step's memory count.
    """
    found: list[Any] = []
    _collect(obj, is_tensor, found)
    return iter(found)


def _collect(obj: Any, is_tensor: Callable[[Any], bool], found: list[Any]) -> None:
    if is_tensor(obj):
        found.append(obj)
        return
    if isinstance(obj, (tuple, list)):
        items: Any = obj
    elif isinstance(obj, dict):
        items = obj.values()
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        items = [getattr(obj, name) for name in _field_names(type(obj))]
    else:
        return
    for item in items:
        _collect(item, is_tensor, found)


@functools.cache
def _field_names(cls: type) -> tuple[str, ...]:
    """The field names of dataclass ``cls`` (fixed once the class is made, so cached per class)."""
    return tuple(f.name for f in dataclasses.fields(cls))


def never_holds_tensors(obj: Any, is_tensor: Callable[[Any], bool]) -> bool:
    """Whether :func:`iter_tensors` finds no tensor in ``obj`` now and never can: ``obj`` is no
    container it walks (a number, a string, a function, ...), or a tuple or a frozen dataclass of such."""
    if is_tensor(obj) or isinstance(obj, (list, dict)):
        return False
    if isinstance(obj, tuple):
        return all(never_holds_tensors(item, is_tensor) for item in obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        if not type(obj).__dataclass_params__.frozen:  # type: ignore[attr-defined]
            return False
        return all(never_holds_tensors(getattr(obj, f.name), is_tensor) for f in dataclasses.fields(obj))
    return True


def bytes_held_by(graphs: Iterable[Any], nbytes: Callable[[Any], int]) -> int:
    """Bytes of the storage ``graphs`` alone keep alive (their ``held_storages()``), each storage once."""
    held: dict[int, Any] = {}
    for graph in graphs:
        held.update(graph.held_storages())
    return sum(nbytes(t) for t in held.values())


class Region:
    """What one capture region has allocated so far.

    Filled by the framework's op hook (every op output whose storage is new)
    and by the kernel observer (kernel results). ``storages`` holds storage
    keys, ``objects`` the ids of tensor objects made in the region (views
    included); both stay valid for the region's lifetime because anything the
    graph keeps is referenced by the graph.
    """

    def __init__(self) -> None:
        self.storages: set[int] = set()
        self.objects: set[int] = set()

    def note_created(self, ops: TensorOps, t: Any, *, fresh_storage: bool) -> None:
        self.objects.add(id(t))
        if fresh_storage:
            self.storages.add(ops.storage_key(t))

    def owns_storage(self, ops: TensorOps, t: Any) -> bool:
        return ops.storage_key(t) in self.storages


class StaticInputTable:
    """Builds a graph's static-input table from the kernel arguments of its capture.

    A kernel argument whose storage the region allocated is not a static
    input. Otherwise the static input is the tensor the engine holds: the
    argument itself, or, for a view the region made (``buf[:n]``), the
    pre-existing tensor it views. Names come from ``names`` (id -> name),
    looked up for the argument and then for its view base.
    """

    def __init__(self, ops: TensorOps, region: Region, names: Mapping[int, str] | None) -> None:
        self._ops = ops
        self._region = region
        self._names = dict(names or {})
        self._seen: dict[int, int] = {}  # id(root) -> index
        self.inputs: list[StaticInput] = []
        self.roots: list[Any] = []  # strong refs while capturing; graphs keep weak ones

    def add_call_args(self, args: Any) -> None:
        for t in iter_tensors(args, self._ops.is_tensor):
            self.add(t)

    def add(self, t: Any) -> None:
        ops, region = self._ops, self._region
        if region.owns_storage(ops, t):
            return
        root = t
        if id(t) in region.objects:  # a view made inside the region
            base = ops.view_base(t)
            root = base if base is not None and id(base) not in region.objects else t
        if id(root) in self._seen:
            return
        name = self._names.get(id(t))
        if name is None:
            name = self._names.get(id(root))
        self._seen[id(root)] = len(self.inputs)
        self.roots.append(root)
        self.inputs.append(StaticInput(name, id(root), ops.data_ptr(root), ops.shape(root), ops.dtype_name(root)))


class Graph(ABC):
    """One captured region.

    ``outputs`` is what the region returned at capture; each replay refreshes
    those tensors in place (until the first replay they hold no valid data).
    Subclasses set ``_ops``, ``static_inputs`` and ``_root_refs`` (per static input, same
    order, a callable giving its tensor object or None once it died: a weak reference, or a
    hold on a root the graph keeps alive itself).
    """

    outputs: Any
    static_inputs: tuple[StaticInput, ...]
    _ops: TensorOps
    _root_refs: tuple[Callable[[], Any], ...]
    #: Names of the int attributes a replay advances (``replays``, ``updates``): host state of
    #: the graph that an engine's ``reset()`` puts back with the rest of its checkpoint.
    counters: tuple[str, ...] = ()

    def persistent_tensors(self) -> list[Any]:
        """Tensors the graph owns whose contents outlive a replay: those of ``outputs``.

        A device graph's other pool memory (intermediates) is written by every
        replay before it is read, so only what it hands the engine persists.
        """
        return list(iter_tensors(self.outputs, self._ops.is_tensor))

    @abstractmethod
    def replay(self) -> None:
        """Run the captured work again on the captured addresses."""

    def stale_inputs(self, current: Mapping[str, Any]) -> list[tuple[StaticInput, int]]:
        """Named static inputs whose binding in ``current`` (name -> tensor) moved.

        A binding is stale when it is another object than the one captured or
        has another ``data_ptr``. Returns ``(input, current data_ptr)`` pairs
        (0 where the binding is not a tensor); names missing from ``current``
        are not checked.
        """
        stale = []
        for inp, ref in zip(self.static_inputs, self._root_refs):
            if inp.name is None or inp.name not in current:
                continue
            cur = current[inp.name]
            ptr = self._ops.data_ptr(cur) if self._ops.is_tensor(cur) else 0
            if ref() is not cur or ptr != inp.data_ptr:
                stale.append((inp, ptr))
        return stale

    def dead_inputs(self) -> list[StaticInput]:
        """Static inputs whose memory the engine no longer holds."""
        return [inp for i, inp in enumerate(self.static_inputs) if not self._input_alive(i)]

    def _input_alive(self, i: int) -> bool:
        return self._root_refs[i]() is not None


class DeviceGraph(Graph):
    """A graph a device API captured (``graph.replay()``); holds weak references to its static inputs."""

    def __init__(self, graph: Any, outputs: Any, table: StaticInputTable, ops: TensorOps, label: str) -> None:
        self.label = label
        self._graph = graph
        self._ops = ops
        self.outputs = outputs
        self.static_inputs = tuple(table.inputs)
        self._root_refs = tuple(weakref.ref(root) for root in table.roots)

    def replay(self) -> None:
        tracer = kernels.current_tracer()
        if tracer is None:
            self._graph.replay()
        else:  # one opaque launch: the trace sees the region as a single call
            tracer.trace_call(self._graph.replay, (), {}, graph=self.label)


class GraphRunner(ABC):
    """Captures regions into graphs on one device."""

    name: str

    @abstractmethod
    def capture(self, fn: Callable[[], Any], *, names: Mapping[int, str] | None = None) -> Graph:
        """Capture ``fn`` (run once, leaving no side effects) into a graph.

        ``names`` maps ``id(tensor)`` to the engine's buffer name, for the
        static-input table.
        """

    @abstractmethod
    def memory_bytes(self) -> int:
        """Allocator bytes in use, or, without allocator statistics, live bytes held by graphs."""

    @abstractmethod
    def synchronize(self) -> None:
        """Wait for all device work issued so far."""
