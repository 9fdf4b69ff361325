"""``graphcheck faults``: the engine faults ``--inject`` can name."""

from __future__ import annotations

import argparse

from graphcheck.cli import exitcodes
from graphcheck.cli.console import make_console


def faults_command(args: argparse.Namespace) -> int:
    from graphcheck.backends.engine.faults import FAULTS
    from graphcheck.cli.console import faults_table

    make_console().print(faults_table(FAULTS))
    return exitcodes.CLEAN


__all__ = ["faults_command"]
