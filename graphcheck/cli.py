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
from graphcheck.cli_errors import BACKENDS, UsageError
from graphcheck.scenario import VERIFY_STRATEGIES, ScenarioError

MODES = VERIFY_STRATEGIES + ("naive",)

class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse would exit 2 with usage; keep one line
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="graphcheck", description="Find graph-capture bugs in MTP decoding engines.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    run = sub.add_parser("run", help="decode scenarios and check them")
    run.add_argument("--backend", default="cpu", help=f"one of {', '.join(BACKENDS)} (default cpu)")
    run.add_argument("--emulate", action="store_true", help="run the backend's framework on CPU with the emulated graph runner")
    run.add_argument("--scenario", metavar="FILE", help="a scenario JSON file instead of the built-in scenarios")
    run.add_argument(
        "--mode", action="append", choices=MODES, help="verify strategy or naive; repeatable (default: all)"
    )
    run.add_argument("--steps", type=int, default=20, help="steps of the built-in scenario (default 20)")
    run.add_argument("--quiet", action="store_true", help="print only the summary")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        from graphcheck.commands import run_command

        return run_command(args)
    except UsageError as err:
        print(f"graphcheck: error: {err}", file=sys.stderr)
        return exitcodes.USAGE
    except ScenarioError as err:
        print(f"graphcheck: bad scenario: {err}", file=sys.stderr)
        return exitcodes.USAGE


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
