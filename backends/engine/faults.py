"""Injectable faults: named bugs that reproduce real graph-capture bug classes.

A fault is a switch on one of the engine's real code paths, never a separate
fake engine: the engine receives a set of names at construction
(``Engine(..., faults=[...])``, ``graphcheck run --inject NAME``) and the code
path that the bug lived on asks ``fault_on(engine.faults, NAME)`` through the
constants below. With no fault on, every switch takes the correct branch.

Each :class:`Fault` names its bug class (the number in ``docs/bug-classes.md``),
the real case it mirrors and the divergence graphcheck must report first.
``FAULTS`` is the registry ``graphcheck faults`` lists.

Where each switch is (``graphcheck.backends.engine.engine``, or the kernel it
hands a keyword flag):

* buffers and capture: slots-sized-by-max-num-seqs (``BufferSizes.for_config``),
  captured-temporary-freed (``_attention_tables``, read by ``_capture_bucket``),
  host-sync-in-capture (``_region_tokens``), warmup-state-leaks (``_warm_replay``);
* graph policy and replay: phantom-request-bucket (``bucket_for``),
  unsliced-graph-output and clone-held-per-step (``_run_graphs``),
  draft-substeps-replay-first (``_repack_substep``);
* packing: rebind-output-offsets (``_pack_target_eager``), stale-padding-rows
  (``pack_target_inputs``), draft-padding-writes-kv and offsets-cut-short
  (``pack_draft_inputs`` through ``_draft_pack_faults``);
* forward, sampling and verify: host-max-seq-len-baked (``_target_forward``),
  naive-seed-frozen, seed-indexed-by-token and reasoning-rule-skipped-in-graph
  (``_sample_and_verify``), seed-advance-outside-graph (``_sample_and_verify``
  and ``_run_eager``).
"""

from __future__ import annotations

from typing import AbstractSet, Iterable

from graphcheck.capabilities import Fault
from graphcheck.errors import InputError

#: Bug classes are numbered 1..NUM_BUG_CLASSES in docs/bug-classes.md.
NUM_BUG_CLASSES = 17

# Fault names: the code paths test these constants, never string literals.
REBIND_OUTPUT_OFFSETS = "rebind-output-offsets"
STALE_PADDING_ROWS = "stale-padding-rows"
NAIVE_SEED_FROZEN = "naive-seed-frozen"
CLONE_HELD_PER_STEP = "clone-held-per-step"
CAPTURED_TEMPORARY_FREED = "captured-temporary-freed"
DRAFT_PADDING_WRITES_KV = "draft-padding-writes-kv"
UNSLICED_GRAPH_OUTPUT = "unsliced-graph-output"
PHANTOM_REQUEST_BUCKET = "phantom-request-bucket"
SLOTS_SIZED_BY_MAX_NUM_SEQS = "slots-sized-by-max-num-seqs"
SEED_ADVANCE_OUTSIDE_GRAPH = "seed-advance-outside-graph"
SEED_INDEXED_BY_TOKEN = "seed-indexed-by-token"
OFFSETS_CUT_SHORT = "offsets-cut-short"
HOST_MAX_SEQ_LEN_BAKED = "host-max-seq-len-baked"
DRAFT_SUBSTEPS_REPLAY_FIRST = "draft-substeps-replay-first"
WARMUP_STATE_LEAKS = "warmup-state-leaks"
REASONING_RULE_SKIPPED_IN_GRAPH = "reasoning-rule-skipped-in-graph"
HOST_SYNC_IN_CAPTURE = "host-sync-in-capture"


_CATALOG = (
    Fault(
        REBIND_OUTPUT_OFFSETS,
        1,
        "eager pre-process (pack_target_inputs outside a graph: eager steps, and before each replay in "
        "scopes forward / forward_sampling) computes cu_seqlens_out and batch_ids_out into fresh tensors "
        "and REBINDS the buffer fields to them instead of copying into the captured storage",
        "FastDeploy #7864 / #8061: cu_seqlens_q_output and batch_id_per_token_output assigned, not copy_'d",
        "address (cu_seqlens_out) at the first replay after an eager step; token where a graph reads the "
        "stale offsets (scope forward_sampling: its sampling and verify; scope forward never reads them and "
        "scope step packs its own), at that replay or once a request beyond slot 0 runs",
        breaks=("pack_target_inputs", "_pack_target_eager", "cu_seqlens_out", "batch_ids_out"),
    ),
    Fault(
        CAPTURED_TEMPORARY_FREED,
        2,
        "the attention metadata the target forward reads (its block tables) comes from a builder that "
        "returns a fresh copy of block_tables instead of the persistent buffer: each capture reads the copy "
        "built for it, which the engine drops once the capture returns, so every replay attends through "
        "freed storage holding the capture-time tables (all slots idle: the sink block)",
        "vllm-ascend #12599 / #16168: the attention metadata builder returned clones; their memory was reused "
        "between capture and replay (illegal memory access); flashinfer #5287",
        "address (an unnamed int64 block-table copy: captured storage was freed) at the first replay; token "
        "(eager vs graph) at the same step",
        breaks=("_attention_tables", "target_forward", "block_tables"),
    ),
    Fault(
        STALE_PADDING_ROWS,
        3,
        "pack_target_inputs (eager before a replay, or inside the step graph) resets only the token ids, "
        "positions and output token index of the padding rows between the real token count and the "
        "bucket's token capacity; their batch ids, KV slot mapping and output-row owners keep what an "
        "earlier, larger batch wrote, so padded rows write KV into real requests' cache rows",
        "sglang #10892 / #22958 / #25529, vllm-ascend #15461: rows between the real batch and the bucket "
        "keep an earlier batch's data (the fix pattern, e.g. gLLM #174: fill slot_mapping[real:padded] "
        "with a dummy slot)",
        "state (k_cache, eager vs graph: the token it later corrupts, with state snapshots off) at the first "
        "replay with fewer real tokens than an earlier pack whose "
        "stale rows map to KV of a request still decoding",
        breaks=("pack_target_inputs", "slot_mapping", "batch_ids", "batch_ids_out"),
    ),
    Fault(
        DRAFT_PADDING_WRITES_KV,
        4,
        "pack_draft_inputs maps the KV slot of its padding rows to slot 0's first cache row (block_tables[0, 0]) "
        "instead of the sink: a graph's draft forward, packed to the bucket's token capacity, writes padding "
        "KV over the draft cache of the request in slot 0 (eager packs have no padding rows)",
        "tokenspeed #955: padded draft rows wrote draft KV into another request's pages",
        "state (draft_k_cache of the request in slot 0, eager vs graph) at the first replay; its draft_tokens "
        "(token) with state snapshots off",
        breaks=("pack_draft_inputs", "d_slot_mapping"),
    ),
    Fault(
        UNSLICED_GRAPH_OUTPUT,
        5,
        "_run_graphs (scopes forward / forward_sampling) hands the target graph's outputs on sliced to the "
        "bucket's padded token count instead of the real one: sampling and verify (scope forward) and the "
        "proposer take every padded row, and the step's real token count (StepInfo.real_tokens, the rows "
        "handed on) is the padded one",
        "FastDeploy #8061: the graph output must be sliced to real_token_num before sampling and the MTP",
        "shape (real_tokens, eager vs graph) at the first replay with fewer real tokens than the bucket holds",
        breaks=("_run_graphs", "hidden", "logits", "target_hidden", "num_rows"),
    ),
    Fault(
        PHANTOM_REQUEST_BUCKET,
        6,
        "bucket_for counts one padded (phantom) request as real and picks the smallest capture size >= R + 1: "
        "a batch that fills a bucket replays the next larger one, and a batch that fills the largest runs eagerly",
        "vllm-ascend #14510: a padded request counted as real when choosing the graph",
        "shape (bucket, policy vs graph engine) at the first decode step whose R equals a capture size",
        breaks=("bucket_for", "bucket"),
    ),
    Fault(
        SLOTS_SIZED_BY_MAX_NUM_SEQS,
        7,
        "BufferSizes gives every per-slot buffer max_num_seqs + 1 slots instead of "
        "max(max_num_seqs, largest capture size) + 1, so a bucket larger than max_num_seqs indexes past them",
        "vllm-ascend #16168: max_num_seqs 6, three MTP requests padded to 16: shape errors and out-of-bounds writes",
        "shape (buffer capacity (slots)) at step 0 when the largest capture size >= max_num_seqs + 1; where "
        "the capture itself fails on the short buffers, capture (engine construction) at step 0",
        breaks=("BufferSizes.for_config", "buffer capacity (slots)"),
    ),
    Fault(
        NAIVE_SEED_FROZEN,
        8,
        "build_sampling_params skips the in-place infer_seed advance in NAIVE mode (eager and graph "
        "paths alike): every step reuses the same random numbers",
        "FastDeploy #8061 review: the seed increment moved into the MTP op and the NAIVE path lost it",
        "seed (infer_seed) against the reference at the first NAIVE step a request runs",
        breaks=("build_sampling_params", "infer_seed"),
    ),
    Fault(
        SEED_ADVANCE_OUTSIDE_GRAPH,
        9,
        "the infer_seed advance is taken out of build_sampling_params and done as a separate kernel after "
        "the sampling of eager steps only: replayed steps never advance it and reuse one random stream",
        "FastDeploy #8061 (the (k+1)*4 increment had to move into the op the graph captures); Megatron-LM #5697 "
        "(RNG offset frozen at capture)",
        "state (infer_seed, eager vs graph), then seed at the same step, at the first replay",
        breaks=("build_sampling_params", "advance_infer_seed", "infer_seed"),
    ),
    Fault(
        SEED_INDEXED_BY_TOKEN,
        10,
        "build_sampling_params takes each output row's base seed from infer_seed at the row's index instead "
        "of at the row's slot (eager and graph alike): requests sample with each other's random streams",
        "FastDeploy #7180: the curand state was offset by the token index instead of the request",
        "token (accept_tokens, reference vs eager) at the first decode step with stochastic verification",
        breaks=("build_sampling_params", "infer_seed"),
    ),
    Fault(
        OFFSETS_CUT_SHORT,
        11,
        "pack_draft_inputs writes d_cu_seqlens with G entries instead of G + 1: the draft forward reads "
        "d_cu_seqlens[G], the end of the last slot's rows, from an earlier pack (eager and graph alike)",
        "FastDeploy #7180: cu_seqlens_q_output built with real_bsz entries, not real_bsz + 1",
        "token (draft_tokens, reference vs eager) of the request in the last slot at the first step it drafts "
        "(its slot looks empty: proposal -1); with num_model_steps >= 2 that -1 feeds the next substep's "
        "embedding lookup: crash at the same step",
        breaks=("pack_draft_inputs", "d_cu_seqlens"),
    ),
    Fault(
        HOST_MAX_SEQ_LEN_BAKED,
        12,
        "the target forward attends over only as many block-table columns as the host's longest running "
        "request needs (a Python int from the scheduler), not the static width: exact on eager steps, but "
        "a graph freezes the capture-time value (one block: every slot idle)",
        "vllm #20190 class: a Python int (max_seq_len, real_bsz, a token count) read inside the captured "
        "region and frozen at capture",
        "state (accept_tokens or draft tokens, eager vs graph; token with state snapshots off) at the first "
        "replay where a request's KV reaches past the first block",
        breaks=("target_forward", "span_blocks"),
    ),
    Fault(
        DRAFT_SUBSTEPS_REPLAY_FIRST,
        13,
        "on graph steps, draft substeps >= 1 run the draft forward (the replayed substep-0 graph, or the step "
        "graph's own substeps) without packing their one-token inputs: they read what substep 0 packed "
        "(needs num_model_steps >= 2)",
        "FastDeploy #8061: only the first draft substep may be captured; later substeps replay a graph built "
        "for other inputs",
        "state (draft_k_cache, eager vs graph; draft_tokens with state snapshots off) at the first replay",
        breaks=("pack_draft_inputs", "_repack_substep"),
    ),
    Fault(
        CLONE_HELD_PER_STEP,
        14,
        "every graph step clones seq_lens_this_time before the replay and the engine keeps each clone "
        "(engine.kept_inputs), so live memory grows by one buffer per replay",
        "FastDeploy #8061 (per-step clone of last_seq_lens_this_time kept alive); llama.cpp #25835 "
        "(+7.96 MiB per request)",
        "memory (memory_bytes) at the second graph replay",
        breaks=("_run_graphs", "kept_inputs"),
    ),
    Fault(
        WARMUP_STATE_LEAKS,
        15,
        "the warm replay after capture forces accept_override to accept all drafts (a dummy-run setting, "
        "like FastDeploy's accept_all_drafts) and does not restore it, while the host mirror of the "
        "override buffer still says -1, so the first real steps accept every draft",
        "TensorRT-LLM #15775: dummy-run flags and probabilities survive capture into the first real replay",
        "state (accept_override, eager vs graph, and slot hygiene of the graph engine) at step 0, before any "
        "replay; token (accept_tokens) at the first replayed step",
        breaks=("_warm_replay", "accept_override"),
    ),
    Fault(
        REASONING_RULE_SKIPPED_IN_GRAPH,
        16,
        "verify_drafts on graph steps (inside the graph, or after the replay in scope forward) drops the "
        "reasoning_status == 1 rule that rejects all drafts; eager steps keep it",
        "FastDeploy verify rules: reasoning_status == 1 must reject all drafts",
        "state (accept_tokens, eager vs graph; token with state snapshots off) at the first replay where a "
        "request in reasoning_status 1 "
        "would accept a draft",
        breaks=("verify_drafts", "reasoning_rule"),
    ),
    Fault(
        HOST_SYNC_IN_CAPTURE,
        17,
        "the target region sizes its packed token count from the device's seq_lens_this_time (a host read, "
        "xp.to_host) instead of the bucket's static capacity: capture refuses the sync",
        "any .item() / .cpu() in a captured region (capture fails on device, or the value is frozen)",
        "capture (engine construction) at step 0",
        breaks=("_region_tokens", "seq_lens_this_time"),
    ),
)

#: name -> Fault, the registry ``graphcheck faults`` lists.
FAULTS: dict[str, Fault] = {f.name: f for f in _CATALOG}


class UnknownFault(InputError, ValueError):
    """No fault has that name (bad input from a command line or a report; an InputError)."""


def check_faults(names: Iterable[str]) -> frozenset[str]:
    """Validate fault names against the registry."""
    chosen = frozenset(names)
    unknown = sorted(chosen - FAULTS.keys())
    if unknown:
        known = ", ".join(sorted(FAULTS)) or "none yet"
        raise UnknownFault(f"unknown fault(s) {', '.join(unknown)}; known: {known}")
    return chosen


def fault_on(faults: AbstractSet[str], name: str) -> bool:
    """Whether the registered fault ``name`` is switched on in ``faults``."""
    if name not in FAULTS:  # a typo in engine code must not silently disable a switch
        raise UnknownFault(f"engine code asked for unregistered fault {name!r}")
    return name in faults
