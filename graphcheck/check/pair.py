"""The engine pair of a lockstep run: built (or taken from the pool) and captured, all or nothing.

:class:`EngineLease` is where a run's engines come from and go back to: the pool's, reset,
when it holds them, else new ones built through the factory (the engine boundary); given
back when the run ends, but for an engine that raised. :func:`build_pair` builds the eager
engine, then the graph engine, which captures its graphs before it returns: it returns a
whole :class:`EnginePair`, or raises (:class:`PairNotBuilt` for a failure that is the
engine's finding) and leaves nothing half-built behind.
"""

from __future__ import annotations

import traceback
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from graphcheck.adapter import EngineExtras, EngineFactory, engine_extras
from graphcheck.check.boundary import EngineAborted
from graphcheck.check.engines import EngineSpecError, require_adapter
from graphcheck.check.failures import is_out_of_memory, out_of_memory
from graphcheck.check.guarded import build_guarded
from graphcheck.check.pool import EnginePool, PoolKey
from graphcheck.check.records import CheckOutcome
from graphcheck.check.watchdog import EngineHung
from graphcheck.errors import EngineError
from graphcheck.memory_estimate import MemoryEstimate
from graphcheck.scenario import Scenario

SOURCES = ("eager", "graph")


@dataclass(frozen=True)
class EnginePair:
    """The eager and the graph engine of one scenario, built and captured, with their optional members
    (the graph engine's ``sizes.tokens`` too)."""

    eager: Any
    graph: Any
    eager_extras: EngineExtras
    graph_extras: EngineExtras

    def engines(self) -> tuple[tuple[str, Any], ...]:
        return (("eager", self.eager), ("graph", self.graph))

    @property
    def snapshots(self) -> bool:
        """Whether both engines implement ``state_snapshot()``."""
        return self.eager_extras.snapshots and self.graph_extras.snapshots

    @property
    def pipeline_depth(self) -> int:
        """Batches still in flight after the last step (the drain steps a pipelined pair needs)."""
        return min(self.eager_extras.pipeline_depth, self.graph_extras.pipeline_depth)


class PairNotBuilt(EngineError):
    """Building or capturing the pair raised ``cause`` in ``where``: a capture divergence, the engine's finding
    (an EngineError: the lockstep run records it, it never escapes one).

    ``eager``: the eager engine when it was built (buffers too small for the buckets explain a
    failed capture); it is never given back."""

    def __init__(self, where: str, cause: Exception, eager: Any) -> None:
        super().__init__(f"{where}: {type(cause).__name__}: {cause}")
        self.where, self.cause, self.eager = where, cause, eager


class EngineLease:
    """Where the engines of one lockstep run come from, and go back to when it ends."""

    def __init__(
        self,
        scenario: Scenario,
        factory: EngineFactory,
        backend: Any,
        faults: Sequence[str],
        label: str,
        pool: EnginePool | None,
        outcome: CheckOutcome,
    ) -> None:
        self.scenario, self.factory, self.backend, self.faults = scenario, factory, backend, faults
        self.label, self.pool, self.outcome = label, pool, outcome
        self.keys: dict[str, PoolKey] = {}
        self.histories: dict[str, tuple[Scenario, ...]] = {}  # what a pooled engine ran before
        self.broken: set[str] = set()  # "eager" / "graph": raised, never given back

    def engine(self, weights: Any, *, use_graphs: bool) -> Any:
        """An engine of the scenario's config: the pool's, reset, when it has one; else a new one."""
        config, source = self.scenario.config, "graph" if use_graphs else "eager"
        if self.pool is not None:
            key = self.pool.key(self.factory, self.backend, config, self.faults, use_graphs=use_graphs)
            self.keys[source] = key
            taken = self.pool.take_with_history(key)
            if taken is not None:
                engine, self.histories[source] = taken
                self.outcome.history = max(self.histories.values(), key=len)
                return engine
        engine = build_guarded(
            self.label, self.factory, config, weights, device=self.backend, use_graphs=use_graphs, faults=self.faults
        )
        require_adapter(engine, self.label)
        return engine

    def broke(self, *sources: str) -> None:
        """The engines of ``sources`` raised: they are never given back."""
        self.broken.update(sources or SOURCES)

    def give_back(self, engines: Sequence[tuple[str, Any]]) -> None:
        """Give ``engines`` back to the pool (idempotent: the lease ends); an engine that raised is dropped."""
        for source, engine in engines:
            if self.pool is not None and engine is not None and source not in self.broken:
                ran = self.histories.get(source, ()) + (self.scenario,)
                self.pool.give(self.keys[source], engine, ran)
        self.pool = None


def build_pair(
    lease: EngineLease,
    weights: Any,
    estimate: MemoryEstimate | None,
    phase: Callable[[str], AbstractContextManager[None]],
) -> EnginePair:
    """The eager engine, then the graph engine (built and captured), each in its ``phase``.

    Raises EngineSpecError, EngineAborted and EngineHung as they are, EngineOutOfMemory for an
    allocation failure (the machine's limit) and :class:`PairNotBuilt` for any other failure (a
    capture that fails is itself the finding); whatever was built is then broken, never given back.
    """
    where, eager = "eager engine construction", None
    try:
        with phase("setup_eager"):
            eager = lease.engine(weights, use_graphs=False)
        where = "graph engine construction and capture"
        with phase("setup_graph"):
            graph = lease.engine(weights, use_graphs=True)
    except (EngineSpecError, EngineAborted, EngineHung):
        lease.broke()
        raise
    except Exception as exc:
        lease.broke()  # a half-built pair is never given back
        if is_out_of_memory(exc):  # the machine's limit, not the engine's bug: never a divergence
            eager = None
            error = out_of_memory(estimate, where, exc)
            traceback.clear_frames(exc.__traceback__)  # let the half-built engines go
            raise error from exc
        raise PairNotBuilt("engine construction", exc, eager) from exc
    return EnginePair(eager, graph, engine_extras(eager), engine_extras(graph, sizes=True))


__all__ = ["SOURCES", "EngineLease", "EnginePair", "PairNotBuilt", "build_pair"]
