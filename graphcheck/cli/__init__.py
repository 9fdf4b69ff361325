"""The ``graphcheck`` command line: ``main`` parses (``parser``) and hands off to one module per subcommand.

``run``, ``replay``, ``doctor``, ``faults``, ``catalog`` and ``bench`` each live
in the module of that name; ``common`` holds what they share. Only this package
knows exit codes (``exitcodes``): 0 clean, 1 divergence, 2 usage error or bad
input, 3 backend unavailable, 130 interrupted (Ctrl-C). ``main`` maps the
domain's errors (``graphcheck.errors``) to them; a user error prints one line
on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from graphcheck.check.memory_gate import MemoryLimitError
from graphcheck.check.records import EngineOutOfMemory
from graphcheck.cli import exitcodes
from graphcheck.cli.parser import build_parser
from graphcheck.errors import BackendUnavailableError, InputError
from graphcheck.scenario import ScenarioError


def _dispatch(args: argparse.Namespace) -> int:
    """Run the subcommand ``args.command``; imported here, so ``graphcheck doctor`` loads no search machinery."""
    if args.command == "run":
        from graphcheck.cli.run import run_command

        return run_command(args)
    if args.command == "replay":
        from graphcheck.cli.replay import replay_command

        return replay_command(args)
    if args.command == "doctor":
        from graphcheck.cli.doctor import doctor_command

        return doctor_command(args)
    if args.command == "catalog":
        from graphcheck.cli.catalog import catalog_command

        return catalog_command(args)
    if args.command == "bench":
        from graphcheck.cli.bench import bench_command

        return bench_command(args)
    from graphcheck.cli.faults import faults_command

    return faults_command(args)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser().parse_args(argv)
        args.argv = ["graphcheck", *argv]
        return _dispatch(args)
    except MemoryLimitError as err:  # worded as before the gate left validation: the scenario is refused
        print(f"graphcheck: bad scenario: {err}", file=sys.stderr)
        return exitcodes.USAGE
    except InputError as err:
        print(f"graphcheck: error: {err}", file=sys.stderr)
        return exitcodes.USAGE
    except ScenarioError as err:
        print(f"graphcheck: bad scenario: {err}", file=sys.stderr)
        return exitcodes.USAGE
    except EngineOutOfMemory as err:
        print(f"graphcheck: {err}", file=sys.stderr)
        return exitcodes.USAGE
    except BackendUnavailableError as err:
        print(f"graphcheck: backend unavailable: {err}", file=sys.stderr)
        return exitcodes.BACKEND_UNAVAILABLE
    except KeyboardInterrupt:
        print("graphcheck: interrupted", file=sys.stderr)
        return exitcodes.INTERRUPTED


__all__ = ["main"]
