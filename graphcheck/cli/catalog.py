"""``graphcheck catalog``: the detection benchmark, every fault fuzzed until caught beside a peer-style baseline."""

from __future__ import annotations

import argparse
import dataclasses
from datetime import datetime, timezone
from pathlib import Path

from graphcheck.cli import exitcodes
from graphcheck.cli.common import check_faults, check_setup, make_dir, resolve_backend
from graphcheck.cli.console import make_console
from graphcheck.errors import InputError


def catalog_command(args: argparse.Namespace) -> int:
    """Fuzz each fault until caught (or its budget), beside the peer-style baseline; exit 0 when all caught and the clean engine is clean."""
    from graphcheck.backends.engine.faults import FAULTS
    from graphcheck.catalog.console import catalog_table, print_table, progress_line, totals_lines
    from graphcheck.catalog.run import CatalogSettings, run_catalog
    from graphcheck.report.catalog import write_catalog
    from graphcheck.report.catalog_model import CatalogInfo

    for option, value in (("--budget", args.budget), ("--shrink-budget", args.shrink_budget)):
        if not 0 < value <= 86_400:
            raise InputError(f"{option} must be in (0, 86400] seconds, got {value:g}")
    backend = resolve_backend(args.backend, args.emulate)
    chosen = set(check_faults(args.fault)) if args.fault else set(FAULTS)
    names = [name for name in FAULTS if name in chosen]  # registry order
    out_dir = Path(args.report_dir) / "catalog"
    make_dir(out_dir, "report folder")
    console = make_console()
    info = CatalogInfo(
        " ".join(args.argv), datetime.now(timezone.utc).isoformat(timespec="seconds"), bool(args.emulate)
    )
    setup = check_setup(args)
    settings = CatalogSettings(budget_s=args.budget, shrink_s=args.shrink_budget, seed=args.seed, setup=setup)
    console.print(
        f"graphcheck catalog: {len(names)} faults on {backend.name} ({backend.description}), "
        f"budget {args.budget:g}s + {args.shrink_budget:g}s shrink per fault, seed {args.seed}"
        + (f", {setup.label()}" if setup.label() else "")
    )
    on_done = None if args.quiet else (lambda name, result: console.print(progress_line(name, result)))
    result = run_catalog(names, backend, settings, out_dir, on_done=on_done)
    from graphcheck.report import graphcheck_version

    paths = write_catalog(result, out_dir, dataclasses.replace(info, version=graphcheck_version()))
    print_table(console, catalog_table(result))
    for line in totals_lines(result):
        console.print(line)
    console.print(f"report: {paths.index_html}")
    return exitcodes.CLEAN if result.passed else exitcodes.DIVERGENCE


__all__ = ["catalog_command"]
