"""The catalog's index.html: one self-contained page rendered with jinja2 (``catalog.html.j2``)."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import jinja2

from graphcheck.catalog.run import CatalogResult, CatalogSummary, FaultResult
from graphcheck.report.catalog_model import CatalogInfo, replay_command, scenario_file
from graphcheck.report.html import environment
from graphcheck.search.timed_search import SearchResult

TEMPLATE = "catalog.html.j2"


@dataclass(frozen=True)
class SearchView:
    """One search, formatted: the first detection and the shrunk scenario."""

    detected: bool
    suites: str
    examples: int
    seconds: str
    suite: str = "—"  # where the first divergence came from
    kind: str = "—"
    tensor: str = "—"
    headline: str = ""
    shrunk_size: str = "—"  # "requests × steps", starred when the shrink budget cut it short
    shrunk_kind: str = "—"
    shrunk_headline: str = ""
    shrink_note: str = ""
    scenario_file: str = ""
    replay: str = ""


@dataclass(frozen=True)
class FaultRow:
    name: str
    bug_class: int
    signal: str
    search: SearchView
    baseline_detected: bool
    baseline_failed: str  # "3 / 8 cases"
    baseline_reason: str


@dataclass(frozen=True)
class CatalogView:
    result: CatalogResult
    info: CatalogInfo
    summary: CatalogSummary
    rows: list[FaultRow]
    clean: SearchView
    clean_baseline_reason: str

    @property
    def verdict(self) -> str:
        return "PASS" if self.result.passed else "FAIL"


def _seconds(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f} s"


def search_view(search: SearchResult, name: str, result: CatalogResult, info: CatalogInfo, out_dir: Path) -> SearchView:
    base = SearchView(search.detected, ", ".join(search.suites), search.examples, _seconds(search.seconds))
    det, shrunk = search.detection, search.shrunk
    if det is None or shrunk is None:
        return base
    first, small = det.outcome.first, shrunk.outcome.first
    requests, steps = shrunk.size
    note = f"{shrunk.examples} runs, {shrunk.seconds:.1f} s" + ("" if shrunk.complete else ", cut at the shrink budget")
    path = out_dir / scenario_file(name)
    return SearchView(
        True,
        base.suites,
        base.examples,
        _seconds(det.seconds),
        det.suite,
        first.kind,
        first.tensor,
        first.headline(),
        f"{requests} × {steps}" + ("" if shrunk.complete else "*"),
        small.kind,
        small.headline(),
        note,
        scenario_file(name),
        replay_command(path, result.backend, info.emulate, name, result.settings.engine, info.emulator),
    )


def fault_row(fault: FaultResult, result: CatalogResult, info: CatalogInfo, out_dir: Path) -> FaultRow:
    baseline = fault.baseline
    return FaultRow(
        fault.fault,
        fault.bug_class,
        fault.signal,
        search_view(fault.search, fault.fault, result, info, out_dir),
        baseline.detected,
        f"{len(baseline.failed)} / {len(baseline.cases)} cases",
        baseline.first_failure,
    )


def catalog_view(result: CatalogResult, info: CatalogInfo, out_dir: Path) -> CatalogView:
    rows = [fault_row(f, result, info, out_dir) for f in result.faults]
    clean = search_view(result.clean.search, "", result, info, out_dir)
    return CatalogView(result, info, result.summary, rows, clean, result.clean.baseline.first_failure)


@functools.cache
def _page() -> jinja2.Template:
    """The catalog's template, compiled once a process."""
    env = environment()
    env.filters["percent"] = lambda rate: f"{100 * rate:.0f}%"
    env.filters["maybe"] = lambda value, fmt="{:g}": "—" if value is None else fmt.format(value)
    return env.get_template(TEMPLATE)


def render_catalog(result: CatalogResult, info: CatalogInfo, out_dir: Path) -> str:
    return _page().render(view=catalog_view(result, info, Path(out_dir)))


__all__ = ["CatalogView", "FaultRow", "SearchView", "catalog_view", "render_catalog"]
