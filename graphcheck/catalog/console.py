"""Console rendering of ``graphcheck catalog``: a line per finished fault, the table, the totals."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.measure import Measurement
from rich.table import Table

from graphcheck.catalog.run import CatalogResult, CatalogSummary, CleanResult, FaultResult, search_localisation
from graphcheck.search.timed_search import SearchResult

_YES, _NO = "[green]yes[/]", "[red]no[/]"
#: The first kind column: the lockstep compares the engines' state buffers, so "state" can come first.
FIRST_KIND_HEADER = "first kind (state diff on)"


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


def _localised(search: SearchResult) -> str:
    """``kernel / buffer`` of the shrunk divergence, "—" without one."""
    loc = search_localisation(search)
    return "—" if loc is None else escape(loc.target)


def _declared(fault: FaultResult) -> str:
    match = fault.localisation_matches
    return "—" if match is None else _YES if match else _NO


def _steps(steps: int | None) -> str:
    return "—" if steps is None else str(steps)


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
    where = "" if search_localisation(search) is None else f", localised to {_localised(search)}"
    return (
        f"[green]caught[/] {name}: {kind} after {examples} examples, {seconds}s; shrunk {_size(search)}{where}; {base}"
    )


def catalog_table(result: CatalogResult) -> Table:
    cfg = result.settings
    table = Table(
        title=f"graphcheck catalog: {result.backend}, budget {cfg.budget_s:g}s per fault, seed {cfg.seed}",
        title_justify="left",
        caption=(
            "* shrink cut at its budget: the smallest failing scenario seen. steps to first div: of the detecting "
            "example; localised to: where the shrunk scenario's first divergence began (kernel / buffer); declared: "
            "whether the fault declares it breaks that (a miss does not fail the catalog)"
        ),
        caption_justify="left",
    )
    for column, justify in (
        ("fault", "left"),
        ("class", "right"),
        ("graphcheck", "left"),
        (FIRST_KIND_HEADER, "left"),
        ("seconds", "right"),
        ("examples", "right"),
        ("steps to first div", "right"),
        ("shrunk req×steps", "right"),
        ("localised to (shrunk)", "left"),
        ("declared", "left"),
        ("baseline", "left"),
    ):
        table.add_column(column, justify=justify, overflow="fold")
    for fault in result.faults:
        table.add_row(*_fault_cells(fault))
    table.add_section()
    table.add_row(*_clean_cells(result.clean))
    return table


def print_table(console: Console, table: Table) -> None:
    """``table`` on ``console``; when that is no terminal (a log, CI), at its natural width, never squeezed.

    The catalog table has eleven columns: at the plain console's width the places and kinds
    would fold a few characters to a line. A terminal gets the table fitted to its width.
    """
    if console.is_terminal:
        console.print(table)
        return
    width = console.width  # print(width=) cannot go past it: widen the console for this table only
    console.width = max(width, Measurement.get(console, console.options.update(width=10_000), table).maximum)
    try:
        console.print(table)
    finally:
        console.width = width


def _fault_cells(fault: FaultResult) -> tuple[str, ...]:
    kind, seconds, examples = _found(fault.search)
    return (
        fault.fault,
        str(fault.bug_class),
        _YES if fault.detected else _NO,
        kind,
        seconds,
        examples,
        _steps(fault.steps_to_divergence.detection),
        _size(fault.search),
        _localised(fault.search),
        _declared(fault),
        _YES if fault.baseline.detected else _NO,
    )


def _clean_cells(clean: CleanResult) -> tuple[str, ...]:
    kind, seconds, examples = _found(clean.search)
    verdict = "[red]diverged[/]" if clean.search.detected else "[green]clean[/]"
    baseline = "[red]failed[/]" if clean.baseline.detected else "[green]clean[/]"
    steps = _steps(clean.steps_to_divergence.detection)
    return (
        "clean engine",
        "—",
        verdict,
        kind,
        seconds,
        examples,
        steps,
        _size(clean.search),
        _localised(clean.search),
        "—",
        baseline,
    )


def _maybe(value: float | None) -> str:
    return "—" if value is None else f"{value:g}"


def _miss(fault: FaultResult) -> str:
    """A fault not localised to what it declares, and where it went instead."""
    loc = fault.localisation
    if loc is None:
        return f"{fault.fault} ({'not localised' if fault.detected else 'not detected'})"
    if not fault.breaks:
        return f"{fault.fault} (nothing declared; localised to {escape(loc.target)})"
    return f"{fault.fault} (localised to {escape(loc.target)}, {loc.method})"


def localised_line(result: CatalogResult) -> str:
    """How many faults were localised to what they declare they break, and the misses (not a failure)."""
    s = result.summary
    line = f"localised to the declared kernel/buffer: {s.localised_matching}/{s.faults}"
    misses = [_miss(f) for f in result.faults if f.fault in s.localisation_misses]
    return line + (f"; [yellow]misses[/]: {', '.join(misses)}" if misses else "")


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
    lines.append(localised_line(result))
    if s.median_steps_detection is not None:
        lines.append(
            f"median steps to first divergence: {s.median_steps_detection:g} (detection), "
            f"{_maybe(s.median_steps_shrunk)} (shrunk)"
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


__all__ = ["FIRST_KIND_HEADER", "catalog_table", "localised_line", "print_table", "progress_line", "totals_lines"]
