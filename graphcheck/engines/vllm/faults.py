"""The faults of ``--engine vllm``: bug classes of vLLM's graph and speculative-decoding code, re-introduced.

Each fault patches methods of one engine's own objects (its model runner, its
drafter, its attention layers), never vLLM's classes, so the other engine of a
lockstep pair and later engines are untouched. Faults that must be inside the
graphs are applied when the runner has loaded its models, before the capture at
start (:func:`before_capture`); the rest when the engine is built
(:func:`after_build`). ``capabilities.FAULTS`` says which bug class each belongs to.
"""

from __future__ import annotations

from typing import Any, Callable


def _slot_tail_stale(runner: Any) -> None:
    """The padded tail of each slot mapping keeps what earlier steps wrote there instead of -1: a graph's
    padding tokens then write their keys and values into real cache rows."""
    build = runner._get_slot_mappings

    def get_slot_mappings(
        num_tokens_padded: int, num_reqs_padded: int, num_tokens_unpadded: int, *args: Any, **kwargs: Any
    ) -> Any:
        tables = runner.input_batch.block_table.block_tables
        kept = [t.slot_mapping.gpu[num_tokens_unpadded:num_tokens_padded].clone() for t in tables]
        result = build(num_tokens_padded, num_reqs_padded, num_tokens_unpadded, *args, **kwargs)
        for table, tail in zip(tables, kept):
            table.slot_mapping.gpu[num_tokens_unpadded:num_tokens_padded].copy_(tail)
        return result

    runner._get_slot_mappings = get_slot_mappings


def _rebind_input_ids(runner: Any) -> None:
    """Every step gives the runner a new input_ids buffer (a copy) before it writes the step's tokens."""
    execute = runner.execute_model

    def execute_model(*args: Any, **kwargs: Any) -> Any:
        fresh = runner.input_ids.gpu.clone()
        runner.input_ids.gpu = runner.input_ids.cpu = fresh  # the CPU runner aliases the two
        return execute(*args, **kwargs)

    runner.execute_model = execute_model


def _kv_slots_temporary(runner: Any) -> None:
    """The runner hands each attention layer's KV-cache update a copy of the slot mapping made on the host
    for the step, not the persistent buffer: a graph keeps reading the copy made when it was captured."""
    build = runner._get_slot_mappings

    def get_slot_mappings(*args: Any, **kwargs: Any) -> Any:
        by_group, by_layer = build(*args, **kwargs)
        if isinstance(by_layer, dict):
            by_layer = {name: mapping.clone() for name, mapping in by_layer.items()}
        return by_group, by_layer

    runner._get_slot_mappings = get_slot_mappings


def _drafter_positions_temporary(runner: Any) -> None:
    """The drafter hands its model a copy of its positions buffer (a per-call temporary)."""
    drafter = getattr(runner, "drafter", None)
    if drafter is None or not hasattr(drafter, "_get_positions"):
        return
    get = drafter._get_positions

    def get_positions(num_tokens: int) -> Any:
        return get(num_tokens).clone()

    drafter._get_positions = get_positions


def _wasted_graph(runner: Any) -> None:
    """The dispatcher sends a batch of whole verify rows (a multiple of 1 + k tokens) that fits a capture
    size exactly to eager mode, although that size was captured (an exact-fit off-by-one at the key table)."""
    dispatcher = runner.cudagraph_dispatcher
    dispatch = dispatcher.dispatch
    spec = getattr(runner, "speculative_config", None)
    per_request = 1 + (spec.num_speculative_tokens if spec is not None else 0)

    def dispatch_exact_fits_eagerly(num_tokens: int, *args: Any, **kwargs: Any) -> Any:
        mode, descriptor = dispatch(num_tokens, *args, **kwargs)
        exact = descriptor.num_tokens == num_tokens and num_tokens % per_request == 0
        if exact and mode.name != "NONE":
            from vllm.config import CUDAGraphMode
            from vllm.forward_context import BatchDescriptor

            return CUDAGraphMode.NONE, BatchDescriptor(num_tokens=num_tokens)
        return mode, descriptor

    dispatcher.dispatch = dispatch_exact_fits_eagerly


#: fault -> (patch, applied before the capture at start)
FAULTS: dict[str, tuple[Callable[[Any], None], bool]] = {
    "vllm-slot-tail-stale": (_slot_tail_stale, True),
    "vllm-rebind-input-ids": (_rebind_input_ids, False),
    "vllm-kv-slots-temporary": (_kv_slots_temporary, True),
    "vllm-drafter-positions-temporary": (_drafter_positions_temporary, True),
    "vllm-wasted-graph": (_wasted_graph, False),  # the capture at start dispatches as it was asked
}


def check(names: tuple[str, ...]) -> None:
    """Raise on a name vLLM's adapter does not implement (an injected fault never silently does nothing)."""
    for name in names:
        if name not in FAULTS:
            raise ValueError(f"vllm has no fault {name!r} (it has: {', '.join(sorted(FAULTS))})")


def before_capture(runner: Any, names: tuple[str, ...]) -> None:
    for name in names:
        patch, early = FAULTS[name]
        if early:
            patch(runner)


def after_build(runner: Any, names: tuple[str, ...]) -> None:
    for name in names:
        patch, early = FAULTS[name]
        if not early:
            patch(runner)


__all__ = ["FAULTS", "after_build", "before_capture", "check"]
