"""The engine's post-capture checkpoint: what ``Engine.reset()`` puts back.

Taken at the end of ``Engine.__init__`` (after capture and the warm replay), it
holds:

* per buffer field and per weight: a weak reference to the tensor object bound
  then, and a copy of its contents. Weak, so that a tensor the engine lets go
  of (a rebound buffer) dies exactly as it would without the checkpoint: the
  lockstep's dead-input audit must see the same engine either way. A tensor
  that died cannot be bound again, and ``restore`` raises
  :class:`EngineNotRestorable` (whoever pools engines then builds a new one);
* per captured graph: copies of the tensors it owns whose contents outlive a
  replay (``Graph.persistent_tensors``) and its replay counters
  (``Graph.counters``);
* deep copies of every host-side attribute (everything but the structural
  ones the engine never changes after construction, and the scheduler, which
  is rebuilt as ``Scheduler(config)``).

``restore`` copies contents back in place (``xp.copy_``): no tensor is
reallocated, so every address a graph froze stays valid, on a device too.
"""

from __future__ import annotations

import copy
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable

from graphcheck.capture.base import iter_tensors
from graphcheck.errors import EngineError


class EngineNotRestorable(EngineError, RuntimeError):
    """A tensor the checkpoint would bind again no longer exists (the engine dropped it)."""


@dataclass
class _Saved:
    ref: weakref.ref
    copy: Any


@dataclass
class Checkpoint:
    """What :func:`restore` needs; copies live here, never on the engine's own attributes."""

    buffers: dict[str, _Saved]
    weights: dict[str, _Saved]
    graph_tensors: list[tuple[Any, Any]]  # (tensor a graph owns, copy of its contents)
    graph_counters: list[tuple[Any, str, int]]  # (graph, attribute, value)
    host: dict[str, Any] = field(default_factory=dict)


def _clone(xp: Any, t: Any) -> Any:
    out = xp.zeros(tuple(t.shape), t.dtype)
    xp.copy_(out, t)
    return out


def _save_fields(xp: Any, named: dict[str, Any]) -> dict[str, _Saved]:
    return {name: _Saved(weakref.ref(t), _clone(xp, t)) for name, t in named.items()}


def _graph_tensors(graph: Any, is_tensor: Callable[[Any], bool]) -> list[Any]:
    persistent = getattr(graph, "persistent_tensors", None)
    found = persistent() if callable(persistent) else list(iter_tensors(getattr(graph, "outputs", None), is_tensor))
    unique: dict[int, Any] = {}
    for t in found:
        unique.setdefault(id(t), t)
    return list(unique.values())


def take_checkpoint(engine: Any, host_names: list[str]) -> Checkpoint:
    """Checkpoint ``engine`` as it is now; ``host_names``: the host-side attributes to deep-copy."""
    xp = engine.xp
    tensor_type = type(engine.buffers.ids)

    def is_tensor(obj: Any) -> bool:
        return isinstance(obj, tensor_type)

    graph_tensors, counters = [], []
    for bucket in engine.graphs.values():
        for graph in bucket.all():
            graph_tensors += [(t, _clone(xp, t)) for t in _graph_tensors(graph, is_tensor)]
            counters += [(graph, name, getattr(graph, name)) for name in getattr(graph, "counters", ())]
    return Checkpoint(
        buffers=_save_fields(xp, dict(engine.buffers.named_tensors())),
        weights=_save_fields(xp, dict(engine.weights.named_tensors())),
        graph_tensors=graph_tensors,
        graph_counters=counters,
        host={name: copy.deepcopy(getattr(engine, name)) for name in host_names},
    )


def _alive(saved: dict[str, _Saved], what: str) -> dict[str, Any]:
    tensors = {name: s.ref() for name, s in saved.items()}
    gone = sorted(name for name, t in tensors.items() if t is None)
    if gone:
        raise EngineNotRestorable(f"{what} {', '.join(gone)}: the tensor bound at construction no longer exists")
    return tensors


def restore(engine: Any, cp: Checkpoint, kept: frozenset[str]) -> None:
    """Put ``engine`` back to checkpoint ``cp``; attributes named in ``kept`` are left as they are.

    Raises EngineNotRestorable (before changing anything) when a tensor to bind again died.
    """
    xp = engine.xp
    buffers, weights = _alive(cp.buffers, "buffer"), _alive(cp.weights, "weight")
    for owner, tensors, saved in ((engine.buffers, buffers, cp.buffers), (engine.weights, weights, cp.weights)):
        for name, t in tensors.items():
            if getattr(owner, name) is not t:
                setattr(owner, name, t)
            xp.copy_(t, saved[name].copy)
    for t, saved_copy in cp.graph_tensors:
        xp.copy_(t, saved_copy)
    for graph, name, value in cp.graph_counters:
        setattr(graph, name, value)
    for name in [n for n in vars(engine) if n not in kept and n not in cp.host]:
        delattr(engine, name)  # set by a step, not by construction
    for name, value in cp.host.items():
        setattr(engine, name, copy.deepcopy(value))
