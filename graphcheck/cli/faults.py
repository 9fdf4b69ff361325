"""``graphcheck faults [--engine SPEC]``: the faults of that engine ``--inject`` can name."""

from __future__ import annotations

import argparse

from graphcheck.cli import exitcodes
from graphcheck.cli.console import make_console


def faults_command(args: argparse.Namespace) -> int:
    from graphcheck.check.engines import resolve_engine
    from graphcheck.cli.console import faults_table

    engine = resolve_engine(getattr(args, "engine", None))
    console = make_console()
    faults = engine.capabilities.faults
    if not engine.builtin:
        console.print(f"engine {engine.spec} ({engine.source})", markup=False, highlight=False)
        for line in engine.capabilities.describe():
            console.print(f"  {line}", markup=False, highlight=False)
        optional = ", ".join(engine.optional_members()) or "none seen on the factory (an engine may still have them)"
        console.print(f"  optional members: {optional}", markup=False, highlight=False)
    if faults:
        console.print(faults_table({f.name: f for f in faults}, details=getattr(args, "details", False)))
        names = engine.capabilities.fault_names
        console.print(f"{len(names)} faults: {', '.join(names)}", markup=False, highlight=False)
    else:
        console.print(f"engine {engine.spec} declares no injectable faults", markup=False, highlight=False)
    return exitcodes.CLEAN


__all__ = ["faults_command"]
