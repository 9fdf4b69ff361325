"""What ``--engine vllm`` supports and fuzzes: its options, its padding policy and its faults."""

from __future__ import annotations

from typing import Any

from graphcheck.buckets import BucketPolicy, Pad, PathPolicy, size_mask
from graphcheck.capabilities import EngineCapabilities, EngineOption, Fault

#: ``method`` option values -> vLLM's speculative method.
METHODS = {0: "ngram", 1: "draft_model", 2: "eagle", 3: "eagle3", 4: "mtp"}
#: Methods whose drafter is a head over the target's hidden states (weights drawn at load, no checkpoint).
HEADS = ("eagle", "eagle3", "mtp")
#: vLLM's CPU attention pages hold a multiple of 32 tokens.
BLOCK_SIZE = 32

#: Options graphcheck draws (the first choice of each is the simplest, and the default).
OPTIONS = (
    EngineOption(
        "method",
        (0, 1, 2, 3, 4),
        "speculative method: 0 n-gram (prompt lookup, proposed on the host), 1 draft_model (a drafter with the "
        "target's weights and graphs of its own), 2 EAGLE and 3 EAGLE-3 (a one-layer head over the target's "
        "hidden states, random weights, graphs of its own), 4 MTP (a MiMo target drafting with its own "
        "next-token layer)",
    ),
    EngineOption(
        "max_num_batched_tokens",
        (256, 16),
        "the scheduler's token budget per step; 16 splits longer prompts into chunks (chunked prefill)",
    ),
    EngineOption(
        "prefill_graphs",
        (1, 0),
        "1: the capture sizes also cover prefill and mixed steps, in powers of two above the largest verify size "
        "up to the token budget (as vLLM's default sizes do); 0: only the verify sizes R(1+k), larger steps eager",
    ),
    EngineOption(
        "cache_tokens",
        (0, 50, 20, 1),
        "KV cache size in tokens, drawn as a share in percent of what the scenario's requests need, never below "
        "its largest request's nor max_model_len (vLLM starts only with room for one full-length request; 0: "
        "every request at full length); below 100 allocations fail, requests wait, are preempted and prefilled again",
        scale="need",
    ),
)
DEFAULTS = {o.name: o.choices[0] for o in OPTIONS}

#: vLLM pads a step's tokens to the smallest capture size that holds them (every step: prefill chunks,
#: decodes and verify batches of R(1+k) tokens alike) and runs it eagerly above the largest; its graphs
#: are keyed by that size (``BatchDescriptor.num_tokens``).
POLICY = BucketPolicy(
    (PathPolicy("piecewise", (("tokens", Pad("sizes", step="capture_tokens")),)),),
    keyed=True,
)

FAULTS = (
    Fault(
        "vllm-slot-tail-stale",
        4,
        "the padded tail of the KV slot mapping keeps the previous step's slots instead of -1, so a graph's "
        "padding tokens write their keys and values into cache rows of live requests",
        "vLLM fills the padded tail of slot_mapping with -1 so reshape_and_cache skips it (vllm-project/vllm#16072); "
        "padding that wrote into live KV slots: vllm-project/vllm#43810",
        "token: eager vs graph (the graph engine's cache rows are overwritten)",
        # the kernel that writes the padding tokens' keys and values where the stale tail points
        ("runner._get_slot_mappings", "slot_mapping", "LlamaForCausalLM.LlamaDecoderLayer.LlamaAttention.Attention"),
    ),
    Fault(
        "vllm-rebind-input-ids",
        1,
        "each step gives the runner a new input_ids buffer instead of writing the persistent one in place",
        "a buffer reassigned instead of written in place under cudagraphs (vllm-project/vllm#11596); producers "
        "returning tensors at new addresses to a captured piece (vllm-project/vllm#53915)",
        "address: runner.input_ids.gpu rebound",
        ("runner.input_ids.gpu", "embed_tokens"),
    ),
    Fault(
        "vllm-kv-slots-temporary",
        2,
        "the runner gives the attention layers' KV-cache update a per-step host copy of the slot mapping, which "
        "a graph freezes at capture: every replay writes keys and values to the capture run's slots",
        "a graph that reads per-step attention metadata frozen at capture (vllm-project/vllm#48261; the "
        "slot_mapping address handling of vllm-project/vllm#34880)",
        "address: the graph reads the capture run's copy, freed after capture (then tokens, eager vs graph)",
        # the kernel that reads the frozen copy: the KV-cache write inside each attention layer
        ("runner._get_slot_mappings", "LlamaForCausalLM.LlamaDecoderLayer.LlamaAttention.Attention"),
    ),
    Fault(
        "vllm-drafter-positions-temporary",
        2,
        "the drafter hands its model a copy of its positions buffer, which the drafter's graphs freeze at "
        "capture: replayed drafts use the dummy run's positions",
        "drafter graphs need the proposer's persistent positions and hidden_states buffers (vllm-project/vllm#17504)",
        "address: the drafter's graph reads the capture run's copy, freed after capture (then draft_tokens)",
        ("drafter.positions", "LlamaForCausalLM.LlamaDecoderLayer.LlamaAttention.RotaryEmbedding"),
        options=(("method", 1),),
    ),
    Fault(
        "vllm-wasted-graph",
        6,
        "the dispatcher sends batches of whole verify rows that fit a capture size exactly (R(1+k) tokens, no "
        "padding) to eager mode although their graph was captured",
        "verify steps falling back to eager with graphs captured (vllm-project/vllm#27325; a verify size left "
        "out of the captured ones, vllm-project/vllm#55004)",
        "shape: graph dispatch (policy vs graph engine)",
        ("cudagraph_dispatcher.dispatch", "graph dispatch"),
    ),
)

CAPABILITIES = EngineCapabilities(
    drafts=True,
    naive=True,
    verify_strategies=("greedy",),
    accept_policies=("normal",),
    models=("float32",),
    contracts=("vllm",),
    frameworks=("torch",),
    layout="packed",
    faults=FAULTS,
    graph_api="torch.cuda",
    options=OPTIONS,
    schedule="engine",
    cache_report=True,
    buckets=POLICY,
)


def vllm_options(config: Any) -> dict[str, int]:
    """The engine's settings for ``config``: its options, defaults where unset."""
    return {name: config.option(name, default) for name, default in DEFAULTS.items()}


def capture_tokens(config: Any) -> tuple[int, ...]:
    """vLLM's capture sizes (tokens) for ``config``: each capture size of requests times the tokens a
    verifying request feeds (1 + k; 1 without drafts), up to the step's token budget (vLLM drops larger
    ones: no step can need them); with ``prefill_graphs``, powers of two above those up to the budget."""
    per_request = 1 if config.naive_mode else 1 + config.num_speculative_tokens
    options = vllm_options(config)
    budget = options["max_num_batched_tokens"]
    sizes = {size * per_request for size in config.capture_sizes if 0 < size * per_request <= budget}
    if sizes and options["prefill_graphs"]:
        above = 1 << max(sizes).bit_length()  # the next power of two above the largest verify size
        sizes |= {1 << n for n in range(above.bit_length() - 1, budget.bit_length()) if 1 << n <= budget}
    return tuple(sorted(sizes))


def cache_blocks(config: Any) -> int:
    """The blocks vLLM is given (``num_gpu_blocks_override``, its null block included): room for every
    request at full length, or the drawn ``cache_tokens`` and a verify's lookahead (k + 1 tokens), never
    less than one request at ``max_model_len`` (vLLM refuses to start with a cache that cannot hold one)."""
    lookahead = 1 + config.num_speculative_tokens
    tokens = vllm_options(config)["cache_tokens"]
    if tokens:
        return -(-(max(tokens, config.max_model_len) + lookahead) // BLOCK_SIZE) + 1
    per_request = -(-(config.max_model_len + lookahead) // BLOCK_SIZE)
    return config.max_num_seqs * per_request + 1


def limits(config: Any) -> dict[str, int]:
    """The sizes the padding policy reads (``StepReport.limits``)."""
    return {"capture_tokens": size_mask(capture_tokens(config))}


__all__ = [
    "BLOCK_SIZE",
    "CAPABILITIES",
    "cache_blocks",
    "DEFAULTS",
    "FAULTS",
    "METHODS",
    "OPTIONS",
    "POLICY",
    "capture_tokens",
]
