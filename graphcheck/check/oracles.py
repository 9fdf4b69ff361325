"""The oracle side of a lockstep run: what each engine's step is compared with.

Two oracles, chosen per run (``ORACLES``):

* ``exact``: the NumPy reference computes the integer model and every rule
  after it; one reference, compared with both engines (pairs
  "reference vs eager" / "reference vs graph"). After an ambiguous mismatch it
  adopts the graph engine's outcome (eager and graph are compared bit for bit
  apart) and keeps checking, so what the request's new course changes for the
  others (admission, the batch eos list) is followed too; an outcome no step
  could have emitted is not adopted, and the request is then no longer compared.
* ``model-agnostic``: for an engine that runs its own model. One
  ``ModelAgnosticOracle`` per engine takes that engine's model report and
  recomputes everything downstream (pairs "oracle vs eager" / "oracle vs
  graph"); after an ambiguous mismatch it adopts the engine's outcome and
  keeps checking.
* ``engine-scheduled``: for an engine that also schedules for itself
  (``EngineCapabilities.schedule == "engine"``). As model-agnostic, but the
  running set comes from the engine's ``Schedule`` and is checked for
  conservation (``graphcheck.reference.scheduled``).

``auto`` picks engine-scheduled for an engine that schedules for itself, exact
for the exact model and model-agnostic otherwise.
"""

from __future__ import annotations

from typing import Any, Mapping

from graphcheck.check.diff import DiffState, Divergence, diff_steps
from graphcheck.errors import InputError
from graphcheck.scenario import EngineConfig, Scenario
from graphcheck.step_result import StepResult

ORACLES = ("exact", "model-agnostic", "engine-scheduled")
ORACLE_CHOICES = ("auto", *ORACLES)


class OracleError(InputError, ValueError):
    """An oracle that cannot check this run (e.g. the exact oracle on a float model)."""


def resolve_oracle(name: str, config: EngineConfig, schedule: str | None = None) -> str:
    """The oracle a run uses: ``auto`` resolved from the model and who schedules (``schedule``: the
    engine's ``EngineCapabilities.schedule``, None while the engine is not known: then
    ``engine-scheduled`` is taken as asked); OracleError for a combination that cannot work."""
    if name not in ORACLE_CHOICES:
        raise OracleError(f"unknown oracle {name!r}; choose one of {', '.join(ORACLE_CHOICES)}")
    if schedule == "engine":
        if name not in ("auto", "engine-scheduled"):
            raise OracleError(
                f"the engine schedules for itself: only the engine-scheduled oracle can check it, not {name!r}"
            )
        return "engine-scheduled"
    if name == "engine-scheduled":
        if schedule == "harness":
            raise OracleError("the engine-scheduled oracle needs an engine that reports its own schedule")
        return name
    if name == "auto":
        return "exact" if config.model == "exact" else "model-agnostic"
    if name == "exact" and config.model != "exact":
        raise OracleError(
            f"the exact oracle computes only the integer model; model {config.model!r} needs --oracle model-agnostic"
        )
    return name


class ExactOracle:
    """The NumPy reference, stepped with the script and compared with both engines."""

    name = "exact"

    def __init__(self, scenario: Scenario, weights: Any):
        from graphcheck.reference import ReferenceDecoder

        self.decoder = ReferenceDecoder(scenario.config, weights)
        self._states = {"reference vs eager": DiffState(), "reference vs graph": DiffState()}
        self.needs_reports = False

    def decoders(self) -> list[Any]:
        return [self.decoder]

    def step(
        self,
        t: int,
        overrides: Mapping[str, int],
        results: Mapping[str, StepResult],
        reports: Mapping[str, Any],
        schedules: Mapping[str, Any] | None = None,
    ) -> StepResult:
        return self.decoder.step(t, overrides)

    def expected_per_engine(self) -> None:
        """One expectation for both engines: the reference's record."""
        return None

    def diff(self, expected: StepResult, results: Mapping[str, StepResult], slots: dict[str, int]) -> list[Divergence]:
        found: list[Divergence] = []
        for source in ("eager", "graph"):
            pair = f"reference vs {source}"
            found += diff_steps(expected, results[source], pair, state=self._states[pair], slots=slots)
        self._adopt(found, results["graph"])
        return found

    def _adopt(self, found: list[Divergence], graph: StepResult) -> None:
        """Follow the graph engine's outcome of every request whose mismatch was ambiguous (as the
        model-agnostic oracle follows its engine's), and compare the request again from there."""
        seen = graph.by_id()
        for rid in sorted({d.request_id for d in found if d.ambiguous and d.request_id in seen}):
            if self.decoder.adopt(seen[rid]):
                for state in self._states.values():
                    state.tainted.discard(rid)


class AgnosticOracles:
    """One model-agnostic (or engine-scheduled) oracle per engine, fed that engine's model report
    (and its schedule)."""

    def __init__(self, scenario: Scenario, *, scheduled: bool = False):
        from graphcheck.reference.oracle import ModelAgnosticOracle
        from graphcheck.reference.scheduled import EngineScheduledOracle

        kind = EngineScheduledOracle if scheduled else ModelAgnosticOracle
        self.name = "engine-scheduled" if scheduled else "model-agnostic"
        self.scheduled = scheduled
        self.oracles = {s: kind(scenario.config) for s in ("eager", "graph")}
        self.needs_reports = True
        self._verdicts: dict[str, Any] = {}

    def decoders(self) -> list[Any]:
        return list(self.oracles.values())

    def step(
        self,
        t: int,
        overrides: Mapping[str, int],
        results: Mapping[str, StepResult],
        reports: Mapping[str, Any],
        schedules: Mapping[str, Any] | None = None,
    ) -> StepResult:
        """Each oracle's verdict on its engine; returns the graph oracle's expected result (the record)."""
        for source, oracle in self.oracles.items():
            if self.scheduled:
                schedule = (schedules or {}).get(source)
                self._verdicts[source] = oracle.step(t, overrides, reports[source], results[source], schedule)
            else:
                self._verdicts[source] = oracle.step(t, overrides, reports[source], results[source])
        return self._verdicts["graph"].result

    def expected_per_engine(self) -> tuple[StepResult, StepResult]:
        """What each engine's oracle expects of it this step, from its own scores: (eager, graph)."""
        return self._verdicts["eager"].result, self._verdicts["graph"].result

    def diff(self, expected: StepResult, results: Mapping[str, StepResult], slots: dict[str, int]) -> list[Divergence]:
        found: list[Divergence] = []
        for source, oracle in self.oracles.items():
            verdict, actual, pair = self._verdicts[source], results[source], f"oracle vs {source}"
            step = actual.step
            ran = tuple(sorted(actual.by_id()))
            if ran != verdict.running:
                found.append(Divergence("value", step, "running_requests", pair, list(verdict.running), list(ran)))
            for b in verdict.breaks:
                found.append(
                    Divergence(
                        b.kind,
                        step,
                        b.tensor,
                        pair,
                        b.expected,
                        b.actual,
                        b.request_id,
                        slots.get(b.request_id),
                        b.detail,
                    )
                )
            diffs = diff_steps(verdict.result, actual, pair, state=DiffState(), slots=slots)
            found += [d for d in diffs if d.tensor != "running_requests"]  # the oracle's own running set is above
            seen = actual.by_id()
            for rid in {d.request_id for d in diffs if d.ambiguous and d.request_id in seen}:
                oracle.adopt(seen[rid])
        return found


def make_oracle(name: str, scenario: Scenario, weights: Any) -> ExactOracle | AgnosticOracles:
    if name == "exact":
        return ExactOracle(scenario, weights)
    return AgnosticOracles(scenario, scheduled=name == "engine-scheduled")


__all__ = [
    "ORACLES",
    "ORACLE_CHOICES",
    "AgnosticOracles",
    "ExactOracle",
    "OracleError",
    "make_oracle",
    "resolve_oracle",
]
