"""Host <-> device kernels: admitting and releasing slots, block-table and test-hook
writes, and the one packed read-back of a step. All run eagerly, outside graphs,
and write persistent buffers in place (a graph keeps reading the same storage).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from graphcheck.backends.engine.buffers import SLOT_IDLE
from graphcheck.capture.kernels import kernel
from graphcheck.contract import Contract

# Column layout of AdmitBatch.ints.
ADMIT_PROMPT_LEN, ADMIT_MAX_DEC_LEN, ADMIT_SEED, ADMIT_TOP_K, ADMIT_REASONING = range(5)
ADMIT_INT_COLUMNS = 5


@dataclass
class AdmitBatch:
    """Device copies of the host-side settings of newly admitted requests."""

    slots: Any  # [n] slot index
    ints: Any  # [n, ADMIT_INT_COLUMNS]
    floats: Any  # [n, 2] top_p, temperature (float64)
    prompts: Any  # [n, max_model_len] prompt, -1 padded
    eos: Any  # [n, MAX_EOS_IDS] -1 padded


def kept_at_release(contract: Contract) -> tuple[str, ...]:
    """The per-slot fields a release leaves as they were under ``contract``: where NAIVE sampling reads a
    packed row's params from another slot (``naive_params`` ``packed_row``, FastDeploy's sampler), the
    top_p, top_k and seed FastDeploy writes only when a request is inserted, so a free slot keeps what its
    last occupant left there."""
    return ("infer_seed", "top_p", "top_k") if contract.naive_params == "packed_row" else ()


@kernel
def release_slots(xp, buf, slots, kept: tuple[str, ...] = ()) -> None:
    """Put every per-slot state field of ``slots`` back to its idle value, but those ``kept``."""
    n = int(slots.shape[0])
    for name, value in SLOT_IDLE.items():
        if name in kept:
            continue
        field = getattr(buf, name)
        xp.index_put_(field, slots, xp.full((n,) + tuple(field.shape[1:]), value, field.dtype))


@kernel
def admit_slots(xp, buf, new: AdmitBatch) -> None:
    """Initialise the slots of newly admitted requests for their prefill step."""
    slots, ints = new.slots, new.ints
    n = int(slots.shape[0])
    prompt_len = ints[:, ADMIT_PROMPT_LEN]
    zeros = xp.zeros((n,), xp.int64)
    put = xp.index_put_
    put(buf.seq_lens_this_time, slots, prompt_len)
    put(buf.seq_lens_encoder, slots, prompt_len)
    put(buf.seq_lens_decoder, slots, zeros)
    put(buf.step_idx, slots, zeros)
    put(buf.stop_flags, slots, xp.full((n,), False, xp.bool))
    put(buf.max_dec_len, slots, ints[:, ADMIT_MAX_DEC_LEN])
    put(buf.prompt_lens, slots, prompt_len)
    put(buf.infer_seed, slots, ints[:, ADMIT_SEED])
    put(buf.top_k, slots, ints[:, ADMIT_TOP_K])
    put(buf.reasoning_status, slots, ints[:, ADMIT_REASONING])
    put(buf.top_p, slots, new.floats[:, 0])
    put(buf.temperature, slots, new.floats[:, 1])
    put(buf.eos_ids, slots, new.eos)
    put(buf.token_ids_all, slots, new.prompts)
    put(buf.draft_seq_lens_encoder, slots, prompt_len)


@kernel
def write_block_entries(xp, block_tables, slots, columns, blocks) -> None:
    """``block_tables[slots[i], columns[i]] = blocks[i]`` in place."""
    xp.put2d_(block_tables, slots, columns, blocks)


@kernel
def write_slot_values(xp, field, slots, values) -> None:
    """``field[slots] = values`` in place (reasoning status, accept overrides)."""
    xp.index_put_(field, slots, values)


#: Column layout of the packed read-back (after the accept / draft token blocks).
OUT_ACCEPT_NUM, OUT_NEXT_TOKENS, OUT_SEED, OUT_STEP_IDX, OUT_SEQ_LEN, OUT_STOPPED = range(6)


@kernel
def collect_step_outputs(xp, buf, num_slots: int):
    """One int64 matrix per step: ``[accept_tokens | draft_tokens | 6 scalars]`` per slot of [0, R)."""
    pick = lambda t: t[:num_slots]  # noqa: E731
    scalars = xp.stack(
        [
            pick(buf.accept_num),
            pick(buf.seq_lens_this_time),
            pick(buf.infer_seed),
            pick(buf.step_idx),
            pick(buf.seq_lens_decoder),
            xp.astype(pick(buf.stop_flags), xp.int64),
        ],
        1,
    )
    return xp.concat([pick(buf.accept_tokens), pick(buf.draft_tokens), scalars], 1)


@kernel
def snapshot(xp, src):
    """A new tensor holding a copy of ``src``."""
    out = xp.zeros(tuple(src.shape), src.dtype)
    xp.copy_(out, src)
    return out


@kernel
def overwrite(xp, dst, src) -> None:
    """``dst[...] = src`` in place (a whole-buffer host -> device refresh)."""
    xp.copy_(dst, src)
