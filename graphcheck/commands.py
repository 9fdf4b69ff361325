"""The ``graphcheck`` subcommands: run, replay, doctor, faults."""

from __future__ import annotations

import argparse
import dataclasses
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from graphcheck import exitcodes
from graphcheck.cli_errors import BackendUnavailableError, UsageError
from graphcheck.console import make_console, outcome_line, summary_table
from graphcheck.examples import demo_scenario
from graphcheck.database import DatabaseSpec, database_key
from graphcheck.fuzz import FuzzResult, fuzz_suite, label_found, write_fuzz_summary, write_pending
from graphcheck.lockstep import check_scenario
from graphcheck.progress import RunProgress
from graphcheck.records import CheckOutcome
from graphcheck.scenario import Scenario, load_scenario
from graphcheck.suite_registry import Suite, load_suites

#: examples per suite for each profile
PROFILE_EXAMPLES = {"ci": 8, "dev": 20, "thorough": 200}
BUILTIN_MODES = ("greedy", "target_match", "topp", "naive")


def resolve_backend(name: str, emulate: bool) -> Any:
    """backends.devices.resolve, with its errors mapped to exit codes."""
    from backends.devices import BackendUnavailable, UnknownBackend, resolve

    try:
        return resolve(name, emulate=emulate)
    except UnknownBackend as err:
        raise UsageError(str(err)) from None
    except BackendUnavailable as err:
        raise BackendUnavailableError(str(err)) from None


def check_faults(names: list[str] | None) -> tuple[str, ...]:
    from backends.engine.faults import UnknownFault, check_faults as check

    try:
        return tuple(sorted(check(names or ())))
    except UnknownFault as err:
        raise UsageError(str(err)) from None


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
        raise UsageError(f"unknown suite {', '.join(unknown)}; known: {', '.join(known)}")
    return [known[n] for n in dict.fromkeys(names)]


def make_dir(path: Path, what: str, *, exist_ok: bool = True) -> None:
    """``mkdir -p path``; a failure is a UsageError naming ``what`` it was for."""
    try:
        path.mkdir(parents=True, exist_ok=exist_ok)
    except OSError as err:
        raise UsageError(f"cannot create {what} {path}: {err.strerror or err}") from None


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


def plan_run(args: argparse.Namespace) -> RunPlan:
    backend = resolve_backend(args.backend, args.emulate)
    faults = check_faults(args.inject)
    suites = pick_suites(args.suite)
    examples = args.examples if args.examples is not None else PROFILE_EXAMPLES[args.profile]
    if not 1 <= examples <= 100_000:
        raise UsageError(f"--examples must be in [1, 100000], got {examples}")
    jobs = getattr(args, "jobs", 1)
    from graphcheck.parallel import check_options

    xdist_args = check_options(jobs, getattr(args, "xdist_args", ""))
    database = DatabaseSpec.parse(getattr(args, "database", None))
    example_db = database.open()
    from graphcheck.report import new_run_id

    run_id = new_run_id()
    out_dir = Path(args.report_dir) / run_id
    make_dir(out_dir, "report folder", exist_ok=False)
    return RunPlan(backend, faults, suites, examples, args.seed, out_dir, run_id, database, example_db, jobs, xdist_args)


def run_command(args: argparse.Namespace) -> int:
    plan = plan_run(args)
    console = make_console()
    started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    started = time.perf_counter()
    pending = plan.out_dir / "pending-scenario.json"
    console.print(
        f"graphcheck run {plan.run_id}: backend {plan.backend.name} ({plan.backend.description}), "
        f"seed {plan.seed}, {plan.examples} examples per suite"
        + (f", injected: {', '.join(plan.faults)}" if plan.faults else "") + f", {plan.database.describe()}"
    )
    if plan.jobs > 1:
        from graphcheck.parallel import run_parallel

        outcomes, fuzzed = run_parallel(args, plan, console)
    else:
        from graphcheck.threads import single_threaded  # torch cpu: thread hand-offs cost more than the tiny ops

        with single_threaded(plan.backend):
            outcomes, fuzzed = _run_in_process(args, plan, console, pending)
    elapsed = time.perf_counter() - started
    pending.unlink(missing_ok=True)
    paths = _write_reports(args, plan, outcomes, started_at, elapsed, fuzzed)
    write_fuzz_summary(plan.out_dir / "fuzz.json", fuzzed, seed=plan.seed, jobs=plan.jobs, database=plan.database.describe())
    console.print(summary_table(outcomes, fuzzed))
    first = next((o.first for o in outcomes if not o.clean), None)
    if first is not None:
        console.print(f"[bold red]DIVERGENCE[/] {first.headline()}")
    else:
        console.print(f"[bold green]CLEAN[/] {len(outcomes)} scenarios checked, {sum(r.examples for r in fuzzed)} fuzzed examples, {elapsed:.1f}s")
    console.print(f"report: {paths.index_html}")
    return exitcodes.DIVERGENCE if first is not None else exitcodes.CLEAN


def _run_in_process(
    args: argparse.Namespace, plan: RunPlan, console: Any, pending: Path
) -> tuple[list[CheckOutcome], list[FuzzResult]]:
    """``-j 1``: every suite with ``plan.seed`` in this process, then the demo scenarios."""
    outcomes: list[CheckOutcome] = []
    fuzzed: list[FuzzResult] = []
    with RunProgress(console, enabled=not args.quiet) as progress:
        # Suites first: a divergence they find comes back shrunk to a minimal scenario.
        for suite in plan.suites:
            progress.start_suite(suite.name, plan.examples)
            result = fuzz_suite(
                suite.name, suite.strategy(), plan.backend, examples=plan.examples, seed=plan.seed,
                faults=plan.faults, pending_path=pending, on_example=lambda s, o, n=suite.name: progress.example(n, o),
                database=plan.example_db, database_key=database_key(suite.name, plan.backend, plan.faults),
            )
            fuzzed.append(result)
            if result.outcome is not None:
                shrunk = result.outcome
                lost = label_found(shrunk, suite.name)
                outcomes.append(shrunk)
                if lost:
                    console.print(f"[bold red]device lost[/] {shrunk.device_error}: the engine's failure poisoned the "
                                  "device for this process, so the scenario is reported unshrunk and the run stops; "
                                  "`graphcheck replay` it in a fresh process")
                    return outcomes, fuzzed
                if not args.keep_going:
                    break
        # Then the built-in demo scenarios: a fixed smoke check of every verify mode.
        if args.keep_going or not outcomes:
            for scenario in builtin_scenarios(args.steps):
                write_pending(pending, scenario)
                outcome = check_scenario(scenario, plan.backend, faults=plan.faults)
                progress.example(scenario.name, outcome)
                outcomes.append(outcome)
    return outcomes, fuzzed


def _write_reports(
    args: argparse.Namespace, plan: RunPlan, outcomes: list[CheckOutcome], started_at: str, elapsed: float,
    fuzzed: list[FuzzResult] | None = None,
) -> Any:
    from graphcheck.report import RunInfo, graphcheck_version, write_junit, write_report

    runner = next((o.runner for o in outcomes if o.runner != "none"), "none")
    info = RunInfo(
        run_id=plan.run_id, backend=plan.backend.name, runner=runner, emulate=bool(args.emulate), seed=plan.seed,
        profile=getattr(args, "profile", ""), started_at=started_at, elapsed_s=elapsed, version=graphcheck_version(),
        faults=plan.faults,
    )
    paths = write_report(outcomes, plan.out_dir, command=" ".join(args.argv), run_info=info)
    if getattr(args, "junit", None):
        write_junit(outcomes, Path(args.junit), info)
    from graphcheck import github

    if github.enabled(getattr(args, "github", None)):
        github.publish(github.FinishedRun(
            outcomes, info, paths, command=" ".join(args.argv), suites=github.suite_lines(fuzzed or ()),
            ci=github.CiContext.from_env(),
        ))
    return paths


def replay_command(args: argparse.Namespace) -> int:
    source = Path(args.file)
    if source.is_dir():
        source = source / "scenario.json"
    scenario = load_scenario(str(source))
    backend = resolve_backend(args.backend, args.emulate)
    faults = check_faults(args.inject)
    from graphcheck.report import new_run_id

    run_id = new_run_id()
    out_dir = Path(args.report_dir) / run_id
    make_dir(out_dir, "report folder")
    console = make_console()
    started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    started = time.perf_counter()
    write_pending(out_dir / "pending-scenario.json", scenario)
    outcome = check_scenario(scenario, backend, faults=faults)
    (out_dir / "pending-scenario.json").unlink(missing_ok=True)
    plan = RunPlan(backend, faults, [], 0, 0, out_dir, run_id)
    paths = _write_reports(args, plan, [outcome], started_at, time.perf_counter() - started)
    console.print(outcome_line(outcome))
    console.print(f"report: {paths.index_html}")
    return exitcodes.CLEAN if outcome.clean else exitcodes.DIVERGENCE


def doctor_command(args: argparse.Namespace) -> int:
    from backends.devices import available_backends

    from graphcheck.console import doctor_table

    make_console().print(doctor_table(available_backends()))
    return exitcodes.CLEAN


def faults_command(args: argparse.Namespace) -> int:
    from backends.engine.faults import FAULTS

    from graphcheck.console import faults_table

    make_console().print(faults_table(FAULTS))
    return exitcodes.CLEAN


def catalog_command(args: argparse.Namespace) -> int:
    """Fuzz each fault until caught (or its budget), beside the peer-style baseline; exit 0 when all caught and the clean engine is clean."""
    from backends.engine.faults import FAULTS

    from graphcheck.catalog import CatalogSettings, run_catalog
    from graphcheck.catalog_console import catalog_table, progress_line, totals_lines
    from graphcheck.report.catalog import CatalogInfo, write_catalog

    for option, value in (("--budget", args.budget), ("--shrink-budget", args.shrink_budget)):
        if not 0 < value <= 86_400:
            raise UsageError(f"{option} must be in (0, 86400] seconds, got {value:g}")
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
        raise UsageError(f"no benchmarks folder at {benchmarks_dir()}: run graphcheck bench from a source checkout")
    if importlib.util.find_spec("pytest_benchmark") is None:
        raise UsageError("graphcheck bench needs pytest-benchmark (pip install 'graphcheck[test]')")
    backend = resolve_backend(args.backend, args.emulate)
    run_id = new_run_id()
    out_dir = Path(args.out) if args.out else Path("reports") / "bench" / run_id
    make_dir(out_dir, "folder")
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
