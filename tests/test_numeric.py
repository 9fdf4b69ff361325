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


def _nudging(delta: float):
    """An engine factory whose graph engine reports every score moved by ``delta`` times its magnitude."""
    from graphcheck.backends.engine import Engine

    class Nudged(Engine):
        def model_report(self):
            report = super().model_report()
            if not self.use_graphs:
                return report
            return {
                rid: ModelStep(rid, step.scores * (1.0 + delta), step.draft_margins, step.draft_runners_up)
                for rid, step in report.items()
            }

    return Nudged


@pytest.mark.parametrize("model", ["float32", "bfloat16"])
def test_low_bit_noise_in_the_scores_is_within_the_tolerance(model: str) -> None:
    from graphcheck.backends.devices import resolve
    from graphcheck.check.lockstep import Lockstep

    outcome = Lockstep(_float_demo(model), resolve("cpu"), engine_factory=_nudging(1e-6)).run()
    assert outcome.clean and outcome.oracle == "model-agnostic"


def test_scores_that_differ_beyond_the_tolerance_fail_the_run() -> None:
    from graphcheck.backends.devices import resolve
    from graphcheck.check.lockstep import Lockstep

    outcome = Lockstep(_float_demo("float32"), resolve("cpu"), engine_factory=_nudging(0.05)).run()
    assert not outcome.clean
    assert (outcome.first.kind, outcome.first.tensor, outcome.first.pair) == ("value", "model scores", "eager vs graph")


def test_the_exact_oracle_refuses_a_float_model() -> None:
    from graphcheck.backends.devices import resolve
    from graphcheck.check.lockstep import Lockstep
    from graphcheck.check.oracles import OracleError

    with pytest.raises(OracleError, match="model-agnostic"):
        Lockstep(_float_demo("bfloat16"), resolve("cpu"), oracle="exact")
