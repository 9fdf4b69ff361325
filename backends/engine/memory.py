"""The built-in engine's memory estimate: what a lockstep run's two engines need, from the size tables.

``engine_memory(config, requests)`` is ``Engine.memory_estimate``, the optional
member of the adapter protocol that the memory gate (``graphcheck.check.memory_gate``)
calls before anything is built. It is pure arithmetic over the tables the engine
allocates from, so it never disagrees with them:

* ``weights``: ``weights.weight_layout`` (what loading uploads, or a float model draws);
* ``buffers``: ``buffers.buffer_layout`` (what ``allocate_buffers`` allocates);
* ``graphs``: per capture size, ``graph_outputs``: the output of every kernel call the
  captured regions make, which a captured graph keeps (the emulated runner owns
  exactly these storages; tests/test_engine_memory.py checks it byte for byte);
* ``working_set``: the largest transient on top of them: the temporaries of one step's
  kernels (``_kernel_bytes``: attention gathers over the whole block table, the
  samplers' ``[rows, vocab]`` arrays) over the largest eager step, prefill or capture,
  and a capture's snapshots of the storage it touches. Kernel temporaries are not
  allocated from a table: their part is a bound over the same ``BufferSizes``,
  measured against the real engine in tests/test_engine_memory.py.

The NumPy reference the lockstep runs beside the engines is not the engine's
business: the gate adds its part (``MemoryEstimate.reference``).
"""

from __future__ import annotations

from typing import Sequence

from graphcheck.backends.engine.buffers import BufferSizes, buffer_layout
from graphcheck.backends.engine.layout import ACTIVATION_DTYPES, DTYPE_BYTES, TensorSpec, total_bytes
from graphcheck.backends.engine.weights import weight_layout
from graphcheck.contract import contract_named
from graphcheck.memory_estimate import MemoryEstimate
from graphcheck.scenario import EngineConfig, RequestSpec

#: Copies of the keys and values one packed token's attention gathers (``[span, H]`` each, over the
#: whole block table): the integer model's int64 gathers and the float64 copies its matmuls take,
#: a float model's gathers in its dtype and the transposed keys.
_GATHER_COPIES = {"exact": 4, "float32": 3, "bfloat16": 3}
#: Per packed token, the attention row's other 8-byte temporaries: vectors over the span (positions,
#: mask, dots, scores, ...), vectors over the hidden size (q, key, value, residual) and scalars.
_SPAN_VECTORS, _HIDDEN_VECTORS, _TOKEN_SCALARS = 6, 4, 16
#: The samplers' 8-byte ``[rows, vocab]`` temporaries (probabilities, rank order, sorted, cumsum, masks).
_SAMPLER_ARRAYS = 8


def graph_outputs(config: EngineConfig, size: int) -> list[TensorSpec]:
    """What the captured graphs of capture size ``size`` keep: every kernel output of their regions.

    The target region packs ``size * (k+1)`` tokens and verifies as many output rows:
    the target forward's hidden states and logits; with ``graph_scope`` other than
    ``forward``, sampling too (the per-row params, the float64 scores, the contract's eos
    ban, the sampler's tokens: a greedy token and the TOPP candidates are views of the
    ``[rows, vocab]`` rank order). Every draft substep the graphs hold (all S with
    ``step``, the one draft graph otherwise; none in NAIVE mode) keeps a draft forward's
    last hidden state, proposals, margins and runners-up.
    """
    c = config
    rows, H, V = size * c.tokens_per_request, c.hidden_size, c.vocab_size
    act = ACTIVATION_DTYPES[c.model]
    logits = "int64" if c.model == "exact" else "float32"
    held = [TensorSpec((rows, H), act), TensorSpec((rows, V), logits)]  # target_forward
    if c.graph_scope != "forward":
        held += [TensorSpec((rows,), dtype) for dtype in ("int64", "float64", "int64", "float64")]
        held.append(TensorSpec((rows, V), "float64"))  # model_scores
        if contract_named(c.contract).min_tokens > 0:
            held.append(TensorSpec((rows, V), "float64"))  # ban_eos
        if c.verify_strategy == "topp" and not c.naive_mode:
            held += [TensorSpec((rows,), "int64"), TensorSpec((rows, V), "int64"), TensorSpec((rows,), "int64")]
        elif c.verify_strategy == "greedy" and not c.naive_mode:
            held.append(TensorSpec((rows, V), "int64"))
        else:
            held.append(TensorSpec((rows,), "int64"))
    substeps = 0 if c.naive_mode else (c.num_model_steps if c.graph_scope == "step" else 1)
    for _ in range(substeps):  # draft_forward
        held += [TensorSpec((size, H), act), TensorSpec((size,), "int64")]
        held += [TensorSpec((size,), "float64"), TensorSpec((size,), "int64")]
    return held


def _kernel_bytes(config: EngineConfig, sizes: BufferSizes, tokens: int, rows: int) -> int:
    """Peak temporaries of one step's kernels over ``tokens`` packed tokens and ``rows`` output rows."""
    span = sizes.blocks_per_seq * sizes.block_size
    gathered = _GATHER_COPIES[config.model] * DTYPE_BYTES[ACTIVATION_DTYPES[config.model]]
    per_token = gathered * span * sizes.hidden + 8 * (
        _SPAN_VECTORS * span + _HIDDEN_VECTORS * sizes.hidden + _TOKEN_SCALARS
    )
    return tokens * per_token + 8 * _SAMPLER_ARRAYS * rows * sizes.vocab


def engine_memory(config: EngineConfig, requests: Sequence[RequestSpec] = ()) -> MemoryEstimate:
    """Bytes the eager and the graph engine of a lockstep run of ``config`` need, by part (no reference).

    With ``requests`` the working set also covers the script's eager prefill of the
    longest prompts that can run together.
    """
    c = config
    sizes = BufferSizes.for_config(c)
    K1, seqs = c.tokens_per_request, c.max_num_seqs
    weights = total_bytes(weight_layout(c))
    buffers = total_bytes(buffer_layout(c, sizes))
    capture_sizes = sorted(set(c.capture_sizes))
    graphs = sum(total_bytes(graph_outputs(c, size)) for size in capture_sizes)
    largest = max(capture_sizes, default=0)
    eager = max(largest, seqs) * K1  # an eager decode step over every slot (R above every capture size)
    work = [_kernel_bytes(c, sizes, eager, eager)]
    if capture_sizes:  # a capture snapshots the storage its kernels touch, then runs them once
        work.append(weights + buffers + _kernel_bytes(c, sizes, largest * K1, largest * K1))
    if requests:
        longest = sorted((len(r.prompt) for r in requests), reverse=True)[:seqs]
        prefill = sum(max(n, K1) for n in longest) + seqs
        work.append(_kernel_bytes(c, sizes, prefill, seqs * K1))
    return MemoryEstimate(weights=weights, buffers=buffers, graphs=graphs, working_set=max(work), reference=0)


__all__ = ["engine_memory", "graph_outputs"]
