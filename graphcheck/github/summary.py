"""The Markdown step summary of a run, as GitHub renders it on the workflow run's page.

GitHub refuses a step summary of 1 MiB or more (and then shows nothing), so
``render_summary`` never returns more than ``max_bytes`` of UTF-8: the top
divergence table stops early with a note saying how many rows it left out,
every cell is clipped, and a final cut at a character boundary backs that up.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from urllib.parse import quote

from graphcheck.check.diff import Divergence
from graphcheck.check.records import CheckOutcome, Localisation
from graphcheck.display import shown
from graphcheck.github.model import FinishedRun
from graphcheck.github.workflow import repo_relative
from graphcheck.report.fmt import clip, show
from graphcheck.report.localisation import BlobLinks, source_link
from graphcheck.report.views import where_of

#: GitHub's limit on one step's summary; what we write stays strictly below it.
SUMMARY_LIMIT_BYTES = 1024 * 1024
#: Rows of the top-divergence table (the full list is in divergences.json).
TOP_ROWS = 50
#: Rows of the suite table.
MAX_SUITE_ROWS = 50
#: Characters of one table cell, of the headline, and of the replay command.
MAX_CELL_CHARS = 100
MAX_HEADLINE_CHARS = 600
MAX_COMMAND_CHARS = 4000
#: Appended when the final cut at ``max_bytes`` had to drop text.
CUT_MARKER = (
    "\n\n_… summary cut to stay under GitHub's 1 MiB step-summary limit; the full report is in the artifact._\n"
)

_INLINE_SPECIAL = re.compile(r"([\\`*_\[\]<>|&~$])")
_BACKTICKS = re.compile(r"`+")

_TABLE_HEAD = (
    "| # | scenario | step | kind | tensor | where | pair | expected | actual |\n"
    "|---:|---|---:|---|---|---|---|---|---|\n"
)


def utf8(text: str) -> bytes:
    """``text`` as UTF-8; a lone surrogate (from a decoded engine message) becomes ``?`` instead of raising."""
    return text.encode("utf-8", "replace")


def fit_utf8(text: str, max_bytes: int, marker: str = CUT_MARKER) -> str:
    """``text`` if its UTF-8 fits in ``max_bytes``; else its longest prefix that fits with ``marker``.

    The cut falls on a character boundary: a partial multi-byte sequence at the
    end of the kept bytes is dropped, never emitted.
    """
    data = utf8(text)
    if len(data) <= max_bytes:
        return data.decode("utf-8")
    tail = utf8(marker)
    if len(tail) > max_bytes:
        tail = b""
    kept = data[: max_bytes - len(tail)].decode("utf-8", "ignore")
    return kept + tail.decode("utf-8")


def _clip(text: str, limit: int) -> str:
    return clip(" ".join(text.split()), limit)  # one line: a cell or heading cannot hold a line break


def md(text: str, limit: int = MAX_CELL_CHARS) -> str:
    """Plain text for a Markdown paragraph or table cell: one line, clipped, markup characters escaped."""
    return _INLINE_SPECIAL.sub(r"\\\1", _clip(text, limit))


def code(text: str, limit: int = MAX_CELL_CHARS) -> str:
    """A code span for a table cell; ``|`` escaped as GFM tables require, even inside code."""
    body = _clip(text, limit).replace("|", "\\|")
    if not body:
        return ""
    fence = "`" * (max((len(m) for m in _BACKTICKS.findall(body)), default=0) + 1)
    pad = " " if body[0] == "`" or body[-1] == "`" else ""
    return f"{fence}{pad}{body}{pad}{fence}"


def code_block(text: str, lang: str = "sh") -> str:
    """A fenced block longer than any backtick run inside it."""
    fence = "`" * max(3, max((len(m) for m in _BACKTICKS.findall(text)), default=0) + 1)
    return f"{fence}{lang}\n{text}\n{fence}\n"


def _seconds(value: float) -> str:
    return f"{value:.1f} s" if value < 120 else f"{value / 60:.1f} min"


def _head(run: FinishedRun) -> str:
    info, outcomes = run.run_info, run.outcomes
    lines = [f"## graphcheck: {'✅ clean' if run.clean else '❌ divergence'}", ""]
    first = run.first()
    if first is not None:
        outcome, div = first
        lines += [
            f"**First divergence** in {code(outcome.scenario.name or 'scenario')}: "
            f"{md(div.headline(), MAX_HEADLINE_CHARS)}",
            "",
        ]
        if outcome.localisation is not None:
            lines += [where_line(outcome.localisation, run.ci.blob_links), ""]
    else:
        fuzzed = sum(s.examples for s in run.suites)
        lines += [
            f"{len(outcomes) + fuzzed} scenarios checked ({fuzzed} fuzzed): eager, graph replay and the "
            "NumPy reference agree on every step.",
            "",
        ]
    runner = code(info.runner) + (" (emulated on the CPU)" if info.emulate else "")
    diverged = sum(not o.clean for o in outcomes)
    rows = [
        ("backend", f"{code(info.backend)}, graph runner {runner}"),
        ("engine", code(info.engine)),
        ("profile, seed", f"{code(info.profile) or '—'}, {'—' if info.seed is None else info.seed}"),
        ("injected faults", ", ".join(code(f) for f in info.faults) or "none"),
        ("scenarios", f"{len(outcomes)} checked, {diverged} diverged"),
        (
            "suites",
            f"{len(run.suites)} fuzzed, {sum(s.examples for s in run.suites)} scenarios, "
            f"{sum(s.steps for s in run.suites)} engine steps"
            if run.suites
            else "none fuzzed",
        ),
        ("divergences", f"{run.failure_count} failing, {run.ambiguous_count} ambiguous (reported, never failing)"),
        ("elapsed", _seconds(info.elapsed_s)),
        ("run", f"{code(info.run_id)}, graphcheck {md(info.version or '?')}"),
        ("command", code(run.command, MAX_COMMAND_CHARS // 8)),
    ]
    lines += ["| run | |", "|---|---|", *(f"| {k} | {v} |" for k, v in rows), ""]
    if run.suites:
        lines += ["| suite | examples | engine steps | time | verdict |", "|---|---:|---:|---:|---|"]
        for suite in run.suites[:MAX_SUITE_ROWS]:
            verdict = "✅ clean" if suite.clean else "❌ divergence (shrunk)"
            lines.append(
                f"| {code(suite.name)} | {suite.examples} | {suite.steps} | {_seconds(suite.elapsed_s)} | {verdict} |"
            )
        if len(run.suites) > MAX_SUITE_ROWS:
            lines.append(f"| … {len(run.suites) - MAX_SUITE_ROWS} more | | | | |")
        lines.append("")
    return "\n".join(lines) + "\n"


def where_line(loc: Localisation, links: BlobLinks | None = None) -> str:
    """**Where it first diverged**: the localisation's headline, then a link to the kernel's source line
    at the run's commit where ``links`` can make one."""
    text = f"**Where it first diverged**: {md(loc.headline(), MAX_HEADLINE_CHARS)}"
    source = source_link(loc.source_file, loc.source_line, links)
    if source is not None and source.href.startswith(("https://", "http://")):
        text += f" ([{md(source.text)}]({quote(source.href, safe=':/#%?=&~')}))"  # no ( ) or space ends the link
    return text


def divergence_row(index: int, outcome: CheckOutcome, div: Divergence) -> str:
    cells = (
        str(index),
        code(outcome.scenario.name or "scenario"),
        str(div.step),
        md(div.kind),
        code(div.tensor),
        md(where_of(div)),
        md(div.pair),
        code(show(div.expected, div.kind, MAX_CELL_CHARS)),
        code(show(div.actual, div.kind, MAX_CELL_CHARS)),
    )
    return "| " + " | ".join(cells) + " |\n"


def _table(run: FinishedRun, budget: int, top: int) -> str:
    """The top-divergence table in at most ``budget`` bytes (a note included when rows were left out)."""
    total = run.failure_count
    if total == 0:
        return ""
    heading = f"### Top divergences ({min(top, total)} of {total})\n\n"
    out = [heading, _TABLE_HEAD]
    reserve = 200  # the "left out" note
    used = len(utf8(heading + _TABLE_HEAD)) + reserve
    shown = 0
    for outcome, div in run.divergences():
        if shown >= top:
            break
        row = divergence_row(shown + 1, outcome, div)
        size = len(utf8(row))
        if used + size > budget:
            break
        out.append(row)
        used += size
        shown += 1
    if shown == 0 and used > budget:
        return ""
    if shown < total:
        out.append(f"\n_… {total - shown} more not shown: `divergences.json` in the report lists all {total}._\n")
    out[0] = f"### Top divergences ({shown} of {total})\n\n"
    return "".join(out) + "\n"


def _tail(run: FinishedRun) -> str:
    ci, paths = run.ci, run.paths
    lines = []
    if not run.clean:
        commands = [_clip(run.replay_command(), MAX_COMMAND_CHARS)]
        root = repo_relative(paths.index_html.parent.parent, ci.workspace)
        if ci.artifact and ci.repository and ci.run_id and not Path(root).is_absolute():
            # the workflow uploads the report folder as the artifact's root: download it back to the same place
            commands.insert(
                0,
                shlex.join(
                    ["gh", "run", "download", ci.run_id, "--repo", ci.repository, "--name", ci.artifact, "--dir", root]
                ),
            )
        lines += [
            "### Replay",
            "",
            "The failing scenario (shrunk, where a suite found it), on your machine:",
            "",
            code_block("\n".join(commands)),
        ]
    html = repo_relative(paths.index_html, ci.workspace)
    where = f"the artifact **{md(ci.artifact)}**" if ci.artifact else "the uploaded reports artifact"
    if ci.run_url:
        where += f" of [this run]({ci.run_url}#artifacts)"
    files = ", ".join(
        code(repo_relative(p, ci.workspace)) for p in (paths.divergences_json, paths.scenario_json, paths.junit_xml)
    )
    lines += [
        "### Report",
        "",
        f"HTML report {code(html, 400)} (self-contained; open it after downloading) in {where}.",
        f"Alongside it: {files}.",
        "",
    ]
    return "\n".join(lines) + "\n"


def render_summary(run: FinishedRun, *, max_bytes: int = SUMMARY_LIMIT_BYTES - 1, top: int = TOP_ROWS) -> str:
    """The step summary in at most ``max_bytes`` bytes of UTF-8."""
    head, tail = _head(run), _tail(run)
    budget = max_bytes - len(utf8(head)) - len(utf8(tail))
    text = head + _table(run, budget, top) + tail
    # Names, messages and scenario text are an engine's or a file's: no bidi control or other hidden
    # code point reaches the summary raw (each shown as a visible escape); line breaks are the summary's own.
    return fit_utf8(shown(text, keep="\n"), max_bytes)
