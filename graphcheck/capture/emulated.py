"""A CPU emulation of device-graph capture and replay.

CPU-only CI has no CUDA graphs, so :class:`EmulatedRunner` gives a region the
semantics a real capture would:

* **capture** runs the region once with a :class:`~graphcheck.capture.kernels.KernelObserver`
  installed and records each outermost kernel call: the function, its tensor
  arguments by identity and everything else by value (containers and
  dataclasses are copied, so rebinding a field later is not seen). The
  capture leaves no side effects: every pre-existing storage a kernel writes
  is snapshotted before its first write (before a kernel first receives it,
  where the framework does not report writes) and restored at the end, and every
  tensor the region allocated is *poisoned* (filled with NaN / a sentinel and,
  until the graph's first replay, any op reading it raises
  :class:`PoisonedTensorError`), since a real capture leaves it uninitialised;
  a replay whose kernels receive no poisoned storage needs no per-op check.
* **replay** re-runs the recorded calls in order and copies each call's fresh
  results into the tensors that call returned at capture, which later calls
  and ``graph.outputs`` hold. Pre-existing tensors are replayed through
  aliases of the storage captured, so a buffer the engine rebinds after
  capture is read stale, and one it frees stays readable, as GPU memory does
  until it is reused.
* **host syncs** in the region raise :class:`HostSyncInCapture`, and (with
  torch) device work outside a kernel, or a kernel touching a tensor that is
  not one of its arguments, raises :class:`EscapedOpError`: the emulation
  replays kernel calls only, so work it would drop must not pass silently.

Everything framework specific sits behind an ``ops`` object (``torch_ops.TorchOps``
for torch CPU tensors); a Paddle variant supplies its own.

:meth:`EmulatedRunner.capture` takes a region callable. A device module that
opens and closes captures by hand (the emulated NPU module's ``capture_begin``
/ ``capture_end``) uses :class:`EmulatedCapture` instead, and patches a
recorded call's host values with :meth:`EmulatedGraph.reissue` (a task update).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import enum
import itertools
import weakref
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, ContextManager, Iterator, Mapping, Protocol

from . import kernels
from .base import (
    CaptureError,
    Graph,
    GraphRunner,
    HostSyncInCapture,
    Region,
    StaticInputTable,
    TensorOps,
    bytes_held_by,
    iter_tensors,
)
from .capture_state import CaptureState
from .warmup import region_label

_SCALARS = (bool, int, float, complex, str, bytes, type(None), enum.Enum, range)


def rebuild(obj: Any, ops: TensorOps, on_tensor: Callable[[Any], Any]) -> Any:
    """Copy ``obj``'s containers and dataclasses, mapping each tensor through ``on_tensor``.

    Scalars are immutable and kept; NumPy arrays are copied; any other object
    is kept by identity (a kernel should not receive one).
    """
    if ops.is_tensor(obj):
        return on_tensor(obj)
    if isinstance(obj, _SCALARS):
        return obj
    if isinstance(obj, (tuple, list)):
        items = [rebuild(item, ops, on_tensor) for item in obj]
        if isinstance(obj, list):
            return items
        if hasattr(obj, "_fields"):  # namedtuple
            return type(obj)(*items)
        return tuple(items) if type(obj) is tuple else type(obj)(items)
    if isinstance(obj, dict):
        return {k: rebuild(v, ops, on_tensor) for k, v in obj.items()}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        clone = copy.copy(obj)
        for f in dataclasses.fields(obj):
            object.__setattr__(clone, f.name, rebuild(getattr(obj, f.name), ops, on_tensor))
        return clone
    if type(obj).__module__ == "numpy" and hasattr(obj, "copy"):
        return obj.copy()
    return obj


# --------------------------------------------------------------------------- framework ops


class FrameworkOps(TensorOps, Protocol):
    """Everything the emulator asks of a framework (:class:`TorchOps` for torch).

    Optional: ``tracks_writes = True`` when :meth:`capture_hooks` calls
    ``state.before_write(t)`` before every op that writes ``t``; the recorder then
    saves a storage at its first write, else whenever a kernel first receives it.
    ``replaying(kernel_inputs)``: a context manager around each replay, given a
    function that lists the tensors the recorded kernels receive.
    """

    framework: str

    def bookkeeping(self) -> ContextManager[None]:
        """Run the runner's own tensor work past the capture checks and the poison guard."""

    def capture_hooks(self, state: CaptureState) -> ContextManager[None]:
        """While capturing: refuse host syncs, note allocations in ``state.region`` and,
        with ``state.check_escapes``, refuse work outside kernels or on non-arguments."""

    def snapshot(self, t: Any) -> Any:
        """Save all of ``t``'s storage."""

    def restore(self, snap: Any) -> None: ...

    def alias(self, t: Any) -> Any:
        """A new handle on ``t``'s memory that keeps ``t`` itself unreferenced."""

    def copy_into(self, dst: Any, src: Any) -> None: ...

    def storage_nbytes(self, t: Any) -> int: ...

    def poison(self, t: Any) -> None:
        """Fill ``t``'s whole storage with a poison value."""

    def mark_poisoned(self, tensors: list[Any], label: str) -> int:
        """Make reads of these storages raise PoisonedTensorError; returns a token."""

    def clear_poison(self, token: int) -> None: ...


@dataclass
class _Call:
    fn: Callable[..., Any]
    args: tuple
    kwargs: dict
    result: Any  # what the call returned at capture; replay copies fresh results into it

    @property
    def name(self) -> str:
        return getattr(self.fn, "__qualname__", repr(self.fn))


class _Recorder:
    """KernelObserver for an emulated capture: snapshot, run, record."""

    def __init__(self, ops: FrameworkOps, state: CaptureState, table: StaticInputTable) -> None:
        self.ops, self.state, self.table = ops, state, table
        self.calls: list[_Call] = []
        self.snapshots: dict[int, Any] = {}  # storage key -> snapshot
        # Where the framework reports writes, a storage is saved just before its first write
        # instead of when a kernel first receives it: the same restore, far fewer copies.
        self._on_write = bool(getattr(ops, "tracks_writes", False))

    @contextmanager
    def saving_on_write(self) -> Iterator[None]:
        """Hook :meth:`_save` into the capture state for the recording (unhooked after, so that no
        cycle keeps the recorder, and the kernel arguments it holds, alive past the capture)."""
        if self._on_write:
            self.state.before_write = self._save
        try:
            yield
        finally:
            self.state.before_write = None

    def _save(self, t: Any) -> None:
        key = self.ops.storage_key(t)
        if key not in self.state.region.storages and key not in self.snapshots:
            self.snapshots[key] = self.ops.snapshot(t)

    def run_kernel(self, fn: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
        ops, region = self.ops, self.state.region
        arg_tensors = list(iter_tensors((args, kwargs), ops.is_tensor))
        keys = {ops.storage_key(t) for t in arg_tensors}
        for t in arg_tensors:
            if not self._on_write:
                self._save(t)
            self.table.add(t)
        frozen = rebuild((args, kwargs), ops, lambda t: t)
        name = getattr(fn, "__qualname__", repr(fn))
        with self.state.in_kernel(name, set(keys)):
            result = fn(*args, **kwargs)
        arg_ids = {id(t) for t in arg_tensors}
        for t in iter_tensors(result, ops.is_tensor):
            if id(t) not in arg_ids:
                region.note_created(ops, t, fresh_storage=ops.storage_key(t) not in keys)
        self.calls.append(_Call(fn, frozen[0], frozen[1], result))
        return result

    def on_host_sync(self, what: str) -> None:
        raise HostSyncInCapture(
            f"host sync '{what}' inside graph capture ({self.state.label}); "
            "a device graph cannot copy to the host mid-replay"
        )


# --------------------------------------------------------------------------- the graph


def _held(root: Any) -> Callable[[], Any]:
    """``root`` behind the call of a weak reference, but held: it stays alive with the graph."""
    return lambda: root


@dataclass(frozen=True)
class _Holdings:
    """The memory a finished capture holds besides its calls and outputs (``EmulatedRunner._finish``)."""

    aliases: list[tuple[int, Any]]  # (static-input index, alias) of each pre-existing tensor its calls read
    owned: list[Any]  # one tensor per storage the region allocated
    poison_token: int | None  # the poison on ``owned`` until the first replay; None: none poisoned


class EmulatedGraph(Graph):
    """A recorded list of kernel calls; see the module docstring."""

    _ops: FrameworkOps

    def __init__(
        self,
        *,
        label: str,
        ops: FrameworkOps,
        calls: list[_Call],
        outputs: Any,
        table: StaticInputTable,
        region: Region,
        holdings: _Holdings,
    ) -> None:
        self.label = label
        self._ops = ops
        self._calls = calls
        self.outputs = outputs
        self.static_inputs = tuple(table.inputs)
        # A root made inside the region (a view without a base) has no engine
        # object to watch: hold it, so it counts as alive.
        self._root_refs = tuple(
            _held(root) if id(root) in region.objects else weakref.ref(root) for root in table.roots
        )
        self._aliases = holdings.aliases  # (static-input index, alias tensor)
        self._owned = holdings.owned  # one tensor per storage the region allocated
        self._poison_token = holdings.poison_token
        self.replays = 0

    def replay(self) -> None:
        if self._poison_token is not None:
            token, self._poison_token = self._poison_token, None
            self._ops.clear_poison(token)
        tracer = kernels.current_tracer()
        replaying = getattr(self._ops, "replaying", None)
        with replaying(self._kernel_inputs) if replaying is not None else contextlib.nullcontext():
            for call in self._calls:
                if tracer is None:
                    fresh = call.fn(*call.args, **call.kwargs)
                else:
                    fresh = tracer.trace_call(call.fn, call.args, call.kwargs, graph=self.label)
                self._store_results(call, fresh)
        self.replays += 1

    def _kernel_inputs(self) -> list[Any]:
        """Every tensor the recorded kernel calls receive (read again: a task update may change them)."""
        return list(iter_tensors([(c.args, c.kwargs) for c in self._calls], self._ops.is_tensor))

    counters = ("replays",)

    def persistent_tensors(self) -> list[Any]:
        """Every storage the region allocated (outputs and intermediates) and the outputs.

        Unlike a device graph, a replay re-runs only the kernel calls: an
        intermediate a kernel writes in part keeps the rest from the last replay.
        """
        return list(self._owned) + super().persistent_tensors()

    def kernel_calls(self) -> list[tuple[Callable[..., Any], tuple, dict]]:
        """The recorded kernel calls, in replay order: ``(fn, args, kwargs)`` as a replay issues them."""
        return [(c.fn, c.args, c.kwargs) for c in self._calls]

    def _store_results(self, call: _Call, fresh: Any) -> None:
        ops = self._ops
        old = list(iter_tensors(call.result, ops.is_tensor))
        new = list(iter_tensors(fresh, ops.is_tensor))
        if len(old) != len(new):
            raise CaptureError(f"kernel {call.name} returned {len(new)} tensors on replay but {len(old)} at capture")
        for o, n in zip(old, new):
            if n is o or (ops.storage_key(n) == ops.storage_key(o) and ops.data_ptr(n) == ops.data_ptr(o)):
                continue
            if ops.shape(n) != ops.shape(o):
                raise CaptureError(
                    f"kernel {call.name} returned shape {ops.shape(n)} on replay but "
                    f"{ops.shape(o)} at capture (dynamic shapes do not replay)"
                )
            ops.copy_into(o, n)

    def reissue(self, index: int, fn: Callable[..., Any], args: tuple, kwargs: dict) -> None:
        """Task update: recorded call ``index`` takes the host values of a re-issued call.

        The re-issued call must be the same kernel on the same tensors (same
        storage and offset); its other arguments replace the frozen ones.
        """
        call = self._calls[index]
        if fn is not call.fn:
            raise CaptureError(
                f"task update re-issued {getattr(fn, '__qualname__', fn)} over {call.name} ({self.label})"
            )
        where = f"task update of {call.name} ({self.label})"
        call.args = _merge(call.args, args, self._ops, where)
        call.kwargs = _merge(call.kwargs, kwargs, self._ops, where)

    def held_storages(self) -> dict[int, Any]:
        """Storage key -> a tensor on it, for memory the graph alone keeps alive."""
        key = self._ops.storage_key
        held = {key(t): t for t in self._owned}
        for i, alias in self._aliases:
            if not self._input_alive(i):
                held[key(alias)] = alias
        return held


def _merge(recorded: Any, issued: Any, ops: TensorOps, where: str) -> Any:
    """``recorded`` with every non-tensor leaf taken from ``issued`` (same structure, same tensors)."""
    if ops.is_tensor(recorded):
        if not ops.is_tensor(issued) or ops.data_ptr(issued) != ops.data_ptr(recorded):
            raise CaptureError(f"{where}: a tensor argument is not the captured one (a task update keeps addresses)")
        return recorded
    if isinstance(recorded, (tuple, list)) and not isinstance(issued, str):
        if type(issued) is not type(recorded) or len(issued) != len(recorded):
            return _leaf(recorded, issued, ops, where)
        items = [_merge(r, i, ops, where) for r, i in zip(recorded, issued)]
        if isinstance(recorded, list):
            return items
        return type(recorded)(*items) if hasattr(recorded, "_fields") else type(recorded)(items)
    if isinstance(recorded, dict) and isinstance(issued, dict) and recorded.keys() == issued.keys():
        return {k: _merge(v, issued[k], ops, where) for k, v in recorded.items()}
    if dataclasses.is_dataclass(recorded) and not isinstance(recorded, type) and type(issued) is type(recorded):
        clone = copy.copy(recorded)
        for f in dataclasses.fields(recorded):
            object.__setattr__(clone, f.name, _merge(getattr(recorded, f.name), getattr(issued, f.name), ops, where))
        return clone
    return _leaf(recorded, issued, ops, where)


def _leaf(recorded: Any, issued: Any, ops: TensorOps, where: str) -> Any:
    """A host value: the issued one, frozen; it must hold no tensor the capture did not record."""
    if any(True for _ in iter_tensors(issued, ops.is_tensor)):
        raise CaptureError(f"{where}: the re-issued call's arguments do not match the captured structure")
    return rebuild(issued, ops, lambda t: t)


# --------------------------------------------------------------------------- the runner


class EmulatedCapture:
    """One emulated capture, opened and closed by hand.

    :meth:`recording` installs the recorder (as the kernel observer, or with
    ``as_device`` as the device recorder that a runner's own observer
    launches kernels through, see :func:`~graphcheck.capture.kernels.launch`) and
    the framework's capture hooks, and on the way out restores every storage
    the region touched. :meth:`finish` turns the recording into a graph.
    """

    def __init__(self, runner: EmulatedRunner, label: str, names: Mapping[int, str] | None = None) -> None:
        self.runner, self.label = runner, label
        self.state = CaptureState(label, check_escapes=True)
        self.table = StaticInputTable(runner.ops, self.state.region, names)
        self.recorder = _Recorder(runner.ops, self.state, self.table)

    @property
    def calls_recorded(self) -> int:
        return len(self.recorder.calls)

    @contextmanager
    def recording(self, *, as_device: bool = False) -> Iterator[None]:
        ops = self.runner.ops
        slot = kernels.device_recording if as_device else kernels.observing
        try:
            with slot(self.recorder), self.recorder.saving_on_write(), ops.capture_hooks(self.state):
                yield
        finally:
            with ops.bookkeeping():
                for snap in self.recorder.snapshots.values():
                    ops.restore(snap)

    def finish(self, outputs: Any) -> EmulatedGraph:
        """The graph of what was recorded; call after :meth:`recording` ended without error."""
        return self.runner._finish(self.label, self.recorder, outputs)


class EmulatedRunner(GraphRunner):
    """Graph runner that emulates device graphs on CPU tensors (see the module docstring)."""

    name = "emulated"

    def __init__(self, ops: FrameworkOps | None = None) -> None:
        if ops is None:
            from .torch_ops import TorchOps

            ops = TorchOps()
        self.ops = ops
        self._graphs: weakref.WeakSet[EmulatedGraph] = weakref.WeakSet()
        self._count = itertools.count(1)
        self._tokens: set[int] = set()  # poison tokens of graphs not yet replayed
        self._owner_scoped = False  # see scope_poison_to_owner

    def capture(self, fn: Callable[[], Any], *, names: Mapping[int, str] | None = None) -> EmulatedGraph:
        capture = self.open_capture(region_label(next(self._count), fn), names)
        with capture.recording():
            outputs = fn()
        return capture.finish(outputs)

    def open_capture(self, label: str, names: Mapping[int, str] | None = None) -> EmulatedCapture:
        """A capture to drive by hand (see :class:`EmulatedCapture`)."""
        return EmulatedCapture(self, label, names)

    def _finish(self, label: str, recorder: _Recorder, outputs: Any) -> EmulatedGraph:
        """Swap pre-existing tensors for aliases and poison what the region allocated."""
        ops, region, table = self.ops, recorder.state.region, recorder.table
        index = {id(root): i for i, root in enumerate(table.roots)}
        aliases: dict[int, tuple[int, Any]] = {}
        owned: dict[int, Any] = {}

        def hold(t: Any) -> Any:
            key = ops.storage_key(t)
            if key in region.storages:
                owned.setdefault(key, t)
                return t
            if id(t) not in aliases:
                base = ops.view_base(t)
                i = index.get(id(t), index.get(id(base)) if base is not None else None)
                aliases[id(t)] = (i if i is not None else -1, ops.alias(t))
            return aliases[id(t)][1]

        with ops.bookkeeping():
            calls = [
                _Call(c.fn, rebuild(c.args, ops, hold), rebuild(c.kwargs, ops, hold), rebuild(c.result, ops, hold))
                for c in recorder.calls
            ]
            for t in iter_tensors(outputs, ops.is_tensor):
                if ops.storage_key(t) in region.storages:
                    owned.setdefault(ops.storage_key(t), t)
            for t in owned.values():
                ops.poison(t)
        token = ops.mark_poisoned(list(owned.values()), label) if owned else None
        if token is not None:
            self._tokens.add(token)
            if self._owner_scoped and hasattr(ops, "scope_poison"):
                ops.scope_poison(token)
        graph = EmulatedGraph(
            label=label,
            ops=ops,
            calls=calls,
            outputs=outputs,
            table=table,
            region=region,
            holdings=_Holdings([a for a in aliases.values() if a[0] >= 0], list(owned.values()), token),
        )
        self._graphs.add(graph)
        return graph

    def memory_bytes(self) -> int:
        """Bytes of storage held alive by this runner's graphs (deduplicated)."""
        return bytes_held_by(list(self._graphs), self.ops.storage_nbytes)

    def synchronize(self) -> None:
        """CPU work is synchronous."""

    def scope_poison_to_owner(self) -> None:
        """From now on, reads of this runner's poisoned storages raise only inside :meth:`guarding`.

        For an owner (an engine) that alone holds its graphs' tensors and runs its
        own calls inside ``guarding()``: outside them nothing can reach those
        storages, and the per-op check would only slow the work in between.
        With ops that have no such scopes (paddle checks on host reads only) nothing changes.
        """
        self._owner_scoped = True
        if hasattr(self.ops, "scope_poison"):
            for token in self._tokens:
                self.ops.scope_poison(token)

    def guarding(self) -> ContextManager[None]:
        """The owner's scope: this runner's poison is enforced in it (see :meth:`scope_poison_to_owner`)."""
        guarding = getattr(self.ops, "guarding", None)
        return guarding() if guarding is not None else contextlib.nullcontext()

    def close(self) -> None:
        """Lift the poison of every graph this runner captured that was never replayed."""
        for graph in list(self._graphs):
            graph._poison_token = None
        for token in self._tokens:
            self.ops.clear_poison(token)
        self._tokens.clear()
