"""Speculative verification of ONE request's step (README §5.3).

The verify logic is kept free of the model: the target's opinion on output row
i arrives as a ``RowVerdict`` from a callback, so hand-made tables can drive
every branch, and the decoder only computes the rows the verify actually reads
(which is also what decides whether the step is ambiguous).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from graphcheck.contract import ACCEPT_ALL_EOS_STANDIN
from graphcheck.reference.sampling import candidates, greedy, sample, topp_sample
from graphcheck.step_result import AMBIGUITY_EPS as EPS


@dataclass(frozen=True)
class RowVerdict:
    """What the target says about one output row.

    ``accepts``: the draft tokens this row accepts in phase 1 (the target token
    for GREEDY/TARGET_MATCH, the first ``len`` candidates for TOPP).
    ``token``: what the row emits when it is the phase-2 position.
    Ambiguity is split by use, since an accepted row never reaches its phase-2
    draw: ``accept_ambiguous`` taints every accept decision of the row,
    ``unsure`` only the decisions on those tokens (TOPP: candidates that a
    near-threshold length may or may not include), ``token_ambiguous`` the draw.
    """

    accepts: tuple[int, ...]
    token: int
    accept_ambiguous: bool = False
    token_ambiguous: bool = False
    unsure: tuple[int, ...] = ()
    ranked: tuple[int, ...] = ()  # the row's first token ids in rank order (TOPP: its candidates)
    lengths: tuple[int, ...] = ()  # TOPP: every candidate length a float library may compute, the chosen first

    def unsure_about(self, draft: int) -> bool:
        return self.accept_ambiguous or draft in self.unsure


@dataclass(frozen=True)
class VerifyInput:
    """A request's state going into verify, plus the step's policy switches."""

    drafts: tuple[int, ...]
    step_idx: int
    max_dec_len: int
    eos: tuple[int, ...]
    prefill: bool = False
    reasoning_status: int = 0
    accept_policy: str = "normal"
    override: int | None = None
    verify_window: int = 0  # graphcheck.contract.Contract.verify_window
    max_len_token: str = "eos"  # graphcheck.contract.Contract.max_len_token
    window_second: str = "ranked"  # graphcheck.contract.Contract.window_second
    accept_all_eos: str = "emit"  # graphcheck.contract.Contract.accept_all_eos


@dataclass(frozen=True)
class VerifyResult:
    tokens: tuple[int, ...]
    step_idx: int
    stopped: bool
    ambiguous: bool

    @property
    def accept_num(self) -> int:
        return len(self.tokens)


class _Emitter:
    """emit(): count the token, stop on EOS, at max_dec_len stop (the token becomes eos[0] unless
    ``max_len_token`` is "drawn")."""

    def __init__(self, step_idx: int, max_dec_len: int, eos: Sequence[int], max_len_token: str = "eos"):
        self.step_idx, self.max_dec_len, self.eos = step_idx, max_dec_len, tuple(eos)
        self.keep_drawn = max_len_token == "drawn"
        self.tokens: list[int] = []
        self.stopped = False

    def emit(self, tok: int) -> bool:
        self.step_idx += 1
        if tok in self.eos:
            self.stopped = True
        elif self.step_idx >= self.max_dec_len:
            tok, self.stopped = tok if self.keep_drawn else self.eos[0], True
        self.tokens.append(int(tok))
        return self.stopped


def _phase1_skipped(inp: VerifyInput) -> bool:
    return inp.prefill or inp.accept_policy == "reject_all" or inp.reasoning_status == 1


def verify(inp: VerifyInput, row: Callable[[int], RowVerdict]) -> VerifyResult:
    """Phase 1 (accept drafts while they match) then phase 2 (bonus/correction token).

    ``row(i)`` is called at most once per row, and only for rows the verify reads.
    """
    row = functools.lru_cache(maxsize=None)(row)
    out = _Emitter(inp.step_idx, inp.max_dec_len, inp.eos, inp.max_len_token)
    ambiguous = False
    i = 0
    if not _phase1_skipped(inp):
        while i < len(inp.drafts):
            draft = inp.drafts[i]
            taken = 1
            if inp.override is not None:
                ok = i < inp.override
            elif inp.accept_policy == "accept_all":
                ok = True
            else:
                verdict = row(i)
                ambiguous |= verdict.unsure_about(draft)
                ok = draft in verdict.accepts
                if not ok:
                    holds, unsure = _window_holds(inp, row, i)
                    ambiguous |= unsure
                    if holds:
                        ok, taken = True, inp.verify_window + 1
            if not ok:
                break
            for token in inp.drafts[i : i + taken]:
                if _guarded(inp, token):
                    token = ACCEPT_ALL_EOS_STANDIN
                if out.emit(token):
                    return VerifyResult(tuple(out.tokens), out.step_idx, True, ambiguous)
            i += taken
    verdict = row(i)
    out.emit(verdict.token)
    return VerifyResult(tuple(out.tokens), out.step_idx, out.stopped, ambiguous or verdict.token_ambiguous)


def _guarded(inp: VerifyInput, token: int) -> bool:
    """Whether a draft accepted by the accept_all policy is an eos the contract's guard replaces."""
    replaces = inp.accept_all_eos == "replace" and inp.accept_policy == "accept_all"
    return replaces and inp.override is None and token in inp.eos


def _window_holds(inp: VerifyInput, row: Callable[[int], RowVerdict], i: int) -> tuple[bool, bool]:
    """The TOPP verify window (a contract option): draft i is its row's second candidate and each
    of the next ``verify_window`` drafts (all of them must exist) is its own row's first.

    Returns (holds, unsure): ``unsure`` when another possible candidate length of row i would
    store a second candidate that decides otherwise (``window_second`` ``stored``).
    """
    w = inp.verify_window
    if w <= 0 or i + w >= len(inp.drafts):
        return False, False
    seconds = _second_candidates(row(i), inp.window_second)
    if inp.drafts[i] not in seconds:
        return False, False
    if not all(row(i + j).ranked[:1] == (inp.drafts[i + j],) for j in range(1, w + 1)):
        return False, False
    return seconds[0] == inp.drafts[i], len(set(seconds)) > 1


def _second_candidates(verdict: RowVerdict, how: str) -> tuple[int, ...]:
    """The second candidate the window reads, under each possible candidate length (the chosen one
    first); empty when the row has no second column (C = 1).

    ``stored``: FastDeploy writes a row's candidates only up to its cut and leaves the rest 0, so a
    one-candidate row stores 0 there (a row whose cut is never reached, length 0, is written whole).
    """
    if len(verdict.ranked) < 2:
        return ()
    if how == "ranked":
        return (verdict.ranked[1],)
    lengths = verdict.lengths or (len(verdict.accepts),)
    return tuple(0 if n == 1 else verdict.ranked[1] for n in lengths)


def naive_step(
    token: int,
    step_idx: int,
    max_dec_len: int,
    eos: Sequence[int],
    ambiguous: bool = False,
    max_len_token: str = "eos",
) -> VerifyResult:
    """NAIVE mode: the one sampled token is emitted, nothing is verified."""
    out = _Emitter(step_idx, max_dec_len, eos, max_len_token)
    out.emit(token)
    return VerifyResult(tuple(out.tokens), out.step_idx, out.stopped, ambiguous)


@dataclass(frozen=True)
class VerifyRule:
    """How every row of a step is judged: the config's verify strategy and candidate limit, the contract's float rules.

    ``eps``: the contract's float band; ``free_draw``: the contract leaves the TOPP
    phase-2 draw unspecified, so the drawn token is ambiguous whenever the row
    has more than one candidate to draw from.
    """

    strategy: str  # "greedy", "target_match" or "topp"
    max_candidate_len: int
    eps: float = EPS
    free_draw: bool = False


def judge_row(
    rule: VerifyRule, logits: np.ndarray, temperature: float, top_p: float, top_k: int, row_seed: int
) -> RowVerdict:
    """The RowVerdict of one row of logits (integer: the exact model) or scores under ``rule``."""
    strategy, eps = rule.strategy, rule.eps
    if strategy == "greedy":
        tok, amb = greedy(logits)
        return RowVerdict((tok,), tok, amb, amb)
    if strategy == "target_match":
        tok, amb = sample(logits, temperature, top_p, top_k, row_seed, eps=eps)
        return RowVerdict((tok,), tok, amb, amb)
    if strategy == "topp":
        cands = candidates(logits, temperature, top_p, rule.max_candidate_len, eps=eps)
        tok, amb = topp_sample(cands, top_p, row_seed, eps=eps)
        amb |= rule.free_draw and max(cands.lengths) > 1
        return RowVerdict(
            cands.accepted, tok, token_ambiguous=amb, unsure=cands.unsure, ranked=cands.ids, lengths=cands.lengths
        )
    raise ValueError(f"unknown verify strategy {strategy!r}")


__all__ = ["RowVerdict", "VerifyInput", "VerifyResult", "VerifyRule", "verify", "naive_step", "judge_row"]
