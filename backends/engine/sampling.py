"""Sampling-parameter expansion and the samplers, batched over output rows.

``build_sampling_params`` is decoding-semantics §6.1 with README §3: output row j of a
slot uses ``add_mod(infer_seed, 4j)``; the slot's ``infer_seed`` is advanced IN
PLACE by the config's increment (4(k+1), NAIVE 4) for every running slot of
[0, G). The samplers follow README §4 on float64 *scores* (``model_scores``:
the integer model's ``logits / 8``, a float model's logits): probabilities
``softmax(scores / temperature)``, rank order by score (descending, ties to the
lower id), one uniform per row from its own seed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from graphcheck.backends.engine.rng import add_int64_rem, add_mod, uniform, uniform_open0
from graphcheck.capture.kernels import kernel


@dataclass
class RowParams:
    """Per output row: seed, top_p, top_k, temperature (tensors [rows])."""

    seed: Any
    top_p: Any
    top_k: Any
    temperature: Any


def running_mask(xp, buf, num_slots):
    """Slots of [0, G) that run in this step: tokens scheduled and not stopped."""
    return xp.logical_and(xp.gt(buf.seq_lens_this_time[:num_slots], 0), xp.logical_not(buf.stop_flags[:num_slots]))


def _advance_seed(xp, buf, num_slots, increment, wrap: bool = False):
    G = num_slots
    add = add_int64_rem if wrap else add_mod
    xp.masked_assign_(buf.infer_seed, slice(0, G), running_mask(xp, buf, G), add(xp, buf.infer_seed[:G], increment))


@dataclass(frozen=True)
class SamplingOptions:
    """How :func:`build_sampling_params` reads and advances the seeds (fixed per engine).

    ``advance_seed`` is False where the contract does not advance the seed in this
    configuration (``Contract.advances_seed``), and under the naive-seed-frozen and
    seed-advance-outside-graph faults; ``seed_by_row`` (seed-indexed-by-token)
    takes a row's base seed from ``infer_seed[row]`` instead of its slot's.
    ``wrap_row_seeds`` / ``wrap_seed_advance``: the contract's ``int64_wrap`` row seeds and
    seed advance (``rng.add_int64_rem``, negative near the modulus) instead of ``add_mod``.
    ``params_by_row``: the contract's NAIVE ``packed_row`` reads: row r takes top_p, top_k
    and its base seed from slot r (temperature stays its own slot's).
    """

    advance_seed: bool = True
    seed_by_row: bool = False
    wrap_row_seeds: bool = False
    wrap_seed_advance: bool = False
    params_by_row: bool = False


#: Every flag at its default: the seed advanced, rows reading their slot's values, sums through ``add_mod``.
DEFAULT_SAMPLING = SamplingOptions()


@kernel
def build_sampling_params(
    xp, buf, num_slots: int, num_rows: int, increment: int, options: SamplingOptions = DEFAULT_SAMPLING
):
    """Expand per-slot sampling params to rows; advance ``infer_seed`` in place (``options``).

    Returns ``(seed, top_p, top_k, temperature)`` per output row.
    """
    G, N = num_slots, num_rows
    owner = buf.batch_ids_out[:N]
    valid = xp.ge(owner, 0)
    slot = xp.maximum(owner, 0)  # padding rows (-1) read slot 0
    row = xp.arange(N)
    local = row - xp.index_select(buf.cu_seqlens_out, slot, 0)
    by_row = xp.clip(row, 0, int(buf.infer_seed.shape[0]) - 1)
    seed_index = by_row if options.seed_by_row or options.params_by_row else slot
    read = by_row if options.params_by_row else slot
    base = xp.index_select(buf.infer_seed, seed_index, 0)
    row_seed = add_int64_rem if options.wrap_row_seeds else add_mod
    seed = xp.where(valid, row_seed(xp, base, xp.maximum(local, 0) * 4), 0)
    top_p = xp.where(valid, xp.index_select(buf.top_p, read, 0), 1.0)
    top_k = xp.where(valid, xp.index_select(buf.top_k, read, 0), 0)
    temperature = xp.where(valid, xp.index_select(buf.temperature, slot, 0), 1.0)

    if options.advance_seed:
        _advance_seed(xp, buf, G, increment, options.wrap_seed_advance)
    return seed, top_p, top_k, temperature


@kernel
def advance_infer_seed(xp, buf, num_slots: int, increment: int, wrap: bool = False) -> None:
    """The seed advance of :func:`build_sampling_params` on its own (``wrap``: ``int64_wrap``).

    Only the seed-advance-outside-graph fault calls it (after eager steps):
    a correct engine advances inside the op a graph captures.
    """
    _advance_seed(xp, buf, num_slots, increment, wrap)


#: Every score of a row whose eos ids, all banned, cover the vocabulary (``reference.rules.BANNED_SCORE``).
BANNED_SCORE = -1e10

#: The integer model's logits enter sampling divided by this (README §4: ``z = logits / 8``).
EXACT_SCORE_SCALE = 8.0


@kernel
def model_scores(xp, buf, logits, scale: float):
    """The float64 scores that enter sampling: ``logits / scale`` (1.0: the logits as they are).

    Also written in place into ``buf.step_scores[:rows]`` (an op a graph captures), where
    ``Engine.model_report`` reads them back. For the integer model (``scale`` 8) this is
    the first division of README §4's ``z = logits / 8 / temperature``, so the
    probabilities stay bit for bit what they were.
    """
    scores = xp.astype(logits, xp.float64)
    if scale != 1.0:
        scores = scores / scale
    xp.assign_(buf.step_scores, slice(0, int(scores.shape[0])), scores)
    return scores


@kernel
def ban_eos(xp, buf, scores, min_tokens: int, covering_uniform: bool = False):
    """The contract's ``min_tokens``: ``scores`` with every eos id of a row's slot at minus
    infinity in the rows j of a slot where ``step_idx + j < min_tokens`` (``reference.rules.ban_eos``).

    Returns new scores; ``buf.step_scores`` (the model report) keeps the scores before the ban.
    A row whose eos ids cover the whole vocabulary is left as it is (``covering_eos`` ``unbanned``)
    or has every score at ``BANNED_SCORE`` (``covering_uniform``); padding rows are left as they are.
    """
    N, V = int(scores.shape[0]), int(scores.shape[1])
    owner = buf.batch_ids_out[:N]
    valid = xp.ge(owner, 0)
    slot = xp.maximum(owner, 0)  # padding rows (-1) read slot 0
    local = xp.arange(N) - xp.index_select(buf.cu_seqlens_out, slot, 0)
    young = xp.lt(xp.index_select(buf.step_idx, slot, 0) + local, min_tokens)
    eos = xp.index_select(buf.eos_ids, slot, 0)  # [N, MAX_EOS_IDS], -1 padded
    vocab = xp.reshape(xp.arange(V), (1, 1, V))
    is_eos = xp.any(xp.eq(xp.unsqueeze(eos, 2), vocab), 1)  # [N, V]
    some_left = xp.lt(xp.sum(xp.astype(is_eos, xp.int64), -1), V)
    in_ban = xp.logical_and(valid, young)
    banned = xp.logical_and(in_ban, some_left)
    out = xp.where(xp.logical_and(is_eos, xp.unsqueeze(banned, 1)), float("-inf"), scores)
    if covering_uniform:
        covered = xp.logical_and(in_ban, xp.logical_not(some_left))
        # A covered row is eos at every id: masking with is_eos keeps the mask [N, V].
        out = xp.where(xp.logical_and(is_eos, xp.unsqueeze(covered, 1)), BANNED_SCORE, out)
    return out


def probabilities(xp, scores, temperature):
    """``softmax(scores / temperature)`` in float64, row-wise."""
    z = scores / xp.unsqueeze(temperature, 1)
    e = xp.exp(z - xp.max(z, -1, keepdims=True))
    return e / xp.sum(e, -1, keepdims=True)


def rank_order(xp, scores):
    """Token ids of each row in rank order: score descending, ties to the lower id.

    A stable ascending sort of the negated scores: equal scores keep their index
    order in every framework (a descending stable sort need not promise that).
    """
    _, order = xp.sort(-scores, -1, descending=False, stable=True)
    return order


def first_true(xp, mask, width, cols=None):
    """Index of the first True along the last axis; ``width`` where there is none.

    ``cols``: ``arange(width)`` as a ``[1, width]`` row, where the caller already has one.
    """
    if cols is None:
        cols = xp.reshape(xp.arange(width), (1, width))
    return xp.min(xp.where(mask, xp.broadcast_to(cols, tuple(mask.shape)), width), -1)


def _greedy(xp, order):
    return order[:, 0]


def _sample(xp, p_sorted, order, params):
    """README §4 ``sample``: top_k, renormalise, top_p prefix, one uniform."""
    rows, vocab = int(p_sorted.shape[0]), int(p_sorted.shape[1])
    ids = xp.reshape(xp.arange(vocab), (1, vocab))
    k = xp.where(xp.gt(params.top_k, 0), params.top_k, vocab)
    kept = xp.lt(ids, xp.unsqueeze(k, 1))
    mass = xp.where(kept, p_sorted, 0.0)
    q = mass / xp.sum(mass, -1, keepdims=True)
    c = xp.cumsum(q, -1)
    reach = xp.logical_and(kept, xp.ge(c, xp.unsqueeze(params.top_p, 1)))
    first = first_true(xp, reach, vocab, ids)
    m = xp.where(xp.lt(first, vocab), first + 1, k)
    c_m = xp.reshape(xp.gather(c, xp.reshape(m - 1, (rows, 1)), 1), (rows,))
    r = uniform(xp, params.seed) * c_m
    hit = xp.logical_and(xp.lt(xp.unsqueeze(r, 1), c), xp.lt(ids, xp.unsqueeze(m, 1)))
    pick = first_true(xp, hit, vocab, ids)
    pick = xp.where(xp.lt(pick, vocab), pick, m - 1)
    return xp.reshape(xp.gather(order, xp.reshape(pick, (rows, 1)), 1), (rows,))


@kernel
def sample_tokens(xp, logits, params: RowParams, greedy: bool):
    """Per-row target token: greedy (GREEDY) or ``sample`` (TARGET_MATCH, NAIVE).

    ``logits``: the float64 scores of :func:`model_scores` (the name is the kernel
    argument traces report).
    """
    order = rank_order(xp, logits)
    if greedy:
        return _greedy(xp, order)
    p = probabilities(xp, logits, params.temperature)
    return _sample(xp, xp.gather(p, order, 1), order, params)


@kernel
def topp_candidates(xp, logits, params: RowParams, max_candidates: int):
    """TOPP: ``(phase-2 token, candidate ids [rows, C], candidate lens)`` per row (README §4).

    ``logits``: the float64 scores of :func:`model_scores`.
    """
    rows = int(logits.shape[0])
    C = max_candidates
    order = rank_order(xp, logits)
    p = probabilities(xp, logits, params.temperature)
    cand = order[:, :C]
    cp = xp.gather(p, cand, 1)
    cum = xp.cumsum(cp, -1)
    top_p = xp.unsqueeze(params.top_p, 1)
    cols = xp.reshape(xp.arange(C), (1, C))
    first = first_true(xp, xp.ge(cum, top_p), C, cols)
    length = xp.where(xp.lt(first, C), first + 1, xp.where(xp.eq(params.top_p, 1.0), C, 0))
    # topp_sample: r = uniform_open0 * top_p; first of the first `len` with r <= cumsum.
    r = uniform_open0(xp, params.seed) * params.top_p
    hit = xp.logical_and(xp.le(xp.unsqueeze(r, 1), cum), xp.lt(cols, xp.unsqueeze(length, 1)))
    pick = first_true(xp, hit, C, cols)
    pick = xp.where(xp.lt(pick, C), pick, 0)
    token = xp.reshape(xp.gather(cand, xp.reshape(pick, (rows, 1)), 1), (rows,))
    return token, cand, length
