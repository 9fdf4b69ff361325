"""The ``graphcheck`` command line: ``main`` parses (``parser``) and hands off to one module per subcommand.

``run``, ``replay``, ``doctor``, ``faults``, ``catalog`` and ``bench`` each live
in the module of that name; ``common`` holds what they share. Only this package
knows exit codes (``exitcodes``): 0 clean, 1 divergence, 2 usage error or bad
input, 3 backend unavailable, 4 the run could not finish, 130 interrupted (Ctrl-C,
SIGTERM, SIGHUP). ``main`` maps the
domain's errors (``graphcheck.errors``) to them through one table,
``exitcodes.EXITS``; a user error prints one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from typing import Iterator, Sequence

from graphcheck.check.boundary import STOP_SIGNALS, EngineAborted, user_stops
from graphcheck.check.watchdog import HardHang, watching
from graphcheck.cli import exitcodes
from graphcheck.cli.parser import build_parser
from graphcheck.display import one_line


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


def _contained(args: argparse.Namespace) -> int:
    """``_dispatch``, with a last net under the engine boundary: graphcheck raises no SystemExit of its own,
    so one that gets here came from engine code run outside the lockstep (the catalogue's baseline, say)
    and must not decide the exit code either."""
    try:
        return _dispatch(args)
    except (Exception, KeyboardInterrupt):
        raise
    except BaseException as err:
        raise EngineAborted(f"graphcheck {args.command}", err) from None


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        with stops_as_interrupts():
            args = build_parser().parse_args(argv)
            args.argv = ["graphcheck", *argv]
            with watching(hang_limit(args), _hung_outside_python):
                return _contained(args)
    except BaseException as err:  # the table decides; what it does not list goes on as it came
        ending = exitcodes.exit_for(err)
        if ending is None:
            raise
        print(ending.message(err), file=sys.stderr)
        return ending.code


def hang_limit(args: argparse.Namespace) -> float:
    """``--hang-limit``, else $GRAPHCHECK_HANG_LIMIT, else the default, in seconds (inf: unbounded)."""
    import os

    from graphcheck.check.watchdog import HANG_LIMIT_ENV, parse_limit
    from graphcheck.errors import InputError

    given = getattr(args, "hang_limit", None)
    text = given if given is not None else os.environ.get(HANG_LIMIT_ENV)
    try:
        return parse_limit(text)
    except ValueError as err:
        raise InputError(f"--hang-limit: {err}") from None


def _hung_outside_python(hang: HardHang) -> int:
    """The last word of a process whose engine hung where no Python code runs (the watchdog's hard path)."""
    sys.stdout.write(
        f"\nHANG the engine's {one_line(hang.where)} was still running after {hang.limit_s:g} s (--hang-limit) "
        "and could not be interrupted (stuck outside Python): graphcheck ends here; the scenario it was "
        "running is on disk (pending-scenario.json)\n"
    )
    sys.stdout.flush()
    return exitcodes.DIVERGENCE


@contextlib.contextmanager
def stops_as_interrupts() -> Iterator[None]:
    """While the body runs, SIGINT, SIGTERM and SIGHUP raise StopRequested (a KeyboardInterrupt), so a run
    stopped by a time limit writes what it found into its report and exits ``INTERRUPTED``, as Ctrl-C does."""
    with user_stops(STOP_SIGNALS):
        yield


__all__ = ["main"]
