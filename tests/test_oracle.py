"""The model-agnostic oracle (reference/oracle.py) against the exact reference.

Fed the exact reference's own logits (as scores, logits / 8) and the
reference's own results as "the engine", the oracle must recompute every
step exactly, under every contract; and it must flag what no contract allows.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graphcheck import strategies as gst
from graphcheck.contract import CONTRACT_NAMES
from graphcheck.driver import apply_events
from graphcheck.model_report import ModelStep
from graphcheck.reference.decoder import ReferenceDecoder
from graphcheck.reference.oracle import ModelAgnosticOracle
from graphcheck.scenario import EngineConfig, RequestSpec, Scenario
from graphcheck.step_result import RequestStep, StepResult


class _Recording(ReferenceDecoder):
    """The exact reference, keeping each request's target logits of the last step."""

    def step(self, t, overrides):
        self.logits: dict[str, np.ndarray] = {}
        return super().step(t, overrides)

    def _target_logits(self, req):
        rows = super()._target_logits(req)
        self.logits[req.spec.request_id] = rows
        return rows


def _reports(ref: _Recording) -> dict[str, ModelStep]:
    return {rid: ModelStep(rid, rows / 8.0) for rid, rows in ref.logits.items()}


def _lockstep(scenario: Scenario):
    """(reference result, oracle step) of every step of ``scenario``."""
    ref = _Recording(scenario.config)
    oracle = ModelAgnosticOracle(scenario.config)
    for t in range(scenario.num_steps):
        apply_events(ref, scenario, t)
        apply_events(oracle, scenario, t)
        overrides = scenario.accept_overrides_at(t)
        result = ref.step(t, overrides)
        yield result, oracle.step(t, overrides, _reports(ref), result)


@settings(max_examples=60)
@given(gst.scenarios(), st.sampled_from(CONTRACT_NAMES))
def test_the_oracle_recomputes_the_reference_from_its_logits(scenario: Scenario, contract: str) -> None:
    scenario = dataclasses.replace(scenario, config=dataclasses.replace(scenario.config, contract=contract))
    for result, verdict in _lockstep(scenario):
        assert verdict.breaks == ()
        assert verdict.running == tuple(sorted(r.request_id for r in result.requests))
        # The oracle follows the engine's draw where the contract leaves it free, so it is never
        # less sure than the reference, which can only call such a draw ambiguous.
        assert _plain(verdict.result) == _plain(result)
        assert all(r.ambiguous for r, o in zip(result.requests, verdict.result.requests) if o.ambiguous)


def _plain(result: StepResult) -> StepResult:
    return dataclasses.replace(result, requests=tuple(dataclasses.replace(r, ambiguous=False) for r in result.requests))


def _scenario(**config) -> Scenario:
    cfg = EngineConfig(max_num_seqs=2, capture_sizes=(1, 2), **config)
    spec = RequestSpec("a", 0, (1, 2, 3), max_dec_len=6, eos_token_ids=(7,))
    return Scenario(cfg, (spec,), num_steps=4)


def test_a_wrong_draft_count_is_a_rule_break() -> None:
    scenario = _scenario()
    ref = _Recording(scenario.config)
    oracle = ModelAgnosticOracle(scenario.config)
    apply_events(ref, scenario, 0)
    apply_events(oracle, scenario, 0)
    result = ref.step(0, {})
    (req,) = result.requests
    short = StepResult(0, (dataclasses.replace(req, draft_tokens=()),))
    verdict = oracle.step(0, {}, _reports(ref), short)
    assert [(b.tensor, b.actual) for b in verdict.breaks] == [("draft_tokens", ())]


@pytest.mark.parametrize(
    "scores, what", [(np.zeros((0, 64)), "model scores"), (np.full((1, 64), np.nan), "model scores")]
)
def test_unusable_scores_are_a_rule_break(scores: np.ndarray, what: str) -> None:
    scenario = _scenario()
    oracle = ModelAgnosticOracle(scenario.config)
    apply_events(oracle, scenario, 0)
    seen = StepResult(0, (RequestStep("a", (5,), (1,), 0, 1, 3, False),))
    verdict = oracle.step(0, {}, {"a": ModelStep("a", scores)}, seen)
    assert [b.tensor for b in verdict.breaks] == [what]
    assert verdict.result.requests == ()
    assert verdict.running == ("a",)


def test_after_adopting_an_outcome_the_oracle_checks_on_from_the_engine_state() -> None:
    scenario = _scenario(verify_strategy="greedy")
    ref = _Recording(scenario.config)
    oracle = ModelAgnosticOracle(scenario.config)
    apply_events(ref, scenario, 0)
    apply_events(oracle, scenario, 0)
    result = ref.step(0, {})
    oracle.step(0, {}, _reports(ref), result)
    (req,) = result.requests
    other = dataclasses.replace(req, accept_tokens=(req.accept_tokens[0] ^ 1,))
    oracle.adopt(other)
    assert oracle.generated("a") == other.accept_tokens
