"""The engine-scheduled oracle (``graphcheck.reference.scheduled``): conservation of an engine's own
schedule, and what a pipelined (async, double-buffered) engine may do with requests that left."""

from __future__ import annotations

import numpy as np

from graphcheck.contract import contract_named
from graphcheck.model_report import ModelStep
from graphcheck.reference.scheduled import EngineScheduledOracle
from graphcheck.scenario import EngineConfig, RequestSpec
from graphcheck.schedule import Schedule, ScheduledRun
from graphcheck.step_result import RequestStep, StepResult

CONFIG = EngineConfig(max_num_seqs=4, naive_mode=True, model="float32", contract="hf-cb")
VOCAB = CONFIG.vocab_size


def _oracle(*specs: RequestSpec) -> EngineScheduledOracle:
    oracle = EngineScheduledOracle(CONFIG, contract_named("hf-cb"))
    for spec in specs:
        oracle.submit(spec)
    return oracle


def _scores(best: int) -> np.ndarray:
    row = np.zeros((1, VOCAB))
    row[0, best] = 5.0
    return row


class Engine:
    """What an engine reports per step: its schedule, the tokens it emitted, its scores."""

    def __init__(self, oracle: EngineScheduledOracle, depth: int = 0):
        self.oracle, self.depth, self.t = oracle, depth, 0

    def step(self, runs: list[tuple[str, int, int, bool]], tokens: dict[str, int] | None = None):
        tokens = tokens or {}
        schedule = Schedule(tuple(ScheduledRun(*r) for r in runs), self.depth)
        emitted = tuple(RequestStep(rid, (tok,), (), 0, 0, 0, False) for rid, tok in sorted(tokens.items()))
        reports = {rid: ModelStep(rid, _scores(tok)) for rid, tok in tokens.items()}
        verdict = self.oracle.step(self.t, {}, reports, StepResult(self.t, emitted), schedule)
        self.t += 1
        return verdict


def _breaks(verdict) -> list[str]:
    return [f"{b.tensor}: {b.expected} {b.actual} {b.detail}" for b in verdict.breaks]


def test_a_chunked_prefill_then_decode_conserves_the_prompt():
    engine = Engine(_oracle(RequestSpec("a", 0, tuple(range(1, 11)), 3, ())))
    assert _breaks(engine.step([("a", 6, 0, False)])) == []
    last = engine.step([("a", 4, 6, True)], {"a": 7})
    assert _breaks(last) == [] and last.result.by_id()["a"].accept_tokens == (7,)
    assert _breaks(engine.step([("a", 1, 10, True)], {"a": 8})) == []


def test_chunks_that_skip_overrun_or_mistime_the_first_token_are_breaks():
    engine = Engine(_oracle(RequestSpec("a", 0, tuple(range(1, 11)), 3, ())))
    engine.step([("a", 4, 0, False)])
    assert any("first_position" in b for b in _breaks(engine.step([("a", 2, 5, False)])))
    engine = Engine(_oracle(RequestSpec("a", 0, tuple(range(1, 11)), 3, ())))
    assert any("query_tokens" in b for b in _breaks(engine.step([("a", 11, 0, True)])))
    engine = Engine(_oracle(RequestSpec("a", 0, tuple(range(1, 11)), 3, ())))
    assert any("produces" in b for b in _breaks(engine.step([("a", 10, 0, False)])))


def test_a_request_that_runs_after_its_stop_breaks_the_schedule_without_a_pipeline():
    engine = Engine(_oracle(RequestSpec("a", 0, (1, 2), 1, ())))
    assert _breaks(engine.step([("a", 2, 0, True)], {"a": 5})) == []  # max_dec_len 1: stopped
    assert any("ran after it stopped" in b for b in _breaks(engine.step([("a", 1, 2, True)])))


def test_a_pipelined_engine_may_run_a_stopped_request_in_the_batch_in_flight_but_not_later():
    engine = Engine(_oracle(RequestSpec("a", 0, (1, 2), 1, ()), RequestSpec("b", 0, (3,), 9, ())), depth=1)
    assert _breaks(engine.step([])) == []  # the first call reports nothing: its batch is in flight
    engine.step([("a", 2, 0, True), ("b", 1, 0, True)], {"a": 5, "b": 6})  # a stops here
    ghost = engine.step([("a", 1, 2, True), ("b", 1, 1, True)], {"b": 6})
    assert _breaks(ghost) == [] and ghost.running == ("b",), "the in-flight run of a produces nothing"
    assert "a" not in ghost.result.by_id()
    engine.step([])  # an idle call does not count as a batch
    late = engine.step([("a", 1, 2, True), ("b", 1, 2, True)], {"b": 6})
    assert any("ran after it stopped" in b for b in _breaks(late))


def test_a_pipelined_engine_reports_the_token_of_a_batch_launched_before_an_abort():
    oracle = _oracle(RequestSpec("a", 0, (1, 2), 9, ()))
    engine = Engine(oracle, depth=1)
    engine.step([("a", 2, 0, True)], {"a": 5})
    oracle.abort("a")  # the next report is of a batch launched before the abort
    in_flight = engine.step([("a", 1, 2, True)], {"a": 6})
    assert _breaks(in_flight) == [] and in_flight.result.by_id()["a"].accept_tokens == (6,)
    after = engine.step([("a", 1, 3, True)], {"a": 7})
    assert any("ran after it aborted" in b for b in _breaks(after))


def test_without_a_pipeline_an_abort_takes_effect_at_once():
    oracle = _oracle(RequestSpec("a", 0, (1, 2), 9, ()))
    engine = Engine(oracle)
    engine.step([("a", 2, 0, True)], {"a": 5})
    oracle.abort("a")
    assert any("ran after it aborted" in b for b in _breaks(engine.step([("a", 1, 2, True)], {"a": 6})))
