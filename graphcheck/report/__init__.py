"""Report files of one lockstep run: ``reports/<run-id>/``.

``write_report(outcomes, out_dir, command=..., run_info=...)`` writes into
``out_dir`` (the run's own folder, created if missing):

- ``index.html``        self-contained HTML (inline CSS, no external resources)
- ``divergences.json``  run info + every divergence of every outcome, JSON-safe
- ``scenario.json``     the first failing outcome's scenario (the first one's when clean),
                        exactly ``Scenario.to_json()``: ``graphcheck replay`` loads it back
- ``junit.xml``         one testcase per fuzzed suite, then one per other outcome, a failure for
                        each diverged one

``suites`` (the run's :class:`~graphcheck.search.result.SuiteResult` list) adds the per-suite fuzzing to
all of them: a Fuzzing table and counts in index.html, one testcase per suite in
junit.xml, a ``"suites"`` list in divergences.json. Every file is written
atomically (temporary file + ``os.replace``); text UTF-8 cannot carry, such as a
lone surrogate, is written escaped (``\\ud800``) rather than failing the write.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence

from graphcheck.check.records import CheckOutcome
from graphcheck.check.situations import SituationRow
from graphcheck.files import write_atomic
from graphcheck.report.jsonout import write_divergences, write_scenario
from graphcheck.report.junit import write_junit
from graphcheck.report.model import (
    SHRINK_STATES,
    ReportPaths,
    RunInfo,
    default_replay_command,
    graphcheck_version,
    new_run_id,
    replay_outcome,
)
from graphcheck.search.result import SuiteResult

#: Files another step of the run writes into the same folder, listed in index.html when present.
COMPANION_FILES = ("fuzz.json", "summary.md", "engine.log")  # engine.log: graphcheck.cli.engine_log


def write_report(
    outcomes: Sequence[CheckOutcome],
    out_dir: Path,
    *,
    command: str,
    replay_command: Callable[[Path], str] | None = None,
    run_info: RunInfo,
    suites: Sequence[SuiteResult] = (),
    extra_files: Sequence[str] = (),
    situations: Sequence[SituationRow] = (),
) -> ReportPaths:
    """Write index.html, divergences.json, scenario.json and junit.xml into ``out_dir``.

    ``command`` is the command line that produced the run (shown in the header);
    ``replay_command`` turns the scenario.json path into the command that replays
    it (default: ``graphcheck replay <path> --backend B [--emulate] [--inject F]``).
    ``suites`` is the per-suite fuzzing (in suite order); a suite whose reported
    outcome is one of ``outcomes`` (the same object) is reported with that outcome.
    index.html lists the report's files, fuzz.json (when ``suites`` are given)
    and summary.md when they are in ``out_dir``, and ``extra_files`` (names in
    ``out_dir`` written after the report). ``situations`` (the run's situation table,
    graphcheck.check.situations) adds the Situations section.
    """
    outcomes = list(outcomes)
    chosen = replay_outcome(outcomes)  # raises ValueError when outcomes is empty
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = ReportPaths(
        index_html=out_dir / "index.html",
        divergences_json=out_dir / "divergences.json",
        scenario_json=out_dir / "scenario.json",
        junit_xml=out_dir / "junit.xml",
    )
    write_scenario(chosen.scenario, paths.scenario_json)
    suites = list(suites)
    write_divergences(outcomes, paths.divergences_json, run_info, suites)
    write_junit(outcomes, paths.junit_xml, run_info, suites=suites)
    replay = (replay_command or default_replay_command(run_info))(paths.scenario_json)
    # jinja2 only where HTML is wanted
    from graphcheck.report.html import REPORT_FILES, PageHeader, render_html, write_html

    present = [name for name in COMPANION_FILES if (out_dir / name).is_file() or (name == "fuzz.json" and suites)]

    html = render_html(
        outcomes,
        run_info,
        header=PageHeader(command, replay, str(paths.scenario_json), chosen.scenario.name),
        suites=suites,
        files=[*REPORT_FILES, *present, *extra_files],
        situations=situations,
    )
    write_html(paths.index_html, html)
    return paths


__all__ = [
    "COMPANION_FILES",
    "SHRINK_STATES",
    "ReportPaths",
    "RunInfo",
    "default_replay_command",
    "graphcheck_version",
    "new_run_id",
    "write_atomic",
    "write_junit",
    "write_report",
]
