"""``graphcheck replay``: one scenario file, or a report folder with its recorded settings, in lockstep."""

from __future__ import annotations

import argparse
import time
from datetime import datetime, timezone
from pathlib import Path

from graphcheck import github
from graphcheck.capture.devices import resolve
from graphcheck.check.checker import Checker
from graphcheck.check.engines import resolve_engine
from graphcheck.check.memory_gate import admit, engine_memory_limit
from graphcheck.check.setup import CheckSetup
from graphcheck.cli import engine_log, exitcodes
from graphcheck.cli.common import (
    Unwritten,
    check_writable_file,
    claim_run_dir,
    publish_github,
    report_unwritten,
    runner_of,
    write_reports,
)
from graphcheck.cli.console import make_console, outcome_line, plain, where_line
from graphcheck.cli.import_path import drop_folder
from graphcheck.cli.progress import plural
from graphcheck.cli.replay_target import replay_target
from graphcheck.files import ledger
from graphcheck.scenario import load_scenario
from graphcheck.search.fuzz import write_pending
from graphcheck.search.plan import check_faults


def replay_command(args: argparse.Namespace) -> int:
    from graphcheck.report import RunInfo, graphcheck_version

    target = replay_target(args)
    if target.recorded_in is not None:  # a downloaded report never imports a module shipped in it
        drop_folder(target.scenario_path.parent)
    engine_memory_limit()
    setup = CheckSetup.parse(getattr(args, "model", None), getattr(args, "contract", None), target.oracle)
    engine = resolve_engine(target.engine)
    loaded = load_scenario(str(target.scenario_path))
    setup.oracle_for(loaded)  # an impossible oracle is a usage error before anything runs
    faults = check_faults(list(target.faults), engine)
    backend = resolve(target.backend, emulate=target.emulate, emulator=target.emulator)
    checker = Checker(backend, engine, setup, faults)
    scenario = checker.prepare(loaded)  # as it runs: the setup's model and contract, fitted to the engine
    admit(scenario, engine.factory)  # one the engines cannot hold is refused before a report folder is made
    if getattr(args, "junit", None):
        check_writable_file(Path(args.junit), "--junit file")
    run_id, out_dir = claim_run_dir(Path(args.report_dir))
    console = make_console()
    publish = github.enabled(getattr(args, "github", None))
    with github.commands_stopped(publish):
        console.print(
            f"replaying {plain(scenario.name or 'scenario')} "
            f"({plural(len(scenario.requests), 'request')}, {plural(scenario.num_steps, 'step')}) "
            f"from {plain(target.scenario_path)}"
        )
        for line in target.describe(backend.description, faults):
            console.print(f"  {line}", markup=False)
        if scenario.history:  # run first, on the same engine pair (graphcheck.check.chain)
            console.print(f"  after its history: {plural(len(scenario.history), 'earlier scenario')}", markup=False)
        started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
        started = time.perf_counter()
        write_pending(out_dir / "pending-scenario.json", scenario)
        with engine_log.captured(out_dir) as logged:
            outcome = checker.run(scenario, localise=True)
        if outcome.engine_error is None:  # an engine that tried to exit: its scenario stays on disk
            (out_dir / "pending-scenario.json").unlink(missing_ok=True)
        unwritten: Unwritten | None = None
        with ledger() as written:
            try:
                info = RunInfo(
                    run_id=run_id,
                    backend=backend.name,
                    runner=runner_of([outcome]),
                    emulate=target.emulate,
                    emulator=getattr(backend, "emulator", "kernel"),
                    seed=None,
                    started_at=started_at,
                    elapsed_s=time.perf_counter() - started,
                    version=graphcheck_version(),
                    faults=faults,
                    oracle=setup.oracle,
                    engine=engine.spec,
                )
                paths = write_reports(args, out_dir, info, [outcome])
            except OSError as err:  # a full disk: the verdict still stands
                paths, info, unwritten = None, None, Unwritten(err, tuple(written))
        console.print(outcome_line(outcome))
        if logged.summary() is not None:
            console.print(logged.summary(), markup=False, highlight=False)
        where = where_line(outcome)
        if where is not None:
            console.print(where)
        if unwritten is not None:
            console.print(report_unwritten(out_dir, unwritten), markup=False, highlight=False)
            return exitcodes.REPORT_UNWRITTEN
        console.print(f"report: {paths.index_html}", markup=False)
    if publish:
        publish_github(args, [outcome], (), paths, info)
    return exitcodes.verdict([outcome])


__all__ = ["replay_command"]
