"""The ``graphcheck`` command line.

Exit codes (graphcheck.exitcodes): 0 clean, 1 divergence, 2 usage error or bad
input, 3 backend unavailable. User errors print one line on stderr, never a
traceback.
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from graphcheck import exitcodes
from graphcheck.cli_errors import BACKENDS, BackendUnavailableError, UsageError
from graphcheck.scenario import ScenarioError

PROFILES = ("dev", "ci", "thorough")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse would print usage and exit; keep one line
        raise UsageError(message)


def _backend_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--backend", default="cpu", help=f"one of {', '.join(BACKENDS)} (default cpu)")
    parser.add_argument(
        "--emulate", action="store_true", help="run the backend's framework on the CPU with the emulated graph runner"
    )
    parser.add_argument("--inject", action="append", metavar="FAULT", help="inject a named engine fault (see `graphcheck faults`); repeatable")
    parser.add_argument("--report-dir", default="reports", metavar="DIR", help="where reports/<run-id>/ go (default reports)")
    parser.add_argument("--junit", metavar="FILE", help="also write a JUnit XML file here")
    parser.add_argument("--quiet", action="store_true", help="no progress display")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="graphcheck", description="Find graph-capture bugs in MTP speculative decoding engines.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    run = sub.add_parser("run", help="check built-in scenarios, then fuzz the suites in lockstep")
    _backend_options(run)
    run.add_argument("--suite", action="append", metavar="NAME", help="fuzz only this suite; repeatable (default: all)")
    run.add_argument("--examples", type=int, metavar="N", help="scenarios per suite (default: from --profile)")
    run.add_argument("--seed", type=int, default=0, metavar="N", help="fuzzing seed; the same seed gives the same run (default 0)")
    run.add_argument("--profile", choices=PROFILES, default="dev", help="dev (default), ci or thorough")
    run.add_argument("--steps", type=int, default=20, metavar="N", help="steps of the built-in demo scenarios (default 20)")
    run.add_argument("--keep-going", action="store_true", help="fuzz every suite even after a divergence")
    replay = sub.add_parser("replay", help="re-run one scenario file (or report folder) in lockstep")
    replay.add_argument("file", metavar="FILE.json")
    _backend_options(replay)
    sub.add_parser("doctor", help="list backends: framework, device, graph runner, what --emulate uses")
    sub.add_parser("faults", help="list the injectable engine faults")
    return parser


def _dispatch(args: argparse.Namespace) -> int:
    from graphcheck import commands

    if args.command == "run":
        if not 1 <= args.steps <= 10_000:
            raise UsageError(f"--steps must be in [1, 10000], got {args.steps}")
        return commands.run_command(args)
    if args.command == "replay":
        return commands.replay_command(args)
    if args.command == "doctor":
        return commands.doctor_command(args)
    return commands.faults_command(args)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser().parse_args(argv)
        args.argv = ["graphcheck", *argv]
        return _dispatch(args)
    except UsageError as err:
        print(f"graphcheck: error: {err}", file=sys.stderr)
        return exitcodes.USAGE
    except ScenarioError as err:
        print(f"graphcheck: bad scenario: {err}", file=sys.stderr)
        return exitcodes.USAGE
    except BackendUnavailableError as err:
        print(f"graphcheck: backend unavailable: {err}", file=sys.stderr)
        return exitcodes.BACKEND_UNAVAILABLE
    except KeyboardInterrupt:
        print("graphcheck: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
