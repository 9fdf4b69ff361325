"""Kernel traces: every kernel call of an engine, with what it read and wrote.

A :class:`KernelTrace` is installed with ``kernels.tracing(trace)`` around an
engine's construction and around the steps to trace. It sees each outermost
kernel call the engine makes eagerly, and each call a graph replays (the
emulated runners, and a CUDA capture made per kernel for tracing, replay call
by call; any other device graph shows as one opaque call named after it).

Per call it records the kernel, its source line, the graph it ran in, every
argument (path in the call, the engine's buffer name, a host copy or digest
before and after, whether the storage is one the engine still binds under that
name) and, once an engine is bound, the engine's state snapshot before and
after (``state_snapshot(during_step=True)``). Construction is traced without
snapshots: the engine does not exist yet; its calls are named afterwards.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import inspect
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, Callable, Iterator

import numpy as np

from graphcheck.adapter import EngineExtras, captured_graphs, engine_extras
from graphcheck.check.state_diff import differing_rows
from graphcheck.state import EngineState

#: Tensors up to this size get a full host copy before and after each call; bigger ones a digest.
MAX_COPY_BYTES = 1 << 20


def is_tensor(obj: Any) -> bool:
    """A torch or paddle tensor (duck-typed: the harness imports no framework)."""
    return hasattr(obj, "data_ptr") and hasattr(obj, "shape") and hasattr(obj, "dtype") and not isinstance(obj, type)


def to_host(t: Any) -> np.ndarray:
    """A host copy of ``t`` (torch or paddle)."""
    if hasattr(t, "detach"):  # torch
        t = t.detach()
        if str(t.dtype) == "torch.bfloat16":
            t = t.float()
        return np.array(t.cpu().numpy(), copy=True)
    return np.array(t.numpy(), copy=True)


def _digest(a: np.ndarray) -> bytes:
    return hashlib.blake2b(np.ascontiguousarray(a).tobytes(), digest_size=16).digest() + str(a.shape).encode()


@dataclass
class ArgRecord:
    """One argument of a kernel call.

    ``path``: where it sat in the call (``buf.slot_mapping``, ``tables``,
    ``span_blocks``); ``buffer``: the engine's name for the tensor, if any;
    ``status``: "" for a tensor the engine still binds under ``buffer`` (or an
    unnamed one it made), "rebound" when the engine binds another tensor under
    that name now, "freed" when the graph reads storage the engine let go.
    """

    path: str
    buffer: str | None = None
    host: bool = False
    value: Any = None  # host value, or a host copy of the tensor before the call (None when too big)
    after: Any = None  # host copy after the call, when it changed
    changed: bool = False
    shape: tuple[int, ...] = ()
    data_ptr: int = 0
    status: str = ""
    tensor_id: int = 0
    digest: bytes = b""

    def changed_rows(self) -> np.ndarray | None:
        """Indices (first dimension) of the rows the call changed; None when the copies cannot tell
        (a host value, a tensor too big to copy, a scalar, a shape that changed)."""
        if not self.changed:
            return None if self.host else np.zeros(0, np.int64)
        if self.value is None or self.after is None or self.value.shape != self.after.shape or not self.value.ndim:
            return None
        return differing_rows(self.value, self.after)


@dataclass
class CallRecord:
    """One kernel call (or one opaque graph replay) of a traced engine."""

    index: int  # position among the calls of its phase
    phase: str  # "construction" or "step N"
    kernel: str  # the kernel function's __qualname__ (or the graph's label, for an opaque replay)
    source: str | None
    line: int | None
    graph: str | None  # the graph that replayed this call; None when the engine called it directly
    args: list[ArgRecord] = field(default_factory=list)
    returns: list[np.ndarray] = field(default_factory=list)
    return_ids: list[int] = field(default_factory=list)
    before: EngineState | None = None
    after: EngineState | None = None
    opaque: bool = False
    caller: tuple[str, str, int] | None = None  # (function, file, line) that called a direct kernel call

    @property
    def caller_name(self) -> str | None:
        return self.caller[0] if self.caller else None

    @property
    def where(self) -> str:
        return f"inside {self.graph}" if self.graph else "called directly (eager)"


_HARNESS_FILES = ("kernels.py", "trace.py")


def _caller() -> tuple[str, str, int] | None:
    """The frame that called the kernel: the first one outside the kernel wrapper and this trace."""
    frame: FrameType | None = sys._getframe(2)
    while frame is not None and Path(frame.f_code.co_filename).name in _HARNESS_FILES:
        frame = frame.f_back
    if frame is None:
        return None
    return (
        frame.f_code.co_qualname if hasattr(frame.f_code, "co_qualname") else frame.f_code.co_name,
        frame.f_code.co_filename,
        frame.f_lineno,
    )


@functools.lru_cache(maxsize=1024)
def _source_of_code(code: Any) -> tuple[str | None, int | None]:
    try:
        path = inspect.getsourcefile(code) or code.co_filename
    except TypeError:
        path = code.co_filename
    return path, code.co_firstlineno


def source_of(fn: Callable[..., Any]) -> tuple[str | None, int | None]:
    """The file and first line of ``fn``'s definition (its first decorator), where Python can tell.

    A recorded op (``__graphcheck_site__``, an ``OpSite``: see ``graphcheck.capture.op_graphs.op_call``)
    gives the engine's line that issued it instead."""
    site = getattr(fn, "__graphcheck_site__", None)
    if site is not None:
        return site.file, site.line
    code = getattr(inspect.unwrap(fn), "__code__", None)
    return _source_of_code(code) if code is not None else (None, None)


def bound_arguments(fn: Callable[..., Any], args: tuple, kwargs: dict) -> list[tuple[str, Any]]:
    try:
        bound = inspect.signature(fn).bind_partial(*args, **kwargs)
        return list(bound.arguments.items())
    except (TypeError, ValueError):
        return [(f"arg{i}", a) for i, a in enumerate(args)] + list(kwargs.items())


def leaves(path: str, obj: Any, depth: int = 0) -> Iterator[tuple[str, Any]]:
    """(path, value) of every tensor and host scalar in ``obj`` (dataclasses, tuples, lists, dicts)."""
    if is_tensor(obj):
        yield path, obj
    elif isinstance(obj, (bool, int, float, str)) or obj is None:
        yield path, obj
    elif depth > 3:
        return
    elif isinstance(obj, (tuple, list)):
        for i, item in enumerate(obj):
            yield from leaves(f"{path}[{i}]", item, depth + 1)
    elif isinstance(obj, dict):
        for k, item in obj.items():
            yield from leaves(f"{path}[{k!r}]", item, depth + 1)
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for f in dataclasses.fields(obj):
            yield from leaves(f"{path}.{f.name}", getattr(obj, f.name), depth + 1)


class KernelTrace:
    """Records the kernel calls of one engine (see the module docstring).

    ``graph_inputs``: a callable giving ``(name, captured data_ptr, alive)`` for
    every static input of the engine's graphs, to name a replayed call's
    arguments and tell rebound and freed storage; set with :meth:`bind`.
    """

    def __init__(self, label: str) -> None:
        self.label = label
        self.calls: list[CallRecord] = []
        self.phase = "construction"
        self._index = 0
        self.engine: Any = None
        self._extras = EngineExtras()  # the bound engine's optional members
        self._names: dict[int, str] = {}  # id(tensor) -> buffer name
        self._by_ptr: dict[int, str] = {}  # current data_ptr -> buffer name
        self._by_view: dict[tuple[int, tuple[int, ...]], str] = {}  # (data_ptr, shape) -> buffer name
        self._captured: dict[int, tuple[str | None, bool]] = {}  # captured data_ptr -> (name, alive)

    # ------------------------------------------------------------------ control
    def bind(self, engine: Any) -> None:
        """From now on, name tensors after ``engine``'s buffers and snapshot its state around calls."""
        self.engine = engine
        self._extras = engine_extras(engine)
        self.refresh_names()
        for call in self.calls:  # construction calls: name their arguments now
            for arg in call.args:
                if not arg.host and arg.buffer is None:
                    arg.buffer = (
                        self._names.get(arg.tensor_id)
                        or self._by_view.get((arg.data_ptr, arg.shape))
                        or self._by_ptr.get(arg.data_ptr)
                    )

    def refresh_names(self) -> None:
        if self.engine is None:
            return
        current = dict(self.engine.buffer_tensors())
        self._names = {id(t): name for name, t in current.items()}
        self._by_ptr = {t.data_ptr(): name for name, t in current.items() if is_tensor(t)}
        # Views that start at one address (a base and its first slice) are told apart by shape.
        self._by_view = {(t.data_ptr(), tuple(t.shape)): name for name, t in current.items() if is_tensor(t)}
        self._captured = {}
        for _, _, graph in captured_graphs(self.engine):
            dead = {inp.tensor_id for inp in graph.dead_inputs()}
            for inp in graph.static_inputs:
                self._captured.setdefault(inp.data_ptr, (inp.name, inp.tensor_id not in dead))

    def start_phase(self, phase: str) -> None:
        self.phase = phase
        self._index = 0
        self.refresh_names()

    def phase_calls(self, phase: str) -> list[CallRecord]:
        return [c for c in self.calls if c.phase == phase]

    # ------------------------------------------------------------------ KernelTracer
    def trace_call(self, fn: Callable[..., Any], args: tuple, kwargs: dict, *, graph: str | None) -> Any:
        from graphcheck.capture import kernels

        opaque = getattr(fn, "__self__", None) is not None and not args and not kwargs and graph is not None
        name = graph if opaque and graph is not None else getattr(fn, "__qualname__", repr(fn))
        source, line = (None, None) if opaque else source_of(fn)
        record = CallRecord(self._index, self.phase, name, source, line, graph, opaque=opaque)
        record.caller = _caller() if graph is None else None
        self._index += 1
        record.before = self._snapshot()
        flat = [(p, v) for pname, value in bound_arguments(fn, args, kwargs) for p, v in leaves(pname, value)]
        record.args = [self._arg_before(path, value, graph) for path, value in flat]
        result = kernels.run_nested(fn, args, kwargs)
        for arg, (_, value) in zip(record.args, flat):
            if not arg.host and arg.status != "freed":
                self._arg_after(arg, value)
        for t in (v for _, v in leaves("out", result)):
            if is_tensor(t):
                record.returns.append(to_host(t))
                record.return_ids.append(id(t))
        record.after = self._snapshot()
        self.calls.append(record)
        return result

    # ------------------------------------------------------------------ helpers
    def _snapshot(self) -> EngineState | None:
        """The bound engine's state now; None before binding, or for an engine without state snapshots
        (the trace then compares calls by their arguments alone)."""
        snapshot = self._extras.state_snapshot
        return snapshot(during_step=True) if snapshot is not None else None

    def _arg_before(self, path: str, value: Any, graph: str | None) -> ArgRecord:
        if not is_tensor(value):
            return ArgRecord(path, host=True, value=value)
        ptr = value.data_ptr()
        arg = ArgRecord(path, shape=tuple(int(n) for n in value.shape), data_ptr=ptr, tensor_id=id(value))
        if getattr(value, "freed", False):  # a device graph's argument whose storage is gone: no data
            name = self._captured.get(ptr, (None, False))[0]
            arg.buffer, arg.status = name, "freed"
            return arg
        arg.buffer = self._names.get(id(value)) or self._by_view.get((ptr, arg.shape)) or self._by_ptr.get(ptr)
        if arg.buffer is None and ptr in self._captured:
            name, alive = self._captured[ptr]
            arg.buffer = name
            arg.status = "freed" if not alive else ("rebound" if name is not None else "")
        host = to_host(value)
        arg.value = host if host.nbytes <= MAX_COPY_BYTES else None
        arg.digest = _digest(host)
        return arg

    def _arg_after(self, arg: ArgRecord, value: Any) -> None:
        host = to_host(value)
        if _digest(host) != arg.digest:
            arg.changed = True
            arg.after = host if host.nbytes <= MAX_COPY_BYTES else None
