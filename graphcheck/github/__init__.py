"""GitHub Actions output of a finished run: a step summary and annotations of the top divergences.

``graphcheck run --github`` (and ``replay``) turns it on; so does the runner's
own ``GITHUB_ACTIONS=true`` unless ``--no-github`` is given. ``publish``:

- appends the Markdown summary (``summary.render_summary``) to the file named
  by ``$GITHUB_STEP_SUMMARY``, within what is left of the step's 1 MiB, and
  keeps a copy as ``summary.md`` in the run's report folder;
- prints one ``::error`` command per top divergence (``TOP_ANNOTATIONS``; the
  runner shows ten errors per step), pointing at the kernel's source line where
  the outcome's localisation names one (its first divergence: the message then
  says ``where:`` it began), else at the engine source line where a traceback
  names one, else at the shrunk ``scenario.json``; a ``::notice`` counts the
  rest and a ``::warning`` the ambiguous mismatches.

Writing the summary never changes the run's exit code: a failure to write it is
one warning line on stderr.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Callable, Mapping

from graphcheck.check.records import Localisation
from graphcheck.github.model import CiContext, FinishedRun
from graphcheck.github.summary import SUMMARY_LIMIT_BYTES, render_summary, utf8
from graphcheck.github.workflow import (
    Annotation,
    commands_stopped,
    escape_data,
    escape_property,
    repo_relative,
    source_location,
)
from graphcheck.report.localisation import is_absolute

#: ``::error`` annotations per run; GitHub shows at most 10 error annotations per step.
TOP_ANNOTATIONS = 10
#: Below this many bytes left in the step's summary file, nothing more is appended.
MIN_SUMMARY_BYTES = 1024


def enabled(flag: bool | None, environ: Mapping[str, str] | None = None) -> bool:
    """``--github`` / ``--no-github`` when given, else whether this runs inside GitHub Actions."""
    if flag is not None:
        return flag
    env = os.environ if environ is None else environ
    return env.get("GITHUB_ACTIONS", "").lower() == "true"


def kernel_location(loc: Localisation | None) -> tuple[str, int] | None:
    """(file, line) of the kernel where a divergence began, when its localisation names a relative source file."""
    if loc is None or not loc.source_file or not loc.source_line or is_absolute(loc.source_file):
        return None
    return loc.source_file.replace("\\", "/"), int(loc.source_line)


def annotations(run: FinishedRun, limit: int = TOP_ANNOTATIONS) -> list[Annotation]:
    """``::error`` for each of the top ``limit`` divergences, then notices for what they leave out."""
    workspace = run.ci.workspace
    scenario_file = repo_relative(run.paths.scenario_json, workspace)
    replay = run.replay_command()
    found: list[Annotation] = []
    for outcome, div in run.divergences():
        if len(found) >= limit:
            break
        loc = outcome.localisation if div is outcome.first else None
        located = kernel_location(loc) or (source_location(div.detail, workspace) if div.detail else None)
        file, line = located if located else (scenario_file, None)
        scenario = outcome.scenario
        where = f"where: {loc.headline()}\n" if loc is not None else ""
        message = (
            f"{div.headline()}\n{where}"
            f"scenario {scenario.name or 'scenario'}: {len(scenario.requests)} requests, {scenario.num_steps} steps "
            f"on {outcome.backend}/{outcome.runner}\nreplay: {replay}"
        )
        found.append(
            Annotation(
                "error", message, title=f"graphcheck: {div.kind} divergence in {div.tensor}", file=file, line=line
            )
        )
    rest = run.failure_count - len(found)
    if rest > 0:
        found.append(
            Annotation(
                "notice",
                f"{rest} more divergences: see the step summary and divergences.json in the report.",
                title="graphcheck: more divergences",
            )
        )
    if run.ambiguous_count:
        found.append(
            Annotation(
                "warning",
                f"{run.ambiguous_count} ambiguous mismatches (a sampling decision within 1e-9 of a float boundary): "
                "reported, not failing.",
                title="graphcheck: ambiguous mismatches",
            )
        )
    return found


def append_summary(text_for: Callable[[int], str], path: Path) -> bool:
    """Append ``text_for(budget)`` to the step summary file, where ``budget`` keeps the file under 1 MiB.

    Returns False (and writes nothing) when fewer than MIN_SUMMARY_BYTES are left.
    """
    used = path.stat().st_size if path.exists() else 0
    budget = SUMMARY_LIMIT_BYTES - 1 - used - 1  # the newline that separates it from what came before
    if budget < MIN_SUMMARY_BYTES:
        return False
    with open(path, "ab") as handle:
        handle.write(b"\n" + utf8(text_for(budget)))
    return True


def publish(
    run: FinishedRun,
    *,
    environ: Mapping[str, str] | None = None,
    out: Callable[[str], object] | None = None,
    err: Callable[[str], object] | None = None,
) -> None:
    """Write the step summary (and its copy in the report folder) and print the annotations."""
    env = os.environ if environ is None else environ
    write_out = out or sys.stdout.write
    write_err = err or sys.stderr.write
    sys.stdout.flush()  # a workflow command must start its own line, after the console's output
    try:
        run.paths.index_html.parent.joinpath("summary.md").write_bytes(utf8(render_summary(run)))
        target = env.get("GITHUB_STEP_SUMMARY")
        if target and not append_summary(lambda budget: render_summary(run, max_bytes=budget), Path(target)):
            write_err(f"graphcheck: warning: step summary {target} is nearly 1 MiB already; nothing appended\n")
    except OSError as error:
        write_err(f"graphcheck: warning: cannot write the GitHub step summary: {error}\n")
    for note in annotations(run):
        write_out(note.command() + "\n")
    if out is None:
        sys.stdout.flush()


__all__ = [
    "Annotation",
    "CiContext",
    "FinishedRun",
    "TOP_ANNOTATIONS",
    "annotations",
    "append_summary",
    "commands_stopped",
    "enabled",
    "escape_data",
    "kernel_location",
    "escape_property",
    "publish",
    "render_summary",
]
