"""Report files of one lockstep run: ``reports/<run-id>/``.

``write_report(outcomes, out_dir, command=..., run_info=...)`` writes into
``out_dir`` (the run's own folder, created if missing):

- ``index.html``        self-contained HTML (inline CSS, no external resources)
- ``divergences.json``  run info + every divergence of every outcome, JSON-safe
- ``scenario.json``     the first failing outcome's scenario (the first one's when clean),
                        exactly ``Scenario.to_json()``: ``graphcheck replay`` loads it back
- ``junit.xml``         one testcase per outcome, a failure for each diverged one
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence

from graphcheck.records import CheckOutcome
from graphcheck.report.jsonout import write_divergences, write_scenario
from graphcheck.report.junit import write_junit
from graphcheck.report.model import (
    ReportPaths,
    RunInfo,
    default_replay_command,
    graphcheck_version,
    new_run_id,
    replay_outcome,
)


def write_report(
    outcomes: Sequence[CheckOutcome],
    out_dir: Path,
    *,
    command: str,
    replay_command: Callable[[Path], str] | None = None,
    run_info: RunInfo,
) -> ReportPaths:
    """Write index.html, divergences.json, scenario.json and junit.xml into ``out_dir``.

    ``command`` is the command line that produced the run (shown in the header);
    ``replay_command`` turns the scenario.json path into the command that replays
    it (default: ``graphcheck replay <path> --backend B [--emulate] [--inject F]``).
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
    write_divergences(outcomes, paths.divergences_json, run_info)
    write_junit(outcomes, paths.junit_xml, run_info)
    replay = (replay_command or default_replay_command(run_info))(paths.scenario_json)
    from graphcheck.report.html import render_html, write_html  # jinja2 only where HTML is wanted

    html = render_html(
        outcomes,
        run_info,
        command=command,
        replay=replay,
        scenario_file=str(paths.scenario_json),
        replay_name=chosen.scenario.name,
    )
    write_html(paths.index_html, html)
    return paths


__all__ = [
    "ReportPaths",
    "RunInfo",
    "default_replay_command",
    "graphcheck_version",
    "new_run_id",
    "write_junit",
    "write_report",
]
