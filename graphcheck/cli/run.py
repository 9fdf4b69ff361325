"""``graphcheck run``: the built-in scenarios and a fuzzing search per suite, in lockstep; one report.

``-j 1`` fuzzes in this process; ``-j N`` hands the suites to pytest-xdist
workers (``graphcheck.parallel.run``) and merges what they found; ``-j auto`` picks N
(``graphcheck.parallel.workers``) and prints why in the run's header.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from graphcheck import github
from graphcheck.check.applicable import applicability, left_out_line
from graphcheck.check.chain import history_line
from graphcheck.check.memory_gate import check_limit_usable, engine_memory_limit
from graphcheck.check.records import CheckOutcome
from graphcheck.check.situations import involved_situations, merged_coverage, situation_table
from graphcheck.check.watchdog import WATCHDOG, HardHang, on_hard_hang
from graphcheck.cli import engine_log, exitcodes
from graphcheck.cli.common import (
    Unwritten,
    check_setup,
    check_writable_file,
    claim_run_dir,
    open_database,
    publish_github,
    report_unwritten,
    runner_of,
    write_reports,
)
from graphcheck.cli.console import make_console, plain, situations_table, summary_table, where_line
from graphcheck.cli.progress import RunProgress, plural
from graphcheck.display import one_line
from graphcheck.files import ledger, write_atomic
from graphcheck.parallel.workers import WorkerPlan
from graphcheck.search.fuzz import DEFAULT_PER_CONFIG, write_fuzz_summary
from graphcheck.search.plan import RUN_PROFILE_EXAMPLES, ResolvedPlan, RunPlan, make_plan
from graphcheck.search.result import SuiteResult, fuzzed, reported_outcomes
from graphcheck.search.suite_run import RunHooks, SuiteRunner


@dataclass(frozen=True)
class RunContext:
    """The command line's side of a run: its plan made runnable, the report folder it claimed, the example
    database it opened, and how ``-j`` spreads it (the xdist arguments, ``-j auto``'s reasoning)."""

    resolved: ResolvedPlan
    run_id: str
    out_dir: Path
    example_db: Any = None  # the opened Hypothesis ExampleDatabase, None for "none"
    xdist_args: tuple[str, ...] = ()
    worker_plan: WorkerPlan | None = None  # -j auto's plan (workers is its count); None for -j N

    @property
    def plan(self) -> RunPlan:
        return self.resolved.plan


def plan_run(args: argparse.Namespace) -> RunContext:
    """Check every option and output path, cheapest first; then claim the report folder."""
    from graphcheck.parallel.run import check_options, choose_workers

    engine_memory_limit()  # a malformed GRAPHCHECK_MAX_ENGINE_MEMORY fails here, not inside a search
    plan = make_plan(
        suites=args.suite,
        examples=args.examples if args.examples is not None else RUN_PROFILE_EXAMPLES[args.profile],
        engine=args.engine,
        faults=args.inject,
        setup=check_setup(args),
        demo_steps=args.steps,
        seed=args.seed,
        backend=args.backend,
        emulate=bool(args.emulate),
        emulator=args.emulator,
        keep_going=args.keep_going,
        hang_limit=WATCHDOG.limit_s,  # what this process watches with (--hang-limit)
    )
    xdist_args = check_options(args.jobs, args.xdist_args)
    if args.junit:
        check_writable_file(Path(args.junit), "--junit file")
    resolved = plan.resolve()
    workers, worker_plan = choose_workers(args.jobs, resolved.backend, xdist_args, os.environ)
    database, example_db = open_database(args.database)
    plan = dataclasses.replace(plan, workers=workers, database=database)
    check_limit_usable(resolved.engine.factory, resolved.checker.prepare)  # before a folder is made
    run_id, out_dir = claim_run_dir(Path(args.report_dir))
    resolved = dataclasses.replace(resolved, plan=plan)
    return RunContext(resolved, run_id, out_dir, example_db, tuple(xdist_args), worker_plan)


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C during a run: what it had found so far, for the report."""

    def __init__(self, results: list[SuiteResult]) -> None:
        super().__init__()
        self.results = results


def run_command(args: argparse.Namespace) -> int:
    run = plan_run(args)
    plan = run.plan
    console = make_console()
    started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    started = time.perf_counter()
    pending = run.out_dir / "pending-scenario.json"
    publish = github.enabled(args.github)
    interrupted = False
    with github.commands_stopped(publish):
        _print_header(console, run)
        with engine_log.captured(run.out_dir) as logged:
            try:
                with on_hard_hang(_hang_report(run, pending)):
                    results = _run_suites(run, console, pending, quiet=args.quiet)
            except RunInterrupted as stop:
                results, interrupted = stop.results, True
        elapsed = time.perf_counter() - started
        outcomes, searched = reported_outcomes(results), fuzzed(results)
        # A stopped run keeps the scenario it was on, as does an engine that tried to exit.
        if not interrupted and all(o.engine_error is None for o in outcomes):
            pending.unlink(missing_ok=True)
        involved = involved_situations(outcomes)
        applicable = applicability(run.resolved.engine.capabilities)
        situations = situation_table(merged_coverage([r.coverage for r in searched]), involved, applicable)
        paths, info, unwritten = None, None, None
        with ledger() as written:
            try:
                write_fuzz_summary(
                    run.out_dir / "fuzz.json",
                    searched,
                    involved=involved,
                    applicable=applicable,
                    seed=plan.seed,
                    jobs=plan.workers,
                    database=plan.database.describe(),
                    interrupted=interrupted,
                    engine=plan.engine,
                    skipped=[{"suite": s.suite, "reason": s.reason} for s in plan.skipped],
                )
                if outcomes:
                    info = _run_info(run, args.profile, outcomes, started_at, elapsed)
                    paths = write_reports(args, run.out_dir, info, outcomes, searched, situations)
            except OSError as err:  # a full disk, a folder gone read-only: the verdict still stands
                unwritten = Unwritten(err, tuple(written))
        if outcomes:
            console.print(summary_table(outcomes, searched))
        if searched:
            console.print(situations_table(situations))
            if applicable.left_out:
                console.print(left_out_line(applicable), markup=False, highlight=False)
        if logged.summary() is not None:
            console.print(logged.summary(), markup=False, highlight=False)
        _print_verdict(console, run, outcomes, searched, elapsed, paths, interrupted, unwritten)
    if publish and paths is not None:
        publish_github(args, outcomes, searched, paths, info)
    if unwritten is not None:
        return exitcodes.REPORT_UNWRITTEN
    if interrupted:
        return exitcodes.INTERRUPTED
    return exitcodes.verdict(outcomes)


def _run_info(run: RunContext, profile: str, outcomes: list[CheckOutcome], started_at: str, elapsed: float) -> Any:
    from graphcheck.report import RunInfo, graphcheck_version

    plan = run.plan
    return RunInfo(
        run_id=run.run_id,
        backend=plan.backend,
        runner=runner_of(outcomes),
        emulate=plan.emulate,
        emulator=getattr(run.resolved.backend, "emulator", "kernel"),
        seed=plan.seed,
        profile=profile,
        started_at=started_at,
        elapsed_s=elapsed,
        version=graphcheck_version(),
        faults=plan.faults,
        oracle=plan.setup.oracle,
        engine=plan.engine,
    )


def _hang_report(run: RunContext, pending: Path) -> Callable[[HardHang], int]:
    """What the watchdog does when the engine hangs where Python cannot interrupt it (a C++ op): keep the
    scenario as the report's scenario.json, print the verdict and the replay command; exit DIVERGENCE."""

    def report(hang: HardHang) -> int:
        kept = run.out_dir / "scenario.json"
        if pending.is_file():
            write_atomic(kept, pending.read_text(encoding="utf-8"))
        sys.stdout.write(
            f"\nHANG the engine's {one_line(hang.where)} was still running after {hang.limit_s:g} s (--hang-limit) "
            f"and could not be interrupted (stuck outside Python): the scenario is kept in {pending} and {kept}\n"
            f"replay: {run.resolved.checker.replay_command(str(kept))}\n"
        )
        sys.stdout.flush()
        return exitcodes.DIVERGENCE

    return report


def _print_header(console: Any, run: RunContext) -> None:
    plan, backend, engine = run.plan, run.resolved.backend, run.resolved.engine
    console.print(f"graphcheck run {run.run_id}: backend {backend.name} ({backend.description})", highlight=False)
    injected = f"; injected: {plain(', '.join(plan.faults))}" if plan.faults else ""
    console.print(
        f"  {plural(len(plan.suites), 'suite')}, {plural(plan.examples, 'example')} per suite "
        f"(an example: one engine configuration, checked with up to {DEFAULT_PER_CONFIG} scenarios), "
        f"seed {plan.seed}{injected}",
        highlight=False,
    )
    console.print(f"  {plan.database.describe()}", markup=False, highlight=False)
    if run.worker_plan is not None:
        console.print(f"  {run.worker_plan.reason}", markup=False, highlight=False)
    if not engine.builtin:
        console.print(f"  engine {plain(engine.spec)} ({plain(engine.source)})", highlight=False)
    for skipped in plan.skipped:
        console.print(f"  skipped suite {plain(skipped.suite)}: {plain(skipped.reason)}", highlight=False)


def _print_verdict(
    console: Any,
    run: RunContext,
    outcomes: list[CheckOutcome],
    fuzzed: list[SuiteResult],
    elapsed: float,
    paths: Any,
    interrupted: bool,
    unwritten: Unwritten | None = None,
) -> None:
    first = next((o for o in outcomes if not o.clean), None)
    checked = _checked(outcomes, fuzzed)
    if interrupted:
        found = (
            f"found {plain(first.first.headline())}" if first is not None and first.first else "no divergence so far"
        )
        pending = run.out_dir / "pending-scenario.json"
        if pending.is_file():
            found += f"; the scenario it was running is kept in {plain(pending)}"
        console.print(f"[bold yellow]INTERRUPTED[/] after {elapsed:.1f}s, {checked}: {found}")
    elif first is not None and first.engine_error is not None:
        console.print(
            f"[bold red]ENGINE ABORTED[/] {plain(first.engine_error)}: engine code may not end graphcheck "
            "(not a divergence; the scenario is kept)"
        )
    elif first is not None and first.first is not None:
        console.print(f"[bold red]DIVERGENCE[/] {plain(first.first.headline())}")
    else:
        near_ties = sum(r.ambiguous_examples for r in fuzzed)
        ambiguous = f" ({near_ties} with an ambiguous near tie)" if near_ties else ""
        console.print(f"[bold green]CLEAN[/] {checked}{ambiguous}, {elapsed:.1f}s")
    where = where_line(first)
    if where is not None:
        console.print(where)
    history = history_line(first.scenario) if first is not None and not first.clean else None
    if history is not None:
        console.print(history, markup=False, highlight=False)
    if unwritten is not None:
        console.print(report_unwritten(run.out_dir, unwritten), markup=False, highlight=False)
        return
    if paths is None:
        console.print(
            f"report: none (nothing was checked to the end); fuzzing: {run.out_dir / 'fuzz.json'}", markup=False
        )
        return
    if first is not None:
        console.print(f"replay: {run.resolved.checker.replay_command(str(paths.scenario_json))}", markup=False)
    console.print(f"report: {paths.index_html}", markup=False)


def _checked(outcomes: list[CheckOutcome], fuzzed: list[SuiteResult]) -> str:
    """``899 scenarios checked (895 fuzzed, 4 built-in)``: every lockstep run of the run, fuzzing's and the rest."""
    searched = {id(r.outcome) for r in fuzzed if r.outcome is not None}  # counted in their suite's figure
    fuzz = sum(r.examples for r in fuzzed)
    builtin = sum(1 for o in outcomes if id(o) not in searched)
    return f"{plural(fuzz + builtin, 'scenario')} checked ({fuzz:,} fuzzed, {builtin:,} built-in)"


def _run_suites(run: RunContext, console: Any, pending: Path, *, quiet: bool) -> list[SuiteResult]:
    """The run's results: ``-j N`` schedules the plan's jobs on pytest-xdist workers, ``-j 1`` runs the plan
    here; both through the same suite runner. A Ctrl-C raises RunInterrupted with what was found so far
    (a search's smallest diverging scenario included)."""
    with RunProgress(console, enabled=not quiet) as progress:
        hooks = RunHooks(
            start_suite=progress.start_suite,
            end_suite=progress.end_suite,
            on_progress=progress.search,
            on_demo=progress.demo,
            device_lost=lambda outcome: _print_device_lost(console, outcome),
        )
        if run.plan.workers > 1:
            return _run_parallel(run, console, hooks)
        from graphcheck.check.threads import single_threaded  # torch cpu: thread hand-offs cost more than the tiny ops

        runner = SuiteRunner.of(run.resolved, pending, hooks, run.example_db)
        with single_threaded(run.resolved.backend):
            try:
                return runner.run()
            except KeyboardInterrupt:
                raise RunInterrupted(runner.results) from None


def _run_parallel(run: RunContext, console: Any, hooks: RunHooks) -> list[SuiteResult]:
    from graphcheck.parallel.run import ParallelInterrupted, describe, run_parallel

    results = run.out_dir / "jobs"
    console.print(describe(run.plan, run.resolved.backend, run.xdist_args, results))
    try:
        return run_parallel(
            run.plan, results, run.resolved.backend, run.xdist_args, RunHooks(end_suite=hooks.end_suite)
        )
    except ParallelInterrupted as stop:
        raise RunInterrupted(stop.results) from None


def _print_device_lost(console: Any, outcome: CheckOutcome) -> None:
    if outcome.hung is not None:
        console.print(
            f"[bold red]hang[/] {plain(outcome.hung)}: the run stops at that scenario, unshrunk (every shrink "
            "attempt would wait as long again); it is kept in the report"
        )
        return
    if outcome.engine_error is not None:
        console.print(
            f"[bold red]engine aborted[/] {plain(outcome.engine_error)}: engine code may not end graphcheck, so "
            "the run stops at that scenario, unshrunk (kept in the report)"
        )
        return
    console.print(
        f"[bold red]device lost[/] {plain(outcome.device_error)}: the engine's failure "
        "poisoned the device for this process, so the scenario is reported unshrunk and the run "
        "stops; `graphcheck replay` it in a fresh process"
    )


__all__ = ["RUN_PROFILE_EXAMPLES", "RunInterrupted", "plan_run", "run_command"]
