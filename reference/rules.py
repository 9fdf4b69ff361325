"""The decoding rules downstream of the model, under a contract (``graphcheck.contract``).

Both oracles use these: the exact reference (which also computes the model)
and the model-agnostic oracle (which takes the model's scores from the engine).
Given one request's state going into a step and a way to read the target's
scores at output row i, ``decide`` returns what the step must emit; the other
functions are the contract's seed arithmetic, the eos ban and the drafter's
skip rule.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Sequence

import numpy as np

from graphcheck.contract import Contract
from graphcheck.reference.rng import add_mod
from graphcheck.reference.sampling import as_scores, sample
from graphcheck.reference.verify import RowVerdict, VerifyInput, VerifyResult, judge_row, naive_step, verify
from graphcheck.scenario import SEED_MODULUS, EngineConfig, RequestSpec

_INT64_SPAN = 1 << 64


def _wrap_int64(value: int) -> int:
    value %= _INT64_SPAN
    return value - _INT64_SPAN if value >= 1 << 63 else value


def row_seed(contract: Contract, infer_seed: int, row: int) -> int:
    """The seed of output row ``row``: ``(infer_seed + 4 row) mod M``.

    ``int64_wrap`` (FastDeploy): the sum wraps in int64 and C's ``%`` keeps the
    dividend's sign, so near M the result is negative.
    """
    if contract.row_seed == "modular":
        return int(add_mod(infer_seed, 4 * row))
    total = _wrap_int64(infer_seed + 4 * row)
    remainder = abs(total) % SEED_MODULUS
    return -remainder if total < 0 else remainder


def next_seed(contract: Contract, config: EngineConfig, infer_seed: int) -> int:
    """``infer_seed`` after a step the request ran."""
    if not contract.advances_seed(config.verify_strategy, config.naive_mode):
        return infer_seed
    return int(add_mod(infer_seed, config.seed_increment))


def ban_eos(scores: np.ndarray, first_row_step: int, eos: Sequence[int], min_tokens: int) -> np.ndarray:
    """Scores with every eos id at minus infinity in rows j where ``first_row_step + j < min_tokens``.

    ``scores`` are float64 rows (``as_scores``); the input is not changed. The ban
    never empties a row: when the eos ids cover the whole vocabulary nothing is banned.
    """
    rows = int(scores.shape[0])
    banned_rows = max(0, min(rows, min_tokens - first_row_step))
    ids = sorted({int(t) for t in eos if 0 <= int(t) < scores.shape[1]})
    if banned_rows == 0 or not ids or len(ids) >= scores.shape[1]:
        return scores
    out = np.array(scores, dtype=np.float64, copy=True)
    out[np.ix_(np.arange(banned_rows), ids)] = -np.inf
    return out


def drafts_expected(config: EngineConfig, step_idx: int, stopped: bool, max_dec_len: int) -> int:
    """How many drafts the proposer must leave after a step: S, or 0 when it skips (stopped,
    NAIVE, or ``step_idx + S >= max_dec_len``)."""
    s = config.num_model_steps
    if config.naive_mode or stopped or step_idx + s >= max_dec_len:
        return 0
    return s


def decide(
    config: EngineConfig,
    contract: Contract,
    spec: RequestSpec,
    inp: VerifyInput,
    infer_seed: int,
    scores: Callable[[int], np.ndarray],
    follow: Sequence[int] | None = None,
) -> VerifyResult:
    """One request's step: verify (speculative) or the NAIVE sample, on the scores of its rows.

    ``scores(i)`` is output row i's float64 scores, the eos ban already applied;
    ``inp`` carries the request's state and the step's policy switches
    (``inp.eos`` is the eos list the contract says the request stops on).
    ``follow``: the tokens an engine emitted this step. Where the contract leaves
    the TOPP draw free, the phase-2 token of row i is ``follow[i]`` when that is
    one of the row's candidates (else the row's own draw, which then differs);
    without ``follow`` such a draw is ambiguous.
    """
    eps = contract.sampling_eps
    free = contract.topp_draw == "unspecified"
    if config.naive_mode:
        seed = row_seed(contract, infer_seed, 0)
        tok, amb = sample(scores(0), spec.temperature, spec.top_p, contract.top_k_of(spec.top_k), seed, eps=eps)
        return naive_step(tok, inp.step_idx, inp.max_dec_len, inp.eos, amb, inp.max_len_token)

    def row(i: int) -> RowVerdict:
        verdict = judge_row(
            config.verify_strategy,
            scores(i),
            spec.temperature,
            spec.top_p,
            contract.top_k_of(spec.top_k),
            row_seed(contract, infer_seed, i),
            config.max_candidate_len,
            eps=eps,
            free_draw=free and follow is None,
        )
        if free and follow is not None and config.verify_strategy == "topp":
            return _follow_draw(verdict, follow, i)
        return verdict

    return verify(inp, row)


def _follow_draw(verdict: RowVerdict, follow: Sequence[int], i: int) -> RowVerdict:
    """The verdict with the engine's phase-2 token when the free draw allows it: one of the
    row's accepted candidates, or its first candidate when none is accepted."""
    if i >= len(follow):
        return verdict
    allowed = verdict.accepts or verdict.ranked[:1]
    token = int(follow[i])
    return replace(verdict, token=token) if token in allowed else verdict


def scored_rows(contract: Contract, rows: np.ndarray, step_idx: int, eos: Sequence[int]) -> Callable[[int], np.ndarray]:
    """``scores(i)`` for ``decide``: row i of ``rows`` (logits or scores) as float64 scores, eos banned
    per the contract's ``min_tokens``."""
    banned = ban_eos(as_scores(rows), step_idx, eos, contract.min_tokens)
    return lambda i: banned[i]


__all__ = ["ban_eos", "decide", "drafts_expected", "next_seed", "row_seed", "scored_rows"]
