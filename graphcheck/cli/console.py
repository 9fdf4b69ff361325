"""Console rendering with rich: summaries, doctor and fault tables."""

from __future__ import annotations

import os
import sys
from typing import Any, Mapping, Sequence

from rich.console import Console, Group, RenderableType
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from graphcheck.check.records import CheckOutcome
from graphcheck.check.situations import SituationRow
from graphcheck.cli.progress import plural
from graphcheck.display import one_line
from graphcheck.search.result import SuiteResult

#: Console width when the output is not a terminal (a CI log, a pipe): wide enough for the tables.
PLAIN_WIDTH = 120


class _OutputConsole(Console):
    """rich's console, except that a reader who closes stdout (``graphcheck faults | head``) does not end
    the command: the rest of its output goes to /dev/null and the exit code is still the verdict."""

    def on_broken_pipe(self) -> None:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def make_console(quiet: bool = False) -> Console:
    """A console for stdout; when it is not a terminal, PLAIN_WIDTH columns instead of rich's 80."""
    width = None if Console().is_terminal else PLAIN_WIDTH
    # soft_wrap: a line of text (a path, a replay command) is never broken; tables still fit the width
    return _OutputConsole(highlight=False, quiet=quiet, soft_wrap=True, width=width)


def plain(text: object) -> str:
    """Untrusted text (a scenario name, a request id, an engine's error message) made safe to print.

    One line, whatever it holds: control characters, line separators and lone
    surrogates become visible escapes, so nothing in it can start a line of
    its own (a GitHub Actions runner executes a line that starts with ``::``);
    rich markup in it is escaped, so ``[/x]`` prints as written.
    """
    return escape(one_line(text))


def outcome_line(outcome: CheckOutcome) -> str:
    name = plain(outcome.scenario.name or "scenario")
    if outcome.clean:
        extra = f", {len(outcome.ambiguous)} ambiguous" if outcome.ambiguous else ""
        return f"[green]clean[/] {name}: {outcome.steps_run} steps on {outcome.backend}/{outcome.runner}{extra}"
    if outcome.engine_error is not None:
        return f"[red]engine aborted[/] {name}: {plain(outcome.engine_error)} (engine code may not end graphcheck)"
    return f"[red]divergence[/] {name}: {plain(outcome.first.headline())}"


def where_line(outcome: CheckOutcome | None) -> str | None:
    """``where: <Localisation.headline()>`` (markup-safe, one line) for a failing outcome that was localised."""
    if outcome is None or outcome.clean or outcome.localisation is None:
        return None
    return f"where: {plain(outcome.localisation.headline())}"


def summary_table(outcomes: Sequence[CheckOutcome], fuzzed: Sequence[SuiteResult]) -> Table:
    table = Table(title="graphcheck summary", title_justify="left")
    for column in ("check", "scenarios", "steps", "verdict", "first divergence"):
        table.add_column(column, overflow="fold")
    searched = {id(r.outcome) for r in fuzzed if r.outcome is not None}  # shown in their suite's row
    for outcome in outcomes:
        if id(outcome) in searched:
            continue
        table.add_row(plain(outcome.scenario.name), "1", str(outcome.steps_run), _verdict(outcome), _first(outcome))
    for result in fuzzed:
        verdict = _verdict(result.outcome) if result.outcome else "[green]clean[/]"
        first = _first(result.outcome) if result.outcome else ""
        table.add_row(f"suite {plain(result.name)}", str(result.examples), str(result.steps), verdict, first)
    return table


def situations_table(rows: Sequence[SituationRow]) -> Table:
    """The situation table, one row per group: each situation with the scenarios that reached it and,
    after a slash, those of them that reached it on a replayed step (``name 12/5``).

    A situation no scenario reached is red (``name 0/0``), one reached but never on a replayed
    step yellow (``name 12/0``); one the reported diverging scenario reaches is marked ``!``.
    """
    reached = sum(1 for r in rows if r.examples)
    replayed = sum(1 for r in rows if r.replayed_examples)
    table = Table(
        title=f"situations reached: {reached} of {len(rows)}, on a replayed step: {replayed} of {len(rows)} "
        "(scenarios per situation / of them on a replayed step; ! = in the divergence)",
        title_justify="left",
    )
    table.add_column("group", no_wrap=True)
    table.add_column("situations", overflow="fold")
    groups: dict[str, list[str]] = {}
    for row in rows:
        cell = f"{row.situation.name} {row.examples}/{row.replayed_examples}{'!' if row.involved else ''}"
        if not row.examples:
            cell = f"[red]{cell}[/]"
        elif not row.replayed_examples:
            cell = f"[yellow]{cell}[/]"
        groups.setdefault(row.situation.group, []).append(cell)
    for group, cells in groups.items():
        table.add_row(group, ", ".join(cells))
    return table


def _verdict(outcome: CheckOutcome) -> str:
    return "[green]clean[/]" if outcome.clean else "[red]divergence[/]"


def _first(outcome: CheckOutcome) -> str:
    first = outcome.first
    if first is None:
        return ""
    scenario = outcome.scenario
    size = f"{plural(len(scenario.requests), 'request')}, {plural(scenario.num_steps, 'step')}"
    return f"{plain(first.headline())} [dim](scenario: {size})[/]"


def doctor_table(statuses: Sequence[Any]) -> Table:
    table = Table(title="graphcheck doctor", title_justify="left")
    for column in ("backend", "framework", "version", "device", "graph runner", "--emulate uses", "usable", "note"):
        table.add_column(column, overflow="fold")
    device = {True: "yes", False: "no", None: "not checked"}
    for s in statuses:
        table.add_row(
            s.name,
            s.framework,
            s.framework_version or "not installed",
            device[s.device_present],
            s.runner,
            s.emulate or "-",
            "[green]yes[/]" if s.usable else "[red]no[/]",
            plain(s.note),
        )
    return table


def faults_table(faults: Mapping[str, Any], *, details: bool = True) -> RenderableType:
    """The faults by bug class: the full table, or (``details=False``) one line per fault, its summary cut
    to the console's width (the name, what ``--inject`` takes, is never cut)."""
    ordered = sorted(faults.items(), key=lambda kv: (getattr(kv[1], "bug_class", 0), kv[0]))
    if not details:
        return _fault_lines(ordered)
    table = Table(title="injectable faults (--inject NAME)", title_justify="left")
    for column in ("name", "class", "what it breaks", "signal", "declared breaks"):
        table.add_column(column, overflow="fold")
    for name, fault in ordered:
        table.add_row(  # an engine's own text: shown as written, bidi controls and markup included
            plain(name),
            str(getattr(fault, "bug_class", "")),
            plain(getattr(fault, "summary", str(fault))),
            plain(getattr(fault, "signal", "")),
            plain(", ".join(getattr(fault, "breaks", ()))),
        )
    return table


def _fault_lines(ordered: Sequence[tuple[str, Any]]) -> Group:
    width = max((len(one_line(name)) for name, _ in ordered), default=4)
    lines = [Text("injectable faults (--inject NAME); --details for what each breaks and shows", style="bold")]
    lines.append(Text(f"{'name':<{width}}  class  what it breaks", style="bold"))
    for name, fault in ordered:
        row = f"{one_line(name):<{width}}  {str(getattr(fault, 'bug_class', '')):<5}  "
        line = Text(row + one_line(getattr(fault, "summary", str(fault))), no_wrap=True, overflow="ellipsis")
        lines.append(line)
    return Group(*lines)
