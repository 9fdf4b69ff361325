"""A float run's noise for the page: the calibration in words and a small plot, step by step.

The plot shows each compared step's largest relative score difference eager vs
graph (``graphcheck.check.noise.NumericTrace``) on a log scale, against the band
(a step above it is a divergence) and the drift level (replays in a row above it
are a drift). Replayed steps are drawn solid, the graph engine's eager steps
hollow. An SVG of plain shapes, built here so the template only places them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

WIDTH_PER_STEP = 14
HEIGHT = 96
MARGIN_LEFT = 44
MARGIN_BOTTOM = 14
FLOOR_EXPONENT = -9  # differences below 1e-9 (and exact zeros) sit on the axis


@dataclass(frozen=True)
class Mark:
    x: float
    y: float
    replayed: bool
    over: bool  # above the band
    title: str


@dataclass(frozen=True)
class Line:
    y: float
    label: str
    css: str


@dataclass(frozen=True)
class NumericView:
    summary: str
    note: str
    width: int
    height: int
    axis_x: int
    axis_y: int
    marks: tuple[Mark, ...]
    lines: tuple[Line, ...]
    ticks: tuple[tuple[float, str], ...]


def numeric_view(trace: Any) -> NumericView | None:
    """The view of ``CheckOutcome.numeric`` (None for the exact model)."""
    if trace is None:
        return None
    cal = trace.calibration
    steps = list(trace.steps)
    top = math.ceil(math.log10(max(cal.ceiling, trace.largest, 1e-9) * 2))
    plot_h = HEIGHT - MARGIN_BOTTOM

    def y(value: float) -> float:
        exp = math.log10(value) if value > 0 else FLOOR_EXPONENT
        exp = min(max(exp, FLOOR_EXPONENT), top)
        return round(plot_h * (top - exp) / (top - FLOOR_EXPONENT), 1)

    marks = tuple(
        Mark(
            MARGIN_LEFT + WIDTH_PER_STEP * i + WIDTH_PER_STEP / 2,
            y(diff),
            replayed,
            diff > cal.band,
            f"step {step}: {diff:.3g} ({'replay' if replayed else 'eager step'})",
        )
        for i, (step, diff, replayed) in enumerate(steps)
    )
    lines = [Line(y(cal.band), f"band {cal.band:.2g}", "band"), Line(y(cal.drift_level), "drift", "drift")]
    if cal.floor:
        lines.append(Line(y(cal.floor), f"floor {cal.floor:.2g}", "floor"))
    ticks = tuple((y(10.0**e), f"1e{e}") for e in range(FLOOR_EXPONENT, top + 1, 3))
    width = MARGIN_LEFT + WIDTH_PER_STEP * max(1, len(steps)) + 60
    return NumericView(
        summary=_summary(cal, trace.largest, len(steps)),
        note=cal.note,
        width=width,
        height=HEIGHT,
        axis_x=MARGIN_LEFT,
        axis_y=plot_h,
        marks=marks,
        lines=tuple(lines),
        ticks=ticks,
    )


def plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _summary(cal: Any, largest: float, steps: int) -> str:
    if cal.probed:
        measured = (
            f"measured noise floor {cal.floor:.3g} ({plural(cal.compared, 'score row')} of the eager engine compared)"
        )
    else:
        measured = "noise not measured (the fixed band applies)"
    return (
        f"{cal.dtype}: {measured}; band {cal.band:.3g} of the magnitude (ceiling {cal.ceiling:.3g}), drift level "
        f"{cal.drift_level:.3g}; largest difference eager vs graph {largest:.3g} over {plural(steps, 'compared step')}"
    )


__all__ = ["NumericView", "numeric_view"]
