"""The static-input table of a real device capture, observed without engine changes.

:class:`CaptureObserver` is a torch dispatch mode to enter inside (or around) a
real ``torch.cuda.graph`` capture. It sees every aten op the captured region
issues and keeps one :class:`GraphInput` row per pre-existing storage the ops
read or write: storages the region did not allocate itself, which the graph
will read and write at the same addresses on every replay. Views are folded
into the tensor they view, and names come from the adapter's buffer map
(``id(tensor) -> name``: module attribute paths, parameter names).

It also refuses host synchronisations before they reach the device (a
``.item()`` inside a CUDA capture invalidates it with an opaque error), naming
the op and the engine's source line. It executes nothing itself and changes no
result: the ops run as they would without it.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Any, Mapping

from . import kernels
from .base import Graph, HostSyncInCapture, StaticInput
from .op_graphs import _sync_reason
from .sites import OpSite, user_frame
from .torch_ops import _op_info, _op_tensors, _storage_key, _written_tensors, forwarding_mode


@dataclass(frozen=True)
class GraphInput(StaticInput):
    """A static-input row with a weak reference to the tensor, and whether the graph writes it."""

    ref: Any = field(default=None, compare=False, repr=False)
    written: bool = False
    first_op: str = ""  # the first op that touched it, with its site

    def alive(self) -> bool:
        """Whether the engine still holds the tensor (a dead one's memory is free for reuse)."""
        return self.ref is not None and self.ref() is not None


class CaptureObserver:
    """Records the pre-existing storages a captured region's ops touch (see the module docstring)."""

    def __init__(self, names: Mapping[int, str] | None = None, *, label: str = "observed capture") -> None:
        import torch

        self.torch = torch
        self.label = label
        self._names = dict(names or {})
        self._made: set[int] = set()  # storage keys the region allocated
        self._made_objects: set[int] = set()
        self._rows: dict[int, dict[str, Any]] = {}  # id(root) -> row fields, in first-touch order
        self._keep: list[Any] = []  # strong refs while observing (ids stay unique)
        self.ops_seen = 0
        self._mode: Any = None
        self._frozen: tuple[GraphInput, ...] | None = None

    def __enter__(self) -> CaptureObserver:
        self._mode = forwarding_mode(self.observe)
        self._mode.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        mode, self._mode = self._mode, None
        mode.__exit__(None, None, None)
        self._frozen = self._table()
        self._rows.clear()  # the rows' strong references go: a dead input must be able to die
        self._keep.clear()

    def observe(self, func: Any, args: tuple, kwargs: dict) -> Any:
        torch = self.torch
        reason = _sync_reason(func, args, kwargs)
        if reason:
            file, line, function = user_frame(2)
            site = OpSite(file=file, line=line, function=function)
            raise HostSyncInCapture(f"{reason} {site.location()}; not allowed inside graph capture ({self.label})")
        info = _op_info(func)
        inputs = _op_tensors(args, torch.Tensor) + (_op_tensors(kwargs.values(), torch.Tensor) if kwargs else [])
        written = {id(t) for t in _written_tensors(info, args, kwargs, torch.Tensor)} if info.written else set()
        for t in inputs:
            if _storage_key(t) not in self._made:
                self._note(t, func, id(t) in written)
        out = func(*args, **kwargs)
        in_keys = {_storage_key(t) for t in inputs}
        in_ids = {id(t) for t in inputs}
        for t in _op_tensors(out, torch.Tensor):
            if id(t) in in_ids:
                continue
            self._made_objects.add(id(t))
            key = _storage_key(t)
            if key not in in_keys:
                self._made.add(key)
        self.ops_seen += 1
        return out

    def _note(self, t: Any, func: Any, written: bool) -> None:
        base = t._base
        root = base if base is not None and id(base) not in self._made_objects else t
        row = self._rows.get(id(root))
        if row is None:
            file, line, function = user_frame(3)
            self._keep.append(root)
            row = self._rows[id(root)] = {
                "name": self._names.get(id(root), self._names.get(id(t))),  # the row is the root's
                "root": root,
                "written": False,
                "first_op": OpSite(file=file, line=line, function=function).describe(str(func)),
            }
        row["written"] = row["written"] or written

    @property
    def inputs(self) -> tuple[GraphInput, ...]:
        """One row per pre-existing storage root the region touched, in first-touch order."""
        return self._frozen if self._frozen is not None else self._table()

    def _table(self) -> tuple[GraphInput, ...]:
        rows = []
        for row in self._rows.values():
            root = row["root"]
            rows.append(
                GraphInput(
                    row["name"],
                    id(root),
                    root.data_ptr(),
                    tuple(root.shape),
                    str(root.dtype).removeprefix("torch."),
                    ref=weakref.ref(root),
                    written=row["written"],
                    first_op=row["first_op"],
                )
            )
        return tuple(rows)


class ObservedGraph(Graph):
    """A real ``torch.cuda.CUDAGraph`` with the static-input table a :class:`CaptureObserver` saw.

    What an adapter hands graphcheck for an engine that captures with ``torch.cuda``
    itself: ``stale_inputs`` and ``dead_inputs`` work on the observed rows, and
    ``replay`` replays the real graph (as one opaque launch under a kernel trace).
    """

    def __init__(self, graph: Any, inputs: tuple[GraphInput, ...], *, outputs: Any = None, label: str = "cuda graph"):
        from .torch_ops import TorchOps

        self._graph = graph
        self.label = label
        self.outputs = outputs
        self._ops = TorchOps()
        self.static_inputs = tuple(inputs)
        self._root_refs = tuple(inp.ref for inp in inputs)

    def replay(self) -> None:
        tracer = kernels.current_tracer()
        if tracer is None:
            self._graph.replay()
        else:
            tracer.trace_call(self._graph.replay, (), {}, graph=self.label)
