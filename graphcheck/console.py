"""Console rendering with rich: summaries, doctor and fault tables."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from rich.console import Console
from rich.table import Table

from graphcheck.fuzz import FuzzResult
from graphcheck.records import CheckOutcome


def make_console(quiet: bool = False) -> Console:
    """A console; when not a terminal (CI logs, pipes) tables get 160 columns instead of 80."""
    probe = Console()
    width = None if probe.is_terminal else 160
    return Console(highlight=False, quiet=quiet, soft_wrap=False, width=width)


def outcome_line(outcome: CheckOutcome) -> str:
    name = outcome.scenario.name or "scenario"
    if outcome.clean:
        extra = f", {len(outcome.ambiguous)} ambiguous" if outcome.ambiguous else ""
        return f"[green]clean[/] {name}: {outcome.steps_run} steps on {outcome.backend}/{outcome.runner}{extra}"
    return f"[red]divergence[/] {name}: {outcome.first.headline()}"


def summary_table(outcomes: Sequence[CheckOutcome], fuzzed: Sequence[FuzzResult]) -> Table:
    table = Table(title="graphcheck summary", title_justify="left")
    for column in ("check", "examples", "steps", "verdict", "first divergence"):
        table.add_column(column, overflow="fold")
    searched = {id(r.outcome) for r in fuzzed if r.outcome is not None}  # shown in their suite's row
    for outcome in outcomes:
        if id(outcome) in searched:
            continue
        table.add_row(outcome.scenario.name, "1", str(outcome.steps_run), _verdict(outcome), _first(outcome))
    for result in fuzzed:
        verdict = _verdict(result.outcome) if result.outcome else "[green]clean[/]"
        first = _first(result.outcome) if result.outcome else ""
        table.add_row(f"suite {result.suite}", str(result.examples), str(result.steps), verdict, first)
    return table


def _verdict(outcome: CheckOutcome) -> str:
    return "[green]clean[/]" if outcome.clean else "[red]divergence[/]"


def _first(outcome: CheckOutcome) -> str:
    first = outcome.first
    if first is None:
        return ""
    scenario = outcome.scenario
    return f"{first.headline()} [dim](scenario: {len(scenario.requests)} requests, {scenario.num_steps} steps)[/]"


def doctor_table(statuses: Sequence[Any]) -> Table:
    table = Table(title="graphcheck doctor", title_justify="left")
    for column in ("backend", "framework", "version", "device", "graph runner", "--emulate uses", "usable", "note"):
        table.add_column(column, overflow="fold")
    device = {True: "yes", False: "no", None: "not checked"}
    for s in statuses:
        table.add_row(
            s.name, s.framework, s.framework_version or "not installed", device[s.device_present],
            s.runner, s.emulate or "-", "[green]yes[/]" if s.usable else "[red]no[/]", s.note,
        )
    return table


def faults_table(faults: Mapping[str, Any]) -> Table:
    table = Table(title="injectable faults (--inject NAME)", title_justify="left")
    for column in ("name", "class", "what it breaks", "signal"):
        table.add_column(column, overflow="fold")
    for name, fault in sorted(faults.items(), key=lambda kv: (getattr(kv[1], "bug_class", 0), kv[0])):
        table.add_row(name, str(getattr(fault, "bug_class", "")), getattr(fault, "summary", str(fault)), getattr(fault, "signal", ""))
    return table
