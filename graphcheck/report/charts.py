"""The report's pictures, as plain shapes the template places in inline SVG (no script, no network).

* :func:`step_chart`: one outcome's steps left to right; the top lane says whether the graph
  engine replayed the step or ran it eagerly, then one lane per divergence kind with a cell on
  each step where that kind diverged, coloured by who disagreed (eager vs graph, or an engine vs
  the reference; ambiguous near ties apart), the first divergence outlined.
* :func:`coverage_chart`: per fuzzed suite, the share of the situations its scenarios reached,
  and of those reached on a replayed step.

(The float deltas against the calibrated band are drawn by :mod:`graphcheck.report.numeric_view`.)
Every chart fits :data:`MAX_WIDTH` pixels, whatever the number of steps or suites, so it never
overflows a page read at 1,280 pixels.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from graphcheck.check.diff import KINDS, Divergence
from graphcheck.check.records import CheckOutcome
from graphcheck.search.result import SuiteResult

MAX_WIDTH = 1080
LABEL_W = 96  # the lane labels on the left
LANE_H = 18
TICK_H = 16
MAX_CELL_W = 36
MIN_CELL_W = 2


@dataclass(frozen=True)
class Cell:
    x: float
    y: float
    w: float
    css: str  # "c-replay", "c-eager", "c-graph", "c-ref", "c-amb"; " c-first" added on the headline's step
    title: str


@dataclass(frozen=True)
class Lane:
    y: float
    label: str


@dataclass(frozen=True)
class StepChart:
    width: int
    height: int
    lanes: tuple[Lane, ...]
    cells: tuple[Cell, ...]
    ticks: tuple[tuple[float, str], ...]
    axis_y: float
    axis_x: int = LABEL_W  # where the cells start, right of the lane labels


def _pair_css(div: Divergence) -> str:
    if div.ambiguous:
        return "c-amb"
    return "c-ref" if "reference" in div.pair else "c-graph"


def _steps(outcome: CheckOutcome) -> list[int]:
    recorded = {rec.step for records in outcome.records.values() for rec in records}
    return sorted(recorded | {d.step for d in outcome.divergences})


def step_chart(outcome: CheckOutcome) -> StepChart | None:
    """The step timeline of a failing outcome (None for a clean one, or one without steps)."""
    steps = _steps(outcome)
    if outcome.clean or not steps:
        return None
    cell_w = max(MIN_CELL_W, min(MAX_CELL_W, (MAX_WIDTH - LABEL_W) / len(steps)))
    column = {step: LABEL_W + i * cell_w for i, step in enumerate(steps)}
    kinds = sorted({d.kind for d in outcome.divergences}, key=lambda k: KINDS.index(k) if k in KINDS else len(KINDS))
    lanes = [Lane(0, "graph engine"), *(Lane((i + 1) * LANE_H, kind) for i, kind in enumerate(kinds))]
    cells = [
        Cell(
            column[r.step],
            0,
            cell_w,
            "c-replay" if r.used_graph else "c-eager",
            f"step {r.step}: " + ("graph replayed" if r.used_graph else "ran eagerly"),
        )
        for r in outcome.records.get("graph", [])
    ]
    first = outcome.first
    seen: set[tuple[str, int]] = set()
    for div in sorted(outcome.divergences, key=lambda d: (d.ambiguous, "reference" in d.pair)):
        if (div.kind, div.step) in seen:
            continue
        seen.add((div.kind, div.step))
        css = _pair_css(div) + (" c-first" if first is not None and div == first else "")
        y = (kinds.index(div.kind) + 1) * LANE_H
        cells.append(Cell(column[div.step], y, cell_w, css, div.headline()[:300]))
    axis_y = len(lanes) * LANE_H
    every = max(1, round(40 / cell_w))
    ticks = tuple((column[s] + cell_w / 2, str(s)) for i, s in enumerate(steps) if i % every == 0)
    width = int(LABEL_W + cell_w * len(steps) + 8)
    return StepChart(width, int(axis_y + TICK_H), tuple(lanes), tuple(cells), ticks, axis_y)


@dataclass(frozen=True)
class CoverageBar:
    y: float
    suite: str
    reached_w: float
    replayed_w: float
    label: str


@dataclass(frozen=True)
class CoverageChart:
    width: int
    height: int
    bar_x: int
    bar_w: int
    bars: tuple[CoverageBar, ...]
    total: int


COVERAGE_BAR_W = 560
COVERAGE_LABEL_W = 150


def coverage_chart(suites: Sequence[SuiteResult], total: int) -> CoverageChart | None:
    """Situations reached per suite, out of ``total`` (None when no suite counted them)."""
    counted = [s for s in suites if s.situations_reached is not None]
    if not counted or total <= 0:
        return None
    bars = []
    for i, suite in enumerate(counted):
        reached, replayed = suite.situations_reached or 0, suite.situations_replayed or 0
        bars.append(
            CoverageBar(
                i * LANE_H,
                suite.name,
                round(COVERAGE_BAR_W * reached / total, 1),
                round(COVERAGE_BAR_W * replayed / total, 1),
                f"{reached}/{total} reached, {replayed} on a replayed step",
            )
        )
    width = COVERAGE_LABEL_W + COVERAGE_BAR_W + 250
    return CoverageChart(width, len(bars) * LANE_H + 4, COVERAGE_LABEL_W, COVERAGE_BAR_W, tuple(bars), total)


__all__ = ["CoverageChart", "StepChart", "coverage_chart", "step_chart"]
