"""``graphcheck run``: the built-in scenarios and a fuzzing search per suite, in lockstep; one report.

``-j 1`` fuzzes in this process; ``-j N`` hands the suites to pytest-xdist
workers (``graphcheck.parallel.run``) and merges what they found; ``-j auto`` picks N
(``graphcheck.parallel.workers``) and prints why in the run's header.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from graphcheck import github
from graphcheck.backends.devices import resolve
from graphcheck.check.applicable import applicability, left_out_line
from graphcheck.check.chain import history_line
from graphcheck.check.engines import resolve_engine
from graphcheck.check.memory_gate import MemoryLimitError, check_limit_usable, engine_memory_limit
from graphcheck.check.records import CheckOutcome
from graphcheck.check.situations import involved_situations, merged_coverage, situation_table
from graphcheck.check.watchdog import HardHang, on_hard_hang
from graphcheck.cli import engine_log, exitcodes
from graphcheck.cli.common import (
    RunPlan,
    Unwritten,
    check_faults,
    check_setup,
    check_writable_file,
    claim_run_dir,
    open_database,
    pick_suites,
    publish_github,
    report_unwritten,
    write_reports,
)
from graphcheck.cli.console import make_console, plain, situations_table, summary_table, where_line
from graphcheck.cli.progress import RunProgress, plural
from graphcheck.display import one_line
from graphcheck.errors import InputError
from graphcheck.files import ledger, write_atomic
from graphcheck.search.fuzz import (
    DEFAULT_PER_CONFIG,
    FuzzResult,
    SearchInterrupted,
    label_found,
    write_fuzz_summary,
)
from graphcheck.search.suite_run import RUN_PROFILE_EXAMPLES, SuiteRun, SuiteRunHooks, SuiteRunSpec, runnable_suites


def plan_run(args: argparse.Namespace) -> RunPlan:
    """Check every option and output path, cheapest first; then claim the report folder."""
    engine_memory_limit()  # a malformed GRAPHCHECK_MAX_ENGINE_MEMORY fails here, not inside a search
    suites = pick_suites(args.suite)
    examples = args.examples if args.examples is not None else RUN_PROFILE_EXAMPLES[args.profile]
    if not 1 <= examples <= 100_000:
        raise InputError(f"--examples must be in [1, 100000], got {examples}")
    engine = resolve_engine(getattr(args, "engine", None))
    faults = check_faults(args.inject, engine)
    setup = check_setup(args)
    from graphcheck.parallel.run import check_options, choose_workers

    xdist_args = check_options(getattr(args, "jobs", 1), getattr(args, "xdist_args", ""))
    if getattr(args, "junit", None):
        check_writable_file(Path(args.junit), "--junit file")
    backend = resolve(args.backend, emulate=args.emulate, emulator=args.emulator)
    jobs, worker_plan = choose_workers(getattr(args, "jobs", 1), backend, xdist_args, os.environ)
    database, example_db = open_database(getattr(args, "database", None))
    plan = RunPlan(
        backend,
        faults,
        suites,
        examples,
        args.seed,
        Path(),
        "",
        database,
        example_db,
        jobs,
        xdist_args,
        bool(args.emulate),
        setup,
        engine,
        worker_plan=worker_plan,
    )
    plan.suites, plan.skipped = runnable_suites(plan.checker, suites)
    if not plan.suites:
        reasons = "; ".join(f"{s.suite}: {s.reason}" for s in plan.skipped)
        raise InputError(f"no suite can run on engine {engine.spec}: {reasons}")
    check_limit_usable(engine.factory, plan.checker.prepare)  # a limit no scenario fits: before a folder is made
    plan.run_id, plan.out_dir = claim_run_dir(Path(args.report_dir))
    return plan


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C during a run: what it had found so far, for the report."""

    def __init__(self, outcomes: list[CheckOutcome], fuzzed: list[FuzzResult]) -> None:
        super().__init__()
        self.outcomes, self.fuzzed = outcomes, fuzzed


def run_command(args: argparse.Namespace) -> int:
    if not 1 <= args.steps <= 10_000:
        raise InputError(f"--steps must be in [1, 10000], got {args.steps}")
    plan = plan_run(args)
    console = make_console()
    started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    started = time.perf_counter()
    pending = plan.out_dir / "pending-scenario.json"
    publish = github.enabled(getattr(args, "github", None))
    interrupted = False
    with github.commands_stopped(publish):
        _print_header(console, plan)
        with engine_log.captured(plan.out_dir) as logged:
            try:
                with on_hard_hang(_hang_report(plan, pending)):
                    outcomes, fuzzed = _run_suites(args, plan, console, pending)
            except RunInterrupted as stop:
                outcomes, fuzzed, interrupted = stop.outcomes, stop.fuzzed, True
        elapsed = time.perf_counter() - started
        # A stopped run keeps the scenario it was on, as does an engine that tried to exit.
        if not interrupted and all(o.engine_error is None for o in outcomes):
            pending.unlink(missing_ok=True)
        involved = involved_situations(outcomes)
        applicable = applicability(plan.engine.capabilities)
        situations = situation_table(merged_coverage(r.coverage for r in fuzzed), involved, applicable)
        paths, info, unwritten = None, None, None
        with ledger() as written:
            try:
                write_fuzz_summary(
                    plan.out_dir / "fuzz.json",
                    fuzzed,
                    involved=involved,
                    applicable=applicable,
                    seed=plan.seed,
                    jobs=plan.jobs,
                    database=plan.database.describe(),
                    interrupted=interrupted,
                    engine=plan.engine.spec,
                    skipped=[{"suite": s.suite, "reason": s.reason} for s in plan.skipped],
                )
                if outcomes:
                    paths, info = write_reports(args, plan, outcomes, started_at, elapsed, fuzzed, situations)
            except OSError as err:  # a full disk, a folder gone read-only: the verdict still stands
                unwritten = Unwritten(err, tuple(written))
        if outcomes:
            console.print(summary_table(outcomes, fuzzed))
        if fuzzed:
            console.print(situations_table(situations))
            if applicable.left_out:
                console.print(left_out_line(applicable), markup=False, highlight=False)
        if logged.summary() is not None:
            console.print(logged.summary(), markup=False, highlight=False)
        _print_verdict(console, plan, outcomes, fuzzed, elapsed, paths, interrupted, unwritten)
    if publish and paths is not None:
        publish_github(args, outcomes, fuzzed, paths, info)
    if unwritten is not None:
        return exitcodes.REPORT_UNWRITTEN
    if interrupted:
        return exitcodes.INTERRUPTED
    return exitcodes.verdict(outcomes)


def _hang_report(plan: RunPlan, pending: Path) -> Callable[[HardHang], int]:
    """What the watchdog does when the engine hangs where Python cannot interrupt it (a C++ op): keep the
    scenario as the report's scenario.json, print the verdict and the replay command; exit DIVERGENCE."""

    def report(hang: HardHang) -> int:
        kept = plan.out_dir / "scenario.json"
        if pending.is_file():
            write_atomic(kept, pending.read_text(encoding="utf-8"))
        sys.stdout.write(
            f"\nHANG the engine's {one_line(hang.where)} was still running after {hang.limit_s:g} s (--hang-limit) "
            f"and could not be interrupted (stuck outside Python): the scenario is kept in {pending} and {kept}\n"
            f"replay: {plan.checker.replay_command(str(kept))}\n"
        )
        sys.stdout.flush()
        return exitcodes.DIVERGENCE

    return report


def _print_header(console: Any, plan: RunPlan) -> None:
    backend = plan.backend
    console.print(f"graphcheck run {plan.run_id}: backend {backend.name} ({backend.description})", highlight=False)
    injected = f"; injected: {plain(', '.join(plan.faults))}" if plan.faults else ""
    console.print(
        f"  {plural(len(plan.suites), 'suite')}, {plural(plan.examples, 'example')} per suite "
        f"(an example: one engine configuration, checked with up to {DEFAULT_PER_CONFIG} scenarios), "
        f"seed {plan.seed}{injected}",
        highlight=False,
    )
    console.print(f"  {plan.database.describe()}", markup=False, highlight=False)
    if plan.worker_plan is not None:
        console.print(f"  {plan.worker_plan.reason}", markup=False, highlight=False)
    if not plan.engine.builtin:
        console.print(f"  engine {plain(plan.engine.spec)} ({plain(plan.engine.source)})", highlight=False)
    for skipped in plan.skipped:
        console.print(f"  skipped suite {plain(skipped.suite)}: {plain(skipped.reason)}", highlight=False)


def _print_verdict(
    console: Any,
    plan: RunPlan,
    outcomes: list[CheckOutcome],
    fuzzed: list[FuzzResult],
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
        pending = plan.out_dir / "pending-scenario.json"
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
        console.print(report_unwritten(plan.out_dir, unwritten), markup=False, highlight=False)
        return
    if paths is None:
        console.print(
            f"report: none (nothing was checked to the end); fuzzing: {plan.out_dir / 'fuzz.json'}", markup=False
        )
        return
    if first is not None:
        console.print(f"replay: {plan.checker.replay_command(str(paths.scenario_json))}", markup=False)
    console.print(f"report: {paths.index_html}", markup=False)


def _checked(outcomes: list[CheckOutcome], fuzzed: list[FuzzResult]) -> str:
    """``899 scenarios checked (895 fuzzed, 4 built-in)``: every lockstep run of the run, fuzzing's and the rest."""
    searched = {id(r.outcome) for r in fuzzed if r.outcome is not None}  # counted in their suite's figure
    fuzz = sum(r.examples for r in fuzzed)
    builtin = sum(1 for o in outcomes if id(o) not in searched)
    return f"{plural(fuzz + builtin, 'scenario')} checked ({fuzz:,} fuzzed, {builtin:,} built-in)"


def _run_suites(
    args: argparse.Namespace, plan: RunPlan, console: Any, pending: Path
) -> tuple[list[CheckOutcome], list[FuzzResult]]:
    if plan.jobs > 1:
        from graphcheck.parallel.run import ParallelInterrupted, run_parallel

        try:
            return run_parallel(args, plan, console)
        except ParallelInterrupted as stop:
            raise RunInterrupted(stop.outcomes, stop.fuzzed) from None
    from graphcheck.check.threads import single_threaded  # torch cpu: thread hand-offs cost more than the tiny ops

    with single_threaded(plan.backend):
        return _run_in_process(args, plan, console, pending)


def _run_in_process(
    args: argparse.Namespace, plan: RunPlan, console: Any, pending: Path
) -> tuple[list[CheckOutcome], list[FuzzResult]]:
    """``-j 1``: every suite with ``plan.seed`` in this process, then the demo scenarios (``SuiteRun``).

    A Ctrl-C raises RunInterrupted with what was found so far (a search's
    smallest diverging scenario included).
    """
    spec = SuiteRunSpec(
        plan.checker,
        plan.suites,
        plan.examples,
        plan.seed,
        pending,
        database=plan.example_db,
        keep_going=args.keep_going,
        demo_steps=args.steps,
    )
    with RunProgress(console, enabled=not args.quiet) as progress:
        hooks = SuiteRunHooks(
            start_suite=progress.start_suite,
            end_suite=progress.end_suite,
            on_progress=progress.search,
            on_demo=lambda scenario, outcome: progress.example(scenario.name, outcome),
            device_lost=lambda outcome: _print_device_lost(console, outcome),
        )
        run = SuiteRun(spec, hooks)
        try:
            run.run()
        except SearchInterrupted as stop:
            run.fuzzed.append(stop.result)
            if stop.result.outcome is not None:
                label_found(stop.result.outcome, stop.result.suite, interrupted=True)
                run.outcomes.append(stop.result.outcome)
            raise RunInterrupted(run.outcomes, run.fuzzed) from None
        except KeyboardInterrupt:
            raise RunInterrupted(run.outcomes, run.fuzzed) from None
        except MemoryLimitError as refused:  # the gate's refusal is the run's end; its scenario stays on disk
            raise refused.kept(pending if pending.is_file() else None) from None
    return run.outcomes, run.fuzzed


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
