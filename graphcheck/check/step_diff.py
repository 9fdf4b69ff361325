"""Eager vs graph vs the oracle, one lockstep step at a time: bit for bit, or within a float model's band.

:class:`StepDiff` holds what the comparison of a run needs across its steps: the oracle,
for a float model the calibration (measured before anything is built), its tolerance band,
the drift watch and the requests parted at a near tie, each step's model reports, and the
full-recompute path of a graph engine that can run its model without batching.
"""

from __future__ import annotations

from typing import Any

from graphcheck.check.diff import Divergence, diff_steps
from graphcheck.check.guarded import engine_type
from graphcheck.check.noise import DRIFT_STEPS, Calibration, NumericTrace
from graphcheck.check.numeric import DriftWatch, Parting, diff_engines_numeric, largest_difference, tolerance_for
from graphcheck.check.oracles import OracleError
from graphcheck.check.pair import EnginePair
from graphcheck.check.recompute import RecomputeCheck
from graphcheck.check.records import StepRecord
from graphcheck.scenario import Scenario
from graphcheck.step_result import StepResult


class StepDiff:
    """The comparisons of one lockstep run; ``calibration``: a float model's, None for an exact one."""

    def __init__(self, oracle: Any, calibration: Calibration | None = None) -> None:
        self.oracle = oracle
        self.calibration = calibration
        self.tolerance = calibration.tolerance() if calibration is not None else None
        self.drift = (
            DriftWatch(calibration.drift_level, DRIFT_STEPS, calibration.band) if calibration is not None else None
        )
        self.parting = Parting()
        self.reports: dict[str, Any] = {}  # the step's model reports, by source
        self.recompute: RecomputeCheck | None = None

    @property
    def needs_reports(self) -> bool:
        """Whether each step's model reports are read (the oracle or the float tolerance needs them)."""
        return self.oracle.needs_reports or self.tolerance is not None

    def attach(self, pair: EnginePair, scenario: Scenario) -> None:
        """Check that ``pair`` reports what this comparison needs; set up the full recompute where it can."""
        if self.needs_reports:
            for engine, extras in ((pair.eager, pair.eager_extras), (pair.graph, pair.graph_extras)):
                if extras.model_report is None:
                    raise OracleError(
                        f"{engine_type(engine)} has no model_report(): the model-agnostic oracle and the float "
                        "tolerance need each step's model scores (docs/adapters.md, 'Engines that run their own model')"
                    )
        if self.tolerance is None or pair.graph_extras.recompute_scores is None:
            return
        prompts = {r.request_id: r.prompt for r in scenario.requests}
        # Another model path (no cache, no batching, other kernels) than the probe measured: the ceiling.
        ceiling = tolerance_for(scenario.config.model)
        assert ceiling is not None, "a calibration is made for a float model only (Lockstep._build)"
        self.recompute = RecomputeCheck(pair.graph, prompts, ceiling, "graph")

    def take_reports(self, pair: EnginePair) -> dict[str, Any]:
        """Each engine's model report of the step, when the oracle or the tolerance needs them."""
        self.reports = {}
        if self.needs_reports:
            found = ((s, x.model_report) for s, x in (("eager", pair.eager_extras), ("graph", pair.graph_extras)))
            self.reports = {source: dict(report()) for source, report in found if report is not None}
        return self.reports

    def engines(self, records: dict[str, StepRecord]) -> list[Divergence]:
        """Eager vs graph: bit for bit, or within the band (with the drift across steps)."""
        eager, graph = records["eager"].result, records["graph"].result
        slots = records["graph"].slot_of()
        if self.tolerance is None:
            return diff_steps(eager, graph, "eager vs graph", slots=slots)
        reports = (self.reports.get("eager", {}), self.reports.get("graph", {}))
        expected = self.oracle.expected_per_engine()
        found = diff_engines_numeric(eager, graph, reports, self.tolerance, self.parting, slots, expected)
        delta = largest_difference(eager, graph, reports, self.parting.parted)
        assert self.drift is not None
        drift = self.drift.add(eager.step, delta, records["graph"].used_graph)
        return found + ([drift] if drift is not None else [])

    def against_oracle(self, records: dict[str, StepRecord]) -> list[Divergence]:
        """Both engines against the reference (or the oracle the run chose)."""
        ref, eager, graph = (records[s].result for s in ("reference", "eager", "graph"))
        return self.oracle.diff(ref, {"eager": eager, "graph": graph}, records["graph"].slot_of())

    def against_recompute(self, graph: StepResult, slots: dict[str, int]) -> list[Divergence]:
        """The graph engine's new tokens against its model run without batching, where it can."""
        if self.recompute is None:
            return []
        return self.recompute.check(graph, self.reports.get("graph", {}), slots)

    def trace(self) -> NumericTrace | None:
        """What a float run measured (the band, and every step's largest difference), for the outcome."""
        if self.calibration is None or self.drift is None:
            return None
        return NumericTrace(self.calibration, tuple(self.drift.trace))


__all__ = ["StepDiff"]
