"""Which rows of the engine's buffers mean something now (``Engine.state_snapshot``).

* Per-slot state (``SLOT_IDLE``'s fields): the rows of the running slots are
  request state; every other slot is free and must hold the field's idle value.
* Packed target scratch: the step's real-token rows ``[0, cu_seqlens_q[R])``
  (inputs) and ``[0, cu_seqlens_out[R])`` (output rows), and the offsets
  ``cu_seqlens_*[0..R]``. Rows past them are padding (a graph's) or leftovers of
  an earlier, larger pack (an eager engine's): never compared.
* Packed draft scratch (``d_*``) only when asked (a kernel trace): after a step
  an eager engine that proposed nothing has not repacked it, a graph engine has.
* KV caches: every row of every block a running request owns (its block-table
  row). Free blocks and the sink hold leftovers and padding writes.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from graphcheck.backends.engine.buffers import CACHE_FIELDS, SLOT_IDLE, EngineBuffers
from graphcheck.state import CACHE, SLOT, TOKEN, BufferState, EngineState

#: Packed target inputs and output rows: buffer -> the prefix-sum buffer counting its rows.
_TARGET_ROWS = {
    "ids": "cu_seqlens_q",
    "positions": "cu_seqlens_q",
    "batch_ids": "cu_seqlens_q",
    "slot_mapping": "cu_seqlens_q",
    "batch_ids_out": "cu_seqlens_out",
    "out_token_index": "cu_seqlens_out",
}
_DRAFT_ROWS = {
    "d_ids": "d_cu_seqlens",
    "d_positions": "d_cu_seqlens",
    "d_batch_ids": "d_cu_seqlens",
    "d_slot_mapping": "d_cu_seqlens",
    "d_prev_hidden": "d_cu_seqlens",
}
_OFFSETS = ("cu_seqlens_q", "cu_seqlens_out")
_DRAFT_OFFSETS = ("d_cu_seqlens",)


#: The order a step writes the buffers in (admission and host writes, the target pack and forward,
#: sampling, verify, the status update, the draft): snapshots list them so, and the lockstep
#: reports the first buffer that differs first, which is the earliest in the step.
STEP_ORDER = (
    "block_tables",
    "accept_override",
    "reasoning_status",
    "max_dec_len",
    "prompt_lens",
    "top_p",
    "top_k",
    "temperature",
    "eos_ids",
    "ids",
    "positions",
    "batch_ids",
    "slot_mapping",
    "cu_seqlens_q",
    "cu_seqlens_out",
    "batch_ids_out",
    "out_token_index",
    "k_cache",
    "v_cache",
    "infer_seed",
    "accept_tokens",
    "accept_num",
    "stop_flags",
    "step_idx",
    "seq_lens_this_time",
    "seq_lens_encoder",
    "seq_lens_decoder",
    "token_ids_all",
    "d_ids",
    "d_positions",
    "d_batch_ids",
    "d_slot_mapping",
    "d_prev_hidden",
    "d_cu_seqlens",
    "draft_k_cache",
    "draft_v_cache",
    "draft_seq_lens_this_time",
    "draft_seq_lens_encoder",
    "draft_seq_lens_decoder",
    "draft_input_tokens",
    "draft_last_hidden",
    "draft_tokens",
)


def _owners_of_offsets(R: int) -> np.ndarray:
    owners = np.arange(R + 1, dtype=np.int64)
    owners[R] = -1  # the end offset belongs to no slot
    return owners


def _segment_owners(cu: np.ndarray, R: int, capacity: int) -> np.ndarray:
    """Slot owning each packed row ``[0, cu[R])`` of a layout with offsets ``cu`` (at most ``capacity`` rows)."""
    counts = np.minimum(np.maximum(np.diff(cu[: R + 1]), 0), capacity)  # a clip, without ndarray.clip's checks
    return np.repeat(np.arange(R, dtype=np.int64), counts)[:capacity]


def _cache_rows(tables: np.ndarray, slots: np.ndarray, block_size: int) -> tuple[np.ndarray, np.ndarray]:
    """Cache rows of every block the slots own (block-table entries > 0, the sink is 0), and their owner."""
    if len(slots) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    owned = tables[slots]
    slot_of, column = np.nonzero(owned > 0)
    blocks = owned[slot_of, column].astype(np.int64)
    rows = (blocks[:, None] * block_size + np.arange(block_size, dtype=np.int64)).reshape(-1)
    owners = np.repeat(np.asarray(slots, dtype=np.int64)[slot_of], block_size)
    return rows, owners


#: Packed layouts: (offsets, the slot of each packed row). A pack writes both; they must agree.
_LAYOUTS = (("cu_seqlens_q", "batch_ids"), ("cu_seqlens_out", "batch_ids_out"), ("d_cu_seqlens", "d_batch_ids"))


def layout_violations(host: dict[str, np.ndarray], R: int) -> tuple[str, ...]:
    """The packed layouts whose offsets ``[0..R]`` are not prefix sums of their rows' slots."""
    found = []
    for offsets, slots in _LAYOUTS:
        if offsets not in host or slots not in host or R <= 0:
            continue
        cu, owner = host[offsets][: R + 1], host[slots]
        steps = np.diff(cu)
        if cu[0] != 0 or (steps < 0).any() or cu[-1] > owner.shape[0]:
            bad = int(np.flatnonzero(steps < 0)[0]) + 1 if (steps < 0).any() else (0 if cu[0] != 0 else R)
            found.append(f"{offsets}[{bad}] = {int(cu[bad])}: not a prefix sum of the packed rows (R = {R})")
            continue
        want = np.repeat(np.arange(R, dtype=owner.dtype), steps)
        got = owner[: int(cu[-1])]
        if not np.array_equal(got, want):
            row = int(np.flatnonzero(got != want)[0])
            found.append(f"{slots}[{row}] = {int(got[row])} but {offsets} puts row {row} in slot {int(want[row])}")
    return tuple(found)


def _take(host: np.ndarray, rows: np.ndarray) -> np.ndarray:
    rows = rows[rows < host.shape[0]]
    return host[rows]


def _snapshot_names(draft_scratch: bool) -> tuple[str, ...]:
    """The buffers a snapshot reads, each once; with the packed draft scratch or without."""
    wanted = list(SLOT_IDLE) + list(_TARGET_ROWS) + list(_OFFSETS) + list(CACHE_FIELDS) + ["block_tables"]
    if draft_scratch:
        wanted += list(_DRAFT_ROWS) + list(_DRAFT_OFFSETS)
    return tuple(dict.fromkeys(wanted))


#: draft_scratch -> the buffers a snapshot reads (constants: computed once, not per snapshot).
_SNAPSHOT_NAMES = {flag: _snapshot_names(flag) for flag in (False, True)}


def snapshot_state(
    xp: Any,
    buffers: EngineBuffers,
    running_slots: Sequence[int],
    real_bsz: int,
    block_size: int,
    *,
    draft_scratch: bool = False,
    kept: Sequence[str] = (),
) -> EngineState:
    """The engine's state now: ``running_slots`` occupy slots, the last step packed ``real_bsz`` slots.

    ``kept``: per-slot fields a release leaves as they were (``transfer.kept_at_release``): a free
    slot holds what its last occupant left there, so they have no idle value to check.
    The buffers are read in one batch (``xp.to_host_many``).
    """
    names = _SNAPSHOT_NAMES[bool(draft_scratch)]
    # Views where the framework allows: every value kept below is a fancy-indexed copy.
    host = dict(zip(names, xp.to_host_many([getattr(buffers, n) for n in names], copy=False)))
    running = np.array(sorted(running_slots), dtype=np.int64)
    B = host["seq_lens_this_time"].shape[0]
    is_free = np.ones(B, dtype=bool)
    is_free[running] = False
    free = np.flatnonzero(is_free)
    R = min(real_bsz, B)
    states: dict[str, BufferState] = {
        name: BufferState(name, SLOT, running, host[name][running], running, free, host[name][free], idle)
        if name not in kept
        else BufferState(name, SLOT, running, host[name][running], running)
        for name, idle in SLOT_IDLE.items()
    }
    for name in _OFFSETS + (_DRAFT_OFFSETS if draft_scratch else ()):
        rows = np.arange(min(R + 1, host[name].shape[0]), dtype=np.int64)
        states[name] = BufferState(name, TOKEN, rows, host[name][rows], _owners_of_offsets(R)[: len(rows)])
    layouts: dict[str, np.ndarray] = {}
    for name, offsets_name in dict(_TARGET_ROWS, **(_DRAFT_ROWS if draft_scratch else {})).items():
        if offsets_name not in layouts:
            cu = host[offsets_name]
            capacity = host[name].shape[0]
            layouts[offsets_name] = (
                _segment_owners(cu, min(R, cu.shape[0] - 1), capacity) if R > 0 else np.zeros(0, np.int64)
            )
        owners = layouts[offsets_name][: host[name].shape[0]]
        rows = np.arange(len(owners), dtype=np.int64)
        states[name] = BufferState(name, TOKEN, rows, host[name][: len(owners)].copy(), owners)
    cache_rows, cache_owners = _cache_rows(host["block_tables"], running, block_size)
    for name in CACHE_FIELDS:
        states[name] = BufferState(name, CACHE, cache_rows, _take(host[name], cache_rows), cache_owners)
    ordered = tuple(states[n] for n in STEP_ORDER if n in states)
    return EngineState(ordered, layout_violations(host, R) if draft_scratch else ())
