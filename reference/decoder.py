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
from graphcheck.reference.rules import IDLE_PARAMS, SlotParams, decide, next_seed, scored_rows
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
    slot: int | None = None  # the lowest free slot at admission, as an engine assigns it (NAIVE packed rows)


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
        self._naive_reads: dict[str, SlotParams] = {}  # naive_params "packed_row": what each request reads
        self._left: dict[int, SlotParams] = {}  # slot -> what its last occupant left there (packed_row reads)

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
            self._vacate(self._all[request_id])

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
        """Admit FIFO while fewer than max_num_seqs run, each into the lowest free slot."""
        while self._queue and len(self._running) < self.config.max_num_seqs:
            req = self._queue.popleft()
            taken = {r.slot for r in self._running}
            req.slot = min(s for s in range(self.config.max_num_seqs) if s not in taken)
            self._running.append(req)
            self._batch_eos = req.spec.eos_token_ids
        if self.config.naive_mode and self.contract.naive_params == "packed_row":
            self._naive_reads = self._packed_row_reads()

    def _packed_row_reads(self) -> dict[str, SlotParams]:
        """naive_params "packed_row": the request of packed output row r (rows in slot order) reads
        slot r's top_p, top_k and seed as they stand before the step; a free slot holds what its last
        occupant left there (FastDeploy writes them only when a request is inserted), the idle values
        where no request ran yet."""
        holders = {r.slot: r for r in self._running}
        reads: dict[str, SlotParams] = {}
        for row, req in enumerate(sorted(self._running, key=lambda r: r.slot if r.slot is not None else -1)):
            holder = holders.get(row)
            reads[req.spec.request_id] = (
                self._left.get(row, IDLE_PARAMS)
                if holder is None
                else SlotParams(holder.spec.top_p, self.contract.top_k_of(holder.spec.top_k), holder.infer_seed)
            )
        return reads

    def _retire(self) -> None:
        for req in self._running:
            if req.stopped:
                self._vacate(req)
        self._running = [r for r in self._running if not r.stopped]

    def _vacate(self, req: _Request) -> None:
        """``req`` leaves its slot, which keeps its top_p, top_k and seed as they stand (packed_row reads)."""
        if req.slot is not None:
            top_k = self.contract.top_k_of(req.spec.top_k)
            self._left[req.slot] = SlotParams(req.spec.top_p, top_k, req.infer_seed)
        _release(req)

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
            window_second=self.contract.window_second,
            accept_all_eos=self.contract.accept_all_eos,
        )

    def _decide(
        self, req: _Request, t: int, override: int | None, rows: np.ndarray, follow: Sequence[int] | None = None
    ) -> VerifyResult:
        """The step's verify (or NAIVE sample) of ``req`` on its target rows (logits or scores);
        ``follow``: the engine's emitted tokens (``rules.decide``)."""
        inp = self._verify_input(req, t, override)
        scores = scored_rows(self.contract, rows, req.step_idx, inp.eos)
        read = self._naive_reads.get(req.spec.request_id)
        return decide(self.config, self.contract, req.spec, inp, req.infer_seed, scores, follow, read)

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
        self._emitted: dict[str, int] = {}  # request id -> tokens emitted in the last step
        self._fed: dict[str, int] = {}  # request id -> output rows the last step computed
        self._drafted_from: dict[str, int] = {}  # request id -> draft_written before the last proposal

    # -- one step -----------------------------------------------------
    def step(self, t: int, overrides: Mapping[str, int]) -> StepResult:
        """Retire the requests that stopped in the last step, admit FIFO, run every running request.

        Retiring at the start of the step (not the end) lets ``adopt`` still change a stop.
        """
        self._retire()
        self._admit()
        outcomes = [self._run(req, t, overrides.get(req.spec.request_id)) for req in self._running]
        return StepResult(t, tuple(sorted(outcomes, key=lambda o: o.request_id)))

    def _run(self, req: _Request, t: int, override: int | None) -> RequestStep:
        rows = self._target_logits(req)
        res = self._decide(req, t, override, rows)
        self._commit(req, res)
        rid = req.spec.request_id
        self._emitted[rid], self._fed[rid], self._drafted_from[rid] = len(res.tokens), len(rows), req.draft_written
        req.drafts = () if self.config.naive_mode else self._propose(req)
        return self._outcome(req, res)

    def adopt(self, outcome: RequestStep) -> bool:
        """Take an engine's outcome of the last step for a request whose check was ambiguous, then
        propose from it; False (nothing changed) when the outcome could not have come from this step.

        The caches keep what the step fed (the drafts), as the engine's do: only the emitted tokens,
        ``step_idx`` and the stop change, and the drafter catches up from where it stood before.
        """
        req = self._all.get(outcome.request_id)
        if req is None or req.target is None or not self._adoptable(outcome):
            return False
        adopt_outcome(self._all, self._emitted, outcome)
        req.draft_written = self._drafted_from.get(outcome.request_id, req.draft_written)
        req.drafts = () if self.config.naive_mode else self._propose(req)
        return True

    def _adoptable(self, outcome: RequestStep) -> bool:
        """1 to (rows computed) tokens, each in the vocabulary: what a step of this request can emit."""
        fed = self._fed.get(outcome.request_id, 0)
        tokens = outcome.accept_tokens
        return 1 <= len(tokens) <= fed and all(0 <= t < self.config.vocab_size for t in tokens)

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
    """A request that left keeps its tokens but not its caches (long scripts stay small), nor its slot."""
    req.target = req.draft = None
    req.slot = None


def adopt_outcome(requests: dict[str, _Request], emitted: dict[str, int], outcome: RequestStep) -> _Request | None:
    """Replace the tokens a request emitted in the last step (``emitted``: request id -> how many)
    with the engine's ``outcome``, and take its step_idx and stop; the request, or None if unknown."""
    req = requests.get(outcome.request_id)
    if req is None:
        return None
    del req.tokens[len(req.tokens) - emitted.get(outcome.request_id, 0) :]
    req.tokens.extend(outcome.accept_tokens)
    emitted[outcome.request_id] = len(outcome.accept_tokens)
    req.step_idx, req.stopped = outcome.step_idx, outcome.stopped
    return req


def decode(scenario: Scenario, weights: Weights | None = None) -> list[StepResult]:
    """Decode a whole scenario with the reference (its configuration's contract); one StepResult per step."""
    decoder = ReferenceDecoder(scenario.config, weights)
    return run_script(decoder, scenario)


__all__ = ["ReferenceDecoder", "ScriptDecoder", "adopt_outcome", "decode", "reasoning_status_at"]
