"""The model-agnostic oracle: everything downstream of an engine's own model, recomputed.

When the reference cannot compute the engine's model (a real transformer in
bfloat16), it still owns every rule that follows the model. One oracle
follows ONE engine: after the engine's step it takes what the engine's model
produced (``graphcheck.model_report.ModelStep``: the target's scores at each
verified row, and the drafts the engine proposed) and recomputes, from those
and from the scenario alone, what the step must emit under the contract:
the verify result (every strategy and accept policy, forced overrides
included), the seed stream, ``step_idx``, ``seq_len``, the stop flags (eos,
max_dec_len), and which requests run (FIFO admission, aborts, retirement).
The harness compares that with the engine's StepResult exactly.

What the oracle cannot know it takes from the engine and checks only for
form: the draft tokens (their count must follow the drafter's skip rule) and,
under a contract that leaves the TOPP draw free, the drawn token (it must be
one of the row's candidates).

Ambiguity works as in the exact reference (a float decision within the
contract's band), with one difference: after an ambiguous mismatch the oracle
adopts the engine's outcome (``adopt``) and keeps checking the request from
there, since it always recomputes from the engine's own state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from graphcheck.contract import Contract
from graphcheck.model_report import ModelStep
from graphcheck.reference.decoder import ScriptDecoder, _Request, adopt_outcome
from graphcheck.reference.rules import drafts_expected
from graphcheck.scenario import EngineConfig
from graphcheck.step_result import RequestStep, StepResult


@dataclass(frozen=True)
class RuleBreak:
    """Something the engine reported that no contract allows, found before any comparison.

    ``kind`` is a divergence kind (graphcheck.check.diff.KINDS); ``tensor`` what it is about.
    """

    kind: str
    request_id: str
    tensor: str
    expected: object
    actual: object
    detail: str = ""


@dataclass(frozen=True)
class OracleStep:
    """The oracle's verdict on one step of its engine.

    ``result``: what the engine must have reported, for the requests it ran and
    the oracle could recompute; ``running``: the requests that must have run;
    ``breaks``: reports no contract allows.
    """

    result: StepResult
    running: tuple[str, ...]
    breaks: tuple[RuleBreak, ...] = ()


class ModelAgnosticOracle(ScriptDecoder):
    """submit / abort like any decoder; ``step(t, overrides, reports, engine_result)`` -> OracleStep."""

    def __init__(self, config: EngineConfig, contract: Contract | None = None):
        super().__init__(config, contract)
        self._emitted: dict[str, int] = {}  # request id -> tokens the oracle appended in the last step

    def step(
        self, t: int, overrides: Mapping[str, int], reports: Mapping[str, ModelStep], engine: StepResult
    ) -> OracleStep:
        # Retiring at the start of the step (not the end) lets ``adopt`` still change a stop.
        self._retire()
        self._admit()
        observed = engine.by_id()
        outcomes: list[RequestStep] = []
        breaks: list[RuleBreak] = []
        for req in self._running:
            rid = req.spec.request_id
            report, seen = reports.get(rid), observed.get(rid)
            if report is None or seen is None:
                continue  # the running-set comparison reports it
            rows = self._rows(req, report, breaks)
            if rows is None:
                continue
            outcomes.append(self._run(req, t, overrides.get(rid), rows, seen, breaks))
        running = tuple(sorted(r.spec.request_id for r in self._running))
        return OracleStep(StepResult(t, tuple(sorted(outcomes, key=lambda o: o.request_id))), running, tuple(breaks))

    def adopt(self, outcome: RequestStep) -> None:
        """Take the engine's outcome of the last step for a request whose check was ambiguous."""
        req = adopt_outcome(self._all, self._emitted, outcome)
        if req is not None:
            req.drafts = tuple(outcome.draft_tokens)

    # -- one request ----------------------------------------------------
    def _rows_needed(self, req: _Request) -> int:
        if self.config.naive_mode or not req.prefilled:
            return 1
        return 1 + len(req.drafts)

    def _rows(self, req: _Request, report: ModelStep, breaks: list[RuleBreak]) -> np.ndarray | None:
        """The report's score rows the step verifies, or None (and a RuleBreak) when unusable."""
        rid, need = req.spec.request_id, self._rows_needed(req)
        try:
            rows = np.asarray(report.scores, dtype=np.float64)
        except (TypeError, ValueError):
            rows = np.zeros((0, 0))
        vocab = self.config.vocab_size
        if rows.ndim != 2 or rows.shape[0] < need or rows.shape[1] != vocab:
            got = tuple(rows.shape)
            breaks.append(RuleBreak("shape", rid, "model scores", (need, vocab), got, "score rows the step verifies"))
            return None
        rows = rows[:need]
        if np.isnan(rows).any():
            breaks.append(RuleBreak("value", rid, "model scores", "no NaN", "NaN", "the model produced NaN scores"))
            return None
        return rows

    def _run(
        self,
        req: _Request,
        t: int,
        override: int | None,
        rows: np.ndarray,
        seen: RequestStep,
        breaks: list[RuleBreak],
    ) -> RequestStep:
        res = self._decide(req, t, override, rows, follow=seen.accept_tokens)
        self._commit(req, res)
        self._emitted[req.spec.request_id] = len(res.tokens)
        req.drafts = self._drafts(req, seen, breaks)
        return self._outcome(req, res)

    def _drafts(self, req: _Request, seen: RequestStep, breaks: list[RuleBreak]) -> tuple[int, ...]:
        """The engine's proposals, checked for form: the skip rule's count, ids in the vocabulary."""
        want = drafts_expected(self.config, req.step_idx, req.stopped, req.spec.max_dec_len)
        drafts = tuple(seen.draft_tokens)
        valid = all(0 <= d < self.config.vocab_size for d in drafts)
        if len(drafts) != want or not valid:
            breaks.append(
                RuleBreak(
                    "token",
                    req.spec.request_id,
                    "draft_tokens",
                    f"{want} draft token ids in [0, {self.config.vocab_size})",
                    drafts,
                    "the drafter proposes S tokens unless the request stopped or step_idx + S >= max_dec_len",
                )
            )
        return drafts


__all__ = ["ModelAgnosticOracle", "OracleStep", "RuleBreak", "adopt_outcome"]
