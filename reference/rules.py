"""The decoding rules downstream of the model, under a contract (``graphcheck.contract``).

Both oracles use these: the exact reference (which also computes the model)
and the model-agnostic oracle (which takes the model's scores from the engine).
Given one request's state going into a step and a way to read the target's
scores at output row i, ``decide`` returns what the step must emit; the other
functions are the contract's seed arithmetic, the eos ban and the drafter's
skip rule.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Sequence

import numpy as np

from graphcheck.contract import Contract
from graphcheck.reference.rng import add_mod
from graphcheck.reference.sampling import as_scores, sample
from graphcheck.reference.verify import RowVerdict, VerifyInput, VerifyResult, VerifyRule, judge_row, naive_step, verify
from graphcheck.scenario import SEED_MODULUS, EngineConfig, RequestSpec

_INT64_SPAN = 1 << 64


def _wrap_int64(value: int) -> int:
    value %= _INT64_SPAN
    return value - _INT64_SPAN if value >= 1 << 63 else value


def seed_sum(arithmetic: str, seed: int, offset: int) -> int:
    """``(seed + offset) mod M`` under a contract's seed arithmetic (``row_seed`` / ``seed_advance_sum``).

    ``int64_wrap`` (FastDeploy): the sum wraps in int64 and C's ``%`` keeps the
    dividend's sign, so near M the result is negative.
    """
    if arithmetic == "modular":
        return int(add_mod(seed, offset))
    total = _wrap_int64(seed + offset)
    remainder = abs(total) % SEED_MODULUS
    return -remainder if total < 0 else remainder


def row_seed(contract: Contract, infer_seed: int, row: int) -> int:
    """The seed of output row ``row``: ``(infer_seed + 4 row) mod M`` (``seed_sum``)."""
    return seed_sum(contract.row_seed, infer_seed, 4 * row)


def next_seed(contract: Contract, config: EngineConfig, infer_seed: int) -> int:
    """``infer_seed`` after a step the request ran: advanced by the seed increment (``seed_sum``) or kept."""
    if not contract.advances_seed(config.verify_strategy, config.naive_mode):
        return infer_seed
    return seed_sum(contract.seed_advance_sum, infer_seed, config.seed_increment)


#: The score of every token of a row whose eos ids, all banned, cover the vocabulary (``covering_eos``
#: ``uniform``): FastDeploy's ban value; any constant leaves the row uniform.
BANNED_SCORE = -1e10


def ban_eos(
    scores: np.ndarray, first_row_step: int, eos: Sequence[int], min_tokens: int, covering: str = "unbanned"
) -> np.ndarray:
    """Scores with every eos id at minus infinity in rows j where ``first_row_step + j < min_tokens``.

    ``scores`` are float64 rows (``as_scores``); the input is not changed. When the eos
    ids cover the whole vocabulary (``covering``, the contract's ``covering_eos``) nothing is
    banned (``unbanned``), or every score of those rows becomes ``BANNED_SCORE`` (``uniform``).
    """
    rows = int(scores.shape[0])
    banned_rows = max(0, min(rows, min_tokens - first_row_step))
    ids = sorted({int(t) for t in eos if 0 <= int(t) < scores.shape[1]})
    covered = len(ids) >= scores.shape[1]
    if banned_rows == 0 or not ids or (covered and covering == "unbanned"):
        return scores
    out = np.array(scores, dtype=np.float64, copy=True)
    if covered:
        out[:banned_rows] = BANNED_SCORE
    else:
        out[np.ix_(np.arange(banned_rows), ids)] = -np.inf
    return out


def drafts_expected(config: EngineConfig, step_idx: int, stopped: bool, max_dec_len: int) -> int:
    """How many drafts the proposer must leave after a step: S, or 0 when it skips (stopped,
    NAIVE, or ``step_idx + S >= max_dec_len``)."""
    s = config.num_model_steps
    if config.naive_mode or stopped or step_idx + s >= max_dec_len:
        return 0
    return s


@dataclass(frozen=True)
class SlotParams:
    """The sampling values a slot holds: top_p, top_k (as stored: ``Contract.top_k_of``) and infer_seed."""

    top_p: float
    top_k: int
    seed: int


#: What a free slot holds (the built-in engine's idle values): NAIVE ``packed_row`` reads may land there.
IDLE_PARAMS = SlotParams(1.0, 0, 0)


def decide(
    config: EngineConfig,
    contract: Contract,
    spec: RequestSpec,
    inp: VerifyInput,
    infer_seed: int,
    scores: Callable[[int], np.ndarray],
    follow: Sequence[int] | None = None,
    naive_read: SlotParams | None = None,
) -> VerifyResult:
    """One request's step: verify (speculative) or the NAIVE sample, on the scores of its rows.

    ``scores(i)`` is output row i's float64 scores, the eos ban already applied;
    ``inp`` carries the request's state and the step's policy switches
    (``inp.eos`` is the eos list the contract says the request stops on).
    ``follow``: the tokens an engine emitted this step. Where the contract leaves
    the TOPP draw free, the phase-2 token of row i is ``follow[i]`` when that is
    one of the row's candidates (else the row's own draw, which then differs);
    without ``follow`` such a draw is ambiguous. ``naive_read``: the top_p, top_k
    and seed NAIVE sampling reads (``naive_params`` ``packed_row``), by default the request's own.
    """
    eps = contract.sampling_eps
    free = contract.topp_draw == "unspecified"
    if config.naive_mode:
        read = naive_read or SlotParams(spec.top_p, contract.top_k_of(spec.top_k), infer_seed)
        seed = row_seed(contract, read.seed, 0)
        tok, amb = sample(scores(0), spec.temperature, read.top_p, read.top_k, seed, eps=eps)
        return naive_step(tok, inp.step_idx, inp.max_dec_len, inp.eos, amb, inp.max_len_token)

    rule = VerifyRule(config.verify_strategy, config.max_candidate_len, eps, free_draw=free and follow is None)

    def row(i: int) -> RowVerdict:
        top_k, seed = contract.top_k_of(spec.top_k), row_seed(contract, infer_seed, i)
        verdict = judge_row(rule, scores(i), spec.temperature, spec.top_p, top_k, seed)
        if free and follow is not None and config.verify_strategy == "topp":
            return _follow_draw(verdict, follow, i, inp)
        return verdict

    return verify(inp, row)


def _follow_draw(verdict: RowVerdict, follow: Sequence[int], i: int, inp: VerifyInput) -> RowVerdict:
    """The verdict with the engine's phase-2 token when the free draw allows it: one of the
    row's accepted candidates, or its first candidate when none is accepted.

    Row i's token is the step's (i+1)-th emitted one; where that reaches ``max_dec_len``
    under ``max_len_token`` ``eos`` the engine emits ``eos[0]`` whatever it drew, so
    ``eos[0]`` there follows any allowed draw that is no other eos id.
    """
    if i >= len(follow):
        return verdict
    allowed = verdict.accepts or verdict.ranked[:1]
    token = int(follow[i])
    if token in allowed:
        return replace(verdict, token=token)
    if _emits_as_max_len_eos(inp, i, token):
        fits = [t for t in (verdict.token, *allowed) if t in allowed and (t == token or t not in inp.eos)]
        if fits:
            return replace(verdict, token=fits[0])
    return verdict


def _emits_as_max_len_eos(inp: VerifyInput, i: int, token: int) -> bool:
    """Whether ``token`` at emit position i is the ``eos[0]`` the max_dec_len rule writes there."""
    at_limit = inp.step_idx + i + 1 >= inp.max_dec_len
    return inp.max_len_token == "eos" and bool(inp.eos) and token == inp.eos[0] and at_limit


def scored_rows(contract: Contract, rows: np.ndarray, step_idx: int, eos: Sequence[int]) -> Callable[[int], np.ndarray]:
    """``scores(i)`` for ``decide``: row i of ``rows`` (logits or scores) as float64 scores, eos banned
    per the contract's ``min_tokens`` and ``covering_eos``."""
    banned = ban_eos(as_scores(rows), step_idx, eos, contract.min_tokens, contract.covering_eos)
    return lambda i: banned[i]


__all__ = [
    "BANNED_SCORE",
    "IDLE_PARAMS",
    "SlotParams",
    "ban_eos",
    "decide",
    "drafts_expected",
    "next_seed",
    "row_seed",
    "scored_rows",
    "seed_sum",
]
