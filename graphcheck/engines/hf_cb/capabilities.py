"""What ``--engine hf-cb`` supports and fuzzes: its options, its padding policy and its faults."""

from __future__ import annotations

from typing import Any

from graphcheck.buckets import BucketPolicy, Pad, PathPolicy
from graphcheck.capabilities import EngineCapabilities, EngineOption, Fault


def _async_choices() -> tuple[int, ...]:
    """Async batching is drawn where the installed transformers runs it on every backend: 5.17 runs it on
    CUDA only (the engine refuses it on the CPU), so with 5.17 installed it is not drawn. Read from the
    package metadata, without importing transformers."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        installed = version("transformers")
    except PackageNotFoundError:
        return (0, 1)
    return (0,) if installed.startswith("5.17.") else (0, 1)


#: Options graphcheck draws (the first choice of each is the simplest, and the default).
OPTIONS = (
    EngineOption("page_size", (8, 4, 16), "tokens per KV-cache page"),
    EngineOption(
        "max_batch_tokens",
        (64, 16, 8),
        "the scheduler's token budget per batch; small budgets split prefills into chunks",
    ),
    EngineOption(
        "cache_tokens",
        (0, 50, 20, 1),
        "KV cache size in tokens, drawn as a share in percent of what the scenario's requests need, never below "
        "its largest request's (0: room for every slot at full length; 1: the largest request alone); below 100 "
        "requests wait for pages, allocations fail, requests are offloaded and prefilled again",
        scale="need",
    ),
    EngineOption("q_padding", (8, 4, 16), "query tokens are padded to a multiple of this (graph keys)"),
    EngineOption("kv_padding", (16, 8, 32), "cache tokens read are padded to a multiple of this (graph keys)"),
    EngineOption("sliding_window", (0, 8), "0: a Llama-style model; > 0: a Mistral config with that sliding window"),
    EngineOption(
        "async_batching",
        _async_choices(),
        "1: double-buffered async batching (two IO pairs; batch N is scheduled and launched before batch N-1's "
        "tokens are in, and its graph carries them into its inputs; results come one call late)",
    ),
)
DEFAULTS = {o.name: o.choices[0] for o in OPTIONS}

#: The varlen path pads q and kv to their intervals (capped at the budget and the largest cache read)
#: and each key length to a power of two of at least 1024, capped at the largest cache read.
_KEY_LENGTH = Pad("pow2", floor=1024, cap="max_tokens_read", optional=True)
POLICY = BucketPolicy(
    (
        PathPolicy(
            "varlen",
            (
                ("q", Pad("interval", step="q_padding", cap="max_batch_tokens")),
                ("kv", Pad("interval", step="kv_padding", cap="max_tokens_read")),
                ("k:full_attention", _KEY_LENGTH),
                ("k:sliding_attention", _KEY_LENGTH),
            ),
        ),
        PathPolicy("decode", (("q", Pad("pow2", cap="max_requests_per_batch")), ("kv", Pad("zero")))),
    )
)

FAULTS = (
    Fault(
        "cb-key-drops-kv",
        12,
        "the varlen graph key leaves out the cache read sizes (kv, key lengths) the capture froze",
        "transformers PR #45323 (a graph key without a host value baked into the capture)",
        "shape: host value kv, graph capture vs replay",
        ("host value kv", "ContinuousBatchingIOs._get_graph_key"),
    ),
    Fault(
        "cb-stale-tail",
        4,
        "padding rows of the cache write indices keep the previous batch's indices instead of the trash index",
        "stale padding rows of a static input",
        "state: the cache rows of a running request, eager vs graph",
        ("io.write_index_storage", "model.model.layers.0.self_attn", "model.model.layers.1.self_attn"),
    ),
    Fault(
        "cb-rebind-bulk",
        1,
        "each batch resets the bulk input tensor by allocating a new one instead of zeroing it in place",
        "a static input buffer reassigned after capture",
        "address: io._bulk_input_tensor rebound",
        ("io._bulk_input_tensor", "model.model.embed_tokens"),
    ),
    Fault(
        "cb-carry-over-shift",
        10,
        "async mode: after a request of batch N-1 leaves, the tokens carried into batch N are taken from the "
        "wrong rows of N-1's output (counted over the requests that stay instead of N-1's rows)",
        "a per-request value of the previous batch looked up by the wrong row (async carry-over)",
        "value: a token's scores, full recompute vs graph (eager shares the bug)",
        ("ContinuousBatchingAsyncIOs.infer_carry_over_ids", "io.io_pairs"),
        options=(("async_batching", 1),),
    ),
)

CAPABILITIES = EngineCapabilities(
    drafts=False,
    naive=True,
    models=("float32", "bfloat16"),
    contracts=("hf-cb",),
    frameworks=("torch",),
    layout="packed",
    faults=FAULTS,
    graph_api="torch.cuda",
    options=OPTIONS,
    schedule="engine",
    buckets=POLICY,
    cache_report=True,
)


def cb_options(config: Any) -> dict[str, int]:
    """The engine's settings for ``config``: its options (defaults where unset), ``num_blocks`` derived."""
    options = {name: config.option(name, default) for name, default in DEFAULTS.items()}
    page = options["page_size"]
    if options["cache_tokens"]:  # a token to spare: async batching schedules one ahead
        options["num_blocks"] = -(-(_held_tokens(options, config.max_model_len) + 1) // page)
        return options
    per_request = -(-config.max_model_len // page) + 2  # a full-length request, with a page to spare each side
    options["num_blocks"] = per_request * (config.max_num_seqs + 1)
    return options


def _held_tokens(options: dict[str, int], max_model_len: int) -> int:
    """The cache tokens for the drawn size: ``cache_tokens`` counts every token of a request, but a
    sliding-window model holds only its window (and a page) of each, so there it shrinks by that share of a
    full-length request, to one window at least."""
    window = options["sliding_window"]
    if not window:
        return options["cache_tokens"]
    held = window + options["page_size"]
    return max(held, options["cache_tokens"] * held // max(1, max_model_len))


__all__ = ["CAPABILITIES", "DEFAULTS", "FAULTS", "OPTIONS", "POLICY", "cb_options"]
