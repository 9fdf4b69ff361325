"""The float model: a small transformer decoder and its MTP draft layer on the paged KV cache.

Called from the ``target_forward`` / ``draft_forward`` kernels (``forward``) when
the engine holds ``FloatWeights``; plain functions, so traces and graph
captures see those two kernels, whatever the model.

Numerics. Weights, KV caches and the hidden states handed between kernels are
in the model dtype ``D`` (float32 or bfloat16, ``FloatWeights.dtype``). Every
matmul runs in ``D`` (``xp.float_matmul``: a bfloat16 GEMM accumulates in
float32 and rounds its result to bfloat16); norms, softmax, SiLU and residual
adds run in float32, and the residual stream is rounded to ``D`` after each add,
as a model stored in ``D`` is. Logits come out in float32.

Target: ``x = embed[t] + pos[p mod L]``; one pre-norm decoder block
(``x += Wo attn(RMSNorm(x))``, ``x += W_down silu(W_up RMSNorm(x))``); the block
output is the target hidden state the drafter reads; ``logits =
RMSNorm(hidden) @ lm_head``. Attention is single-head over the whole hidden
width: ``softmax(q.k / sqrt(H))`` over the token's slot's cached positions ``j <=
pos`` (others ``-inf``), gathered at one static shape (``paged.gather_kv``).

Draft (MTP): ``x = [RMSNorm(draft_embed[t]), RMSNorm(prev_hidden)] @ draft_proj +
pos[p mod L]``, one decoder block of its own on the draft KV cache, then the
shared ``lm_head`` after its own final norm; proposal = argmax (ties to the
lowest id), with its margin over the runner-up.
"""

from __future__ import annotations

import math
from typing import Any

from graphcheck.backends.engine.float_weights import Block, FloatWeights
from graphcheck.backends.engine.paged import PagedKV, TokenLayout, gather_kv, last_rows, token_layout, write_kv
from graphcheck.backends.engine.proposal import propose

RMS_EPS = 1e-6


def _f32(xp, x):
    return xp.astype(x, xp.float32)


def _stored(xp, x, dtype):
    """``x`` (float32) rounded to the model dtype, kept in float32 for the next elementwise step."""
    return x if dtype == xp.float32 else _f32(xp, xp.astype(x, dtype))


def _mm(xp, x, w, dtype):
    """``x @ w`` in the model dtype, as float32."""
    return _f32(xp, xp.float_matmul(x, w, dtype))


def rms_norm(xp, x, gain):
    """``x / sqrt(mean(x^2) + eps) * gain`` in float32, over the last axis."""
    x = _f32(xp, x)
    mean_sq = xp.sum(x * x, -1, keepdims=True) / int(x.shape[-1])
    return x * xp.rsqrt(mean_sq + RMS_EPS) * _f32(xp, gain)


def silu(xp, x):
    """``x * sigmoid(x)`` in float32 (exp(-x) overflowing to inf gives -0.0, never NaN)."""
    return x / (1.0 + xp.exp(-x))


def attention(xp, q, kv: PagedKV, tokens: TokenLayout, dtype):
    """Causal single-head attention of each packed token over its slot's paged KV; float32 ``[T, H]``."""
    T, H = int(q.shape[0]), int(q.shape[1])
    keys, vals, causal = gather_kv(xp, kv, tokens)
    span = int(keys.shape[1])
    q3 = xp.reshape(q, (T, 1, H))
    dots = xp.reshape(_mm(xp, q3, xp.transpose(keys, (0, 2, 1)), dtype), (T, span)) * (1.0 / math.sqrt(H))
    dots = xp.where(causal, dots, float("-inf"))  # position 0 is never masked: no empty row
    e = xp.exp(dots - xp.max(dots, -1, keepdims=True))
    p = e / xp.sum(e, -1, keepdims=True)
    return xp.reshape(_mm(xp, xp.reshape(p, (T, 1, span)), vals, dtype), (T, H))


def decoder_block(xp, x, b: Block, kv: PagedKV, tokens: TokenLayout, dtype):
    """One pre-norm block over the residual stream ``x`` (float32); writes the tokens' KV in place."""
    h = rms_norm(xp, x, b.attn_norm)
    q = _mm(xp, h, b.wq, dtype)
    key, val = _mm(xp, h, b.wk, dtype), _mm(xp, h, b.wv, dtype)
    write_kv(xp, kv, xp.astype(key, dtype), xp.astype(val, dtype))
    attn = attention(xp, q, kv, tokens, dtype)
    x = _stored(xp, x + _mm(xp, attn, b.wo, dtype), dtype)
    up = silu(xp, _mm(xp, rms_norm(xp, x, b.mlp_norm), b.w_up, dtype))
    return _stored(xp, x + _mm(xp, up, b.w_down, dtype), dtype)


def _positions(xp, w: FloatWeights, position):
    return _f32(xp, xp.index_select(w.pos, xp.mod(position, int(w.pos.shape[0])), 0))


def target(xp, w: FloatWeights, buf, num_tokens: int, num_rows: int, block_size: int, tables, span_blocks) -> Any:
    """``target_forward`` for the float model: ``(hidden [T, H] in D, logits [num_rows, V] float32)``."""
    T, dtype = num_tokens, w.dtype
    ids, position = buf.ids[:T], buf.positions[:T]
    tokens = token_layout(xp, buf.batch_ids[:T], position)
    x = _stored(xp, _f32(xp, xp.index_select(w.embed, ids, 0)) + _positions(xp, w, position), dtype)
    block = w.target_block()
    kv = PagedKV(buf.k_cache, buf.v_cache, tables, buf.slot_mapping[:T], block_size, span_blocks)
    hidden = decoder_block(xp, x, block, kv, tokens, dtype)
    out_hidden = xp.index_select(hidden, buf.out_token_index[:num_rows], 0)
    logits = _mm(xp, rms_norm(xp, out_hidden, w.final_norm), w.lm_head, dtype)
    return xp.astype(hidden, dtype), logits


def draft(xp, w: FloatWeights, buf, num_slots: int, num_tokens: int, block_size: int) -> Any:
    """``draft_forward`` for the float model: ``(last_hidden [G, H] in D, proposals [G], margins [G],
    runners_up [G])``."""
    G, T, dtype = num_slots, num_tokens, w.dtype
    ids, position = buf.d_ids[:T], buf.d_positions[:T]
    tokens = token_layout(xp, buf.d_batch_ids[:T], position)
    embedded = rms_norm(xp, xp.index_select(w.draft_embed, ids, 0), w.draft_embed_norm)
    carried = rms_norm(xp, buf.d_prev_hidden[:T], w.draft_hidden_norm)
    combined = _mm(xp, xp.concat([embedded, carried], -1), w.draft_proj, dtype)
    x = _stored(xp, combined + _positions(xp, w, position), dtype)
    block = w.draft_block()
    kv = PagedKV(buf.draft_k_cache, buf.draft_v_cache, buf.block_tables, buf.d_slot_mapping[:T], block_size)
    hd = decoder_block(xp, x, block, kv, tokens, dtype)
    active, last = last_rows(xp, buf.d_cu_seqlens[: G + 1], G, T)
    last_hidden = xp.where(xp.unsqueeze(active, 1), xp.index_select(hd, last, 0), 0.0)
    logits = _mm(xp, rms_norm(xp, last_hidden, w.draft_final_norm), w.lm_head, dtype)
    proposals, margins, second = propose(xp, logits, active)
    return xp.astype(last_hidden, dtype), proposals, margins, second
