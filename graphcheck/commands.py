"""The ``graphcheck`` subcommands: run, replay, doctor, faults."""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence

from graphcheck import exitcodes, github
from graphcheck.errors import BackendUnavailableError, InputError
from graphcheck.console import make_console, outcome_line, plain, summary_table
from graphcheck.examples import demo_scenario
from graphcheck.database import ENV_VAR as DATABASE_ENV, DatabaseSpec, database_key
from graphcheck.fuzz import FuzzResult, SearchInterrupted, fuzz_suite, label_found, write_fuzz_summary, write_pending
from graphcheck.lockstep import check_scenario
from graphcheck.progress import RunProgress, plural
from graphcheck.replay_target import replay_target
from graphcheck.records import CheckOutcome
from graphcheck.scenario import Scenario, engine_memory_limit, load_scenario
from graphcheck.suite_registry import Suite, load_suites

#: examples per suite for each profile
PROFILE_EXAMPLES = {"ci": 8, "dev": 20, "thorough": 200}
BUILTIN_MODES = ("greedy", "target_match", "topp", "naive")


def resolve_backend(name: str, emulate: bool) -> Any:
    """backends.devices.resolve, with its errors mapped to exit codes."""
    from graphcheck.backends.devices import BackendUnavailable, UnknownBackend, resolve

    try:
        return resolve(name, emulate=emulate)
    except UnknownBackend as err:
        raise InputError(str(err)) from None
    except BackendUnavailable as err:
        raise BackendUnavailableError(str(err)) from None


def check_faults(names: list[str] | None) -> tuple[str, ...]:
    from graphcheck.backends.engine.faults import UnknownFault, check_faults as check

    try:
        return tuple(sorted(check(names or ())))
    except UnknownFault as err:
        raise InputError(str(err)) from None


def builtin_scenarios(steps: int) -> list[Scenario]:
    """The demo scenario once per verify mode: a fixed, deterministic smoke check."""
    picked = []
    for mode in BUILTIN_MODES:
        naive = mode == "naive"
        scenario = demo_scenario(verify_strategy="target_match" if naive else mode, naive_mode=naive, num_steps=steps)
        picked.append(dataclasses.replace(scenario, name=f"builtin/demo-{mode}"))
    return picked


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


def plan_run(args: argparse.Namespace) -> RunPlan:
    """Check every option and output path, cheapest first; then claim the report folder."""
    engine_memory_limit()  # a malformed GRAPHCHECK_MAX_ENGINE_MEMORY fails here, not inside a search
    suites = pick_suites(args.suite)
    examples = args.examples if args.examples is not None else PROFILE_EXAMPLES[args.profile]
    if not 1 <= examples <= 100_000:
        raise InputError(f"--examples must be in [1, 100000], got {examples}")
    faults = check_faults(args.inject)
    jobs = getattr(args, "jobs", 1)
    from graphcheck.parallel import check_options

    xdist_args = check_options(jobs, getattr(args, "xdist_args", ""))
    if getattr(args, "junit", None):
        check_writable_file(Path(args.junit), "--junit file")
    backend = resolve_backend(args.backend, args.emulate)
    database, example_db = open_database(getattr(args, "database", None))
    run_id, out_dir = claim_run_dir(Path(args.report_dir))
    return RunPlan(backend, faults, suites, examples, args.seed, out_dir, run_id, database, example_db, jobs,
                   xdist_args, bool(args.emulate))


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C during a run: what it had found so far, for the report."""

    def __init__(self, outcomes: list[CheckOutcome], fuzzed: list[FuzzResult]) -> None:
        super().__init__()
        self.outcomes, self.fuzzed = outcomes, fuzzed


def run_command(args: argparse.Namespace) -> int:
    plan = plan_run(args)
    console = make_console()
    started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    started = time.perf_counter()
    pending = plan.out_dir / "pending-scenario.json"
    publish = github.enabled(getattr(args, "github", None))
    interrupted = False
    with github.commands_stopped(publish):
        _print_header(console, plan)
        try:
            outcomes, fuzzed = _run_suites(args, plan, console, pending)
        except RunInterrupted as stop:
            outcomes, fuzzed, interrupted = stop.outcomes, stop.fuzzed, True
        elapsed = time.perf_counter() - started
        pending.unlink(missing_ok=True)
        write_fuzz_summary(plan.out_dir / "fuzz.json", fuzzed, seed=plan.seed, jobs=plan.jobs,
                           database=plan.database.describe(), interrupted=interrupted)
        paths = _write_reports(args, plan, outcomes, started_at, elapsed, fuzzed) if outcomes else None
        if outcomes:
            console.print(summary_table(outcomes, fuzzed))
        _print_verdict(console, plan, outcomes, fuzzed, elapsed, paths, interrupted)
    if publish and paths is not None:
        _publish_github(args, plan, outcomes, fuzzed, paths)
    if interrupted:
        return exitcodes.INTERRUPTED
    return exitcodes.DIVERGENCE if any(not o.clean for o in outcomes) else exitcodes.CLEAN


def _print_header(console: Any, plan: RunPlan) -> None:
    backend = plan.backend
    console.print(f"graphcheck run {plan.run_id}: backend {backend.name} ({backend.description})", highlight=False)
    injected = f"; injected: {', '.join(plan.faults)}" if plan.faults else ""
    console.print(f"  {plural(len(plan.suites), 'suite')}, {plural(plan.examples, 'example')} per suite, "
                  f"seed {plan.seed}{injected}", highlight=False)
    console.print(f"  {plan.database.describe()}", markup=False, highlight=False)


def _print_verdict(console: Any, plan: RunPlan, outcomes: list[CheckOutcome], fuzzed: list[FuzzResult],
                   elapsed: float, paths: Any, interrupted: bool) -> None:
    first = next((o for o in outcomes if not o.clean), None)
    examples = sum(r.examples for r in fuzzed)
    if interrupted:
        found = f"found {plain(first.first.headline())}" if first is not None and first.first else "no divergence so far"
        console.print(f"[bold yellow]INTERRUPTED[/] after {elapsed:.1f}s, {plural(examples, 'fuzzed example')}: {found}")
    elif first is not None and first.first is not None:
        console.print(f"[bold red]DIVERGENCE[/] {plain(first.first.headline())}")
    else:
        console.print(f"[bold green]CLEAN[/] {plural(len(outcomes), 'scenario')} checked, "
                      f"{plural(examples, 'fuzzed example')}, {elapsed:.1f}s")
    if paths is None:
        console.print(f"report: none (nothing was checked to the end); fuzzing: {plan.out_dir / 'fuzz.json'}",
                      markup=False)
        return
    if first is not None:
        console.print(f"replay: {_replay_line(plan, paths.scenario_json)}", markup=False)
    console.print(f"report: {paths.index_html}", markup=False)


def _replay_line(plan: RunPlan, scenario_json: Path) -> str:
    from graphcheck.report.model import replay_command_line

    return replay_command_line(scenario_json, plan.backend.name, emulate=plan.emulate, faults=plan.faults)


def _run_suites(args: argparse.Namespace, plan: RunPlan, console: Any,
                pending: Path) -> tuple[list[CheckOutcome], list[FuzzResult]]:
    if plan.jobs > 1:
        from graphcheck.parallel import run_parallel

        return run_parallel(args, plan, console)
    from graphcheck.threads import single_threaded  # torch cpu: thread hand-offs cost more than the tiny ops

    with single_threaded(plan.backend):
        return _run_in_process(args, plan, console, pending)


def _run_in_process(
    args: argparse.Namespace, plan: RunPlan, console: Any, pending: Path
) -> tuple[list[CheckOutcome], list[FuzzResult]]:
    """``-j 1``: every suite with ``plan.seed`` in this process, then the demo scenarios.

    A Ctrl-C raises RunInterrupted with what was found so far (a search's
    smallest diverging scenario included).
    """
    outcomes: list[CheckOutcome] = []
    fuzzed: list[FuzzResult] = []
    with RunProgress(console, enabled=not args.quiet) as progress:
        try:
            # Suites first: a divergence they find comes back shrunk to a minimal scenario.
            for suite in plan.suites:
                if _fuzz_one(suite, args, plan, console, pending, progress, outcomes, fuzzed):
                    break
            # Then the built-in demo scenarios: a fixed smoke check of every verify mode.
            if args.keep_going or not outcomes:
                for scenario in builtin_scenarios(args.steps):
                    write_pending(pending, scenario)
                    outcome = check_scenario(scenario, plan.backend, faults=plan.faults)
                    progress.example(scenario.name, outcome)
                    outcomes.append(outcome)
        except SearchInterrupted as stop:
            fuzzed.append(stop.result)
            if stop.result.outcome is not None:
                label_found(stop.result.outcome, stop.result.suite, interrupted=True)
                outcomes.append(stop.result.outcome)
            raise RunInterrupted(outcomes, fuzzed) from None
        except KeyboardInterrupt:
            raise RunInterrupted(outcomes, fuzzed) from None
    return outcomes, fuzzed


def _fuzz_one(suite: Suite, args: argparse.Namespace, plan: RunPlan, console: Any, pending: Path,
              progress: RunProgress, outcomes: list[CheckOutcome], fuzzed: list[FuzzResult]) -> bool:
    """Fuzz one suite into ``outcomes`` / ``fuzzed``; whether the run stops here."""
    progress.start_suite(suite.name, plan.examples)
    result = fuzz_suite(
        suite.name, suite.strategy(), plan.backend, examples=plan.examples, seed=plan.seed,
        faults=plan.faults, pending_path=pending, on_progress=progress.search,
        database=plan.example_db, database_key=database_key(suite.name, plan.backend, plan.faults),
    )
    fuzzed.append(result)
    progress.end_suite(result)
    if result.outcome is None:
        return False
    lost = label_found(result.outcome, suite.name)
    outcomes.append(result.outcome)
    if lost:
        console.print(f"[bold red]device lost[/] {plain(result.outcome.device_error)}: the engine's failure "
                      "poisoned the device for this process, so the scenario is reported unshrunk and the run "
                      "stops; `graphcheck replay` it in a fresh process")
        return True
    return not args.keep_going


def _run_info(args: argparse.Namespace, plan: RunPlan, outcomes: Sequence[CheckOutcome], started_at: str,
              elapsed: float) -> Any:
    from graphcheck.report import RunInfo, graphcheck_version

    runner = next((o.runner for o in outcomes if o.runner != "none"), "none")
    return RunInfo(
        run_id=plan.run_id, backend=plan.backend.name, runner=runner, emulate=plan.emulate, seed=plan.seed,
        profile=getattr(args, "profile", ""), started_at=started_at, elapsed_s=elapsed, version=graphcheck_version(),
        faults=plan.faults,
    )


def _write_reports(
    args: argparse.Namespace, plan: RunPlan, outcomes: list[CheckOutcome], started_at: str, elapsed: float,
    fuzzed: Sequence[FuzzResult] = (),
) -> Any:
    from graphcheck.report import write_junit, write_report

    info = _run_info(args, plan, outcomes, started_at, elapsed)
    suites = suite_runs(fuzzed, outcomes)
    summary = ("summary.md",) if github.enabled(getattr(args, "github", None)) else ()
    paths = write_report(outcomes, plan.out_dir, command=" ".join(args.argv), run_info=info, suites=suites,
                         extra_files=summary)
    if getattr(args, "junit", None):
        write_junit(outcomes, Path(args.junit), info, suites=suites)
    return paths


def suite_runs(fuzzed: Sequence[FuzzResult], outcomes: Sequence[CheckOutcome]) -> list[Any]:
    """The report's view of each suite's search (``SuiteRun``), tied to its outcome when that is reported."""
    from graphcheck.report import SuiteRun

    reported = {id(o) for o in outcomes}

    def one(result: FuzzResult) -> Any:
        found = result.outcome
        if found is None:
            shrink = "-"
        elif found.device_error is not None:
            shrink = "unshrunk: device lost"
        else:
            shrink = "interrupted" if result.interrupted else "shrunk"
        return SuiteRun(
            result.suite, result.examples, result.steps, result.elapsed_s, found is None or found.clean, shrink,
            found.first.headline() if found is not None and found.first else None, result.first_failure_at,
            found.scenario.name if found is not None and id(found) in reported else None,
        )

    return [one(r) for r in fuzzed]


def _publish_github(args: argparse.Namespace, plan: RunPlan, outcomes: list[CheckOutcome],
                    fuzzed: Sequence[FuzzResult], paths: Any) -> None:
    info = _run_info(args, plan, outcomes, "", 0.0)
    github.publish(github.FinishedRun(
        outcomes, info, paths, command=" ".join(args.argv), suites=github.suite_lines(fuzzed),
        ci=github.CiContext.from_env(),
    ))


def replay_command(args: argparse.Namespace) -> int:
    target = replay_target(args)
    engine_memory_limit()
    scenario = load_scenario(str(target.scenario_path))
    faults = check_faults(list(target.faults))
    backend = resolve_backend(target.backend, target.emulate)
    if getattr(args, "junit", None):
        check_writable_file(Path(args.junit), "--junit file")
    run_id, out_dir = claim_run_dir(Path(args.report_dir))
    plan = RunPlan(backend, faults, [], 0, 0, out_dir, run_id, emulate=target.emulate)
    console = make_console()
    publish = github.enabled(getattr(args, "github", None))
    with github.commands_stopped(publish):
        console.print(f"replaying {plain(scenario.name or 'scenario')} "
                      f"({plural(len(scenario.requests), 'request')}, {plural(scenario.num_steps, 'step')}) "
                      f"from {plain(target.scenario_path)}")
        for line in target.describe(backend.description, faults):
            console.print(f"  {line}", markup=False)
        started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
        started = time.perf_counter()
        write_pending(out_dir / "pending-scenario.json", scenario)
        outcome = check_scenario(scenario, backend, faults=faults)
        (out_dir / "pending-scenario.json").unlink(missing_ok=True)
        paths = _write_reports(args, plan, [outcome], started_at, time.perf_counter() - started)
        console.print(outcome_line(outcome))
        console.print(f"report: {paths.index_html}", markup=False)
    if publish:
        _publish_github(args, plan, [outcome], (), paths)
    return exitcodes.CLEAN if outcome.clean else exitcodes.DIVERGENCE


def doctor_command(args: argparse.Namespace) -> int:
    from graphcheck.backends.devices import available_backends

    from graphcheck.console import doctor_table

    make_console().print(doctor_table(available_backends()))
    return exitcodes.CLEAN


def faults_command(args: argparse.Namespace) -> int:
    from graphcheck.backends.engine.faults import FAULTS

    from graphcheck.console import faults_table

    make_console().print(faults_table(FAULTS))
    return exitcodes.CLEAN


def catalog_command(args: argparse.Namespace) -> int:
    """Fuzz each fault until caught (or its budget), beside the peer-style baseline; exit 0 when all caught and the clean engine is clean."""
    from graphcheck.backends.engine.faults import FAULTS

    from graphcheck.catalog import CatalogSettings, run_catalog
    from graphcheck.catalog_console import catalog_table, progress_line, totals_lines
    from graphcheck.report.catalog import CatalogInfo, write_catalog

    for option, value in (("--budget", args.budget), ("--shrink-budget", args.shrink_budget)):
        if not 0 < value <= 86_400:
            raise InputError(f"{option} must be in (0, 86400] seconds, got {value:g}")
    backend = resolve_backend(args.backend, args.emulate)
    chosen = set(check_faults(args.fault)) if args.fault else set(FAULTS)
    names = [name for name in FAULTS if name in chosen]  # registry order
    out_dir = Path(args.report_dir) / "catalog"
    make_dir(out_dir, "report folder")
    console = make_console()
    info = CatalogInfo(" ".join(args.argv), datetime.now(timezone.utc).isoformat(timespec="seconds"), bool(args.emulate))
    settings = CatalogSettings(budget_s=args.budget, shrink_s=args.shrink_budget, seed=args.seed)
    console.print(f"graphcheck catalog: {len(names)} faults on {backend.name} ({backend.description}), "
                  f"budget {args.budget:g}s + {args.shrink_budget:g}s shrink per fault, seed {args.seed}")
    on_done = None if args.quiet else (lambda name, result: console.print(progress_line(name, result)))
    result = run_catalog(names, backend, settings, out_dir, on_done=on_done)
    from graphcheck.report import graphcheck_version

    paths = write_catalog(result, out_dir, dataclasses.replace(info, version=graphcheck_version()))
    console.print(catalog_table(result))
    for line in totals_lines(result):
        console.print(line)
    console.print(f"report: {paths.index_html}")
    return exitcodes.CLEAN if result.passed else exitcodes.DIVERGENCE


def bench_command(args: argparse.Namespace) -> int:
    """Run benchmarks/ under pytest-benchmark; exit 0 when the checking-overhead target is met, else 1."""
    import importlib.util

    from graphcheck.bench import BenchRun, benchmarks_dir, log_tail, run_benchmarks, summarise, write_summary
    from graphcheck.bench_console import decode_table, lockstep_table, verdict_line
    from graphcheck.report import new_run_id
    from graphcheck.timings import overhead_target

    if not benchmarks_dir().is_dir():
        raise InputError(f"no benchmarks folder at {benchmarks_dir()}: run graphcheck bench from a source checkout")
    if importlib.util.find_spec("pytest_benchmark") is None:
        raise InputError("graphcheck bench needs pytest-benchmark (pip install 'graphcheck[test]')")
    backend = resolve_backend(args.backend, args.emulate)
    if args.out:
        run_id, out_dir = new_run_id(), Path(args.out)
        make_dir(out_dir, "folder")
    else:
        run_id, out_dir = claim_run_dir(Path("reports") / "bench")
    console = make_console()
    console.print(f"graphcheck bench {run_id}: {backend.description}" + (" (quick)" if args.quick else ""))
    started = time.perf_counter()
    rc, data = run_benchmarks(BenchRun(backend.name, bool(args.emulate), bool(args.quick), out_dir.resolve(), args.select))
    summary = summarise(data, backend=backend.name, device=backend.device, overhead_target=overhead_target(backend.device), pytest_rc=rc)
    extra = {"run_id": run_id, "command": " ".join(args.argv), "quick": bool(args.quick), "elapsed_s": time.perf_counter() - started}
    path = write_summary(summary, out_dir, extra)
    if rc != 0:
        console.print(log_tail(out_dir), markup=False, highlight=False)
    if summary.decode:
        console.print(decode_table(summary))
    if summary.lockstep:
        console.print(lockstep_table(summary))
    console.print(verdict_line(summary))
    console.print(f"results: {path} (pytest-benchmark JSON: {out_dir / 'bench.json'}, log: {out_dir / 'pytest.log'})")
    return exitcodes.CLEAN if summary.passed else exitcodes.DIVERGENCE
