"""The target layer and the draft (MTP) layer on the paged KV cache (README §1).

Integer-exact: activations are int64, dot products are float64 matmuls of small
integers rounded back to int64. Attention gathers, for every packed token, the
KV rows of its slot's blocks over all ``blocks_per_seq * block_size`` positions
(static shape) and masks ``j > pos`` out; padded tokens use the sink block only.
"""

from __future__ import annotations

from graphcheck.backends.engine.blocks import SINK_BLOCK
from graphcheck.backends.engine.sampling import EXACT_SCORE_SCALE
from graphcheck.backends.graphs.kernels import kernel

NPOS_WRAP = 16  # wrap() maps into -8..7


def wrap(xp, a):
    """``((a + 8) floor-mod 16) - 8``."""
    return xp.mod(a + 8, NPOS_WRAP) - 8


def argmax_lowest(xp, logits):
    """Index of the row maximum; ties go to the lowest index."""
    width = int(logits.shape[-1])
    best = xp.max(logits, -1, keepdims=True)
    ids = xp.broadcast_to(xp.arange(width), tuple(logits.shape))
    return xp.min(xp.where(xp.eq(logits, best), ids, width), -1)


def top_margin(xp, scores, best_ids):
    """Per row: the best score minus the second best (0.0 on a tie), float64.

    ``best_ids``: each row's argmax; the second best is the maximum over the other ids.
    """
    width = int(scores.shape[-1])
    s = xp.astype(scores, xp.float64)
    ids = xp.broadcast_to(xp.arange(width), tuple(s.shape))
    best = xp.max(s, -1)
    others = xp.where(xp.eq(ids, xp.unsqueeze(best_ids, 1)), float("-inf"), s)
    return best - xp.max(others, -1)


def _write_kv(xp, k_cache, v_cache, rows, key, val):
    xp.index_put_(k_cache, rows, key)
    xp.index_put_(v_cache, rows, val)


def _attend(xp, q, k_cache, v_cache, block_tables, slot, position, valid, block_size, span_blocks=None):
    """``a_i = sum_{j <= pos_i} (((q_i . key_j) mod 7) - 3) * val_j`` per packed token.

    Keys come from the first ``span_blocks`` block-table columns (all of them when None).
    """
    T, H = int(q.shape[0]), int(q.shape[1])
    width = int(block_tables.shape[1])
    blocks = xp.index_select(block_tables, slot, 0)  # [T, width]
    if span_blocks is not None:
        width = span_blocks
        blocks = blocks[:, :width]
    span = width * block_size
    blocks = xp.where(xp.unsqueeze(valid, 1), blocks, SINK_BLOCK)
    offsets = xp.reshape(xp.arange(block_size), (1, 1, block_size))
    rows = xp.reshape(xp.unsqueeze(blocks, 2) * block_size + offsets, (-1,))  # [T * span]
    keys = xp.reshape(xp.index_select(k_cache, rows, 0), (T, span, H))
    vals = xp.reshape(xp.index_select(v_cache, rows, 0), (T, span, H))
    q3 = xp.reshape(q, (T, 1, H))
    dots = xp.reshape(xp.int_matmul(q3, xp.transpose(keys, (0, 2, 1))), (T, span))
    score = xp.mod(dots, 7) - 3
    causal = xp.le(xp.reshape(xp.arange(span), (1, span)), xp.unsqueeze(position, 1))
    score = xp.where(causal, score, 0)
    attn = xp.int_matmul(xp.reshape(score, (T, 1, span)), vals)
    return xp.reshape(attn, (T, H))


def _layer(
    xp, x, wq, wk, wv, k_cache, v_cache, block_tables, slot_rows, slot, position, valid, block_size, span_blocks=None
):
    q = wrap(xp, xp.int_matmul(x, wq))
    key = wrap(xp, xp.int_matmul(x, wk))
    val = wrap(xp, xp.int_matmul(x, wv))
    _write_kv(xp, k_cache, v_cache, slot_rows, key, val)
    attn = _attend(xp, q, k_cache, v_cache, block_tables, slot, position, valid, block_size, span_blocks)
    return wrap(xp, x + attn)


@kernel
def target_forward(
    xp, w, buf, num_tokens: int, num_rows: int, block_size: int, *, tables=None, span_blocks: int | None = None
):
    """Target layer over the first T packed tokens; writes target KV in place.

    Returns ``(hidden [T, H], logits [num_rows, V])``; output row r is the hidden
    state of packed token ``out_token_index[r]``.

    Attention metadata: ``tables`` is the block table attention reads
    (``buf.block_tables`` when None); ``span_blocks`` limits attention to the
    first block-table columns (None: all). A correct engine passes the buffer
    and None; the captured-temporary-freed and host-max-seq-len-baked faults
    pass a per-step copy and a host-side count.
    """
    T = num_tokens
    ids, position = buf.ids[:T], buf.positions[:T]
    bid = buf.batch_ids[:T]
    valid = xp.ge(bid, 0)
    slot = xp.where(valid, bid, 0)
    npos = int(w.pos.shape[0])
    x = wrap(xp, xp.index_select(w.embed, ids, 0) + xp.index_select(w.pos, xp.mod(position, npos), 0))
    hidden = _layer(
        xp,
        x,
        w.wq_f64,
        w.wk_f64,
        w.wv_f64,
        buf.k_cache,
        buf.v_cache,
        buf.block_tables if tables is None else tables,
        buf.slot_mapping[:T],
        slot,
        position,
        valid,
        block_size,
        span_blocks,
    )
    out_hidden = xp.index_select(hidden, buf.out_token_index[:num_rows], 0)
    logits = xp.int_matmul(out_hidden, w.lm_head_f64)
    return hidden, logits


@kernel
def draft_forward(xp, w, buf, num_slots: int, num_tokens: int, block_size: int):
    """Draft layer over the first T packed draft tokens; writes draft KV in place.

    Returns ``(last_hidden [G, H], proposals [G], margins [G])``: for each slot
    with draft tokens, the draft hidden state of its last token, ``argmax(hd @
    lm_head)`` (ties to the lowest id) and that proposal's margin over the
    runner-up in score units (logits / 8, as sampling sees the target's);
    zeros / -1 / 0.0 for slots without tokens.
    """
    G, T = num_slots, num_tokens
    ids, position = buf.d_ids[:T], buf.d_positions[:T]
    bid = buf.d_batch_ids[:T]
    valid = xp.ge(bid, 0)
    slot = xp.where(valid, bid, 0)
    npos = int(w.pos.shape[0])
    carried = wrap(xp, xp.int_matmul(buf.d_prev_hidden[:T], w.draft_hidden_f64))
    x = wrap(
        xp,
        xp.index_select(w.draft_embed, ids, 0) + carried + xp.index_select(w.pos, xp.mod(position, npos), 0),
    )
    hd = _layer(
        xp,
        x,
        w.draft_wq_f64,
        w.draft_wk_f64,
        w.draft_wv_f64,
        buf.draft_k_cache,
        buf.draft_v_cache,
        buf.block_tables,
        buf.d_slot_mapping[:T],
        slot,
        position,
        valid,
        block_size,
    )
    cu = buf.d_cu_seqlens[: G + 1]
    active = xp.gt(cu[1:], cu[:G])
    last = xp.clip(cu[1:] - 1, 0, T - 1)
    last_hidden = xp.where(xp.unsqueeze(active, 1), xp.index_select(hd, last, 0), 0)
    logits = xp.int_matmul(last_hidden, w.lm_head_f64)
    proposals = argmax_lowest(xp, logits)
    margins = top_margin(xp, logits, proposals) / EXACT_SCORE_SCALE
    return last_hidden, xp.where(active, proposals, -1), xp.where(active, margins, 0.0)
