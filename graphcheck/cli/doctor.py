"""``graphcheck doctor``: which backends this machine can run, and how."""

from __future__ import annotations

import argparse

from graphcheck.cli import exitcodes
from graphcheck.cli.console import make_console


def doctor_command(args: argparse.Namespace) -> int:
    from graphcheck.capture.devices import available_backends
    from graphcheck.cli.console import doctor_table

    make_console().print(doctor_table(available_backends()))
    return exitcodes.CLEAN


__all__ = ["doctor_command"]
