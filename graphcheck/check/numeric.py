"""Eager vs graph for a float model: numeric tolerance, near ties, and requests that part.

An engine running a float model computes its eager steps at the real batch and
its replays at the padded bucket, so the two legitimately differ in low bits.
Here that is allowed, and nothing else:

* float buffers of the state snapshot and the model's scores are compared
  with a tolerance derived from the model's dtype (``Tolerance``);
* a token that differs eager vs graph is *ambiguous* (a near tie) only when
  the two engines' scores at the row that decided it are within that
  tolerance AND the oracle, recomputing each engine's step from its own
  scores, expects the two different tokens too: the difference is then
  explained by the scores alone (each engine is held to its own oracle
  exactly). Equal scores with different tokens are a real divergence. A
  differing draft proposal is a near tie when the two engines swapped their
  best and runner-up draft tokens and both margins are within the tolerance;
* after a near tie the request's two sequences legitimately part: it is no
  longer compared eager vs graph (each engine is still checked against its own
  oracle), and neither are requests whose scheduling the parting changed;
* seeds, step counters, stop flags on equal tokens, running sets before any
  parting, and everything outside this module stay exact.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Mapping

import numpy as np

from graphcheck.check.diff import DiffState, Divergence, diff_steps
from graphcheck.step_result import RequestStep, StepResult

PAIR = "eager vs graph"


@dataclass(frozen=True)
class Tolerance:
    """How far two float results of one model may differ: ``rtol`` of the larger magnitude (at least 1)."""

    dtype: str
    rtol: float

    def bound(self, *arrays: np.ndarray) -> float:
        scale = max([1.0, *(float(np.max(np.abs(a))) for a in arrays if np.size(a))])
        return self.rtol * scale

    def close(self, expected: np.ndarray, actual: np.ndarray) -> np.ndarray:
        """Elementwise: within ``bound`` of each other (NaN equals NaN)."""
        e, a = np.asarray(expected, dtype=np.float64), np.asarray(actual, dtype=np.float64)
        finite = np.isfinite(e) & np.isfinite(a)
        bound = self.bound(e[finite], a[finite]) if finite.any() else 0.0
        return np.isclose(e, a, rtol=0.0, atol=bound, equal_nan=True)


#: The ceilings: the bands of an engine whose noise could not be measured (``graphcheck.check.noise``
#: calibrates the band of every other engine from its measured noise, below these).
TOLERANCES = {"float32": Tolerance("float32", 1e-3), "bfloat16": Tolerance("bfloat16", 6e-2)}


def tolerance_for(model: str) -> Tolerance | None:
    """The ceiling tolerance of a float model; None for the exact model (compared bit for bit)."""
    return TOLERANCES.get(model)


def relative_difference(a: np.ndarray, b: np.ndarray) -> float:
    """max |a - b| over finite entries, relative to the larger magnitude (at least 1): what a band bounds."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return float("inf")
    finite = np.isfinite(a) & np.isfinite(b)
    if not finite.any():
        return 0.0
    a, b = a[finite], b[finite]
    scale = max(1.0, float(np.max(np.abs(a))), float(np.max(np.abs(b))))
    return float(np.max(np.abs(a - b))) / scale


def largest_difference(
    eager: StepResult, graph: StepResult, reports: tuple[Mapping[str, Any], Mapping[str, Any]], parted: set[str]
) -> float | None:
    """The largest relative score difference eager vs graph this step, over the requests both ran with
    the same tokens (None when there is none to compare)."""
    e_by, g_by = eager.by_id(), graph.by_id()
    found = None
    for rid in sorted((set(e_by) & set(g_by)) - parted):
        if e_by[rid].accept_tokens != g_by[rid].accept_tokens:
            continue
        e_rows, g_rows = _rows(reports[0].get(rid)), _rows(reports[1].get(rid))
        if e_rows is None or g_rows is None or e_rows.shape != g_rows.shape:
            continue
        delta = relative_difference(e_rows, g_rows)
        found = delta if found is None else max(found, delta)
    return found


@dataclass
class DriftWatch:
    """Differences under the band that are there on every replay: systematic, not noise.

    ``add`` takes each step's largest difference; ``steps`` replays in a row above
    ``level`` are a drift (reported once). ``trace`` keeps every step's difference,
    for reports (difference against band, step by step).
    """

    level: float
    steps: int
    band: float
    trace: list[tuple[int, float, bool]] = field(default_factory=list)  # (step, difference, replayed)
    _run: list[tuple[int, float]] = field(default_factory=list)
    _reported: bool = False

    def add(self, step: int, delta: float | None, replayed: bool) -> Divergence | None:
        if delta is None:
            return None
        self.trace.append((step, delta, replayed))
        if not replayed:
            return None  # the graph engine's eager steps do not break a run of replays
        if delta <= self.level or delta > self.band:  # noise, or already a divergence of its own
            self._run.clear()
            return None
        self._run.append((step, delta))
        if len(self._run) < self.steps or self._reported:
            return None
        self._reported = True
        first = self._run[0][0]
        return Divergence(
            "value",
            step,
            "model scores (drift)",
            PAIR,
            f"<= {self.level:.3g} on some replay",
            max(d for _, d in self._run),
            detail=(
                f"scores differ by more than {self.level:.3g} of their magnitude on {len(self._run)} replays in a "
                f"row (steps {first}..{step}), under the band {self.band:.3g}: a systematic difference, not noise"
            ),
        )


@dataclass
class Parting:
    """Requests no longer compared eager vs graph, after a near tie (``tainted``, as DiffState)."""

    state: DiffState = field(default_factory=DiffState)

    @property
    def parted(self) -> set[str]:
        return self.state.tainted


def _rows(report: Any) -> np.ndarray | None:
    if report is None:
        return None
    try:
        rows = np.asarray(report.scores, dtype=np.float64)
    except (TypeError, ValueError):
        return None
    return rows if rows.ndim == 2 else None


def _first_difference(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def _near_tie(
    eager: RequestStep,
    graph: RequestStep,
    reports: tuple[Any, Any],
    expected: tuple[RequestStep | None, RequestStep | None],
    tol: Tolerance,
) -> str | None:
    """Why the request's token difference is a near tie, or None when it is not one."""
    if eager.infer_seed != graph.infer_seed:
        return None
    e_rows, g_rows = (_rows(r) for r in reports)
    if eager.accept_tokens != graph.accept_tokens:
        e_want, g_want = expected
        if e_want is None or g_want is None or e_want.accept_tokens == g_want.accept_tokens:
            return None  # the scores do not explain it: the same decision on both engines' scores
        row = _first_difference(eager.accept_tokens, graph.accept_tokens)
        if e_rows is None or g_rows is None or row >= min(len(e_rows), len(g_rows)):
            return None
        e, g = e_rows[row], g_rows[row]
        if e.shape != g.shape or not tol.close(e, g).all():
            return None
        delta = float(np.max(np.abs(e - g))) if e.size else 0.0
        return (
            f"near tie at output row {row}: scores within {tol.bound(e, g):.3g} ({tol.dtype}; max |diff| {delta:.3g})"
        )
    if eager.draft_tokens != graph.draft_tokens:
        return _draft_near_tie(eager, graph, reports, tol, [x for x in (e_rows, g_rows) if x is not None])
    return None


def _draft_near_tie(
    eager: RequestStep, graph: RequestStep, reports: tuple[Any, Any], tol: Tolerance, scale: list[np.ndarray]
) -> str | None:
    """A draft proposal that differs is a near tie when each engine's pick is the other's runner-up
    and both margins are within twice the tolerance (each side may move by the tolerance)."""
    s = _first_difference(eager.draft_tokens, graph.draft_tokens)
    if None in reports or s >= min(len(eager.draft_tokens), len(graph.draft_tokens)):
        return None
    e, g = reports
    if s >= min(len(e.draft_margins), len(g.draft_margins), len(e.draft_runners_up), len(g.draft_runners_up)):
        return None
    swapped = e.draft_runners_up[s] == graph.draft_tokens[s] and g.draft_runners_up[s] == eager.draft_tokens[s]
    bound = 2 * tol.bound(*scale)
    margin = max(e.draft_margins[s], g.draft_margins[s])
    if not swapped or margin > bound:
        return None
    return (
        f"near tie in draft {s}: the engines swap their best two draft tokens, margins within {bound:.3g} ({tol.dtype})"
    )


def _scores_differ(
    step: int, rid: str, slot: int | None, reports: tuple[Any, Any], tol: Tolerance
) -> Divergence | None:
    e_rows, g_rows = (_rows(r) for r in reports)
    if e_rows is None or g_rows is None:
        return None
    if e_rows.shape != g_rows.shape:
        return Divergence("shape", step, "model scores", PAIR, e_rows.shape, g_rows.shape, rid, slot)
    close = tol.close(e_rows, g_rows)
    if close.all():
        return None
    row, col = (int(i) for i in np.argwhere(~close)[0])
    return Divergence(
        "value",
        step,
        "model scores",
        PAIR,
        float(e_rows[row, col]),
        float(g_rows[row, col]),
        rid,
        slot,
        detail=f"output row {row}, token {col}: beyond the {tol.dtype} tolerance {tol.bound(e_rows, g_rows):.3g}",
    )


def diff_engines_numeric(
    eager: StepResult,
    graph: StepResult,
    reports: tuple[Mapping[str, Any], Mapping[str, Any]],
    tol: Tolerance,
    parting: Parting,
    slots: Mapping[str, int],
    expected: tuple[StepResult, StepResult] | None = None,
) -> list[Divergence]:
    """Eager vs graph of one step of a float model (see the module docstring).

    ``expected``: what the model-agnostic oracle expects of each engine, from its own scores.
    """
    step = eager.step
    e_by, g_by = eager.by_id(), graph.by_id()
    found: list[Divergence] = []
    ran_e, ran_g = set(e_by) - parting.parted, set(g_by) - parting.parted
    if ran_e != ran_g:
        if not parting.parted:
            return [Divergence("value", step, "running_requests", PAIR, sorted(ran_e), sorted(ran_g))]
        changed = sorted(ran_e ^ ran_g)  # scheduling after an earlier parting: legitimately different
        parting.parted.update(changed)
        found.append(
            Divergence(
                "value",
                step,
                "running_requests",
                PAIR,
                sorted(ran_e),
                sorted(ran_g),
                detail="scheduling differs after requests parted at a near tie",
                ambiguous=True,
            )
        )
    for rid in sorted(ran_e & ran_g - parting.parted):
        pair_reports = (reports[0].get(rid), reports[1].get(rid))
        diffs = diff_steps(StepResult(step, (e_by[rid],)), StepResult(step, (g_by[rid],)), PAIR, slots=slots)
        if not diffs:
            scores = _scores_differ(step, rid, slots.get(rid), pair_reports, tol)
            found += [scores] if scores is not None else []
            continue
        wants = (expected[0].by_id().get(rid), expected[1].by_id().get(rid)) if expected else (None, None)
        why = _near_tie(e_by[rid], g_by[rid], pair_reports, wants, tol)
        if why is None:
            found += diffs
            continue
        parting.parted.add(rid)
        found += [_ambiguous(d, why) for d in diffs]
    return found


def _ambiguous(d: Divergence, why: str) -> Divergence:
    return replace(d, ambiguous=True, detail=f"{why}; the request is compared with its oracle only from here")


__all__ = [
    "PAIR",
    "DriftWatch",
    "Parting",
    "TOLERANCES",
    "Tolerance",
    "diff_engines_numeric",
    "largest_difference",
    "relative_difference",
    "tolerance_for",
]
