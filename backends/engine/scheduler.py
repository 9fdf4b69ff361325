"""Host-side request table: FIFO admission into slots, reasoning status, KV blocks.

Slots: a request is admitted into the lowest free slot below ``max_num_seqs``;
a slot freed at the end of step t-1 is free at step t. The slot high-water mark
``R`` (largest occupied slot + 1) is what the graph bucket is chosen by.

The host keeps a mirror of what it needs to plan a step without reading the
device mid-step: each request's prefill state, KV length and draft count, all
refreshed from the one read-back at the end of every step.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

from graphcheck.backends.engine.blocks import BlockAllocator, blocks_per_seq, num_blocks_for
from graphcheck.scenario import EngineConfig, RequestSpec


def reasoning_status_at(spec: RequestSpec, t: int) -> int:
    """README §5.1: the status of the latest change with step <= t (later entry wins ties); 0 if none."""
    status, latest = 0, -1
    for change in spec.reasoning:
        if latest <= change.step <= t:
            status, latest = change.status, change.step
    return status


@dataclass
class Request:
    spec: RequestSpec
    slot: int | None = None
    prefilled: bool = False
    seq_len: int = 0  # positions holding target KV
    next_tokens: int = 0  # target input tokens of the next step
    reasoning_status: int = 0  # as last written to the device
    blocks: list[int] = field(default_factory=list)

    @property
    def request_id(self) -> str:
        return self.spec.request_id

    @property
    def is_prefill(self) -> bool:
        return not self.prefilled

    @property
    def output_rows(self) -> int:
        return 1 if self.is_prefill else self.next_tokens


class Scheduler:
    def __init__(self, config: EngineConfig):
        self.config = config
        self.max_num_seqs = config.max_num_seqs
        self.block_size = config.block_size
        self.max_blocks = blocks_per_seq(config.max_model_len, config.block_size)
        self.allocator = BlockAllocator(num_blocks_for(config.max_num_seqs, config.max_model_len, config.block_size))
        self.waiting: deque[Request] = deque()
        self.slots: dict[int, Request] = {}  # slot -> running request
        self.known: dict[str, Request] = {}  # waiting or running

    # -- script events ---------------------------------------------------
    def submit(self, spec: RequestSpec) -> None:
        if spec.request_id in self.known:
            raise ValueError(f"request {spec.request_id!r} is already queued or running")
        req = Request(spec)
        self.known[spec.request_id] = req
        self.waiting.append(req)

    def abort(self, request_id: str) -> Request | None:
        """Drop a waiting or running request; returns it if it held a slot (unknown ids: None)."""
        req = self.known.pop(request_id, None)
        if req is None:
            return None
        if req.slot is None:
            self.waiting = deque(r for r in self.waiting if r is not req)
            return None
        return req

    def admit(self) -> list[Request]:
        """FIFO admission into the lowest free slots."""
        admitted = []
        while self.waiting and len(self.slots) < self.max_num_seqs:
            req = self.waiting.popleft()
            req.slot = min(s for s in range(self.max_num_seqs) if s not in self.slots)
            req.next_tokens = len(req.spec.prompt)
            self.slots[req.slot] = req
            admitted.append(req)
        return admitted

    def release(self, req: Request) -> int:
        """Free the request's slot and blocks; returns the slot."""
        slot = req.slot
        assert slot is not None and self.slots.get(slot) is req
        del self.slots[slot]
        self.known.pop(req.request_id, None)
        self.allocator.free(req.blocks)
        req.blocks = []
        req.slot = None
        return slot

    # -- planning ----------------------------------------------------------
    def running(self) -> list[Request]:
        return [self.slots[s] for s in sorted(self.slots)]

    def high_water(self) -> int:
        return max(self.slots) + 1 if self.slots else 0

    def grow_blocks(self, req: Request, extra_positions: int) -> list[tuple[int, int]]:
        """Allocate blocks so positions ``< seq_len + next_tokens + extra`` are backed.

        Returns the new ``(column, block)`` table entries.
        """
        need = min(self.config.max_model_len, req.seq_len + req.next_tokens + extra_positions)
        wanted = min(self.max_blocks, math.ceil(need / self.block_size))
        new = []
        while len(req.blocks) < wanted:
            block = self.allocator.allocate()
            new.append((len(req.blocks), block))
            req.blocks.append(block)
        return new
