"""index.html: one self-contained page (inline CSS, no external resources) rendered with jinja2."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Sequence

import jinja2

from graphcheck.records import CheckOutcome
from graphcheck.report.fmt import Omitted, sources_of
from graphcheck.report.kinds import TITLES, kind_sections
from graphcheck.report.model import RunInfo
from graphcheck.report.views import (
    OutcomeView,
    accept_rows,
    config_rows,
    div_row,
    div_rows,
    request_rows,
    timeline,
)

TEMPLATE = "index.html.j2"


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

    @property
    def headline(self) -> OutcomeView | None:
        return next((o for o in self.outcomes if not o.clean), None)

    @property
    def runner_label(self) -> str:
        runner, backend = self.info.runner, self.info.backend
        if runner == "emulated" and backend == "cpu":
            return "emulated (CPU graph emulation)"
        if runner == "emulated" or self.info.emulate:
            return f"{runner} (CPU emulation, not real {backend} graphs)"
        return runner


def outcome_view(outcome: CheckOutcome, index: int) -> OutcomeView:
    scenario = outcome.scenario
    first = outcome.first
    return OutcomeView(
        index=index,
        anchor=f"outcome-{index}",
        name=scenario.name or f"scenario {index}",
        backend=outcome.backend,
        runner=outcome.runner,
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
    )


def run_view(
    outcomes: Sequence[CheckOutcome], run_info: RunInfo, command: str, replay: str, scenario_file: str, replay_name: str
) -> RunView:
    views = [outcome_view(o, i) for i, o in enumerate(outcomes)]
    failing = [v for v in views if not v.clean]
    return RunView(
        info=run_info,
        command=command,
        replay=replay,
        scenario_file=scenario_file,
        replay_name=replay_name,
        verdict="DIVERGENCE" if failing else "CLEAN",
        failing_outcomes=len(failing),
        failure_count=sum(v.failure_count for v in views),
        ambiguous_count=sum(v.ambiguous_count for v in views),
        outcomes=views,
    )


def _load_template(name: str) -> str:
    return resources.files("graphcheck.report").joinpath("templates", name).read_text(encoding="utf-8")


def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FunctionLoader(_load_template),
        autoescape=jinja2.select_autoescape(enabled_extensions=("html", "j2"), default_for_string=True, default=True),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["sources"] = sources_of
    env.filters["firstline"] = _first_line
    env.tests["omitted"] = lambda row: isinstance(row, Omitted)
    env.globals["kind_blurb"] = lambda kind: TITLES.get(kind, ("", ""))[1]
    env.globals["plural"] = lambda n, word: f"{n} {word}" + ("" if n == 1 else "s")
    return env


def _first_line(text: str, limit: int = 160) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    more = len(line) > limit or "\n" in text.strip()
    return line[:limit] + (" …" if more else "")


def render_html(
    outcomes: Sequence[CheckOutcome],
    run_info: RunInfo,
    *,
    command: str,
    replay: str,
    scenario_file: str,
    replay_name: str = "",
) -> str:
    view = run_view(outcomes, run_info, command, replay, scenario_file, replay_name)
    return environment().get_template(TEMPLATE).render(run=view)


def write_html(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


__all__ = ["RunView", "environment", "render_html", "run_view", "write_html"]
