"""Paged-KV block allocator (host side).

``num_blocks = max_num_seqs * ceil(max_model_len / block_size) + 1``. Block 0 is
the sink: unallocated block-table entries and every padded token point at it,
so padded rows only ever read or write the sink. Real blocks are handed out
lowest id first, which keeps runs deterministic.
"""

from __future__ import annotations

import heapq
import math

SINK_BLOCK = 0


def blocks_per_seq(max_model_len: int, block_size: int) -> int:
    return math.ceil(max_model_len / block_size)


def num_blocks_for(max_num_seqs: int, max_model_len: int, block_size: int) -> int:
    return max_num_seqs * blocks_per_seq(max_model_len, block_size) + 1


class BlockAllocator:
    def __init__(self, num_blocks: int):
        if num_blocks < 2:
            raise ValueError("need the sink block and at least one real block")
        self.num_blocks = num_blocks
        self._free = list(range(1, num_blocks))
        heapq.heapify(self._free)

    @property
    def num_free(self) -> int:
        return len(self._free)

    def allocate(self) -> int:
        if not self._free:
            raise RuntimeError("KV cache exhausted: no free block")
        return heapq.heappop(self._free)

    def free(self, blocks) -> None:
        for block in blocks:
            if block == SINK_BLOCK or not 0 < block < self.num_blocks:
                raise ValueError(f"cannot free block {block}")
            heapq.heappush(self._free, block)
