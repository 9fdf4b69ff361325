"""What the subcommands share: output folders, the example database, reports.

Errors come out as they are raised (``graphcheck.errors`` and its subclasses, an
unknown backend or fault included); ``graphcheck.cli.main`` maps them to exit codes.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from pathlib import Path
from typing import Any, Sequence

from graphcheck import github
from graphcheck.check.records import CheckOutcome
from graphcheck.check.setup import CheckSetup
from graphcheck.check.situations import SituationRow
from graphcheck.display import redacted
from graphcheck.errors import InputError
from graphcheck.search.database import ENV_VAR as DATABASE_ENV
from graphcheck.search.database import DatabaseSpec
from graphcheck.search.result import SuiteResult


def make_dir(path: Path, what: str, *, exist_ok: bool = True) -> None:
    """``mkdir -p path``; a failure is a InputError naming ``what`` it was for."""
    try:
        path.mkdir(parents=True, exist_ok=exist_ok)
    except OSError as err:
        raise InputError(f"cannot create {what} {path}: {err.strerror or err}") from None


def claim_run_dir(parent: Path) -> tuple[str, Path]:
    """A new, empty report folder ``parent/<run-id>``, created atomically: its id and path.

    The id is the time to the second; when another run (or process) took it
    first, ``-2``, ``-3``, ... are tried, each an atomic ``mkdir``.
    """
    from graphcheck.report import new_run_id

    make_dir(parent, "report folder")
    base = new_run_id()
    for attempt in range(1, 1000):
        run_id = base if attempt == 1 else f"{base}-{attempt}"
        try:
            (parent / run_id).mkdir()
        except FileExistsError:
            continue
        except OSError as err:
            raise InputError(f"cannot create report folder {parent / run_id}: {err.strerror or err}") from None
        return run_id, parent / run_id
    raise InputError(f"cannot create a report folder in {parent}: 999 runs started in the same second")


def check_writable_file(path: Path, what: str) -> None:
    """Fail now, not after the run, when ``path`` cannot be written (its folder is created)."""
    make_dir(path.parent, f"folder for {what}")
    existed = path.exists()
    try:
        with open(path, "a", encoding="utf-8"):
            pass
    except OSError as err:
        raise InputError(f"cannot write {what} {path}: {err.strerror or err}") from None
    if not existed:
        path.unlink(missing_ok=True)


def open_database(option: str | None) -> tuple[DatabaseSpec, Any]:
    """The example database ``--database`` names, opened; the default location may fall back to none, loudly."""
    spec = DatabaseSpec.parse(option)
    try:
        return spec, spec.open()
    except InputError as err:
        if option is not None or os.environ.get(DATABASE_ENV):
            raise
        print(f"graphcheck: warning: {err}; failing examples will not be saved (pass --database)", file=sys.stderr)
        return DatabaseSpec("none"), None


def runner_of(outcomes: Sequence[CheckOutcome]) -> str:
    """The graph runner the outcomes were checked with ("none" when no scenario got that far)."""
    return next((o.runner for o in outcomes if o.runner != "none"), "none")


def write_reports(
    args: argparse.Namespace,
    out_dir: Path,
    info: Any,
    outcomes: list[CheckOutcome],
    suites: Sequence[SuiteResult] = (),
    situations: Sequence[SituationRow] = (),
) -> Any:
    """Write the report folder ``out_dir`` (and ``--junit``) of a run that ``info`` (a RunInfo) describes; the
    paths written. ``suites``: the fuzzed suites' results; ``situations``: the run's situation table
    (graphcheck.check.situations), shown in index.html."""
    from graphcheck.report import write_junit, write_report

    summary = ("summary.md",) if github.enabled(getattr(args, "github", None)) else ()
    paths = write_report(
        outcomes,
        out_dir,
        command=redacted(" ".join(args.argv)),
        run_info=info,
        suites=suites,
        extra_files=summary,
        situations=situations,
    )
    if getattr(args, "junit", None):
        write_junit(outcomes, Path(args.junit), info, suites=suites)
    return paths


def publish_github(
    args: argparse.Namespace, outcomes: list[CheckOutcome], suites: Sequence[SuiteResult], paths: Any, info: Any
) -> None:
    """The step summary and annotations of a run whose reports ``write_reports`` wrote (its ``paths`` and ``info``)."""
    github.publish(
        github.FinishedRun(
            outcomes,
            info,
            paths,
            command=redacted(" ".join(args.argv)),
            suites=list(suites),
            ci=github.CiContext.from_env(),
        )
    )


@dataclasses.dataclass(frozen=True)
class Unwritten:
    """A report a full disk (or a folder gone read-only) stopped: the error, and the files written whole
    before it (every report file is written whole or not at all: ``graphcheck.files``)."""

    error: OSError
    written: tuple[Path, ...] = ()


def report_unwritten(out_dir: Path, unwritten: Unwritten | OSError) -> str:
    """The line that says the verdict above stands but its report could not be written (exit
    ``REPORT_UNWRITTEN``, never the code of a divergence), naming the files that were written whole."""
    if isinstance(unwritten, OSError):
        unwritten = Unwritten(unwritten)
    err = unwritten.error
    reason = err.strerror or str(err) or type(err).__name__
    names = [p.name if p.parent == out_dir else str(p) for p in unwritten.written]
    written = f"only {', '.join(names)} written whole" if names else "no report file was written"
    return f"report: NOT WRITTEN in {out_dir} ({reason}); the verdict above stands; {written}, the rest is missing"


__all__ = [
    "check_writable_file",
    "claim_run_dir",
    "make_dir",
    "open_database",
    "Unwritten",
    "report_unwritten",
    "publish_github",
    "runner_of",
    "write_reports",
]


def check_setup(args: Any) -> CheckSetup:
    """--model, --contract and --oracle as one CheckSetup; a bad value or combination is an InputError."""
    return CheckSetup.parse(
        getattr(args, "model", None), getattr(args, "contract", None), getattr(args, "oracle", None)
    )
