"""index.html: one self-contained page (inline CSS, no external resources) rendered with jinja2."""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Mapping, Sequence

import jinja2

from graphcheck.check.chain import history_lines
from graphcheck.check.records import CheckOutcome
from graphcheck.check.situations import SITUATION_NAMES, SituationRow
from graphcheck.display import shown
from graphcheck.files import write_atomic
from graphcheck.report.charts import coverage_chart, step_chart
from graphcheck.report.fmt import Omitted, sources_of
from graphcheck.report.kinds import TITLES, kind_sections
from graphcheck.report.localisation import BlobLinks, localisation_view
from graphcheck.report.model import SHRINK_STATES, RunInfo, pair_suites
from graphcheck.report.numeric_view import numeric_view
from graphcheck.report.views import (
    OutcomeView,
    accept_rows,
    config_rows,
    div_row,
    div_rows,
    request_rows,
    timeline,
)
from graphcheck.search.result import SuiteResult

TEMPLATE = "index.html.j2"

#: The files of a run's folder, in the order the page lists them.
REPORT_FILES = ("index.html", "divergences.json", "scenario.json", "junit.xml")

#: ``SuiteResult.shrink_state`` -> the pill's css class.
SHRINK_CSS = {
    "-": "",
    "shrunk": "ok",
    "unshrunk: device lost": "bad",
    "unshrunk: engine aborted": "bad",
    "unshrunk: engine hung": "bad",
    "interrupted": "amb",
}


@dataclass(frozen=True)
class SuiteRow:
    """One fuzzed suite, formatted for the Fuzzing table."""

    suite: str
    examples: int
    steps: int
    graph_steps: int  # the graph engine's steps
    replayed_steps: int  # of them, those that replayed a graph
    seconds: str
    clean: bool
    shrink: str  # "—" for "-"
    shrink_css: str
    shrink_note: str
    first: str
    first_failure_at: str
    scenario: str
    anchor: str  # the outcome section this suite's divergence is shown in, "" when none

    @property
    def replayed(self) -> str:
        return replayed_share(self.replayed_steps, self.graph_steps)


def replayed_share(replayed: int, steps: int) -> str:
    """``412 (80 %)``: how many of the graph engine's ``steps`` replayed a graph ("—" without steps)."""
    return "—" if steps == 0 else f"{replayed:,} ({100 * replayed // steps} %)"


def suite_row(run: SuiteResult, index: int | None, scenario: str | None = None) -> SuiteRow:
    """A fuzzed suite's row; ``index``: its reported outcome's place among the outcomes, ``scenario`` its name."""
    shrink = run.shrink_state
    return SuiteRow(
        suite=run.name,
        examples=run.examples,
        steps=run.steps,
        graph_steps=run.coverage.graph_steps,
        replayed_steps=run.coverage.replayed_steps,
        seconds=f"{run.elapsed_s:.2f}",
        clean=run.clean,
        shrink="—" if shrink == "-" else shrink,
        shrink_css=SHRINK_CSS.get(shrink, "amb"),
        shrink_note=SHRINK_STATES.get(shrink, ""),
        first=run.headline or "—",
        first_failure_at="—" if run.first_failure_at is None else f"{run.first_failure_at:,}",
        scenario=scenario or "",
        anchor="" if index is None else f"outcome-{index}",
    )


@dataclass(frozen=True)
class RunView:
    """What the page header needs about the whole run."""

    info: RunInfo
    command: str
    replay: str
    scenario_file: str
    replay_name: str
    verdict: str
    failing_outcomes: int
    failure_count: int
    ambiguous_count: int
    outcomes: list[OutcomeView]
    suites: list[SuiteRow] = dataclasses.field(default_factory=list)
    other_outcomes: int = 0  # outcomes no fuzzed suite found: the built-in demo scenarios
    files: list[str] = dataclasses.field(default_factory=lambda: list(REPORT_FILES))
    situations: list[SituationRow] = dataclasses.field(default_factory=list)
    coverage: Any = None  # situations reached per suite (graphcheck.report.charts.coverage_chart)

    @property
    def situations_reached(self) -> int:
        return sum(1 for row in self.situations if row.examples)

    @property
    def situations_replayed(self) -> int:
        """Situations some example reached on a replayed step."""
        return sum(1 for row in self.situations if row.replayed_examples)

    @property
    def fuzz_counts(self) -> str:
        """ "7 suites fuzzed: 160 scenarios, 1,234 steps; 4 built-in scenarios checked" ("" without suites)."""
        if not self.suites:
            return ""
        n = len(self.suites)
        diverged = sum(not s.clean for s in self.suites)
        text = f"{n} suite{'' if n == 1 else 's'} fuzzed"
        if diverged:
            text += f" ({diverged} diverged)"
        examples, steps = sum(s.examples for s in self.suites), sum(s.steps for s in self.suites)
        text += f": {examples:,} scenario{'' if examples == 1 else 's'}, {steps:,} step{'' if steps == 1 else 's'}"
        graph_steps = sum(s.graph_steps for s in self.suites)
        if graph_steps:
            replayed = sum(s.replayed_steps for s in self.suites)
            text += f", {replayed_share(replayed, graph_steps)} of the graph engine's steps replayed a graph"
        if self.other_outcomes:
            text += f"; {self.other_outcomes} built-in scenario{'' if self.other_outcomes == 1 else 's'} checked"
        return text

    @property
    def headline(self) -> OutcomeView | None:
        return next((o for o in self.outcomes if not o.clean), None)

    @property
    def runner_label(self) -> str:
        runner, backend = self.info.runner, self.info.backend
        if runner == "emulated-ops":
            return "emulated-ops (CPU op-level graph emulation)" + (
                "" if backend == "cpu" else f", not real {backend} graphs"
            )
        if runner == "emulated" and backend == "cpu":
            return "emulated (CPU graph emulation)"
        if runner == "emulated" or self.info.emulate:
            return f"{runner} (CPU emulation, not real {backend} graphs)"
        return runner


def outcome_view(outcome: CheckOutcome, index: int, links: BlobLinks | None = None) -> OutcomeView:
    """One outcome for the page; ``links`` turns its localisation's source lines into links to the commit."""
    scenario = outcome.scenario
    first = outcome.first
    loc = outcome.localisation if first is not None else None
    return OutcomeView(
        index=index,
        anchor=f"outcome-{index}",
        name=scenario.name or f"scenario {index}",
        backend=outcome.backend,
        runner=outcome.runner,
        oracle=outcome.oracle,
        faults=outcome.faults,
        clean=outcome.clean,
        steps_run=outcome.steps_run,
        elapsed_s=outcome.elapsed_s,
        headline=div_row(first) if first else None,
        failures=div_rows(outcome.failures),
        ambiguous=div_rows(outcome.ambiguous),
        config=config_rows(scenario),
        requests=request_rows(scenario),
        accepts=accept_rows(scenario),
        timeline=timeline(outcome),
        sections=kind_sections(outcome),
        localisation=localisation_view(loc, first, links) if loc is not None else None,
        numeric=numeric_view(outcome.numeric),
        chart=step_chart(outcome),
        history=history_lines(scenario),
    )


@dataclass(frozen=True)
class PageHeader:
    """How the run came about and how to replay it: the lines of the page's header."""

    command: str  # the command line that produced the run
    replay: str  # the command that replays scenario_file
    scenario_file: str
    replay_name: str = ""  # the replayed scenario's name


def run_view(
    outcomes: Sequence[CheckOutcome],
    run_info: RunInfo,
    header: PageHeader,
    suites: Sequence[SuiteResult] = (),
    files: Sequence[str] = REPORT_FILES,
    links: BlobLinks | None = None,
    situations: Sequence[SituationRow] = (),
) -> RunView:
    views = [outcome_view(o, i, links) for i, o in enumerate(outcomes)]
    failing = [v for v in views if not v.clean]
    pairing = pair_suites(suites, outcomes)
    return RunView(
        info=run_info,
        command=header.command,
        replay=header.replay,
        scenario_file=header.scenario_file,
        replay_name=header.replay_name,
        verdict="DIVERGENCE" if failing or not all(s.clean for s in suites) else "CLEAN",
        failing_outcomes=len(failing),
        failure_count=sum(v.failure_count for v in views),
        ambiguous_count=sum(v.ambiguous_count for v in views),
        outcomes=views,
        suites=[suite_row(run, i, pairing.scenario_name(i, outcomes)) for run, i in pairing.pairs],
        other_outcomes=len(pairing.rest),
        files=list(dict.fromkeys(files)),
        situations=list(situations),
        coverage=coverage_chart(suites, len(situations) or len(SITUATION_NAMES)),
    )


def _load_template(name: str) -> str:
    return resources.files("graphcheck.report").joinpath("templates", name).read_text(encoding="utf-8")


def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FunctionLoader(_load_template),
        autoescape=jinja2.select_autoescape(enabled_extensions=("html", "j2"), default_for_string=True, default=True),
        undefined=jinja2.StrictUndefined,
        finalize=visible_on_page,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["sources"] = sources_of
    env.filters["firstline"] = _first_line
    env.filters["thousands"] = lambda n: f"{n:,}"
    env.tests["omitted"] = lambda row: isinstance(row, Omitted)
    env.globals["kind_blurb"] = lambda kind: TITLES.get(kind, ("", ""))[1]
    env.globals["plural"] = lambda n, word: f"{n} {word}" + ("" if n == 1 else "s")
    return env


@functools.cache
def _page() -> jinja2.Template:
    """index.html's template, compiled once a process: a fresh environment compiles it again (~75 ms)."""
    return environment().get_template(TEMPLATE)


#: The hidden code points a page keeps as they are: HTML lays out line breaks and tabs (``<pre>``).
PAGE_KEEPS = "\n\r\t"


def visible_on_page(value: Any) -> Any:
    """The ``finalize`` of every template: a string it prints (a name, a message, a rendered macro) with
    its bidi controls, zero-width and other format characters and controls shown as escapes
    (``graphcheck.display.shown``), before autoescaping; safe markup stays safe (an escape adds no markup)."""
    if hasattr(value, "__html__"):
        return type(value)(shown(value, PAGE_KEEPS))
    return shown(value, PAGE_KEEPS) if isinstance(value, str) else value


def _first_line(text: str, limit: int = 160) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    more = len(line) > limit or "\n" in text.strip()
    return line[:limit] + (" …" if more else "")


def render_html(
    outcomes: Sequence[CheckOutcome],
    run_info: RunInfo,
    *,
    header: PageHeader,
    suites: Sequence[SuiteResult] = (),
    files: Sequence[str] = REPORT_FILES,
    environ: Mapping[str, str] | None = None,
    situations: Sequence[SituationRow] = (),
) -> str:
    """The page; ``header`` its command lines, ``suites`` adds the Fuzzing table, ``situations`` the
    Situations table (both only when given), ``files`` are the folder's files it lists (and links).

    ``environ`` (default ``os.environ``): on GitHub Actions (``GITHUB_SERVER_URL``, ``GITHUB_REPOSITORY``,
    ``GITHUB_SHA``) a localisation's source lines link to the files at the run's commit.
    """
    links = BlobLinks.from_env(environ)
    view = run_view(outcomes, run_info, header, suites, files, links, situations)
    return _page().render(run=view)


def write_html(path: Path, text: str) -> Path:
    """Write the page atomically; text UTF-8 cannot carry (lone surrogates) is written escaped."""
    return write_atomic(path, text)


__all__ = [
    "REPORT_FILES",
    "PageHeader",
    "RunView",
    "SuiteRow",
    "environment",
    "render_html",
    "run_view",
    "suite_row",
    "write_html",
]
