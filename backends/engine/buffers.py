"""The engine's persistent device buffers: one typed dataclass.

Sizes (``B = config.max_padded_reqs = max(max_num_seqs, largest capture) + 1``):

* per-slot state: ``[B]`` / ``[B, k+1]`` / ``[B, max_model_len]`` ...; a free slot
  holds the idle values (``stop_flags`` True, lengths 0, tokens -1), so a padded
  row of a graph reads inert data;
* packed per-token scratch: ``max_num_batched_tokens`` rows, at least
  ``B * (k+1)`` (every graph's padded token capacity) and room for an eager step
  that prefills ``max_num_seqs`` whole prompts;
* paged KV caches for the target and the draft model, ``[num_blocks * block_size, H]``,
  sharing the block tables; block 0 is the sink;
* model-report scratch (``REPORT_FIELDS``): the scores of the last step's output
  rows and each slot's draft margins, read only by ``Engine.model_report``.

Every buffer a graph reads is updated in place; nothing here is ever rebound.
``buffer_layout`` is the size table: every field's shape, dtype and idle value,
which ``allocate_buffers`` allocates and the memory estimate sums.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from graphcheck.backends.engine.blocks import blocks_per_seq, num_blocks_for
from graphcheck.backends.engine.layout import ACTIVATION_DTYPES, TensorSpec, dtype_handle
from graphcheck.scenario import MAX_EOS_IDS, EngineConfig

PAD_TOKEN = 0  # token id of padded packed-token rows (any id < vocab works)


@dataclass(frozen=True)
class BufferSizes:
    slots: int  # B = max_padded_reqs
    tokens_per_req: int  # k + 1
    max_tokens: int  # packed-token capacity
    max_model_len: int
    blocks_per_seq: int
    num_blocks: int
    block_size: int
    hidden: int
    vocab: int
    draft_steps: int  # columns of draft_margins: num_model_steps (at least 1)

    @classmethod
    def for_config(cls, config: EngineConfig, *, slots_by_max_num_seqs: bool = False) -> BufferSizes:
        """Sizes for ``config``; ``slots_by_max_num_seqs`` is the slots-sized-by-max-num-seqs
        fault (``max_num_seqs + 1`` slots, too few once a capture size reaches max_num_seqs + 1)."""
        slots = config.max_num_seqs + 1 if slots_by_max_num_seqs else config.max_padded_reqs
        k1 = config.tokens_per_request
        return cls(
            slots=slots,
            tokens_per_req=k1,
            max_tokens=max(slots * k1, config.max_num_seqs * config.max_model_len),
            max_model_len=config.max_model_len,
            blocks_per_seq=blocks_per_seq(config.max_model_len, config.block_size),
            num_blocks=num_blocks_for(config.max_num_seqs, config.max_model_len, config.block_size),
            block_size=config.block_size,
            hidden=config.hidden_size,
            vocab=config.vocab_size,
            draft_steps=max(1, config.num_model_steps),
        )

    @property
    def score_rows(self) -> int:
        """Rows of ``step_scores``: every output row a step can have (``slots * (k+1)``)."""
        return self.slots * self.tokens_per_req


@dataclass
class EngineBuffers:
    # ---- per-slot request state (target) -------------------------------
    seq_lens_this_time: Any  # [B] tokens of the slot in the current / next step
    seq_lens_encoder: Any  # [B] prompt length while the prefill is pending, else 0
    seq_lens_decoder: Any  # [B] positions holding target KV (committed length - 1)
    step_idx: Any  # [B] generated tokens so far
    stop_flags: Any  # [B] bool; True for free slots and stopped requests
    max_dec_len: Any  # [B]
    prompt_lens: Any  # [B]
    infer_seed: Any  # [B] advanced in place every step the slot runs
    top_p: Any  # [B] float64
    top_k: Any  # [B]
    temperature: Any  # [B] float64
    eos_ids: Any  # [B, MAX_EOS_IDS], -1 padded
    reasoning_status: Any  # [B]
    accept_override: Any  # [B] forced accept count for this step, -1 = none (test hook)
    draft_tokens: Any  # [B, k+1] col 0: last committed token; 1..: drafts for the next step
    accept_tokens: Any  # [B, k+1] emitted tokens of the last step (-1 padded)
    accept_num: Any  # [B]
    token_ids_all: Any  # [B, max_model_len] prompt then generated tokens (-1 beyond)
    block_tables: Any  # [B, blocks_per_seq] block ids, 0 (sink) where unallocated
    # ---- per-slot draft (MTP) state ------------------------------------
    draft_seq_lens_this_time: Any  # [B] draft tokens of the current substep
    draft_seq_lens_encoder: Any  # [B] prompt length until the draft prefill ran
    draft_seq_lens_decoder: Any  # [B] first draft position of the current substep
    draft_input_tokens: Any  # [B] last proposal (input of the next substep)
    draft_last_hidden: Any  # [B, H] draft hidden state of the slot's last token (ACTIVATION_FIELDS)
    # ---- packed target inputs (scratch, rewritten every step) ------------
    ids: Any  # [T]
    positions: Any  # [T]
    batch_ids: Any  # [T] slot of each token, -1 for padding
    slot_mapping: Any  # [T] KV cache row of each token (sink row for padding)
    cu_seqlens_q: Any  # [B+1]
    cu_seqlens_out: Any  # [B+1]
    batch_ids_out: Any  # [T] slot of each output row, -1 for padding
    out_token_index: Any  # [T] packed token feeding each output row
    # ---- packed draft inputs (scratch) -----------------------------------
    d_ids: Any
    d_positions: Any
    d_batch_ids: Any
    d_slot_mapping: Any
    d_prev_hidden: Any  # [T, H] (ACTIVATION_FIELDS)
    d_cu_seqlens: Any  # [B+1]
    # ---- paged KV caches ---------------------------------------------------
    k_cache: Any  # [num_blocks * block_size, H] int64, or the float model's dtype (ACTIVATION_FIELDS)
    v_cache: Any
    draft_k_cache: Any
    draft_v_cache: Any
    # ---- model report (scratch, see REPORT_FIELDS) --------------------------
    step_scores: Any  # [B*(k+1), V] float64 scores of the step's output rows, as they enter sampling
    draft_margins: Any  # [B, S] float64 best minus second-best draft score of each substep's proposal
    draft_runners_up: Any  # [B, S] the second-best draft token of each substep's proposal

    def named_tensors(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


#: Packed per-step scratch: only the real rows are meaningful.
SCRATCH_FIELDS = (
    "ids",
    "positions",
    "batch_ids",
    "slot_mapping",
    "cu_seqlens_q",
    "cu_seqlens_out",
    "batch_ids_out",
    "out_token_index",
    "d_ids",
    "d_positions",
    "d_batch_ids",
    "d_slot_mapping",
    "d_prev_hidden",
    "d_cu_seqlens",
)
#: KV caches: every block but the sink (block 0) is request state.
CACHE_FIELDS = ("k_cache", "v_cache", "draft_k_cache", "draft_v_cache")
#: What the last step's model produced, for ``Engine.model_report``: written every step (the
#: graph engine's padded rows and slots included), read back only on demand, never request
#: state, so state snapshots leave them out.
REPORT_FIELDS = ("step_scores", "draft_margins", "draft_runners_up")
#: Fields that carry request state across steps (compared bit for bit between eager and graph).
STATE_FIELDS = tuple(
    f.name for f in fields(EngineBuffers) if f.name not in SCRATCH_FIELDS + CACHE_FIELDS + REPORT_FIELDS
)


#: The value every per-slot state field holds while its slot is free.
SLOT_IDLE: dict[str, int | float | bool] = {
    "seq_lens_this_time": 0,
    "seq_lens_encoder": 0,
    "seq_lens_decoder": 0,
    "step_idx": 0,
    "stop_flags": True,
    "max_dec_len": 0,
    "prompt_lens": 0,
    "infer_seed": 0,
    "top_p": 1.0,
    "top_k": 0,
    "temperature": 1.0,
    "eos_ids": -1,
    "reasoning_status": 0,
    "accept_override": -1,
    "draft_tokens": -1,
    "accept_tokens": -1,
    "accept_num": 0,
    "token_ids_all": -1,
    "block_tables": 0,
    "draft_seq_lens_this_time": 0,
    "draft_seq_lens_encoder": 0,
    "draft_seq_lens_decoder": 0,
    "draft_input_tokens": -1,
    "draft_last_hidden": 0,
}
assert set(SLOT_IDLE) == set(STATE_FIELDS)


#: Buffers holding model activations: int64 for the integer model, the model dtype for a float one.
ACTIVATION_FIELDS = ("d_prev_hidden", "draft_last_hidden") + CACHE_FIELDS


def activation_dtype(xp, model: str) -> Any:
    """The dtype of ``ACTIVATION_FIELDS`` for ``EngineConfig.model``."""
    return dtype_handle(xp, ACTIVATION_DTYPES[model])


def buffer_layout(config: EngineConfig, sizes: BufferSizes | None = None) -> dict[str, TensorSpec]:
    """Every buffer's shape, dtype and idle value, in ``EngineBuffers`` field order, sized ``sizes``
    (default: for ``config``): the one table ``allocate_buffers`` allocates from and the memory
    estimate (``memory.engine_memory``) sums.

    Per-slot state is ``[B]`` (``[B, columns]`` for the six fields with a second axis) and holds
    its ``SLOT_IDLE`` value; packed scratch is ``[T]`` (``[B + 1]`` for the offsets, ``[T, H]`` for the draft's
    hidden input); the four KV caches are ``[num_blocks * block_size, H]``; the model report's
    scratch is ``[B * (k+1), V]`` scores and ``[B, S]`` margins and runners-up.
    """
    s = sizes or BufferSizes.for_config(config)
    B, K1, T, H = s.slots, s.tokens_per_req, s.max_tokens, s.hidden
    act = ACTIVATION_DTYPES[config.model]
    columns = {
        "eos_ids": MAX_EOS_IDS,
        "draft_tokens": K1,
        "accept_tokens": K1,
        "token_ids_all": s.max_model_len,
        "block_tables": s.blocks_per_seq,
        "draft_last_hidden": H,
    }
    state_dtypes = {"stop_flags": "bool", "top_p": "float64", "temperature": "float64", "draft_last_hidden": act}
    layout = {
        name: TensorSpec((B, columns[name]) if name in columns else (B,), state_dtypes.get(name, "int64"), idle)
        for name, idle in SLOT_IDLE.items()
    }
    token_fill = {"ids": PAD_TOKEN, "d_ids": PAD_TOKEN, "batch_ids": -1, "batch_ids_out": -1, "d_batch_ids": -1}
    for name in SCRATCH_FIELDS:
        if name in _OFFSET_FIELDS:
            layout[name] = TensorSpec((B + 1,), "int64")
        elif name == "d_prev_hidden":
            layout[name] = TensorSpec((T, H), act)
        else:
            layout[name] = TensorSpec((T,), "int64", token_fill.get(name, 0))
    cache_rows = s.num_blocks * s.block_size
    for name in CACHE_FIELDS:
        layout[name] = TensorSpec((cache_rows, H), act)
    layout["step_scores"] = TensorSpec((s.score_rows, s.vocab), "float64")
    layout["draft_margins"] = TensorSpec((B, s.draft_steps), "float64")
    layout["draft_runners_up"] = TensorSpec((B, s.draft_steps), "int64", -1)
    return {name: layout[name] for name in _FIELD_NAMES}


#: Packed offsets of ``[B + 1]`` entries (the other scratch fields are per packed token).
_OFFSET_FIELDS = ("cu_seqlens_q", "cu_seqlens_out", "d_cu_seqlens")
_FIELD_NAMES = tuple(f.name for f in fields(EngineBuffers))


def allocate_buffers(xp, config: EngineConfig, sizes: BufferSizes | None = None) -> EngineBuffers:
    """Fresh buffers holding the idle values (every slot free), sized ``sizes`` (default: for ``config``),
    allocated from ``buffer_layout`` in field order."""
    return EngineBuffers(**{name: spec.allocate(xp) for name, spec in buffer_layout(config, sizes).items()})
