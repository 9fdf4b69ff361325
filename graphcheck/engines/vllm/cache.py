"""The KV cache as vLLM's scheduler sees it each step (``graphcheck.schedule.CacheReport``).

Watched on one engine's own objects, nothing global: its ``KVCacheManager.allocate_slots`` (None when
the blocks a request needs are not free: the scheduler then preempts or leaves the request waiting)
and the ``preempted_req_ids`` of the step's ``SchedulerOutput`` (a preempted request gives its blocks
back and is prefilled again, prompt and output, when it next runs).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from graphcheck.schedule import CacheReport


@dataclass
class CacheWatch:
    """Failed allocations since the last report, by the scheduler's (internal) request id."""

    manager: Any
    failed: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        allocate: Callable[..., Any] = self.manager.allocate_slots
        failed = self.failed

        def allocate_slots(request: Any, *args: Any, **kwargs: Any) -> Any:
            blocks = allocate(request, *args, **kwargs)
            if blocks is None:
                failed.append(str(request.request_id))
            return blocks

        self.manager.allocate_slots = allocate_slots

    def report(self, scheduled: Iterable[str], preempted: Iterable[str], external: Callable[[str], str]) -> CacheReport:
        """The cache once the step was scheduled: ``scheduled`` and ``preempted`` are internal ids, named
        with ``external``; a request waits when an allocation for it failed and it did not run."""
        ran = set(scheduled)
        pool = self.manager.block_pool
        waiting = sorted({external(r) for r in self.failed if r not in ran})
        report = CacheReport(
            blocks=int(pool.num_gpu_blocks) - 1,  # block 0 is vLLM's null block, never handed out
            free_blocks=int(pool.get_num_free_blocks()),
            failed_allocations=len(self.failed),
            waiting=tuple(waiting),
            offloaded=tuple(sorted(external(r) for r in preempted)),
        )
        self.failed.clear()
        return report


__all__ = ["CacheWatch"]
