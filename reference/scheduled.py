"""The engine-scheduled oracle: an engine that schedules for itself, checked for conservation.

A real serving engine decides on its own who runs in a step and on how many
tokens (token budgets, chunked prefill, requests waiting for cache blocks).
graphcheck cannot predict that schedule, so this oracle takes it from the
engine (``graphcheck.schedule.Schedule``) and checks what any correct
schedule conserves, request by request:

* it runs only between its arrival and its abort or stop, never after either,
  but for the batches an async engine had in flight by then
  (``Schedule.pipeline_depth``): a run scheduled before the engine knew of a
  stop produces nothing, and one launched before an abort is checked as any
  run (the abort takes effect once those batches are reported);
* its query tokens continue where the last chunk ended (``first_position``
  equals the tokens it has processed) and never go past what it has: the
  prompt, then each generated token once; an engine may also start a request
  over from position 0 (preempted, its cache dropped, re-prefilled with the
  prompt and every token generated so far);
* it produces a token exactly in the steps whose chunk reaches the end of
  what it has (the prefill chunks add up to the prompt before the first
  token), and then exactly one, or, with speculative decoding, the drafts the
  step verified that the target accepts and one token more; drafts are fed
  only after the request's last token, at most ``num_speculative_tokens`` of
  them, and only the accepted ones stay in its cache.

Each produced token is recomputed from the engine's own scores (its model
report) under the contract, as the model-agnostic oracle does for the
built-in schedule: greedy or sampled, eos per request, ``max_dec_len``. What
the step must report follows: the token, ``step_idx``, ``seq_len`` (tokens in
the request's cache after the step) and the stop flag; ``infer_seed`` stays
the request's seed when the contract does not model seeds.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from graphcheck.contract import Contract
from graphcheck.model_report import ModelStep
from graphcheck.reference.decoder import ScriptDecoder, _Request
from graphcheck.reference.oracle import OracleStep, RuleBreak, adopt_outcome
from graphcheck.scenario import EngineConfig
from graphcheck.schedule import Schedule, ScheduledRun
from graphcheck.step_result import RequestStep, StepResult


class EngineScheduledOracle(ScriptDecoder):
    """submit / abort like any decoder; ``step(t, overrides, reports, engine_result, schedule)`` -> OracleStep."""

    def __init__(self, config: EngineConfig, contract: Contract | None = None):
        super().__init__(config, contract)
        self._processed: dict[str, int] = {}  # request id -> tokens fed to the model so far
        self._left: dict[str, str] = {}  # request id -> "aborted" / "stopped"
        self._left_at: dict[str, int] = {}  # request id -> the batch it stopped in
        self._emitted: dict[str, int] = {}
        self._depth = 0  # the engine's pipeline depth, from its schedules
        self._seen = 0  # batches seen (non-empty schedules)
        self._aborting: dict[str, int] = {}  # request id -> batches until an abort takes effect

    def abort(self, request_id: str) -> None:
        if request_id not in self._all or request_id in self._left:
            super().abort(request_id)
            return
        if self._depth:  # batches launched before the abort are still to be reported
            self._aborting[request_id] = self._depth
            return
        self._leave(request_id, "aborted")
        super().abort(request_id)

    def _leave(self, request_id: str, why: str) -> None:
        self._left[request_id] = why
        self._left_at[request_id] = self._seen

    def step(
        self,
        t: int,
        overrides: Mapping[str, int],
        reports: Mapping[str, ModelStep],
        engine: StepResult,
        schedule: Schedule | None = None,
    ) -> OracleStep:
        breaks: list[RuleBreak] = []
        if schedule is None:
            breaks.append(RuleBreak("shape", "", "schedule", "a Schedule every step", None, _NO_SCHEDULE))
            return OracleStep(StepResult(t, ()), tuple(sorted(engine.by_id())), tuple(breaks))
        self._depth = schedule.pipeline_depth
        if schedule.runs:  # a batch (an idle call of a pipelined engine reports none)
            self._seen += 1
        observed = engine.by_id()
        outcomes: list[RequestStep] = []
        ghosts = {r.request_id for r in schedule.runs if self._in_flight_after_stop(r.request_id)}
        for run in schedule.runs:
            if run.request_id in ghosts:
                continue  # scheduled before the engine knew it stopped: it produces nothing (the diff sees any token)
            req = self._admissible(run, breaks)
            if req is None:
                continue
            outcome = self._run(req, t, run, reports.get(run.request_id), observed.get(run.request_id), breaks)
            if outcome is not None:
                outcomes.append(outcome)
        if schedule.runs:
            self._take_effect()
        running = tuple(sorted(r.request_id for r in schedule.runs if r.request_id not in ghosts))
        return OracleStep(StepResult(t, tuple(sorted(outcomes, key=lambda o: o.request_id))), running, tuple(breaks))

    def adopt(self, outcome: RequestStep) -> None:
        """Take the engine's outcome of the last step for a request whose check was ambiguous."""
        req = adopt_outcome(self._all, self._emitted, outcome)
        if req is None:
            return
        if req.stopped:
            self._leave(outcome.request_id, "stopped")
        else:
            self._left.pop(outcome.request_id, None)

    # -- one request ----------------------------------------------------
    def _admissible(self, run: ScheduledRun, breaks: list[RuleBreak]) -> _Request | None:
        """The request ``run`` is about, when it may run now; else None and a RuleBreak."""
        rid = run.request_id
        req = self._all.get(rid)
        if req is None:
            breaks.append(RuleBreak("value", rid, "schedule", "a submitted request", rid, "ran before it arrived"))
            return None
        left = self._left.get(rid)
        if left is not None:
            breaks.append(RuleBreak("value", rid, "schedule", f"not to run once {left}", "ran", f"ran after it {left}"))
            return None
        if req in self._queue:
            self._queue.remove(req)
        if req not in self._running:
            self._running.append(req)
        return req

    def _run(
        self,
        req: _Request,
        t: int,
        run: ScheduledRun,
        report: ModelStep | None,
        seen: RequestStep | None,
        breaks: list[RuleBreak],
    ) -> RequestStep | None:
        rid = run.request_id
        done = self._processed.get(rid, 0)
        have = len(req.tokens)  # prompt + generated: what the request can feed
        fed = run.query_tokens - len(run.drafts)  # its own tokens; the drafts come after them
        if run.first_position == 0 and done > 0:  # preempted and re-prefilled from scratch (its cache dropped)
            done = 0
        if run.first_position != done:
            breaks.append(RuleBreak("shape", rid, "schedule.first_position", done, run.first_position, _CONTIGUOUS))
        if fed < 1 or done + fed > have:
            breaks.append(
                RuleBreak("shape", rid, "schedule.query_tokens", f"1..{have - done}", run.query_tokens, _WITHIN)
            )
            return None
        self._processed[rid] = done + fed
        must_produce = done + fed == have
        if run.produces != must_produce:
            breaks.append(RuleBreak("value", rid, "schedule.produces", must_produce, run.produces, _PRODUCES))
        if run.drafts and not self._drafts_fit(rid, run, must_produce, breaks):
            return None
        self._emitted[rid] = 0
        if not must_produce:
            return self._outcome_of(req, (), req.step_idx, req.stopped, False, seen)
        rows = self._rows(req, report, 1 + len(run.drafts), breaks)
        if rows is None or seen is None:
            return None
        req.drafts, req.prefilled = run.drafts, bool(run.drafts)
        res = self._decide(req, t, None, rows, follow=seen.accept_tokens)
        req.tokens.extend(res.tokens)
        req.step_idx, req.stopped = res.step_idx, res.stopped
        self._processed[rid] = len(req.tokens) - 1  # the accepted drafts stay in its cache, the rest do not
        self._emitted[rid] = len(res.tokens)
        if req.stopped:
            self._leave(rid, "stopped")
            self._running.remove(req)
        return self._outcome_of(req, res.tokens, res.step_idx, res.stopped, res.ambiguous, seen)

    def _drafts_fit(self, rid: str, run: ScheduledRun, producing: bool, breaks: list[RuleBreak]) -> bool:
        """Drafts follow a request's last token (a step that produces), at most k, ids in the vocabulary."""
        k, vocab = self.config.num_speculative_tokens, self.config.vocab_size
        valid = all(0 <= d < vocab for d in run.drafts)
        if producing and len(run.drafts) <= k and valid:
            return True
        want = f"at most {k} draft ids in [0, {vocab}), after the request's last token"
        breaks.append(RuleBreak("token", rid, "schedule.drafts", want, run.drafts, _DRAFTS))
        return False

    def _in_flight_after_stop(self, rid: str) -> bool:
        """Whether ``rid`` stopped within the last ``pipeline_depth`` batches (a run of it now was
        scheduled before the engine knew)."""
        return self._left.get(rid) == "stopped" and self._seen - self._left_at[rid] <= self._depth

    def _take_effect(self) -> None:
        """Aborts whose in-flight batches have all been reported now take effect."""
        for rid in list(self._aborting):
            self._aborting[rid] -= 1
            if self._aborting[rid] <= 0:
                del self._aborting[rid]
                if rid not in self._left:
                    self._leave(rid, "aborted")
                super().abort(rid)

    def _outcome_of(
        self,
        req: _Request,
        tokens: tuple[int, ...],
        step_idx: int,
        stopped: bool,
        ambiguous: bool,
        seen: RequestStep | None,
    ) -> RequestStep:
        """What the engine must report; its proposals for the next step are its own (a drafter the oracle
        cannot run), checked for form when the next step verifies them."""
        rid = req.spec.request_id
        drafts = tuple(seen.draft_tokens) if seen is not None and not stopped else ()
        return RequestStep(
            rid, tuple(tokens), drafts, req.infer_seed, step_idx, self._processed[rid], stopped, ambiguous
        )

    def _rows(self, req: _Request, report: ModelStep | None, need: int, breaks: list[RuleBreak]) -> np.ndarray | None:
        """The ``need`` score rows the step verifies (one per draft, and one more)."""
        rid, vocab = req.spec.request_id, self.config.vocab_size
        if report is None:
            breaks.append(RuleBreak("shape", rid, "model scores", (need, vocab), None, "no model report for the token"))
            return None
        try:
            rows = np.asarray(report.scores, dtype=np.float64)
        except (TypeError, ValueError):
            rows = np.zeros((0, 0))
        if rows.ndim != 2 or rows.shape[0] < need or rows.shape[1] != vocab:
            got = tuple(rows.shape)
            breaks.append(RuleBreak("shape", rid, "model scores", (need, vocab), got, "the rows the step verifies"))
            return None
        if np.isnan(rows[:need]).any():
            breaks.append(RuleBreak("value", rid, "model scores", "no NaN", "NaN", "the model produced NaN scores"))
            return None
        return rows[:need]


_NO_SCHEDULE = "an engine that schedules for itself reports StepReport.schedule (graphcheck.schedule)"
_CONTIGUOUS = "a chunk starts where the request's last chunk ended (its tokens already in the cache)"
_WITHIN = "a chunk feeds at least one token and never past the prompt and the tokens generated so far"
_PRODUCES = "a request samples a token exactly when its chunk reaches the end of what it has to process"
_DRAFTS = "a step verifies at most num_speculative_tokens drafts, fed after the request's last token"

__all__ = ["EngineScheduledOracle"]
