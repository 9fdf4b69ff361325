"""Console rendering of ``graphcheck catalog --seeds``: a line per finished run, the table, the totals."""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from graphcheck.catalog.seeds import CleanSeeds, FaultSeeds, SeedRun, SeedsResult


def _maybe(value: float | None, fmt: str = "{:g}") -> str:
    return "—" if value is None else fmt.format(value)


def _seeds(seeds: tuple[int, ...]) -> str:
    return ", ".join(map(str, seeds)) or "—"


def progress_line(run: SeedRun) -> str:
    """One line as each run finishes."""
    name = run.fault or "clean engine"
    if not run.caught:
        verdict = "[green]clean[/]" if not run.fault else "[red]missed[/]"
        return f"{verdict} {escape(name)} seed {run.seed}: {run.examples} examples in {run.seconds:.1f}s"
    verdict = "[red]false positive[/]" if not run.fault else "[green]caught[/]"
    return (
        f"{verdict} {escape(name)} seed {run.seed}: by {escape(run.caught_by or '')} ({run.kind}) "
        f"after {run.examples} examples, {run.seconds:.1f}s"
    )


def _cell(run: SeedRun) -> str:
    """A fault's run at one seed: the suite that caught it, or "missed"."""
    return f"[green]{escape(run.caught_by or '')}[/]" if run.caught else "[red]missed[/]"


def _clean_cell(run: SeedRun) -> str:
    return f"[red]diverged: {escape(run.caught_by or '')}[/]" if run.caught else "[green]clean[/]"


def _fault_cells(fault: FaultSeeds) -> list[str]:
    colour = "green" if fault.detected else "red"
    return [
        fault.fault,
        str(fault.bug_class),
        f"[{colour}]{fault.caught}/{len(fault.runs)}[/]",
        *(_cell(r) for r in fault.runs),
        _maybe(fault.median_examples),
        _maybe(fault.median_seconds, "{:.1f}"),
        _seeds(fault.missed_seeds),
    ]


def _clean_cells(clean: CleanSeeds) -> list[str]:
    colour = "green" if clean.clean else "red"
    return [
        "clean engine",
        "—",
        f"[{colour}]{clean.clean_runs}/{len(clean.runs)} clean[/]",
        *(_clean_cell(r) for r in clean.runs),
        "—",
        "—",
        _seeds(clean.false_positive_seeds),
    ]


def seeds_table(result: SeedsResult) -> Table:
    cfg = result.settings
    table = Table(
        title=(
            f"graphcheck catalog: {result.backend}, {cfg.seeds} seeds ({_seeds(cfg.seed_list)}), "
            f"graphcheck run --profile {cfg.profile} ({cfg.examples} examples per suite) at each"
        ),
        title_justify="left",
        caption=(
            "seed columns: the suite (or demo scenario) whose example diverged first, as `graphcheck run` "
            "stops there; median examples (whole run) and seconds to the first divergence, over the caught seeds"
        ),
        caption_justify="left",
    )
    columns = ["fault", "class", "caught", *(f"seed {s}" for s in cfg.seed_list)]
    for column in [*columns, "median examples", "median seconds", "missed seeds"]:
        right = column in ("class", "caught", "median examples", "median seconds")
        table.add_column(column, justify="right" if right else "left", overflow="fold")
    for fault in result.faults:
        table.add_row(*_fault_cells(fault))
    table.add_section()
    table.add_row(*_clean_cells(result.clean))
    return table


def totals_lines(result: SeedsResult) -> list[str]:
    s = result.summary
    lines = [
        f"caught at every seed: {s.caught_everywhere}/{s.faults} faults; "
        f"(fault, seed) pairs caught: {s.pairs_caught}/{s.pairs} ({100 * s.pair_rate:.0f}%); "
        f"clean runs clean: {s.clean_runs_clean}/{s.clean_runs}",
    ]
    if s.median_seconds is not None:
        lines.append(f"median to the first divergence: {s.median_examples:g} examples, {s.median_seconds:.1f}s")
    missed = [f"{f.fault} (seeds {_seeds(f.missed_seeds)})" for f in result.faults if not f.detected]
    if missed:
        lines.append(f"[bold red]MISSED[/] {', '.join(missed)}")
    if not result.clean.clean:
        first = next(r for r in result.clean.runs if r.caught)
        lines.append(
            f"[bold red]CLEAN ENGINE DIVERGED[/] at seeds {_seeds(result.clean.false_positive_seeds)}; "
            f"seed {first.seed}: {escape(first.headline or '')}"
        )
    verdict = "[bold green]PASS[/]" if result.passed else "[bold red]FAIL[/]"
    lines.append(f"{verdict} in {result.elapsed_s:.1f}s")
    return lines


__all__ = ["progress_line", "seeds_table", "totals_lines"]
