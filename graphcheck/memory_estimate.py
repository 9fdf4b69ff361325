"""How much memory a lockstep run of a scenario takes on the built-in engine: pure arithmetic.

``engine_memory(config, requests)`` estimates, from the configuration and the
prompts alone, what the eager engine, the graph engine (its captured graphs
included), the NumPy reference and the largest transient of a step hold;
scenario validation rejects a scenario whose estimate is above the limit, so an
engine that cannot be allocated is never reported as a bug. The figures follow
what ``backends/engine`` allocates; tests/test_engine_memory.py measures them
against the real engine. A leaf: standard library only.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:
    from graphcheck.scenario import EngineConfig, RequestSpec

#: Rows of eos ids per slot (graphcheck.scenario.MAX_EOS_IDS; a test checks they agree).
MAX_EOS_IDS = 8

#: Rows of the reference's position table (reference.weights.NPOS; tests check they agree).
_NPOS = 32
#: The engine's per-slot state fields of shape [B] (backends/engine/buffers.py SLOT_IDLE), stop_flags
#: (bool) among them, and its packed per-token fields of shape [T] and [B + 1].
_SLOT_SCALAR_FIELDS = 18
_TOKEN_FIELDS = 10
_OFFSET_FIELDS = 3
#: Bytes per element of the buffers holding model activations (KV caches, hidden states), by
#: ``EngineConfig.model``: int64 for the integer model, the float model's dtype otherwise.
ACTIVATION_BYTES = {"exact": 8, "float32": 4, "bfloat16": 2}
#: The float model's MLP width in hidden sizes (backends/engine/float_weights.py MLP_RATIO).
_FLOAT_MLP_RATIO = 2


def weight_bytes(config: EngineConfig) -> int:
    """One engine's weights: the integer model's int64 arrays plus float64 copies of the matmul
    ones; a float model's arrays in its dtype (backends/engine/float_weights.py's draw plan:
    embeddings, a max_model_len position table, two decoder blocks, the MTP combiner, norms)."""
    H, V = config.hidden_size, config.vocab_size
    if config.model == "exact":
        return 8 * (4 * V * H + _NPOS * H + 14 * H * H)
    block = (4 + 2 * _FLOAT_MLP_RATIO) * H * H + 2 * H  # wq wk wv wo, w_up w_down, two norms
    elements = 3 * V * H + config.max_model_len * H + 2 * block + 2 * H * H + 4 * H
    return ACTIVATION_BYTES[config.model] * elements


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes of a lockstep run on the built-in engine (``engine_memory``), by part.

    ``weights`` and ``buffers`` are one engine's (the eager and the graph engine
    each hold both); ``graphs`` what the graph engine's captured graphs hold
    (every capture size); ``working_set`` the largest transient on top of that:
    a capture's snapshots of the storage it touches plus one kernel's
    temporaries (the attention gathers ``[tokens, max_model_len, hidden]`` and
    the sampling rows ``[rows, vocab]``), an eager step over the largest batch
    or prefill, or the reference's prefill attention; ``reference`` the NumPy
    reference's weights and per-request caches.
    """

    weights: int
    buffers: int
    graphs: int
    working_set: int
    reference: int

    @property
    def eager_engine(self) -> int:
        """What the eager engine holds once built."""
        return self.weights + self.buffers

    @property
    def graph_engine(self) -> int:
        """What the graph engine holds once built and captured."""
        return self.weights + self.buffers + self.graphs

    @property
    def total(self) -> int:
        """The peak of the whole lockstep run: both engines, the reference and the working set."""
        return self.eager_engine + self.graph_engine + self.working_set + self.reference


def _kernel_bytes(config: EngineConfig, tokens: int, rows: int) -> int:
    """Peak temporaries of one step's kernels over ``tokens`` packed tokens and ``rows`` output rows.

    Attention gathers every token's keys and values over the whole block table
    (``span`` positions): the integer model as int64 and multiplies float64
    copies, a float model in its dtype (a third copy for the transposed keys);
    the samplers hold a few ``[rows, vocab]`` float64 / int64 arrays.
    """
    H, V = config.hidden_size, config.vocab_size
    span = -(-config.max_model_len // config.block_size) * config.block_size
    gathered = 4 * 8 if config.model == "exact" else 3 * ACTIVATION_BYTES[config.model]
    return tokens * (gathered * span * H + 8 * (6 * span + 4 * H + 16)) + 64 * rows * V


def engine_memory(config: EngineConfig, requests: Sequence[RequestSpec] = ()) -> MemoryEstimate:
    """Estimated bytes of a lockstep run of ``config`` on the built-in engine (pure arithmetic).

    Derived from what ``backends/engine`` allocates: the weights (``weight_bytes``),
    the persistent buffers (per-slot state, packed scratch of ``max(slots * (k+1),
    max_num_seqs * max_model_len)`` tokens, four paged KV caches, the model
    report's scores and margins; activations in ``ACTIVATION_BYTES[config.model]``
    bytes), per capture size what the graphs keep (the logits and hidden rows of
    their padded tokens), and the working set. With ``requests`` it adds what the
    script needs: an eager prefill of the longest prompts that can run together,
    and the reference's caches.
    Measured against the engine on the CPU in tests/test_engine_memory.py.
    """
    c = config
    H, V, L, K1 = c.hidden_size, c.vocab_size, c.max_model_len, c.tokens_per_request
    seqs = c.max_num_seqs
    slots = c.max_padded_reqs
    blocks_per_seq = -(-L // c.block_size)
    cache_rows = (seqs * blocks_per_seq + 1) * c.block_size
    tokens = max(slots * K1, seqs * L)
    act = ACTIVATION_BYTES[c.model]
    weights = weight_bytes(c)
    buffers = (
        slots * (8 * (_SLOT_SCALAR_FIELDS - 1) + 1)  # stop_flags is bool
        + 8 * slots * (MAX_EOS_IDS + 2 * K1 + L + blocks_per_seq)
        + act * slots * H  # draft_last_hidden
        + 8 * tokens * _TOKEN_FIELDS
        + act * tokens * H  # d_prev_hidden
        + 8 * _OFFSET_FIELDS * (slots + 1)
        + 4 * act * cache_rows * H
        + 8 * slots * (K1 * V + 2 * max(1, c.num_model_steps))  # model report: scores, draft margins, runners-up
    )
    draft_steps = 0 if c.naive_mode else c.num_model_steps
    vocab_rows = 2 if c.verify_strategy in ("greedy", "topp") and not c.naive_mode and c.graph_scope != "forward" else 1
    if c.graph_scope != "forward":  # the float64 scores that enter sampling (model_scores)
        vocab_rows += 1
    draft_graphs = draft_steps if c.graph_scope == "step" else min(draft_steps, 1)
    sizes = sorted(set(c.capture_sizes))
    graphs = sum(8 * (g * K1 * (vocab_rows * V + H + 6) + g * draft_graphs * (H + 2) + 16) for g in sizes)
    largest = max(sizes, default=0)
    work = [
        # an eager decode step over every slot (R above every capture size)
        _kernel_bytes(c, max(largest, seqs) * K1, max(largest, seqs) * K1),
    ]
    if sizes:  # a capture snapshots the storage its kernels touch, then runs them once
        work.append(weights + buffers + _kernel_bytes(c, largest * K1, largest * K1))
    reference = weight_bytes(dataclasses.replace(c, model="exact"))  # the reference's integer weights
    if requests:
        longest = sorted((len(r.prompt) for r in requests), reverse=True)[:seqs]
        prefill = sum(max(n, K1) for n in longest) + seqs
        work.append(_kernel_bytes(c, prefill, seqs * K1))
        work.append(8 * 4 * longest[0] * longest[0])  # the reference's prefill scores, one request at a time
        rows = sorted((len(r.prompt) + r.max_dec_len + K1 + 1 for r in requests), reverse=True)[:seqs]
        reference += 8 * 6 * H * sum(rows)  # target and draft cache: keys, values, hidden
    return MemoryEstimate(weights, buffers, graphs, max(work), reference)


def estimated_engine_bytes(config: EngineConfig) -> int:
    """``engine_memory(config).total``: a lockstep run of ``config`` (whatever its requests), in bytes."""
    return engine_memory(config).total


_SIZE_UNITS = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
_SIZE = re.compile(r"\s*(\d{1,30})\s*([kmgt]?)(?:i?b)?\s*", re.IGNORECASE)


def parse_memory_size(text: str) -> int | None:
    """Bytes of ``text``: ``4294967296``, ``4G``, ``4GiB``, ``512m``, ``64K`` (powers of 1024);
    ``none`` (or ``unlimited``) is no limit. ValueError when malformed or zero."""
    if text.strip().lower() in ("none", "unlimited"):
        return None
    match = _SIZE.fullmatch(text)
    if match is None or int(match.group(1)) == 0:
        raise ValueError(f"not a positive byte count: {text!r}")
    return int(match.group(1)) * _SIZE_UNITS[match.group(2).lower()]


def format_bytes(n: float) -> str:
    """``n`` bytes in B / KiB / MiB / GiB / TiB, one decimal."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


__all__ = [
    "ACTIVATION_BYTES",
    "MemoryEstimate",
    "engine_memory",
    "estimated_engine_bytes",
    "format_bytes",
    "parse_memory_size",
    "weight_bytes",
]
