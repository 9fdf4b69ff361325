"""An engine's own schedule of one step: who ran, on how many query tokens, who produced a token.

graphcheck's built-in engine follows graphcheck's scheduling model (FIFO
admission into slots, a whole prompt in one prefill step). A real serving
engine schedules for itself: a token budget per step, prefill split into
chunks, requests that wait for cache blocks. Such an engine declares
``EngineCapabilities.schedule = "engine"`` and reports, every step, a
:class:`Schedule` (``StepReport.schedule``); the engine-scheduled oracle
(``graphcheck.reference.scheduled``) then takes who ran from it and checks it
for conservation instead of predicting it: prefill chunks add up to the
prompt, positions are contiguous, nothing runs before it arrives or after it
was aborted or stopped (but for the batches an async engine had in flight
then: ``Schedule.pipeline_depth``), and a request produces exactly one token in
a step where its chunk reaches the end of what it has to process.

A leaf: standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ScheduledRun:
    """One request's part of a step.

    ``query_tokens``: tokens of the request the step fed to the model, ``drafts``
    included; ``first_position``: the position of the first of them (the tokens of the
    request already in its cache); ``produces``: whether the step sampled a
    token for it (the chunk reached the end of its prompt, or it is decoding);
    ``drafts``: the draft tokens the step verified for it (speculative decoding),
    fed after its own last token: greedy verification accepts them while they are
    the target's choice, then emits one token more.
    """

    request_id: str
    query_tokens: int
    first_position: int
    produces: bool
    drafts: tuple[int, ...] = ()


@dataclass(frozen=True)
class CacheReport:
    """The engine's KV cache as it scheduled one step (optional: ``Schedule.cache``).

    ``blocks`` / ``free_blocks``: the cache's blocks in all and those free once the step
    was scheduled; ``failed_allocations``: the block allocations the scheduler tried for the
    step and could not make; ``waiting``: requests that arrived, have not finished and did
    not run because their blocks could not be allocated; ``offloaded``: requests the engine
    evicted from the cache while scheduling the step (requeued: they are prefilled again,
    or restored, when they next run).
    """

    blocks: int
    free_blocks: int
    failed_allocations: int = 0
    waiting: tuple[str, ...] = ()
    offloaded: tuple[str, ...] = ()


@dataclass(frozen=True)
class Schedule:
    """Every request the step ran, in the engine's batch order.

    ``pipeline_depth``: how many batches before this one were still in flight
    when the engine scheduled it (0: it knew every earlier result; 1: an async,
    double-buffered engine that schedules batch N before batch N-1's tokens are
    in). A request that stopped or was aborted may therefore still run in the
    next ``pipeline_depth`` batches: a run after a stop produces nothing, a run
    after an abort was launched before it and may still produce its token.
    """

    runs: tuple[ScheduledRun, ...]
    pipeline_depth: int = 0
    cache: CacheReport | None = None  # the KV cache under this schedule, where the engine reports it

    def by_id(self) -> dict[str, ScheduledRun]:
        return {r.request_id: r for r in self.runs}

    @property
    def query_tokens(self) -> int:
        return sum(r.query_tokens for r in self.runs)


__all__ = ["CacheReport", "Schedule", "ScheduledRun"]
