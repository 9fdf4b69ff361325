"""``graphcheck catalog``: the detection benchmark.

By default every fault is fuzzed until caught (or its budget), beside a
peer-style baseline. With ``--seeds N`` each fault is checked the way
``graphcheck run --profile P --seed s`` would check it, at N seeds, and the
figure is how many of them catch it (``graphcheck.catalog.seeds``).
"""

from __future__ import annotations

import argparse
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from graphcheck.capture.devices import resolve
from graphcheck.check.engines import EngineChoice, resolve_engine
from graphcheck.check.honoured import check_honoured
from graphcheck.cli import exitcodes
from graphcheck.cli.common import check_setup, make_dir
from graphcheck.cli.console import make_console
from graphcheck.display import redacted
from graphcheck.errors import InputError
from graphcheck.search.plan import check_faults

#: the most seeds ``--seeds`` takes
MAX_SEEDS = 1000


def catalog_command(args: argparse.Namespace) -> int:
    """Exit 0 when every fault was caught (at every seed, with ``--seeds``) and the clean engine is clean."""
    _check_options(args)
    engine = resolve_engine(args.engine)
    names = _fault_names(args.fault, engine)
    if not names:
        raise InputError(f"engine {engine.spec} declares no injectable faults: there is nothing to catalog")
    backend = resolve(args.backend, emulate=args.emulate, emulator=args.emulator)
    check_honoured(engine.spec, engine.capabilities, check_setup(args), backend)
    out_dir = Path(args.report_dir) / "catalog"
    make_dir(out_dir, "report folder")
    if args.seeds is not None:
        return _seeds_catalog(args, backend, engine, names, out_dir)
    return _budget_catalog(args, backend, engine, names, out_dir)


def _check_options(args: argparse.Namespace) -> None:
    """Each option's range, and which options go with ``--seeds``: one line (exit 2) on the first bad one."""
    if args.seeds is None:
        for option, value in (("--profile", args.profile), ("--jobs", args.jobs)):
            if value is not None:
                raise InputError(f"{option} needs --seeds")
    else:
        if not 1 <= args.seeds <= MAX_SEEDS:
            raise InputError(f"--seeds must be in [1, {MAX_SEEDS}], got {args.seeds}")
        for option, value in _budget_options(args):
            if value is not None:
                raise InputError(f"{option} does not apply with --seeds (each seed is a whole run)")
        if args.jobs is not None and not 1 <= args.jobs <= 256:
            raise InputError(f"--jobs must be in [1, 256], got {args.jobs}")
    for option, value in _budget_options(args):
        if value is not None and not 0 < value <= 86_400:
            raise InputError(f"{option} must be in (0, 86400] seconds, got {value:g}")


def _budget_options(args: argparse.Namespace) -> tuple[tuple[str, float | None], ...]:
    return (("--budget", args.budget), ("--clean-budget", args.clean_budget), ("--shrink-budget", args.shrink_budget))


def _fault_names(chosen: list[str] | None, engine: EngineChoice) -> list[str]:
    """The faults asked for (default: every fault the engine declares), in its declaration order."""
    declared = [f.name for f in engine.capabilities.faults]
    picked = set(check_faults(chosen, engine)) if chosen else set(declared)
    return [name for name in declared if name in picked]


def _engine_label(engine: EngineChoice) -> str:
    return "" if engine.builtin else f", engine {engine.spec}"


def _info(args: argparse.Namespace) -> Any:
    from graphcheck.report import graphcheck_version
    from graphcheck.report.catalog_model import CatalogInfo

    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    return CatalogInfo(redacted(" ".join(args.argv)), started, bool(args.emulate), graphcheck_version(), args.emulator)


def _budget_catalog(
    args: argparse.Namespace, backend: Any, engine: EngineChoice, names: list[str], out_dir: Path
) -> int:
    """Fuzz each fault until caught (or its budget), beside the peer-style baseline."""
    from graphcheck.catalog.console import catalog_table, print_table, progress_line, totals_lines
    from graphcheck.catalog.run import DEFAULT_BUDGET_S, DEFAULT_SHRINK_S, CatalogSettings, run_catalog
    from graphcheck.report.catalog import write_catalog

    budget = DEFAULT_BUDGET_S if args.budget is None else args.budget
    shrink = DEFAULT_SHRINK_S if args.shrink_budget is None else args.shrink_budget
    console = make_console()
    info = _info(args)
    setup = check_setup(args)
    settings = CatalogSettings(
        budget_s=budget,
        shrink_s=shrink,
        seed=args.seed,
        setup=setup,
        engine=engine.spec,
        clean_budget_s=args.clean_budget,
    )
    clean = settings.clean_budget
    console.print(
        f"graphcheck catalog: {len(names)} faults on {backend.name} ({backend.description}), "
        f"budget {budget:g}s + {shrink:g}s shrink per fault"
        + (f", {clean:g}s for the clean engine" if clean != budget else "")
        + f", seed {args.seed}"
        + (f", {setup.label()}" if setup.label() else "")
        + _engine_label(engine),
        markup=False,
        highlight=False,
    )
    on_done = None if args.quiet else (lambda name, result: console.print(progress_line(name, result)))
    result = run_catalog(names, backend, settings, out_dir, on_done=on_done)
    paths = write_catalog(result, out_dir, info)
    print_table(console, catalog_table(result))
    for line in totals_lines(result):
        console.print(line)
    console.print(f"report: {paths.index_html}")
    return exitcodes.CLEAN if result.passed else exitcodes.DIVERGENCE


def _seeds_catalog(
    args: argparse.Namespace, backend: Any, engine: EngineChoice, names: list[str], out_dir: Path
) -> int:
    """Each fault (and the clean engine) at ``--seeds`` seeds, each a ``graphcheck run --profile``."""
    from graphcheck.catalog.console import print_table
    from graphcheck.catalog.seeds import DEFAULT_PROFILE, SeedsSettings, run_seeds
    from graphcheck.catalog.seeds_console import progress_line, seeds_table, totals_lines
    from graphcheck.report.catalog_seeds import write_seeds_catalog
    from graphcheck.search.plan import RUN_PROFILE_EXAMPLES

    profile = args.profile or DEFAULT_PROFILE
    jobs = (len(names) + 1) * args.seeds
    workers = args.jobs if args.jobs is not None else min(os.cpu_count() or 1, jobs)
    console = make_console()
    info = _info(args)
    setup = check_setup(args)
    settings = SeedsSettings(
        args.seeds, RUN_PROFILE_EXAMPLES[profile], args.seed, profile, setup, workers, engine=engine.spec
    )
    console.print(
        f"graphcheck catalog: {len(names)} faults and the clean engine on {backend.name} ({backend.description}), "
        f"each at seeds {args.seed}..{args.seed + args.seeds - 1} as `graphcheck run --profile {profile}`, "
        f"{workers} worker{'s' if workers != 1 else ''}"
        + (f", {setup.label()}" if setup.label() else "")
        + _engine_label(engine),
        markup=False,
        highlight=False,
    )
    on_done = None if args.quiet else (lambda run: console.print(progress_line(run)))
    result = run_seeds(names, backend, settings, out_dir, on_done=on_done)
    paths = write_seeds_catalog(result, out_dir, info)
    print_table(console, seeds_table(result))
    for line in totals_lines(result):
        console.print(line)
    console.print(f"report: {paths.index_html}")
    return exitcodes.CLEAN if result.passed else exitcodes.DIVERGENCE


__all__ = ["catalog_command"]
