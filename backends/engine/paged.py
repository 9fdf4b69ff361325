"""The paged KV cache as attention sees it: writes, and the static-shape gather.

Shared by the integer model (``forward``) and the float model (``float_model``):
every packed token gathers the KV rows of ITS slot's blocks over all
``width * block_size`` positions of the block table (one static shape, so a
graph captures it for any batch), and the caller masks positions ``j > pos``.
Padded tokens (``valid`` False) read the sink block only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from graphcheck.backends.engine.blocks import SINK_BLOCK


@dataclass(frozen=True)
class TokenLayout:
    """Per packed token: its slot (0 on padding), position, and whether it is real."""

    slot: Any
    position: Any
    valid: Any


def token_layout(xp, batch_ids, positions) -> TokenLayout:
    """The layout of packed tokens from their batch ids (-1 on padding) and positions."""
    return TokenLayout(xp.maximum(batch_ids, 0), positions, xp.ge(batch_ids, 0))


@dataclass(frozen=True)
class PagedKV:
    """One paged KV cache as a layer's attention writes and reads it in one forward.

    ``k_cache`` / ``v_cache`` ``[rows, H]``: the cache tensors; ``block_tables`` ``[slots, width]``:
    the block table attention reads; ``slot_rows`` ``[T]``: the cache row each packed token writes
    (padding: the sink); ``block_size``: rows per block; ``span_blocks``: attention reads the first
    ``span_blocks`` block-table columns only (None: all of them). Built on the host by the forward
    kernel from views of the engine's buffers, then handed down unchanged.
    """

    k_cache: Any
    v_cache: Any
    block_tables: Any
    slot_rows: Any
    block_size: int
    span_blocks: int | None = None


def write_kv(xp, kv: PagedKV, key, val) -> None:
    """Write each token's key and value into its cache row ``kv.slot_rows`` (padding: the sink)."""
    xp.index_put_(kv.k_cache, kv.slot_rows, key)
    xp.index_put_(kv.v_cache, kv.slot_rows, val)


def gather_kv(xp, kv: PagedKV, tokens: TokenLayout):
    """Keys and values ``[T, span, H]`` of every token's slot, and ``causal`` ``[T, span]`` (``j <= pos``).

    Keys come from the first ``kv.span_blocks`` block-table columns (all of them when None).
    """
    block_size = kv.block_size
    T = int(tokens.slot.shape[0])
    H = int(kv.k_cache.shape[1])
    width = int(kv.block_tables.shape[1])
    blocks = xp.index_select(kv.block_tables, tokens.slot, 0)  # [T, width]
    if kv.span_blocks is not None:
        width = kv.span_blocks
        blocks = blocks[:, :width]
    span = width * block_size
    blocks = xp.where(xp.unsqueeze(tokens.valid, 1), blocks, SINK_BLOCK)
    offsets = xp.reshape(xp.arange(block_size), (1, 1, block_size))
    rows = xp.reshape(xp.unsqueeze(blocks, 2) * block_size + offsets, (-1,))  # [T * span]
    keys = xp.reshape(xp.index_select(kv.k_cache, rows, 0), (T, span, H))
    vals = xp.reshape(xp.index_select(kv.v_cache, rows, 0), (T, span, H))
    causal = xp.le(xp.reshape(xp.arange(span), (1, span)), xp.unsqueeze(tokens.position, 1))
    return keys, vals, causal


def last_rows(xp, cu, num_slots: int, num_tokens: int):
    """Per slot of a packed layout with offsets ``cu`` [G+1]: whether it has rows, and its last row."""
    G = num_slots
    active = xp.gt(cu[1:], cu[:G])
    return active, xp.clip(cu[1:] - 1, 0, num_tokens - 1)
