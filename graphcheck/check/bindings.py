"""A captured graph's static inputs against the engine's buffers now: the records' ``bindings``.

After every replayed step (and a lazy capture) the lockstep run records, per static input of
the bucket's graphs, where the graph reads and where the engine's buffer of that name is now
(:class:`~graphcheck.check.records.Binding`): a stale one is an ``address`` divergence. The
bindings of a graph are memoised per engine while everything they are made of is unchanged.
"""

from __future__ import annotations

import weakref
from typing import Any, Mapping, Sequence, TypeAlias

from graphcheck.adapter import EngineAdapter, captured_graphs, input_label
from graphcheck.check.records import Binding


def graph_label(kind: str, size: int) -> str:
    """How reports name a graph: ``target[4]``, ``draft[2]``."""
    return f"{kind}[{size}]"


#: graph -> (the key its bindings were made from, those bindings); weak, so it keeps no graph alive.
BindingsMemo: TypeAlias = "weakref.WeakKeyDictionary[Any, tuple[tuple[Any, ...], tuple[Binding, ...]]]"


def bindings_of(engine: EngineAdapter, bucket: int, memo: BindingsMemo | None = None) -> tuple[Binding, ...]:
    """The static inputs of the graphs of ``bucket``, against the engine's current buffers.

    Named inputs are all reported; an unnamed one (a tensor the engine made
    outside the graph without keeping it as a buffer) only once it is dead,
    as ``<unnamed DTYPE[SHAPE]>``: the graph reads storage nobody owns.
    ``memo`` (one per engine, e.g. a Lockstep's) reuses a graph's bindings while
    everything they are made of is unchanged (:func:`_graph_bindings`).
    """
    current = engine.buffer_tensors()
    names = tuple(current)
    found: list[Binding] = []
    for kind, _, graph in captured_graphs(engine, bucket):
        label = graph_label(kind, bucket)
        stale = {inp.tensor_id: ptr for inp, ptr in graph.stale_inputs(current)}
        dead = frozenset(inp.tensor_id for inp in graph.dead_inputs())
        key = (label, _input_fields(graph.static_inputs), tuple(stale.items()), dead, names)
        cached = _memo_get(memo, graph, key)
        if cached is None:
            cached = _graph_bindings(label, graph.static_inputs, current, stale, dead)
            _memo_put(memo, graph, key, cached)
        found += cached
    return tuple(found)


def _input_fields(inputs: Sequence[Any]) -> tuple[tuple[Any, ...], ...]:
    """What a binding takes from each static input, by value (an adapter's inputs need not be frozen)."""
    return tuple((inp.name, inp.tensor_id, inp.data_ptr, inp.shape, inp.dtype) for inp in inputs)


def _memo_get(memo: BindingsMemo | None, graph: Any, key: tuple[Any, ...]) -> tuple[Binding, ...] | None:
    """The memoised bindings of ``graph`` when they were made from an equal ``key``, else None."""
    if memo is None:
        return None
    try:
        entry = memo.get(graph)
    except TypeError:  # an adapter's graph that takes no weak reference: never memoised
        return None
    return entry[1] if entry is not None and entry[0] == key else None


def _memo_put(memo: BindingsMemo | None, graph: Any, key: tuple[Any, ...], bindings: tuple[Binding, ...]) -> None:
    """Memoise ``bindings`` of ``graph``, made from ``key`` (not for a graph that takes no weak reference)."""
    if memo is not None:
        try:
            memo[graph] = (key, bindings)
        except TypeError:
            pass


def _graph_bindings(
    label: str, inputs: Sequence[Any], current: Mapping[str, Any], stale: dict[int, int], dead: frozenset[int]
) -> tuple[Binding, ...]:
    """The bindings of one graph's static ``inputs``.

    A pure function of the label, the inputs' fields, the stale
    pointers, the dead inputs and which names ``current`` has: :func:`bindings_of`
    memoises it on exactly those (Binding is frozen, so records may share them).
    """
    found = []
    for inp in inputs:
        if inp.name is None:
            if inp.tensor_id in dead:
                found.append(Binding(label, input_label(inp), inp.data_ptr, None, False, inp.shape, inp.dtype))
            continue
        ptr = stale.get(inp.tensor_id, inp.data_ptr if inp.name in current else None)
        found.append(Binding(label, inp.name, inp.data_ptr, ptr, inp.tensor_id not in dead, inp.shape, inp.dtype))
    return tuple(found)


__all__ = ["BindingsMemo", "bindings_of", "graph_label"]
