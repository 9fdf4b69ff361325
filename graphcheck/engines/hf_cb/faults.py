"""The faults of ``--engine hf-cb``: bugs of transformers' continuous batching's history, re-introduced.

Each fault patches one method of one engine's own objects (never the library's
classes, so the other engine of a lockstep pair and later engines are
untouched). ``capabilities.FAULTS`` says which bug class each belongs to.
"""

from __future__ import annotations

from typing import Any, Callable


def _key_drops_kv(engine: Any) -> None:
    """The varlen path's graph key without the cache read sizes (transformers PR #45323's class): a
    graph captured for one number of cached tokens is replayed for batches that read more or fewer."""
    io = engine.io

    def graph_key() -> tuple[int, ...]:
        return (io.num_q_tokens,)

    io._get_graph_key = graph_key


def _stale_tail(engine: Any) -> None:
    """Only a full reset puts the trash index into the index storages: the padding rows of a batch
    keep the indices an earlier, longer batch wrote there (the per-batch reset's index fill is lost)."""
    io = engine.io
    reset = io._reset_static_tensors

    def reset_static_tensors(full_reset: bool = False) -> None:
        if full_reset:
            reset(full_reset)
            return
        kept = (io.write_index_storage.clone(), io.read_index_storage.clone())
        reset(full_reset)
        io.write_index_storage.copy_(kept[0])
        io.read_index_storage.copy_(kept[1])

    io._reset_static_tensors = reset_static_tensors


def _rebind_bulk(engine: Any) -> None:
    """Every batch's reset allocates a new bulk input tensor (and re-slices its views) instead of
    zeroing the old one in place: a graph captured earlier keeps reading the old storage."""
    io = engine.io
    torch = engine.torch
    reset = io._reset_static_tensors
    views = {
        name: getattr(io, name)
        for name in ("input_ids", "position_ids", "cumulative_seqlens_q", "logits_indices", "carry_over_ids")
    }
    rows = {name: _row_of(io._bulk_input_tensor, view) for name, view in views.items()}
    k_rows = {name: _row_of(io._bulk_input_tensor, view) for name, view in io.cumulative_seqlens_k.items()}

    def reset_static_tensors(full_reset: bool = False) -> None:
        if not full_reset:
            fresh = torch.empty_like(io._bulk_input_tensor)
            fresh.copy_(io._bulk_input_tensor)
            io._bulk_input_tensor = fresh
            for name, (row, size) in rows.items():
                setattr(io, name, fresh[row, :size])
            for name, (row, size) in k_rows.items():
                io.cumulative_seqlens_k[name] = fresh[row, :size]
        reset(full_reset)

    io._reset_static_tensors = reset_static_tensors


def _row_of(bulk: Any, view: Any) -> tuple[int, int]:
    """(row, length) of a one-row view of ``bulk``."""
    offset = view.storage_offset() - bulk.storage_offset()
    return offset // bulk.stride(0), view.numel()


FAULTS: dict[str, Callable[[Any], None]] = {
    "cb-key-drops-kv": _key_drops_kv,
    "cb-stale-tail": _stale_tail,
    "cb-rebind-bulk": _rebind_bulk,
}


def apply(engine: Any, names: tuple[str, ...]) -> None:
    """Inject ``names`` into ``engine``; an unknown name raises (an injected fault never silently does nothing)."""
    for name in names:
        if name not in FAULTS:
            raise ValueError(f"hf-cb has no fault {name!r} (it has: {', '.join(sorted(FAULTS))})")
        FAULTS[name](engine)


__all__ = ["FAULTS", "apply"]
