"""Eager vs graph with a float model: near ties are ambiguous, real token differences are not."""

from __future__ import annotations

import numpy as np
import pytest

from graphcheck.check.numeric import TOLERANCES, Parting, diff_engines_numeric, tolerance_for
from graphcheck.model_report import ModelStep
from graphcheck.step_result import RequestStep, StepResult

TOL = TOLERANCES["float32"]


def _step(token: int, drafts: tuple[int, ...] = (3,)) -> StepResult:
    return StepResult(4, (RequestStep("a", (token,), drafts, 12, 5, 9, False),))


def _scores(*row: float) -> dict[str, ModelStep]:
    return {"a": ModelStep("a", np.array([row], dtype=np.float64), (1.0,))}


#: Token 0 leads token 1 by one part in 10^5: a near tie at any float tolerance.
TIED = (2.0, 1.99998, -1.0, 0.5)


def _diff(eager_token, graph_token, eager_row, graph_row, expected_tokens, parting=None):
    parting = parting if parting is not None else Parting()
    expected = (_step(expected_tokens[0]), _step(expected_tokens[1]))
    found = diff_engines_numeric(
        _step(eager_token),
        _step(graph_token),
        (_scores(*eager_row), _scores(*graph_row)),
        TOL,
        parting,
        {"a": 0},
        expected,
    )
    return found, parting


def test_a_perturbed_low_bit_that_flips_a_near_tie_is_ambiguous() -> None:
    graph_row = (TIED[0], TIED[1] + 4e-5, *TIED[2:])  # now token 1 leads, by 2e-5: inside the tolerance
    found, parting = _diff(0, 1, TIED, graph_row, expected_tokens=(0, 1))
    assert found and all(d.ambiguous for d in found)
    assert "near tie at output row 0" in found[0].detail
    assert parting.parted == {"a"}
    # From here on the request is compared with each engine's oracle only, never eager vs graph.
    later, _ = _diff(0, 5, TIED, TIED, expected_tokens=(0, 0), parting=parting)
    assert later == []


def test_a_real_token_difference_is_a_divergence_even_when_the_scores_agree() -> None:
    found, parting = _diff(0, 1, TIED, TIED, expected_tokens=(0, 0))
    assert [d.tensor for d in found if not d.ambiguous] == ["accept_tokens"]
    assert not parting.parted


def test_scores_beyond_the_tolerance_make_the_token_difference_real() -> None:
    graph_row = (TIED[0], TIED[1] + 0.5, *TIED[2:])
    found, _ = _diff(0, 1, TIED, graph_row, expected_tokens=(0, 1))
    assert [d.tensor for d in found if not d.ambiguous] == ["accept_tokens"]


def test_scores_beyond_the_tolerance_are_a_value_divergence_on_equal_tokens() -> None:
    graph_row = (TIED[0] + 0.5, *TIED[1:])
    found, _ = _diff(0, 0, TIED, graph_row, expected_tokens=(0, 0))
    assert [(d.kind, d.tensor) for d in found] == [("value", "model scores")]
    within = (TIED[0] + 1e-4, *TIED[1:])
    assert _diff(0, 0, TIED, within, expected_tokens=(0, 0))[0] == []


def test_a_seed_difference_is_never_a_near_tie() -> None:
    eager, graph = _step(0), StepResult(4, (RequestStep("a", (1,), (3,), 13, 5, 9, False),))
    found = diff_engines_numeric(
        eager, graph, (_scores(*TIED), _scores(*TIED)), TOL, Parting(), {"a": 0}, (eager, graph)
    )
    assert found and not any(d.ambiguous for d in found)


def _drafted(margin: float, runner_up: int) -> dict[str, ModelStep]:
    return {"a": ModelStep("a", np.array([TIED]), (margin,), (runner_up,))}


def test_a_draft_proposal_swapped_with_its_runner_up_at_a_small_margin_is_ambiguous() -> None:
    eager, graph = _step(0, (3,)), _step(0, (4,))
    found = diff_engines_numeric(eager, graph, (_drafted(1e-5, 4), _drafted(2e-5, 3)), TOL, Parting(), {"a": 0})
    assert found and all(d.ambiguous for d in found) and "draft 0" in found[0].detail


@pytest.mark.parametrize(
    "eager_report, graph_report",
    [
        pytest.param((0.7, 4), (0.6, 3), id="margins-too-wide"),
        pytest.param((1e-5, 5), (1e-5, 3), id="not-the-runner-up"),
        pytest.param((1e-5, 4), (1e-5, 6), id="graph-runner-up-differs"),
    ],
)
def test_a_draft_proposal_that_no_near_tie_explains_is_a_divergence(eager_report, graph_report) -> None:
    eager, graph = _step(0, (3,)), _step(0, (4,))
    reports = (_drafted(*eager_report), _drafted(*graph_report))
    found = diff_engines_numeric(eager, graph, reports, TOL, Parting(), {"a": 0})
    assert found and not any(d.ambiguous for d in found)


@pytest.mark.parametrize("model, expected", [("exact", None), ("float32", 1e-3), ("bfloat16", 6e-2)])
def test_the_tolerance_follows_the_model_dtype(model: str, expected: float | None) -> None:
    tol = tolerance_for(model)
    assert (tol.rtol if tol else None) == expected


# ---------------------------------------------------------------------------
# End to end: the lockstep on the float model, with a graph engine whose model
# report is nudged (as a GPU's batch-dependent kernels would) or corrupted.
# ---------------------------------------------------------------------------


def _float_demo(model: str):
    import dataclasses

    from graphcheck.search.builtin import demo_scenario

    base = demo_scenario("greedy", num_steps=6)
    return dataclasses.replace(base, config=dataclasses.replace(base.config, model=model))


def _nudging(delta: float, every: int = 1):
    """An engine factory whose graph engine reports the scores of every ``every``-th step moved by
    ``delta`` times their magnitude (a kernel's batch-dependent rounding, or a systematic error)."""
    from graphcheck.backends.engine import Engine

    class Nudged(Engine):
        def model_report(self):
            report = super().model_report()
            self._reported = getattr(self, "_reported", 0) + 1
            if not self.use_graphs or self._reported % every:
                return report
            return {
                rid: ModelStep(rid, step.scores * (1.0 + delta), step.draft_margins, step.draft_runners_up)
                for rid, step in report.items()
            }

    return Nudged


def _on_one_cpu_thread(work):
    """``work(cpu)`` on one torch thread, as every graphcheck run has it on the CPU (Checker.run): a
    multi-threaded matmul may sum in another order for the padded bucket than for the real batch, and
    the probe's cached calibration must be measured the way the runs it serves step."""
    from graphcheck.capture.devices import resolve
    from graphcheck.check.threads import single_threaded

    cpu = resolve("cpu")
    with single_threaded(cpu):
        return work(cpu)


def _calibration(model: str):
    from graphcheck.backends.engine import Engine
    from graphcheck.check.noise import calibration_for
    from graphcheck.scenario import EngineConfig

    return _on_one_cpu_thread(
        lambda cpu: calibration_for(Engine, cpu, EngineConfig(model=model), Engine.capabilities.fit)
    )


def _run(model: str, factory):
    from graphcheck.check.lockstep import Lockstep

    return _on_one_cpu_thread(lambda cpu: Lockstep(_float_demo(model), cpu, engine_factory=factory).run())


@pytest.mark.parametrize("model", ["float32", "bfloat16"])
def test_the_band_is_calibrated_from_the_measured_noise_below_the_ceiling(model: str) -> None:
    from graphcheck.check.noise import EPSILON, MULTIPLE, ULPS

    cal = _calibration(model)
    assert cal.probed and cal.compared > 0, cal.note
    assert cal.band == min(cal.ceiling, max(MULTIPLE * cal.floor, ULPS[model] * EPSILON[model]))
    assert cal.band < cal.ceiling, "the built-in engine's CPU noise is far below the fixed band"
    outcome = _run(model, _nudging(0.0))
    assert outcome.clean and outcome.numeric.calibration == cal
    assert outcome.numeric.largest == 0.0 and outcome.numeric.steps


@pytest.mark.parametrize("model", ["float32", "bfloat16"])
def test_noise_within_the_band_passes(model: str) -> None:
    band = _calibration(model).band
    assert _run(model, _nudging(band / 8)).clean, "a constant difference below the drift level"
    assert _run(model, _nudging(band / 2, every=2)).clean, "under the band and not on every replay"


def test_a_small_systematic_difference_under_the_band_is_a_drift() -> None:
    cal = _calibration("float32")
    outcome = _run("float32", _nudging(cal.band / 2))
    assert not outcome.clean
    assert (outcome.first.tensor, outcome.first.pair) == ("model scores (drift)", "eager vs graph")


def test_scores_that_differ_beyond_the_tolerance_fail_the_run() -> None:
    outcome = _run("float32", _nudging(0.05))
    assert not outcome.clean
    assert (outcome.first.kind, outcome.first.tensor, outcome.first.pair) == ("value", "model scores", "eager vs graph")


def _scaled_final_norm(factor: float):
    """The graph engine's target final-norm gain scaled in place after capture: every replay (and
    the graph engine's eager steps) computes with the other constant, as a graph-only edit would."""
    from graphcheck.backends.engine import Engine

    class Scaled(Engine):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            if self.use_graphs:
                gain = self.weights.final_norm
                gain.mul_(factor) if hasattr(gain, "mul_") else gain.__imul__(factor)

    return Scaled


def test_a_graph_only_change_well_under_the_old_band_is_a_divergence() -> None:
    """A normalisation constant changed by 4e-5 in the graph engine: 25 times under the fixed float32
    band of 1e-3 (which let it through), far above the measured noise."""
    cal = _calibration("float32")
    assert cal.floor < 4e-5 / 16 < 1e-3
    outcome = _run("float32", _scaled_final_norm(1 + 4e-5))
    assert not outcome.clean, outcome.numeric
    assert outcome.first.pair == "eager vs graph"
    assert 1e-5 < outcome.numeric.largest < 1e-3


def test_the_exact_oracle_refuses_a_float_model() -> None:
    from graphcheck.capture.devices import resolve
    from graphcheck.check.lockstep import Lockstep
    from graphcheck.check.oracles import OracleError

    with pytest.raises(OracleError, match="model-agnostic"):
        Lockstep(_float_demo("bfloat16"), resolve("cpu"), oracle="exact")
