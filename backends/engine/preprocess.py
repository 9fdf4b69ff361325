"""Packing kernels (decoding-semantics §2 ``speculate_pre_process``, §5.1-5.3 draft packing).

A step's inputs are packed without padding between requests: slot ``b`` owns the
token rows ``[cu[b], cu[b+1])``. ``num_slots`` (G) and ``num_tokens`` (T) are the
only static sizes: eager runs pass the real slot high-water mark and token count,
graph runs the bucket and its token capacity. Every token row in ``[0, T)`` is
written: rows past the real tokens become padding (batch id -1, token PAD_TOKEN,
position 0, the sink KV row), so a graph never reads a previous step's leftovers.
"""

from __future__ import annotations

from dataclasses import dataclass

from graphcheck.backends.engine.blocks import SINK_BLOCK
from graphcheck.backends.engine.buffers import PAD_TOKEN
from graphcheck.capture.kernels import kernel


def segments(xp, counts, num_tokens):
    """Packed layout of per-slot ``counts`` [G] over ``num_tokens`` rows.

    Returns ``cu`` [G+1] (exclusive prefix sums), and per row: ``valid`` (bool),
    ``slot`` (clamped to 0 on padding rows) and ``local`` (index within the slot).
    """
    G = int(counts.shape[0])
    cu = xp.concat([xp.zeros((1,), xp.int64), xp.cumsum(counts, 0)], 0)
    rows = xp.arange(num_tokens)
    owner = xp.searchsorted(cu[1:], rows, right=True)  # G on rows past the last token
    valid = xp.lt(owner, G)
    slot = xp.where(valid, owner, 0)
    local = rows - xp.index_select(cu, slot, 0)
    return cu, valid, slot, local


def cache_rows(xp, block_tables, slot, position, block_size):
    """KV-cache row of each token: ``table[b, pos // bs] * bs + pos % bs`` (the caller masks padding rows)."""
    width = int(block_tables.shape[1])
    column = xp.clip(xp.floor_div(position, block_size), 0, width - 1)
    block = xp.take2d(block_tables, slot, column)
    return block * block_size + xp.mod(position, block_size)


@kernel
def pack_target_inputs(
    xp,
    buf,
    num_slots: int,
    num_tokens: int,
    block_size: int,
    *,
    fresh_output_offsets: bool = False,
    stale_padding: bool = False,
):
    """Pack the target's input tokens of slots [0, G) into the first T token rows.

    Prefill slots (``seq_lens_encoder > 0``) take their prompt from
    ``token_ids_all`` and emit one output row (the last prompt token); decode
    slots take ``draft_tokens[b, :n]`` (last committed token, then the drafts)
    and emit one output row per token. Positions start at ``seq_lens_decoder``.

    Fault switches (``graphcheck.backends.engine.faults``), both off in a correct engine:
    ``stale_padding`` (stale-padding-rows) resets only the token ids, positions
    and output token index of padding rows and leaves their batch ids, KV slot
    mapping and output-row owners as an earlier batch wrote them;
    ``fresh_output_offsets`` (rebind-output-offsets) returns ``cu_seqlens_out``
    and ``batch_ids_out`` as fresh tensors for the caller to rebind instead of
    writing them in place. Returns None otherwise.
    """
    G, T = num_slots, num_tokens
    rows = slice(0, T)

    def padded(old, fill):
        # Padding rows get the inert ``fill``; the stale-padding-rows fault keeps ``old[:T]``.
        return old[:T] if stale_padding else fill

    n = buf.seq_lens_this_time[:G]
    enc = buf.seq_lens_encoder[:G]
    dec = buf.seq_lens_decoder[:G]
    cu, valid, slot, local = segments(xp, n, T)

    prefill = xp.gt(xp.index_select(enc, slot, 0), 0)
    position = xp.index_select(dec, slot, 0) + local
    max_len = int(buf.token_ids_all.shape[1])
    k1 = int(buf.draft_tokens.shape[1])
    prompt_tok = xp.take2d(buf.token_ids_all, slot, xp.clip(local, 0, max_len - 1))
    decode_tok = xp.take2d(buf.draft_tokens, slot, xp.clip(local, 0, k1 - 1))
    token = xp.where(prefill, prompt_tok, decode_tok)

    mapping = cache_rows(xp, buf.block_tables, slot, position, block_size)
    xp.assign_where_(buf.ids, rows, valid, token, PAD_TOKEN)
    xp.assign_where_(buf.positions, rows, valid, position, 0)
    xp.assign_where_(buf.batch_ids, rows, valid, slot, padded(buf.batch_ids, -1))
    xp.assign_where_(buf.slot_mapping, rows, valid, mapping, padded(buf.slot_mapping, SINK_BLOCK * block_size))
    xp.assign_(buf.cu_seqlens_q, slice(0, G + 1), cu)

    # Output rows: one per decode token, one per prefill (its last prompt token).
    out_n = xp.where(xp.gt(enc, 0), xp.minimum(n, 1), n)
    cu_out, row_valid, row_slot, row_local = segments(xp, out_n, T)
    row_prefill = xp.gt(xp.index_select(enc, row_slot, 0), 0)
    first = xp.index_select(cu, row_slot, 0)
    last = first + xp.index_select(n, row_slot, 0) - 1
    source = xp.where(row_prefill, last, first + row_local)
    xp.assign_where_(buf.out_token_index, rows, row_valid, source, 0)
    if fresh_output_offsets:  # fault rebind-output-offsets: new tensors, not the buffers
        cu_fresh = xp.zeros(tuple(buf.cu_seqlens_out.shape), xp.int64)
        owner_fresh = xp.full(tuple(buf.batch_ids_out.shape), -1, xp.int64)
        xp.assign_(cu_fresh, slice(0, G + 1), cu_out)
        xp.assign_where_(owner_fresh, rows, row_valid, row_slot, padded(buf.batch_ids_out, -1))
        return cu_fresh, owner_fresh
    xp.assign_(buf.cu_seqlens_out, slice(0, G + 1), cu_out)
    xp.assign_where_(buf.batch_ids_out, rows, row_valid, row_slot, padded(buf.batch_ids_out, -1))
    return None


@dataclass(frozen=True)
class DraftPackFaults:
    """The fault switches of :func:`pack_draft_inputs` (``graphcheck.backends.engine.faults``), both
    off in a correct engine.

    ``padding_writes_kv`` (draft-padding-writes-kv) maps padding rows to slot 0's first KV
    row instead of the sink; ``offsets_cut_short`` (offsets-cut-short) writes
    ``d_cu_seqlens[:G]`` only, leaving the last slot's end offset ``d_cu_seqlens[G]`` as an
    earlier pack wrote it.
    """

    padding_writes_kv: bool = False
    offsets_cut_short: bool = False


#: A correct engine's draft packing: no fault switched on.
NO_DRAFT_PACK_FAULTS = DraftPackFaults()


@kernel
def pack_draft_inputs(
    xp,
    buf,
    target_hidden,
    num_slots: int,
    num_tokens: int,
    block_size: int,
    first_substep: bool,
    faults: DraftPackFaults = NO_DRAFT_PACK_FAULTS,
) -> None:
    """Pack the draft model's inputs of one substep (README §5.5).

    Substep 0: slot b writes draft positions ``[start, start + n)``, draft
    position q takes committed token ``t_{q+1}`` (``token_ids_all[b, q+1]``) and
    the target hidden state of position q (packed target row ``cu_q[b] + j``).
    Substep s >= 1: one token per active slot, its last proposal with its last
    draft hidden state. ``target_hidden`` is only read on substep 0. ``faults``:
    :class:`DraftPackFaults`.
    """
    G, T = num_slots, num_tokens
    n = buf.draft_seq_lens_this_time[:G]
    start = buf.draft_seq_lens_decoder[:G]
    cu, valid, slot, local = segments(xp, n, T)
    position = xp.index_select(start, slot, 0) + local
    if first_substep:
        max_len = int(buf.token_ids_all.shape[1])
        token = xp.take2d(buf.token_ids_all, slot, xp.clip(position + 1, 0, max_len - 1))
        hidden_rows = int(target_hidden.shape[0])
        source = xp.clip(xp.index_select(buf.cu_seqlens_q, slot, 0) + local, 0, hidden_rows - 1)
        hidden = xp.index_select(target_hidden, source, 0)
    else:
        token = xp.index_select(buf.draft_input_tokens, slot, 0)
        hidden = xp.index_select(buf.draft_last_hidden, slot, 0)
    rows = slice(0, T)
    xp.assign_where_(buf.d_ids, rows, valid, token, PAD_TOKEN)
    xp.assign_where_(buf.d_positions, rows, valid, position, 0)
    xp.assign_where_(buf.d_batch_ids, rows, valid, slot, -1)
    mapping = cache_rows(xp, buf.block_tables, slot, position, block_size)
    pad_row = SINK_BLOCK * block_size
    if faults.padding_writes_kv:  # fault: padding rows land in slot 0's cache, not the sink (tokenspeed #955)
        pad_row = xp.take2d(buf.block_tables, xp.zeros((T,), xp.int64), xp.zeros((T,), xp.int64)) * block_size
    xp.assign_where_(buf.d_slot_mapping, rows, valid, mapping, pad_row)
    xp.assign_where_(buf.d_prev_hidden, rows, xp.unsqueeze(valid, 1), hidden, 0)
    if faults.offsets_cut_short:  # fault: G entries, not G + 1 (FastDeploy #7180)
        xp.assign_(buf.d_cu_seqlens, slice(0, G), cu[:G])
    else:
        xp.assign_(buf.d_cu_seqlens, slice(0, G + 1), cu)
