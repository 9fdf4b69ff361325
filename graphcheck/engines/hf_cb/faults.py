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
    for io in engine.graph_ios():
        io._get_graph_key = _short_key(io)


def _short_key(io: Any) -> Any:
    def graph_key() -> tuple[int, ...]:
        return (io.num_q_tokens,)

    return graph_key


def _stale_tail(engine: Any) -> None:
    """Only a full reset puts the trash index into the index storages: the padding rows of a batch
    keep the indices an earlier, longer batch wrote there (the per-batch reset's index fill is lost)."""
    for io in engine.prepared_ios():
        _keep_indices(io)


def _keep_indices(io: Any) -> None:
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
    """Every batch allocates a new bulk input tensor (and re-slices its views) instead of writing the
    old one in place: a graph captured earlier keeps reading the old storage. Without async batching
    the per-batch reset does it; with it, the host-to-device transfer into the device side of a pair."""
    if not engine.pipelined:
        io = engine.io
        reset = io._reset_static_tensors
        rebind = _rebinder(io, engine.torch)

        def reset_static_tensors(full_reset: bool = False) -> None:
            if not full_reset:
                rebind()
            reset(full_reset)

        io._reset_static_tensors = reset_static_tensors
        return
    for pair in engine.io.io_pairs:
        _rebind_on_transfer(pair.host_io, _rebinder(pair.device_io, engine.torch))


def _rebind_on_transfer(host_io: Any, rebind: Any) -> None:
    transfer = host_io._transfer_inputs

    def transfer_inputs(other: Any, stream: Any, non_blocking: bool = False) -> None:
        rebind()
        transfer(other, stream, non_blocking)

    host_io._transfer_inputs = transfer_inputs


def _rebinder(io: Any, torch: Any) -> Any:
    """A function that gives ``io`` a new bulk input tensor holding the old one's values, views re-sliced."""
    views = {
        name: getattr(io, name)
        for name in ("input_ids", "position_ids", "cumulative_seqlens_q", "logits_indices", "carry_over_ids")
    }
    rows = {name: _row_of(io._bulk_input_tensor, view) for name, view in views.items()}
    k_rows = {name: _row_of(io._bulk_input_tensor, view) for name, view in io.cumulative_seqlens_k.items()}

    def rebind() -> None:
        fresh = torch.empty_like(io._bulk_input_tensor)
        fresh.copy_(io._bulk_input_tensor)
        io._bulk_input_tensor = fresh
        for name, (row, size) in rows.items():
            setattr(io, name, fresh[row, :size])
        for name, (row, size) in k_rows.items():
            io.cumulative_seqlens_k[name] = fresh[row, :size]

    return rebind


def _carry_over_shift(engine: Any) -> None:
    """Async mode's carry-over map counts the previous batch's rows over the requests that stay in
    the next batch, not over all its rows: once a request leaves, every later request's input token
    is taken from its predecessor's output row. Eager and graph share it (the map is made on the host
    for both); a full recompute of the model sees it."""
    if not engine.pipelined:
        return
    io, torch = engine.io, engine.torch

    def infer_carry_over_ids() -> Any:
        upcoming = io.io_pairs[io.current_pair].host_io.req_id_to_new_token_position
        previous = io.io_pairs[1 - io.current_pair].host_io.req_id_to_new_token_position
        ids = [-1] * io.max_batch_tokens
        staying = [rid for rid in previous if rid in upcoming]
        for row, rid in enumerate(staying):
            ids[upcoming[rid]] = row
        return torch.tensor(ids, dtype=torch.int32)

    io.infer_carry_over_ids = infer_carry_over_ids


def _row_of(bulk: Any, view: Any) -> tuple[int, int]:
    """(row, length) of a one-row view of ``bulk``."""
    offset = view.storage_offset() - bulk.storage_offset()
    return offset // bulk.stride(0), view.numel()


FAULTS: dict[str, Callable[[Any], None]] = {
    "cb-key-drops-kv": _key_drops_kv,
    "cb-stale-tail": _stale_tail,
    "cb-rebind-bulk": _rebind_bulk,
    "cb-carry-over-shift": _carry_over_shift,
}


def apply(engine: Any, names: tuple[str, ...]) -> None:
    """Inject ``names`` into ``engine``; an unknown name raises (an injected fault never silently does nothing)."""
    for name in names:
        if name not in FAULTS:
            raise ValueError(f"hf-cb has no fault {name!r} (it has: {', '.join(sorted(FAULTS))})")
        FAULTS[name](engine)


__all__ = ["FAULTS", "apply"]
