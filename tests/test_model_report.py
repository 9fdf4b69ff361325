"""``Engine.model_report()``: the last step's scores and draft margins (``graphcheck.model_report``).

For the integer model the report is checked against the reference: every
request's scores are the reference's integer logits / 8 of the same rows, and
every draft margin is the reference draft logits' best minus second best, / 8.
Eager and graph engines report the same, in every graph scope; the margins are
never negative and there is one per draft token.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import graphcheck.reference.decoder as ref_decoder
from graphcheck.capture.devices import resolve
from graphcheck.check.threads import single_threaded
from graphcheck.driver import apply_events
from graphcheck.model_report import ModelStep
from graphcheck.reference import ReferenceDecoder
from graphcheck.reference.model import logits_of

from _engine_scenarios import SCOPES, engine_for, reference_weights, scenario_for
from _layers import fast_first

pytest.importorskip("torch")


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    with single_threaded(resolve("cpu")):
        yield


class RecordingReference(ReferenceDecoder):
    """The reference, keeping each request's integer target logits and draft margins of the current step."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.logits: dict[str, np.ndarray] = {}
        self.margins: dict[str, list[float]] = {}
        self._current: str | None = None

    def step(self, t, overrides):
        self.logits, self.margins = {}, {}
        return super().step(t, overrides)

    def _target_logits(self, req):
        logits = super()._target_logits(req)
        self.logits[req.spec.request_id] = logits
        return logits

    def _propose(self, req):
        self._current = req.spec.request_id
        self.margins[self._current] = []
        return super()._propose(req)

    def record_proposal(self, w, hd) -> int:
        row = np.sort(logits_of(w, hd).astype(np.float64))
        assert self._current is not None
        self.margins[self._current].append(float(row[-1] - row[-2]) / 8)
        return int(np.argmax(logits_of(w, hd)))


def _check_report(report: dict[str, ModelStep], ref: RecordingReference, result, label: str) -> int:
    """Check one step's report; returns how many draft margins it compared."""
    compared = 0
    assert set(report) == {r.request_id for r in result.requests}, label
    for step in result.requests:
        got = report[step.request_id]
        assert got.request_id == step.request_id
        assert isinstance(got.scores, np.ndarray) and got.scores.dtype == np.float64, label
        want = ref.logits[step.request_id].astype(np.float64) / 8
        np.testing.assert_array_equal(got.scores, want, err_msg=f"{label}: {step.request_id}")
        assert len(got.draft_margins) == len(step.draft_tokens), label
        assert all(m >= 0 for m in got.draft_margins), label
        if step.draft_tokens:
            assert list(got.draft_margins) == ref.margins[step.request_id], f"{label}: {step.request_id}"
            compared += len(step.draft_tokens)
    return compared


def _run(name: str, scope: str, monkeypatch: pytest.MonkeyPatch) -> list[list[dict[str, ModelStep]]]:
    """Eager and graph engines next to the recording reference; returns each engine's reports per step."""
    scenario = scenario_for(name, scope)
    ref = RecordingReference(scenario.config, reference_weights(name))
    monkeypatch.setattr(ref_decoder, "draft_proposal", ref.record_proposal)
    engines = [engine_for(name, scope, use_graphs=g)[1] for g in (False, True)]
    reports: list[list[dict[str, ModelStep]]] = [[], []]
    replayed = margins = 0
    for t in range(scenario.num_steps):
        overrides = scenario.accept_overrides_at(t)
        for decoder in (ref, *engines):
            apply_events(decoder, scenario, t)
        expected = ref.step(t, overrides)
        for i, engine in enumerate(engines):
            result = engine.step(t, overrides)
            assert result == expected, f"{name} {scope} step {t}"
            report = engine.model_report()
            margins += _check_report(report, ref, result, f"{name} {scope} step {t} {'graph' if i else 'eager'}")
            reports[i].append(report)
        replayed += engines[1].last_step_info.used_graph
    assert replayed > 0
    assert margins > 0 or scenario.config.naive_mode
    return reports


CASES = [(n, s) for n in ("demo-topp", "demo-naive", "buckets", "small_seqs", "eager_above") for s in SCOPES]


@pytest.mark.parametrize(
    "name,scope", fast_first(CASES, lambda c: c in (("demo-topp", "step"), ("buckets", "forward")))
)
def test_report_scores_are_the_reference_logits_over_8(name: str, scope: str, monkeypatch) -> None:
    eager, graph = _run(name, scope, monkeypatch)
    for t, (a, b) in enumerate(zip(eager, graph)):
        assert a.keys() == b.keys()
        for rid in a:
            np.testing.assert_array_equal(a[rid].scores, b[rid].scores, err_msg=f"step {t} {rid}")
            assert a[rid].draft_margins == b[rid].draft_margins


@pytest.mark.parametrize("scope", fast_first(SCOPES, 1))
def test_greedy_reject_all_emits_the_argmax_of_each_report(scope: str) -> None:
    """GREEDY with every draft rejected: each step emits the argmax (lowest id) of its first score row."""
    import dataclasses

    from graphcheck.backends.engine import Engine
    from graphcheck.reference import make_weights

    base = scenario_for("demo-greedy", scope)
    scenario = dataclasses.replace(base, config=dataclasses.replace(base.config, accept_policy="reject_all"))
    engine = Engine(scenario.config, make_weights(scenario.config))
    rows = 0
    for t in range(scenario.num_steps):
        apply_events(engine, scenario, t)
        result = engine.step(t, scenario.accept_overrides_at(t))
        report = engine.model_report()
        for step in result.requests:
            scores = report[step.request_id].scores
            rows += 1
            assert step.accept_tokens[0] == int(np.argmax(scores[0])) or step.stopped
    assert rows > 0


def test_report_of_an_idle_step_is_empty() -> None:
    _, engine = engine_for("demo-greedy", "step")
    assert engine.model_report() == {}
    engine.step(0, {})
    assert engine.model_report() == {}
