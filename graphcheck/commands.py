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
from graphcheck.fuzz import FuzzResult, fuzz_suite, write_pending
from graphcheck.lockstep import check_scenario
from graphcheck.progress import RunProgress
from graphcheck.records import CheckOutcome
from graphcheck.scenario import Scenario, load_scenario

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


def pick_suites(names: list[str] | None) -> list[Any]:
    from suites import SUITES

    if not names:
        return list(SUITES.values())
    unknown = [n for n in names if n not in SUITES]
    if unknown:
        raise UsageError(f"unknown suite {', '.join(unknown)}; known: {', '.join(SUITES)}")
    return [SUITES[n] for n in dict.fromkeys(names)]


@dataclasses.dataclass
class RunPlan:
    backend: Any
    faults: tuple[str, ...]
    suites: list[Any]
    examples: int
    seed: int
    out_dir: Path
    run_id: str


def plan_run(args: argparse.Namespace) -> RunPlan:
    backend = resolve_backend(args.backend, args.emulate)
    faults = check_faults(args.inject)
    suites = pick_suites(args.suite)
    examples = args.examples if args.examples is not None else PROFILE_EXAMPLES[args.profile]
    if not 1 <= examples <= 100_000:
        raise UsageError(f"--examples must be in [1, 100000], got {examples}")
    from graphcheck.report import new_run_id

    run_id = new_run_id()
    out_dir = Path(args.report_dir) / run_id
    try:
        out_dir.mkdir(parents=True, exist_ok=False)
    except OSError as err:
        raise UsageError(f"cannot create report folder {out_dir}: {err.strerror or err}") from None
    return RunPlan(backend, faults, suites, examples, args.seed, out_dir, run_id)


def run_command(args: argparse.Namespace) -> int:
    plan = plan_run(args)
    console = make_console()
    started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    started = time.perf_counter()
    pending = plan.out_dir / "pending-scenario.json"
    console.print(
        f"graphcheck run {plan.run_id}: backend {plan.backend.name} ({plan.backend.description}), "
        f"seed {plan.seed}, {plan.examples} examples per suite"
        + (f", injected: {', '.join(plan.faults)}" if plan.faults else "")
    )
    outcomes: list[CheckOutcome] = []
    fuzzed: list[FuzzResult] = []
    with RunProgress(console, enabled=not args.quiet) as progress:
        # Suites first: a divergence they find comes back shrunk to a minimal scenario.
        for suite in plan.suites:
            progress.start_suite(suite.name, plan.examples)
            result = fuzz_suite(
                suite.name, suite.strategy(), plan.backend, examples=plan.examples, seed=plan.seed,
                faults=plan.faults, pending_path=pending, on_example=lambda s, o, n=suite.name: progress.example(n, o),
            )
            fuzzed.append(result)
            if result.outcome is not None:
                shrunk = result.outcome
                shrunk.scenario = dataclasses.replace(shrunk.scenario, name=f"{suite.name}/shrunk")
                outcomes.append(shrunk)
                if not args.keep_going:
                    break
        # Then the built-in demo scenarios: a fixed smoke check of every verify mode.
        if args.keep_going or not outcomes:
            for scenario in builtin_scenarios(args.steps):
                write_pending(pending, scenario)
                outcome = check_scenario(scenario, plan.backend, faults=plan.faults)
                progress.example(scenario.name, outcome)
                outcomes.append(outcome)
    elapsed = time.perf_counter() - started
    pending.unlink(missing_ok=True)
    paths = _write_reports(args, plan, outcomes, started_at, elapsed)
    console.print(summary_table(outcomes, fuzzed))
    first = next((o.first for o in outcomes if not o.clean), None)
    if first is not None:
        console.print(f"[bold red]DIVERGENCE[/] {first.headline()}")
    else:
        console.print(f"[bold green]CLEAN[/] {len(outcomes)} scenarios checked, {sum(r.examples for r in fuzzed)} fuzzed examples, {elapsed:.1f}s")
    console.print(f"report: {paths.index_html}")
    return exitcodes.DIVERGENCE if first is not None else exitcodes.CLEAN


def _write_reports(args: argparse.Namespace, plan: RunPlan, outcomes: list[CheckOutcome], started_at: str, elapsed: float) -> Any:
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
    out_dir.mkdir(parents=True, exist_ok=True)
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
