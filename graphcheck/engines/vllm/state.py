"""What of a vLLM engine's memory is request state after a step (``graphcheck.adapter.StateSnapshots``).

Two kinds of buffer are declared, each row by the request that owns it:

* the KV cache of every attention layer, target's and drafter's (``kv_caches.<i>``): the rows of the
  positions a running request has computed (``num_computed_tokens``: after a verify, vLLM has already
  taken the rejected drafts back), read through the request's own blocks. A row is named by its
  position in the request (the owner names the request): which physical blocks hold it is the block
  pool's choice, and two engines with the same schedule may be given different blocks (the order of
  the free queue follows each engine's history of frees). Rows past a request's computed length
  (rejected drafts, the padding a graph wrote nowhere) and blocks nobody owns are never compared.
* the model runner's persistent per-token inputs (``runner.input_ids.gpu``, ``runner.positions``):
  the rows of the step's real tokens, in batch order, which the step's graph read. What a graph
  engine wrote past them (its padding) is its own business.

A float model's KV rows are compared within the calibrated band by the lockstep, as its scores are.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from graphcheck.state import CACHE, TOKEN, BufferState

#: The runner's per-token inputs whose real rows a step's graph reads (``<name>.gpu`` in buffer_tensors).
TOKEN_INPUTS = ("input_ids", "positions")


@dataclass(frozen=True)
class KvRows:
    """The cache rows running requests computed: per row, the request's position, its owner and the
    physical row (``block * block_size + offset``) that holds it."""

    positions: np.ndarray
    owners: np.ndarray
    physical: np.ndarray


def kv_rows(requests: Sequence[tuple[int, Sequence[int], int]], block_size: int) -> KvRows:
    """``requests``: (owner, block ids, computed tokens) per running request, in a fixed order."""
    positions: list[np.ndarray] = [np.zeros(0, np.int64)]
    owners: list[np.ndarray] = [np.zeros(0, np.int64)]
    physical: list[np.ndarray] = [np.zeros(0, np.int64)]
    for owner, blocks, computed in requests:
        at = np.arange(computed, dtype=np.int64)
        table = np.asarray(blocks, dtype=np.int64)
        if table.size * block_size < at.size:
            raise ValueError(f"{len(blocks)} blocks cannot hold {computed} computed tokens")
        positions.append(at)
        owners.append(np.full(at.size, owner, dtype=np.int64))
        physical.append(table[at // block_size] * block_size + at % block_size)
    return KvRows(np.concatenate(positions), np.concatenate(owners), np.concatenate(physical))


@dataclass(frozen=True)
class BlockLayout:
    """Where vLLM's CPU attention keeps each token of a block: ``keys[t, d]`` and ``values[t, d]`` index
    the flat memory of one (block, head), ``2 * block_size * head_size`` elements.

    The CPU kernels pack a block for their vector ISA (``cpu_attn_reshape_and_cache``), so a token's
    key is not a row of the tensor; :func:`learn_layout` asks the kernel itself where it puts them."""

    keys: np.ndarray  # int64 [block_size, head_size]
    values: np.ndarray  # int64 [block_size, head_size]


def learn_layout(write: Any, torch: Any, block_size: int, head_size: int) -> BlockLayout:
    """The layout ``write(key, value, key_cache, value_cache, slot_mapping)`` (the engine's cache writer,
    its ISA bound) gives one block of one head: each element written is numbered (keys from +1, values
    from -1), exact in float32, and found again in the block's memory."""
    n = block_size * head_size
    numbers = torch.arange(1, n + 1, dtype=torch.float32).reshape(block_size, 1, head_size)
    cache = torch.zeros(1, 1, 2 * block_size, head_size, dtype=torch.float32)
    key_cache, value_cache = cache.chunk(2, dim=2)
    write(numbers, -numbers, key_cache, value_cache, torch.arange(block_size, dtype=torch.int64))
    flat = cache.reshape(-1).numpy()
    keys, values = np.full(n, -1, np.int64), np.full(n, -1, np.int64)
    at = np.flatnonzero(flat > 0)
    keys[flat[at].astype(np.int64) - 1] = at
    at = np.flatnonzero(flat < 0)
    values[(-flat[at]).astype(np.int64) - 1] = at
    if (keys < 0).any() or (values < 0).any():
        raise RuntimeError("vLLM's CPU cache writer left some of a block's keys or values unwritten")
    return BlockLayout(keys.reshape(block_size, head_size), values.reshape(block_size, head_size))


def cache_state(name: str, cache: Any, rows: KvRows, layout: BlockLayout, torch: Any) -> BufferState:
    """One layer's cache ``[blocks, heads, block_size, 2 * head_size]`` at ``rows``, one token per row
    (``[rows, heads, 2, head_size]``: its key, its value), each row named by its position in its request."""
    block_size = layout.keys.shape[0]
    blocks, heads = cache.shape[0], cache.shape[1]
    memory = cache.detach().reshape(blocks, heads, -1).permute(0, 2, 1)  # [blocks, elements, heads]
    block, offset = rows.physical // block_size, rows.physical % block_size
    elements = np.concatenate([layout.keys[offset], layout.values[offset]], axis=1)  # [rows, 2 * head_size]
    index = torch.as_tensor(block[:, None]), torch.as_tensor(elements)
    values = memory[index].permute(0, 2, 1).cpu().numpy()  # [rows, heads, 2 * head_size]
    head_size = layout.keys.shape[1]
    return BufferState(name, CACHE, rows.positions, values.reshape(len(block), heads, 2, head_size), rows.owners)


def token_state(name: str, buffer: Any, owners: np.ndarray) -> BufferState:
    """The first ``len(owners)`` rows of a packed per-token input, one per real token of the step."""
    n = int(owners.size)
    return BufferState(name, TOKEN, np.arange(n, dtype=np.int64), buffer[:n].detach().cpu().numpy(), owners)


__all__ = ["TOKEN_INPUTS", "BlockLayout", "KvRows", "learn_layout", "cache_state", "kv_rows", "token_state"]
