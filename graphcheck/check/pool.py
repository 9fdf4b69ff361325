"""Built engines kept for the next scenario of the same configuration.

Building an engine pair and capturing every bucket costs more than most
scenarios' steps. An :class:`EnginePool` keeps the engines a lockstep run is
done with, keyed by everything that shapes an engine (factory, backend,
config, faults, graphs or not), and hands them to the next run of that key
after ``reset()`` (the adapter's optional method: an engine without it is
never kept). An engine whose step raised, whose construction or capture
failed, or whose reset failed is never handed out again.

The pool is a small LRU over keys, so memory stays bounded: past
``capacity`` configurations the least recently used engines are dropped. It also
keeps the reference weights (``graphcheck.reference.make_weights``) of the
configurations it holds.

Each engine it keeps carries its history: the scenarios it ran since it was
built, in order (it was reset after each). A divergence that only shows after
some of them is a finding with that history (``graphcheck.search.history``).
An engine that has run :data:`MAX_RUNS` scenarios is let go, so that a
history stays short enough to replay and shrink.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Sequence

from graphcheck.adapter import engine_extras
from graphcheck.check.watchdog import EngineHung
from graphcheck.errors import EngineAbortedError
from graphcheck.scenario import EngineConfig

#: Keys (configurations) kept by default: a fuzzed batch uses one at a time.
DEFAULT_CAPACITY = 4
#: Scenarios an engine runs before the pool lets it go (its history stays within graphcheck.scenario.MAX_HISTORY).
MAX_RUNS = 32


@dataclass(frozen=True)
class PoolKey:
    """Everything an engine is built from, but the weights (a function of ``config``).

    The factory and the backend count by identity (either may be unhashable); the
    key holds them, so that their ids are not reused while it exists.
    """

    factory_id: int
    backend_id: int
    config: EngineConfig
    faults: tuple[str, ...]
    use_graphs: bool
    factory: Any = field(compare=False)
    backend: Any = field(compare=False)


def supports_reset(engine: Any) -> bool:
    """Whether ``engine`` implements the optional ``reset()`` (``graphcheck.adapter.Resettable``)."""
    return engine_extras(engine).resettable


class EnginePool:
    """An LRU of built engines (one idle engine per key, ``2 * capacity`` keys: an eager and a graph
    engine per configuration) and of reference weights (``capacity`` configurations)."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        if capacity < 1:
            raise ValueError(f"EnginePool: capacity must be at least 1, got {capacity}")
        self.capacity = capacity
        self._idle: OrderedDict[PoolKey, tuple[Any, tuple[Any, ...]]] = OrderedDict()  # key -> (engine, history)
        self._weights: OrderedDict[EngineConfig, Any] = OrderedDict()
        self.reused = 0  # engines handed out again

    @staticmethod
    def key(factory: Any, backend: Any, config: EngineConfig, faults: Sequence[str], *, use_graphs: bool) -> PoolKey:
        return PoolKey(id(factory), id(backend), config, tuple(faults), use_graphs, factory, backend)

    def __len__(self) -> int:
        return len(self._idle)

    def take(self, key: PoolKey) -> Any | None:
        """The idle engine of ``key``, reset to its post-construction state; None when there is none
        (or its reset failed: then it is dropped)."""
        taken = self.take_with_history(key)
        return None if taken is None else taken[0]

    def take_with_history(self, key: PoolKey) -> tuple[Any, tuple[Any, ...]] | None:
        """:meth:`take`, with the scenarios the engine ran since it was built (its history)."""
        kept = self._idle.pop(key, None)
        if kept is None:
            return None
        engine, history = kept
        try:
            engine.reset()
        except (EngineAbortedError, EngineHung):  # the run's finding (it tried to exit, it hung), not a failed reset
            raise
        except Exception:
            return None
        self.reused += 1
        return engine, history

    def give(self, key: PoolKey, engine: Any, history: tuple[Any, ...] = ()) -> None:
        """Keep ``engine`` (done with, healthy) for the next run of ``key``, with ``history``, the scenarios it
        ran since it was built; an engine without reset() is dropped, as is one past MAX_RUNS scenarios."""
        if not supports_reset(engine) or len(history) >= MAX_RUNS:
            return
        self._idle[key] = (engine, tuple(history))
        self._idle.move_to_end(key)
        self._trim()

    def weights(self, config: EngineConfig) -> Any:
        """``make_weights(config)``, cached for the configs of the last ``capacity`` calls."""
        from graphcheck.reference import make_weights

        if config in self._weights:
            self._weights.move_to_end(config)
            return self._weights[config]
        weights = self._weights[config] = make_weights(config)
        while len(self._weights) > self.capacity:
            self._weights.popitem(last=False)
        return weights

    def clear(self) -> None:
        """Drop every engine and weight set."""
        self._idle.clear()
        self._weights.clear()

    def _trim(self) -> None:
        while len(self._idle) > 2 * self.capacity:  # two keys per config: eager and graph
            self._idle.popitem(last=False)
