"""What the HTML shows of one outcome: headline, scenario tables, step timeline, divergence rows."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Sequence

from graphcheck.check.diff import KINDS, Divergence
from graphcheck.check.records import CheckOutcome, StepRecord
from graphcheck.report.fmt import Capped, cap, human_bytes, show, sources_of
from graphcheck.report.localisation import LocalisationView
from graphcheck.scenario import RequestSpec, Scenario

#: Most step rows the timeline shows; the rest are summarised as "… N steps not shown".
MAX_TIMELINE_ROWS = 200
#: Most rows of any one divergence table.
MAX_DIVERGENCE_ROWS = 200
#: Prompt tokens shown in the request table before "…".
MAX_PROMPT_TOKENS = 16
#: Running request ids shown per timeline row before "+N".
MAX_RUNNING_SHOWN = 12


@dataclass(frozen=True)
class DivRow:
    """One divergence, formatted."""

    kind: str
    step: int
    tensor: str
    pair: str
    expected: str
    actual: str
    expected_source: str
    actual_source: str
    where: str
    detail: str
    headline: str
    ambiguous: bool


@dataclass(frozen=True)
class RequestRow:
    request_id: str
    arrival: int
    prompt_len: int
    prompt: str
    max_dec_len: int
    eos: str
    temperature: str
    top_p: str
    top_k: int
    seed: int
    reasoning: str
    abort: str


@dataclass(frozen=True)
class TimelineRow:
    step: int
    running: str
    bucket: str
    tokens: str
    replayed: str  # "yes", "no", or "—" where no engine record exists
    memory: str
    status: str  # "first", "fail", "amb" or "ok"
    kinds: str


@dataclass
class OutcomeView:
    index: int
    anchor: str
    name: str
    backend: str
    runner: str
    oracle: str
    faults: tuple[str, ...]
    clean: bool
    steps_run: int
    elapsed_s: float
    headline: DivRow | None
    failures: Capped[DivRow]
    ambiguous: Capped[DivRow]
    config: list[tuple[str, str]]
    requests: Capped[RequestRow]
    accepts: Capped[tuple[int, str, int]]
    timeline: Capped[TimelineRow]
    sections: list[Any] = field(default_factory=list)
    #: Where the first failing divergence began (shown above the per-kind tables); None when not localised.
    localisation: LocalisationView | None = None
    #: A float run's calibration and step-by-step differences (graphcheck.report.numeric_view).
    numeric: Any = None
    #: The step timeline chart of a failing outcome (graphcheck.report.charts.step_chart).
    chart: Any = None
    #: The scenarios the engine pair ran before this one (``Scenario.history``), one line each.
    history: list[str] = field(default_factory=list)

    @property
    def failure_count(self) -> int:
        return self.failures.total

    @property
    def ambiguous_count(self) -> int:
        return self.ambiguous.total


def where_of(div: Divergence) -> str:
    parts = []
    if div.request_id is not None:
        parts.append(f"request {div.request_id}")
    if div.slot is not None:
        parts.append(f"slot {div.slot}")
    return ", ".join(parts) or "—"


def div_row(div: Divergence) -> DivRow:
    left, right = sources_of(div.pair)
    return DivRow(
        kind=div.kind,
        step=div.step,
        tensor=div.tensor,
        pair=div.pair,
        expected=show(div.expected, div.kind),
        actual=show(div.actual, div.kind),
        expected_source=left,
        actual_source=right,
        where=where_of(div),
        detail=div.detail,
        headline=div.headline(),
        ambiguous=div.ambiguous,
    )


def div_rows(divs: Sequence[Divergence], limit: int = MAX_DIVERGENCE_ROWS) -> Capped[DivRow]:
    return cap([div_row(d) for d in sorted(divs, key=lambda d: d.step)], lambda r: False, limit)


def config_rows(scenario: Scenario) -> list[tuple[str, str]]:
    cfg = scenario.config
    rows = [(f.name, show(getattr(cfg, f.name))) for f in dataclasses.fields(cfg)]
    rows.append(("max_padded_reqs (derived)", str(cfg.max_padded_reqs)))
    rows.append(("seed_increment (derived)", str(cfg.seed_increment)))
    rows.append(("num_steps", str(scenario.num_steps)))
    return rows


def request_row(spec: RequestSpec) -> RequestRow:
    prompt = " ".join(map(str, spec.prompt[:MAX_PROMPT_TOKENS]))
    if len(spec.prompt) > MAX_PROMPT_TOKENS:
        prompt += f" … (+{len(spec.prompt) - MAX_PROMPT_TOKENS})"
    return RequestRow(
        request_id=spec.request_id,
        arrival=spec.arrival_step,
        prompt_len=len(spec.prompt),
        prompt=prompt,
        max_dec_len=spec.max_dec_len,
        eos=" ".join(map(str, spec.eos_token_ids)),
        temperature=f"{spec.temperature:g}",
        top_p=f"{spec.top_p:g}",
        top_k=spec.top_k,
        seed=spec.seed,
        reasoning=", ".join(f"step {c.step} → {c.status}" for c in spec.reasoning) or "—",
        abort="—" if spec.abort_step is None else f"step {spec.abort_step}",
    )


def request_rows(scenario: Scenario) -> Capped[RequestRow]:
    return cap([request_row(r) for r in scenario.requests], lambda r: False, MAX_DIVERGENCE_ROWS)


def accept_rows(scenario: Scenario) -> Capped[tuple[int, str, int]]:
    rows = [(a.step, a.request_id, a.accepted) for a in scenario.accepts]
    return cap(rows, lambda r: False, MAX_DIVERGENCE_ROWS)


def records_by_step(outcome: CheckOutcome, source: str) -> dict[int, StepRecord]:
    return {rec.step: rec for rec in outcome.records.get(source, [])}


def step_view_record(step: int, views: list[dict[int, StepRecord]]) -> StepRecord | None:
    """The record the timeline describes a step by: the graph engine's, else eager's, else the reference's."""
    for by_step in views:
        if step in by_step:
            return by_step[step]
    return None


def running_text(rec: StepRecord) -> str:
    slots = rec.slot_of()
    ids = [r.request_id for r in rec.result.requests] or list(slots)
    shown = [f"{rid}@{slots[rid]}" if rid in slots else rid for rid in ids[:MAX_RUNNING_SHOWN]]
    extra = f" +{len(ids) - MAX_RUNNING_SHOWN}" if len(ids) > MAX_RUNNING_SHOWN else ""
    return (" ".join(shown) + extra) if shown else "—"


def step_status(step: int, divs: Sequence[Divergence], first_step: int | None) -> str:
    """ "first" on the headline's step, "fail" where anything failed, "amb" where only ambiguity."""
    if any(not d.ambiguous for d in divs):
        return "first" if step == first_step else "fail"
    return "amb" if divs else "ok"


def timeline_row(step: int, rec: StepRecord | None, divs: Sequence[Divergence], first_step: int | None) -> TimelineRow:
    status = step_status(step, divs, first_step)
    kinds = ", ".join(sorted({d.kind for d in divs}, key=_kind_order))
    if rec is None:
        return TimelineRow(step, "—", "—", "—", "—", "—", status, kinds)
    if rec.source != "graph":  # the graph engine left no record of this step (e.g. it crashed)
        kinds = (kinds + " · " if kinds else "") + f"{rec.source} record only"
    if rec.source == "reference":  # no engine record at all: nothing to say about buckets or padding
        return TimelineRow(step, running_text(rec), "—", "—", "—", "—", status, kinds)
    return TimelineRow(
        step=step,
        running=running_text(rec),
        bucket="eager" if rec.bucket is None else str(rec.bucket),
        tokens=f"{rec.real_tokens} / {rec.padded_tokens}",
        replayed="yes" if rec.used_graph else "no",
        memory=human_bytes(rec.memory_bytes) if rec.memory_bytes else "—",
        status=status,
        kinds=kinds,
    )


def _kind_order(kind: str) -> int:
    return KINDS.index(kind) if kind in KINDS else len(KINDS)


def timeline(outcome: CheckOutcome) -> Capped[TimelineRow]:
    views = [records_by_step(outcome, s) for s in ("graph", "eager", "reference")]
    by_step: dict[int, list[Divergence]] = {}
    for div in outcome.divergences:
        by_step.setdefault(div.step, []).append(div)
    first = outcome.first
    steps = sorted(set().union(*views) | set(by_step))
    rows = [
        timeline_row(step, step_view_record(step, views), by_step.get(step, []), first.step if first else None)
        for step in steps
    ]
    return cap(rows, lambda r: r.status != "ok", MAX_TIMELINE_ROWS)
