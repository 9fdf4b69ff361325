"""Console rendering of ``graphcheck catalog``: a line per finished fault, the table, the totals."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from graphcheck.catalog.run import CatalogResult, CatalogSummary, CleanResult, FaultResult
from graphcheck.search.timed_search import SearchResult

_YES, _NO = "[green]yes[/]", "[red]no[/]"


def _size(search: SearchResult) -> str:
    if search.shrunk is None:
        return "—"
    requests, steps = search.shrunk.size
    return f"{requests}×{steps}" + ("" if search.shrunk.complete else "*")


def _found(search: SearchResult) -> tuple[str, str, str]:
    """(first kind, seconds, examples) of a search: to detection, or the whole budget."""
    det = search.detection
    if det is None:
        return "—", f"{search.seconds:.1f}", str(search.examples)
    return f"{det.kind} [dim]{det.outcome.first.tensor}[/]", f"{det.seconds:.1f}", str(det.examples)


def progress_line(name: str, result: Any) -> str:
    """One line as each fault (``name``) or the clean engine (``name == ""``) finishes."""
    search, baseline = result.search, result.baseline
    base = (
        f"baseline {'failed' if baseline.detected else 'passed'} ({len(baseline.failed)}/{len(baseline.cases)} cases)"
    )
    if not name:
        verdict = "[red]diverged[/]" if search.detected else "[green]clean[/]"
        return f"clean engine: {verdict}, {search.examples} examples in {search.seconds:.1f}s; {base}"
    if search.detection is None:
        return f"[red]missed[/] {name}: {search.examples} examples in {search.seconds:.1f}s; {base}"
    kind, seconds, examples = _found(search)
    return f"[green]caught[/] {name}: {kind} after {examples} examples, {seconds}s; shrunk {_size(search)}; {base}"


def catalog_table(result: CatalogResult) -> Table:
    cfg = result.settings
    table = Table(
        title=f"graphcheck catalog: {result.backend}, budget {cfg.budget_s:g}s per fault, seed {cfg.seed}",
        title_justify="left",
        caption="* shrink cut at its budget: the smallest failing scenario seen",
        caption_justify="left",
    )
    for column, justify in (
        ("fault", "left"),
        ("class", "right"),
        ("graphcheck", "left"),
        ("first kind", "left"),
        ("seconds", "right"),
        ("examples", "right"),
        ("shrunk req×steps", "right"),
        ("baseline", "left"),
    ):
        table.add_column(column, justify=justify, overflow="fold")
    for fault in result.faults:
        table.add_row(*_fault_cells(fault))
    table.add_section()
    table.add_row(*_clean_cells(result.clean))
    return table


def _fault_cells(fault: FaultResult) -> tuple[str, ...]:
    kind, seconds, examples = _found(fault.search)
    return (
        fault.fault,
        str(fault.bug_class),
        _YES if fault.detected else _NO,
        kind,
        seconds,
        examples,
        _size(fault.search),
        _YES if fault.baseline.detected else _NO,
    )


def _clean_cells(clean: CleanResult) -> tuple[str, ...]:
    kind, seconds, examples = _found(clean.search)
    verdict = "[red]diverged[/]" if clean.search.detected else "[green]clean[/]"
    baseline = "[red]failed[/]" if clean.baseline.detected else "[green]clean[/]"
    return ("clean engine", "—", verdict, kind, seconds, examples, _size(clean.search), baseline)


def totals_lines(result: CatalogResult) -> list[str]:
    s: CatalogSummary = result.summary
    lines = [
        f"detection rate: graphcheck {s.detected}/{s.faults} ({100 * s.rate:.0f}%), "
        f"peer-style baseline {s.baseline_detected}/{s.faults} ({100 * s.baseline_rate:.0f}%)",
    ]
    if s.median_seconds is not None:
        lines.append(
            f"median to first detection: {s.median_seconds:.1f}s, {s.median_examples:g} examples; "
            f"median shrunk scenario (requests × steps): {s.median_shrunk_requests:g} × {s.median_shrunk_steps:g}"
        )
    missed = [f.fault for f in result.faults if not f.detected]
    if missed:
        lines.append(f"[bold red]MISSED[/] {', '.join(missed)}")
    if not result.clean.clean:
        lines.append(
            "[bold red]CLEAN ENGINE DIVERGED[/] "
            + (
                result.clean.search.detection.headline
                if result.clean.search.detection
                else result.clean.baseline.first_failure
            )
        )
    verdict = "[bold green]PASS[/]" if result.passed else "[bold red]FAIL[/]"
    lines.append(f"{verdict} in {result.elapsed_s:.1f}s")
    return lines


__all__ = ["catalog_table", "progress_line", "totals_lines"]
