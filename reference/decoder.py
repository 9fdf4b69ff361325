"""The reference decoder: README §5 step by step, one request at a time.

It keeps a FIFO waiting queue and a list of running requests (no slots, no
padding, no batching: slots are an engine concern and must not change any
token). Each running request carries its committed tokens, its seed, the
drafts proposed last step and its own target and draft caches.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from graphcheck.contract import Contract, contract_named
from graphcheck.driver import run_script
from graphcheck.reference.model import Cache, draft_forward, draft_proposal, logits_of, target_forward
from graphcheck.reference.rules import decide, next_seed, scored_rows
from graphcheck.reference.verify import VerifyInput, VerifyResult
from graphcheck.reference.weights import Weights, make_weights
from graphcheck.scenario import EngineConfig, RequestSpec, Scenario
from graphcheck.step_result import RequestStep, StepResult


def reasoning_status_at(spec: RequestSpec, t: int) -> int:
    """The status of the latest change with step <= t (a later script entry wins a tie); 0 if none."""
    status, best = 0, -1
    for change in spec.reasoning:
        if best <= change.step <= t:
            status, best = change.status, change.step
    return status


@dataclass
class _Request:
    """Per-request decode state (the reference's whole 'slot')."""

    spec: RequestSpec
    tokens: list[int]
    infer_seed: int
    target: Cache | None = None  # allocated at prefill, dropped when the request leaves
    draft: Cache | None = None
    step_idx: int = 0
    prefilled: bool = False
    drafts: tuple[int, ...] = ()
    draft_written: int = 0  # draft-cache positions 0..draft_written-1 hold committed entries
    stopped: bool = False


class ScriptDecoder:
    """The script side every oracle shares: FIFO admission, aborts, retirement, the eos list.

    Subclasses implement ``step``. ``contract`` defaults to the configuration's
    (``EngineConfig.contract``).
    """

    def __init__(self, config: EngineConfig, contract: Contract | None = None):
        self.config = config
        self.contract = contract if contract is not None else contract_named(config.contract)
        self._all: dict[str, _Request] = {}
        self._queue: deque[_Request] = deque()
        self._running: list[_Request] = []
        self._batch_eos: tuple[int, ...] = ()  # eos_scope "batch": the list of the last request admitted

    # -- script events ------------------------------------------------
    def submit(self, spec: RequestSpec) -> None:
        """Join the waiting queue; admission happens at the start of the next step()."""
        if spec.request_id in self._all:
            raise ValueError(f"request {spec.request_id!r} was already submitted")
        req = _Request(spec, list(spec.prompt), spec.seed)
        self._all[spec.request_id] = req
        self._queue.append(req)

    def abort(self, request_id: str) -> None:
        """Drop a queued or running request; unknown or finished ids are ignored."""
        self._queue = deque(r for r in self._queue if r.spec.request_id != request_id)
        self._running = [r for r in self._running if r.spec.request_id != request_id]
        if request_id in self._all:
            _release(self._all[request_id])

    # -- inspection ---------------------------------------------------
    def tokens(self, request_id: str) -> tuple[int, ...]:
        """The request's committed sequence: prompt, then every generated token."""
        return tuple(self._all[request_id].tokens)

    def generated(self, request_id: str) -> tuple[int, ...]:
        req = self._all[request_id]
        return tuple(req.tokens[len(req.spec.prompt) :])

    def running_ids(self) -> tuple[str, ...]:
        return tuple(r.spec.request_id for r in self._running)

    def queued_ids(self) -> tuple[str, ...]:
        return tuple(r.spec.request_id for r in self._queue)

    # -- shared step parts ----------------------------------------------
    def _admit(self) -> None:
        """Admit FIFO while fewer than max_num_seqs run."""
        while self._queue and len(self._running) < self.config.max_num_seqs:
            req = self._queue.popleft()
            self._running.append(req)
            self._batch_eos = req.spec.eos_token_ids

    def _retire(self) -> None:
        for req in self._running:
            if req.stopped:
                _release(req)
        self._running = [r for r in self._running if not r.stopped]

    def _eos_of(self, req: _Request) -> tuple[int, ...]:
        """The eos list the request stops on: its own, or the batch's (contract eos_scope)."""
        if self.contract.eos_scope == "batch" and self._batch_eos:
            return self._batch_eos
        return req.spec.eos_token_ids

    def _verify_input(self, req: _Request, t: int, override: int | None) -> VerifyInput:
        return VerifyInput(
            drafts=req.drafts if req.prefilled else (),
            step_idx=req.step_idx,
            max_dec_len=req.spec.max_dec_len,
            eos=self._eos_of(req),
            prefill=not req.prefilled,
            reasoning_status=reasoning_status_at(req.spec, t),
            accept_policy=self.config.accept_policy,
            override=override,
            verify_window=self.contract.verify_window,
            max_len_token=self.contract.max_len_token,
        )

    def _decide(
        self, req: _Request, t: int, override: int | None, rows: np.ndarray, follow: Sequence[int] | None = None
    ) -> VerifyResult:
        """The step's verify (or NAIVE sample) of ``req`` on its target rows (logits or scores);
        ``follow``: the engine's emitted tokens (``rules.decide``)."""
        inp = self._verify_input(req, t, override)
        scores = scored_rows(self.contract, rows, req.step_idx, inp.eos)
        return decide(self.config, self.contract, req.spec, inp, req.infer_seed, scores, follow)

    def _commit(self, req: _Request, res: VerifyResult) -> None:
        req.tokens.extend(res.tokens)
        req.step_idx, req.stopped, req.prefilled = res.step_idx, res.stopped, True
        req.infer_seed = next_seed(self.contract, self.config, req.infer_seed)

    def _outcome(self, req: _Request, res: VerifyResult) -> RequestStep:
        return RequestStep(
            request_id=req.spec.request_id,
            accept_tokens=res.tokens,
            draft_tokens=req.drafts,
            infer_seed=req.infer_seed,
            step_idx=req.step_idx,
            seq_len=len(req.tokens) - 1,
            stopped=req.stopped,
            ambiguous=res.ambiguous,
        )


class ReferenceDecoder(ScriptDecoder):
    """submit / abort / step(t, overrides) -> StepResult, per reference/README.md: the exact oracle,
    which computes the integer model too."""

    def __init__(self, config: EngineConfig, weights: Weights | None = None, contract: Contract | None = None):
        super().__init__(config, contract)
        self.weights = weights if weights is not None else make_weights(config)

    # -- one step -----------------------------------------------------
    def step(self, t: int, overrides: Mapping[str, int]) -> StepResult:
        """Admit FIFO, run every running request, retire the ones that stopped."""
        self._admit()
        outcomes = [self._run(req, t, overrides.get(req.spec.request_id)) for req in self._running]
        self._retire()
        return StepResult(t, tuple(sorted(outcomes, key=lambda o: o.request_id)))

    def _run(self, req: _Request, t: int, override: int | None) -> RequestStep:
        res = self._decide(req, t, override, self._target_logits(req))
        self._commit(req, res)
        req.drafts = () if self.config.naive_mode else self._propose(req)
        return self._outcome(req, res)

    def _target_logits(self, req: _Request) -> np.ndarray:
        """Run the target over this step's input; one logits row per output row."""
        if not req.prefilled:
            # Room for every position the request can reach: prompt, output, one step of drafts.
            rows = len(req.tokens) + req.spec.max_dec_len + self.config.tokens_per_request + 1
            req.target = Cache(self.config.hidden_size, rows)
            req.draft = Cache(self.config.hidden_size, rows)
            hidden = target_forward(self.weights, req.target, np.array(req.tokens), 0)
            return logits_of(self.weights, hidden[-1:])
        assert req.target is not None, "a running request keeps its caches"
        inputs = np.array([req.tokens[-1], *req.drafts], dtype=np.int64)
        hidden = target_forward(self.weights, req.target, inputs, len(req.tokens) - 1)
        return logits_of(self.weights, hidden)

    def _propose(self, req: _Request) -> tuple[int, ...]:
        """The MTP drafter (README §5.5): catch the draft cache up, then S substeps."""
        s_count = self.config.num_model_steps
        if req.stopped or req.step_idx + s_count >= req.spec.max_dec_len:
            return ()
        assert req.target is not None and req.draft is not None
        w, n = self.weights, len(req.tokens) - 1
        start = req.draft_written
        toks = np.array(req.tokens[start + 1 : n + 1], dtype=np.int64)
        hd = draft_forward(w, req.draft, toks, req.target.hidden[start:n], start)
        req.draft_written = n
        proposals = [draft_proposal(w, hd[-1])]
        for s in range(1, s_count):
            hd = draft_forward(w, req.draft, np.array([proposals[-1]]), hd[-1:], n - 1 + s)
            proposals.append(draft_proposal(w, hd[-1]))
        return tuple(proposals)


def _release(req: _Request) -> None:
    """A request that left keeps its tokens but not its caches (long scripts stay small)."""
    req.target = req.draft = None


def decode(scenario: Scenario, weights: Weights | None = None) -> list[StepResult]:
    """Decode a whole scenario with the reference (its configuration's contract); one StepResult per step."""
    decoder = ReferenceDecoder(scenario.config, weights)
    return run_script(decoder, scenario)


__all__ = ["ReferenceDecoder", "ScriptDecoder", "decode", "reasoning_status_at"]
