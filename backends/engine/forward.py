"""The target layer and the draft (MTP) layer on the paged KV cache (README §1).

``target_forward`` and ``draft_forward`` are the kernels the engine calls, for
every model: with ``FloatWeights`` they run the float model
(``graphcheck.backends.engine.float_model``), otherwise the integer model below.

Integer-exact: activations are int64, dot products are float64 matmuls of small
integers cast back to int64 (``xp.int_matmul``: exact). Attention gathers, for every packed token, the
KV rows of its slot's blocks over all ``blocks_per_seq * block_size`` positions
(static shape) and masks ``j > pos`` out; padded tokens use the sink block only
(``graphcheck.backends.engine.paged``).
"""

from __future__ import annotations

from graphcheck.backends.engine import float_model
from graphcheck.backends.engine.float_weights import FloatWeights
from graphcheck.backends.engine.paged import PagedKV, TokenLayout, gather_kv, last_rows, token_layout, write_kv
from graphcheck.backends.engine.proposal import propose
from graphcheck.backends.engine.sampling import EXACT_SCORE_SCALE
from graphcheck.capture.kernels import kernel

NPOS_WRAP = 16  # wrap() maps into -8..7


def wrap(xp, a):
    """``((a + 8) floor-mod 16) - 8``."""
    return xp.mod(a + 8, NPOS_WRAP) - 8


def _attend(xp, q, kv: PagedKV, tokens: TokenLayout):
    """``a_i = sum_{j <= pos_i} (((q_i . key_j) mod 7) - 3) * val_j`` per packed token."""
    T, H = int(q.shape[0]), int(q.shape[1])
    keys, vals, causal = gather_kv(xp, kv, tokens)
    span = int(keys.shape[1])
    q3 = xp.astype(xp.reshape(q, (T, 1, H)), xp.float64)
    # The scores stay in float64 from one matmul to the next (no cast to int64 and back): the
    # dots are exact integers there, and so are their floor-mod 7 and the -3.
    dots = xp.reshape(xp.matmul(q3, xp.astype(xp.transpose(keys, (0, 2, 1)), xp.float64)), (T, span))
    score = xp.where(causal, xp.mod(dots, 7) - 3, 0.0)
    attn = xp.int_matmul(xp.reshape(score, (T, 1, span)), vals)
    return xp.reshape(attn, (T, H))


def _layer(xp, x, wqkv, kv: PagedKV, tokens: TokenLayout):
    # q, key and val in one matmul with ``wqkv = [wq | wk | wv]`` (weights.py): each output
    # column is its own exact integer dot product, so the thirds are the three projections.
    H = int(x.shape[1])
    qkv = wrap(xp, xp.int_matmul(x, wqkv))
    q, key, val = qkv[:, :H], qkv[:, H : 2 * H], qkv[:, 2 * H :]
    write_kv(xp, kv, key, val)
    attn = _attend(xp, q, kv, tokens)
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
    tables = buf.block_tables if tables is None else tables
    if isinstance(w, FloatWeights):
        return float_model.target(xp, w, buf, num_tokens, num_rows, block_size, tables, span_blocks)
    T = num_tokens
    ids, position = buf.ids[:T], buf.positions[:T]
    tokens = token_layout(xp, buf.batch_ids[:T], position)
    npos = int(w.pos.shape[0])
    x = wrap(xp, xp.index_select(w.embed, ids, 0) + xp.index_select(w.pos, xp.mod(position, npos), 0))
    kv = PagedKV(buf.k_cache, buf.v_cache, tables, buf.slot_mapping[:T], block_size, span_blocks)
    hidden = _layer(xp, x, w.qkv_f64, kv, tokens)
    out_hidden = xp.index_select(hidden, buf.out_token_index[:num_rows], 0)
    logits = xp.int_matmul(out_hidden, w.lm_head_f64)
    return hidden, logits


@kernel
def draft_forward(xp, w, buf, num_slots: int, num_tokens: int, block_size: int):
    """Draft layer over the first T packed draft tokens; writes draft KV in place.

    Returns ``(last_hidden [G, H], proposals [G], margins [G], runners_up [G])``:
    for each slot with draft tokens, the draft hidden state of its last token,
    ``argmax(hd @ lm_head)`` (ties to the lowest id), that proposal's margin over
    the runner-up in score units (the integer model's logits / 8, as sampling
    sees the target's) and the runner-up's id; zeros / -1 / 0.0 / -1 for slots
    without tokens.
    """
    if isinstance(w, FloatWeights):
        return float_model.draft(xp, w, buf, num_slots, num_tokens, block_size)
    G, T = num_slots, num_tokens
    ids, position = buf.d_ids[:T], buf.d_positions[:T]
    tokens = token_layout(xp, buf.d_batch_ids[:T], position)
    npos = int(w.pos.shape[0])
    # README §1 wraps the carried state before the sum too; wrap only depends on its argument
    # mod 16, so wrapping the whole sum once gives the same x.
    carried = xp.int_matmul(buf.d_prev_hidden[:T], w.draft_hidden_f64)
    x = wrap(
        xp,
        xp.index_select(w.draft_embed, ids, 0) + carried + xp.index_select(w.pos, xp.mod(position, npos), 0),
    )
    kv = PagedKV(buf.draft_k_cache, buf.draft_v_cache, buf.block_tables, buf.d_slot_mapping[:T], block_size)
    hd = _layer(xp, x, w.draft_qkv_f64, kv, tokens)
    active, last = last_rows(xp, buf.d_cu_seqlens[: G + 1], G, T)
    last_hidden = xp.where(xp.unsqueeze(active, 1), xp.index_select(hd, last, 0), 0)
    proposals, margins, second = propose(xp, xp.int_matmul(last_hidden, w.lm_head_f64), active, EXACT_SCORE_SCALE)
    return last_hidden, proposals, margins, second
