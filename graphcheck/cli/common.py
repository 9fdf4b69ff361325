"""What the subcommands share: faults and suites by name, output folders, the run plan, reports.

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
from graphcheck.check.checker import Checker, builtin_engine
from graphcheck.check.engines import EngineChoice
from graphcheck.check.records import CheckOutcome
from graphcheck.check.setup import CheckSetup
from graphcheck.check.situations import SituationRow
from graphcheck.display import redacted
from graphcheck.errors import InputError
from graphcheck.parallel.workers import WorkerPlan
from graphcheck.search.database import ENV_VAR as DATABASE_ENV
from graphcheck.search.database import DatabaseSpec
from graphcheck.search.fuzz import FuzzResult
from graphcheck.search.suite_registry import Suite, load_suites


def check_faults(names: list[str] | None, engine: EngineChoice) -> tuple[str, ...]:
    """``--inject`` names, sorted; each must be a fault ``engine`` declares (``graphcheck faults --engine``)."""
    chosen = sorted(set(names or ()))
    known = engine.capabilities.fault_names
    unknown = [n for n in chosen if n not in known]
    if unknown:
        where = "" if engine.builtin else f" of engine {engine.spec}"
        raise InputError(f"unknown fault(s){where} {', '.join(unknown)}; known: {', '.join(known) or 'none'}")
    return tuple(chosen)


def pick_suites(names: list[str] | None) -> list[Suite]:
    known = load_suites()
    if not names:
        return list(known.values())
    unknown = [n for n in names if n not in known]
    if unknown:
        raise InputError(f"unknown suite {', '.join(unknown)}; known: {', '.join(known)}")
    return [known[n] for n in dict.fromkeys(names)]


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


@dataclasses.dataclass
class RunPlan:
    backend: Any
    faults: tuple[str, ...]
    suites: list[Suite]
    examples: int
    seed: int
    out_dir: Path
    run_id: str
    database: DatabaseSpec = DatabaseSpec("none")
    example_db: Any = None  # the opened Hypothesis ExampleDatabase, None for "none"
    jobs: int = 1  # parallel workers (-j); each fuzzes every suite with its own seed
    xdist_args: list[str] = dataclasses.field(default_factory=list)  # --xdist-args, split
    emulate: bool = False  # --emulate as given (cpu is emulated without it)
    setup: CheckSetup = CheckSetup()  # --model, --contract, --oracle
    engine: EngineChoice = dataclasses.field(default_factory=builtin_engine)  # --engine
    skipped: list[Any] = dataclasses.field(default_factory=list)  # suites the engine cannot run (SkippedSuite)
    worker_plan: WorkerPlan | None = None  # -j auto's plan (jobs is its count); None for -j N

    @property
    def checker(self) -> Checker:
        """The Checker of this run (no pool: each search keeps its own)."""
        return Checker(self.backend, self.engine, self.setup, self.faults)


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


def run_info(
    args: argparse.Namespace, plan: RunPlan, outcomes: Sequence[CheckOutcome], started_at: str, elapsed: float
) -> Any:
    from graphcheck.report import RunInfo, graphcheck_version

    runner = next((o.runner for o in outcomes if o.runner != "none"), "none")
    return RunInfo(
        run_id=plan.run_id,
        backend=plan.backend.name,
        runner=runner,
        emulate=plan.emulate,
        emulator=getattr(plan.backend, "emulator", "kernel"),
        seed=plan.seed,
        profile=getattr(args, "profile", ""),
        started_at=started_at,
        elapsed_s=elapsed,
        version=graphcheck_version(),
        faults=plan.faults,
        oracle=plan.setup.oracle,
        engine=plan.engine.spec,
    )


def write_reports(
    args: argparse.Namespace,
    plan: RunPlan,
    outcomes: list[CheckOutcome],
    started_at: str,
    elapsed: float,
    fuzzed: Sequence[FuzzResult] = (),
    situations: Sequence[SituationRow] = (),
) -> tuple[Any, Any]:
    """Write the report folder (and ``--junit``); the paths written and the RunInfo they describe.

    ``situations``: the run's situation table (graphcheck.check.situations), shown in index.html."""
    from graphcheck.report import write_junit, write_report

    info = run_info(args, plan, outcomes, started_at, elapsed)
    suites = suite_runs(fuzzed, outcomes)
    summary = ("summary.md",) if github.enabled(getattr(args, "github", None)) else ()
    paths = write_report(
        outcomes,
        plan.out_dir,
        command=redacted(" ".join(args.argv)),
        run_info=info,
        suites=suites,
        extra_files=summary,
        situations=situations,
    )
    if getattr(args, "junit", None):
        write_junit(outcomes, Path(args.junit), info, suites=suites)
    return paths, info


def suite_runs(fuzzed: Sequence[FuzzResult], outcomes: Sequence[CheckOutcome]) -> list[Any]:
    """The report's view of each suite's search (``SuiteRun``), tied to its outcome when that is reported."""
    from graphcheck.check.situations import SITUATION_NAMES
    from graphcheck.report import SuiteRun

    reported = {id(o) for o in outcomes}

    def one(result: FuzzResult) -> Any:
        found = result.outcome
        return SuiteRun(
            result.suite,
            result.examples,
            result.steps,
            result.elapsed_s,
            found is None or found.clean,
            result.shrink_state,
            found.first.headline() if found is not None and found.first else None,
            result.first_failure_at,
            found.scenario.name if found is not None and id(found) in reported else None,
            sum(1 for n in SITUATION_NAMES if result.coverage.hits.get(n)),
            sum(1 for n in SITUATION_NAMES if result.coverage.replayed.get(n)),
            graph_steps=result.coverage.graph_steps,
            replayed_steps=result.coverage.replayed_steps,
        )

    return [one(r) for r in fuzzed]


def publish_github(
    args: argparse.Namespace, outcomes: list[CheckOutcome], fuzzed: Sequence[FuzzResult], paths: Any, info: Any
) -> None:
    """The step summary and annotations of a run whose reports ``write_reports`` wrote (its ``paths`` and ``info``)."""
    github.publish(
        github.FinishedRun(
            outcomes,
            info,
            paths,
            command=redacted(" ".join(args.argv)),
            suites=github.suite_lines(fuzzed),
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
    "RunPlan",
    "check_faults",
    "check_writable_file",
    "claim_run_dir",
    "make_dir",
    "open_database",
    "Unwritten",
    "report_unwritten",
    "pick_suites",
    "publish_github",
    "run_info",
    "suite_runs",
    "write_reports",
]


def check_setup(args: Any) -> CheckSetup:
    """--model, --contract and --oracle as one CheckSetup; a bad value or combination is an InputError."""
    return CheckSetup.parse(
        getattr(args, "model", None), getattr(args, "contract", None), getattr(args, "oracle", None)
    )
