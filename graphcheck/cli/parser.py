"""The ``graphcheck`` argument parser: one subparser per subcommand.

``--backend`` and ``--emulate`` come from one parent parser (``backend_options``)
that run, replay, catalog and bench share. It leaves both unset (None) when not
given, so replay can tell "not given" from a value and fall back to what a report
folder recorded; the other subcommands fill in their defaults, cpu and no
emulation (``_Parser.unset_defaults``).
"""

from __future__ import annotations

import argparse
from typing import Any, Sequence

from graphcheck.capture.devices import BACKENDS, EMULATORS
from graphcheck.cli import exitcodes
from graphcheck.errors import InputError

PROFILES = ("dev", "ci", "thorough")
#: --backend and --emulate when not given, for every subcommand but replay
BACKEND_DEFAULTS = {"backend": "cpu", "emulate": False, "emulator": "kernel"}


class _Parser(argparse.ArgumentParser):
    #: values for options left unset (None) on this (sub)command, filled in after parsing
    unset_defaults: dict[str, Any] = {}

    def error(self, message: str) -> None:  # argparse would print usage and exit; keep one line
        raise InputError(message)

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        namespace, extras = super().parse_known_args(args, namespace)
        for dest, value in self.unset_defaults.items():
            if getattr(namespace, dest, None) is None:
                setattr(namespace, dest, value)
        return namespace, extras


def backend_options() -> argparse.ArgumentParser:
    """The parent parser of the backend options that run, replay, catalog and bench share."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument(
        "--backend",
        default=None,
        help=f"one of {', '.join(BACKENDS)} (default cpu; replay of a report folder: the recorded one)",
    )
    parent.add_argument(
        "--emulate",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="run the backend's framework on the CPU with the emulated graph runner (default off; replay of a report folder: the recorded setting)",
    )
    parent.add_argument(
        "--emulator",
        choices=EMULATORS,
        default=None,
        help="the CPU graph emulator of cpu and cuda --emulate: kernel (records @kernel calls, default) or ops "
        "(records every torch op, as a CUDA capture records kernels); replay of a report folder: the recorded one",
    )
    _engine_option(parent)
    parent.add_argument(
        "--hang-limit",
        default=None,
        metavar="SECONDS",
        help="the longest one call into the engine (build, capture, step, reset) may take before it is a hang "
        "finding (default $GRAPHCHECK_HANG_LIMIT, else 300; none: unbounded)",
    )
    return parent


def _engine_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--engine",
        default=None,
        metavar="SPEC",
        help="the engine to check: builtin (default), a name registered under the graphcheck.engines entry point "
        "group, or package.module:attribute (docs/adapters.md); replay of a report folder: the recorded one",
    )


def setup_options() -> argparse.ArgumentParser:
    """The parent parser of --model, --contract and --oracle (run, replay, catalog)."""
    from graphcheck.check.oracles import ORACLE_CHOICES
    from graphcheck.check.setup import MODEL_ALIASES
    from graphcheck.contract import CONTRACT_NAMES
    from graphcheck.scenario import MODELS

    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument(
        "--model",
        choices=(*MODELS, *MODEL_ALIASES),
        help="the built-in engine's model for every scenario: exact (the integer model), float32 or bfloat16 "
        "(float = float32); default: each scenario's own (exact)",
    )
    parent.add_argument(
        "--contract",
        choices=CONTRACT_NAMES,
        help="the decoding contract the engine follows (docs/adapters.md); default: each scenario's own (default)",
    )
    parent.add_argument(
        "--oracle",
        choices=ORACLE_CHOICES,
        default=None,
        help="exact: the reference computes the model too; model-agnostic: it recomputes everything after the "
        "engine's own model; auto (default): exact for the exact model, model-agnostic otherwise",
    )
    return parent


def _report_options(parser: argparse.ArgumentParser, *, recorded: bool = False) -> None:
    """The options run and replay share; ``recorded``: replay's, whose defaults come from a report folder."""
    parser.add_argument(
        "--inject",
        action="append",
        metavar="FAULT",
        help="inject a named engine fault (see `graphcheck faults`); repeatable"
        + (" (default: the recorded faults)" if recorded else ""),
    )
    parser.add_argument(
        "--report-dir", default="reports", metavar="DIR", help="where reports/<run-id>/ go (default reports)"
    )
    parser.add_argument("--junit", metavar="FILE", help="also write a JUnit XML file here")
    parser.add_argument("--quiet", action="store_true", help="no progress display")
    parser.add_argument(
        "--github",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="write a GitHub step summary and error annotations (default: on when GITHUB_ACTIONS=true)",
    )


REPLAY_DESCRIPTION = """\
Re-run one scenario in lockstep (eager, graph replay, reference) and write a report.

  graphcheck replay FILE.json     the scenario in FILE.json, with the backend, --emulate, --engine
                                  and --inject given here (default: cpu, builtin, no faults)
  graphcheck replay REPORT_DIR    the scenario.json of a report folder (reports/<run-id>), with the
                                  backend, --emulate, engine, injected faults and oracle that run
                                  recorded in its divergences.json; an option given here overrides
                                  its recorded value

Exit codes: as `graphcheck --help` lists them (0 clean, 1 divergence, 2 bad input, 3 backend
unavailable, 5 report unwritten, 6 engine aborted, 130 interrupted).
"""


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="graphcheck",
        description="Find graph-capture bugs in MTP speculative decoding engines.",
        epilog=exitcodes.help_text(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    backend = backend_options()
    setup = setup_options()
    _run_parser(sub, backend, setup)
    replay = sub.add_parser(
        "replay",
        help="re-run one scenario file, or a report folder with its recorded settings, in lockstep",
        description=REPLAY_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[backend, setup],
    )
    replay.add_argument("file", metavar="FILE.json|REPORT_DIR", help="a scenario file, or a report folder")
    _report_options(replay, recorded=True)
    sub.add_parser("doctor", help="list backends: framework, device, graph runner, what --emulate uses")
    faults = sub.add_parser("faults", help="list the injectable faults of an engine (--engine; default builtin)")
    _engine_option(faults)
    faults.add_argument(
        "--details", action="store_true", help="the full table: what each fault breaks, its signal, what it declares"
    )
    _catalog_parser(sub, backend, setup)
    _bench_parser(sub, backend)
    return parser


def _run_parser(sub: Any, backend: argparse.ArgumentParser, setup: argparse.ArgumentParser) -> None:
    run = sub.add_parser(
        "run", help="check built-in scenarios, then fuzz the suites in lockstep", parents=[backend, setup]
    )
    run.unset_defaults = BACKEND_DEFAULTS
    _report_options(run)
    run.add_argument("--suite", action="append", metavar="NAME", help="fuzz only this suite; repeatable (default: all)")
    run.add_argument(
        "--examples",
        type=int,
        metavar="N",
        help="examples per suite: an example is one drawn engine configuration, checked with a batch of up to "
        "8 scenarios (default: from --profile: 8 ci, 20 dev, 200 thorough)",
    )
    run.add_argument(
        "--seed", type=int, default=0, metavar="N", help="fuzzing seed; the same seed gives the same run (default 0)"
    )
    run.add_argument("--profile", choices=PROFILES, default="dev", help="dev (default), ci or thorough")
    run.add_argument(
        "--steps", type=int, default=20, metavar="N", help="steps of the built-in demo scenarios (default 20)"
    )
    run.add_argument("--keep-going", action="store_true", help="fuzz every suite even after a divergence")
    run.add_argument(
        "--database",
        metavar="PATH|redis://HOST:PORT/DB|none",
        help="example database: failing scenarios saved and replayed first "
        "(default $GRAPHCHECK_DATABASE, else .hypothesis/graphcheck)",
    )
    run.add_argument(
        "-j",
        "--jobs",
        type=jobs_value,
        default=1,
        metavar="N|auto",
        help="N pytest-xdist workers, each fuzzing every suite with its own seed (seed .. seed+N-1); auto: from "
        "the CPU cores and GPUs (at most 8 per GPU, or 16 with CUDA MPS running); default 1, in process",
    )
    run.add_argument(
        "--xdist-args",
        metavar="ARGS",
        default="",
        help='extra pytest-xdist options for -j, one shell-quoted string; write it with =, e.g. --xdist-args="--tx ssh=gpu1//python=python3"',
    )


def jobs_value(text: str) -> int | str:
    """``-j``'s value: a number (its range is checked later), or ``auto``."""
    from graphcheck.parallel.workers import AUTO

    if text.strip().lower() == AUTO:
        return AUTO
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of workers or auto, got {text!r}") from None


def _catalog_parser(sub: Any, backend: argparse.ArgumentParser, setup: argparse.ArgumentParser) -> None:
    from graphcheck.catalog.run import DEFAULT_BUDGET_S, DEFAULT_SHRINK_S
    from graphcheck.catalog.seeds import DEFAULT_PROFILE

    catalog = sub.add_parser(
        "catalog",
        parents=[backend, setup],
        help="detection benchmark: fuzz each fault until caught, beside a peer-style baseline",
    )
    catalog.unset_defaults = BACKEND_DEFAULTS
    catalog.add_argument(
        "--fault", action="append", metavar="NAME", help="benchmark only this fault; repeatable (default: every fault)"
    )
    # None when not given: --seeds refuses the budget options rather than ignore them
    catalog.add_argument(
        "--budget",
        type=float,
        metavar="SECONDS",
        help=f"fuzzing seconds per fault, shrinking excluded (default {DEFAULT_BUDGET_S:g})",
    )
    catalog.add_argument(
        "--clean-budget",
        type=float,
        metavar="SECONDS",
        help="fuzzing seconds of the clean engine, which no fault ends early (default: --budget)",
    )
    catalog.add_argument(
        "--shrink-budget",
        type=float,
        metavar="SECONDS",
        help=f"shrinking seconds per detected fault (default {DEFAULT_SHRINK_S:g})",
    )
    catalog.add_argument(
        "--seed",
        type=int,
        default=0,
        metavar="N",
        help="fuzzing seed; the same seed draws the same examples; with --seeds the first seed (default 0)",
    )
    catalog.add_argument(
        "--seeds",
        type=int,
        metavar="N",
        help="instead of a budget per fault: is each fault caught by `graphcheck run --profile P` "
        "at each of N seeds (--seed .. --seed+N-1)?",
    )
    catalog.add_argument(
        "--profile", choices=PROFILES, help=f"with --seeds: the run profile at each seed (default {DEFAULT_PROFILE})"
    )
    catalog.add_argument(
        "-j",
        "--jobs",
        type=int,
        metavar="N",
        help="with --seeds: N worker processes (default: the CPU cores)",
    )
    catalog.add_argument(
        "--report-dir", default="reports", metavar="DIR", help="the catalog goes to DIR/catalog/ (default reports)"
    )
    catalog.add_argument("--quiet", action="store_true", help="no line per fault, only the table")


def _bench_parser(sub: Any, backend: argparse.ArgumentParser) -> None:
    bench = sub.add_parser(
        "bench",
        parents=[backend],
        help="benchmarks: decode step eager vs graph, lockstep steps/s and checking overhead",
    )
    bench.unset_defaults = BACKEND_DEFAULTS
    bench.add_argument("--quick", action="store_true", help="fewer sizes and rounds: a smoke run, rough figures")
    bench.add_argument(
        "--out", metavar="DIR", help="where bench.json, summary.json and pytest.log go (default reports/bench/<run-id>)"
    )
    bench.add_argument(
        "-k", dest="select", metavar="EXPR", help="only the benchmarks matching this pytest -k expression"
    )
    bench.add_argument(
        "--baseline",
        metavar="FILE|DIR",
        help="judge pooled fuzz examples/s against a baseline's (>= 2x, on the suites both ran): DIR, a graphcheck "
        "checkout (an older commit) measured first in this run; or FILE, the summary.json of an earlier graphcheck "
        "bench or benchmarks/fuzz_baseline.py's output",
    )


__all__ = ["BACKEND_DEFAULTS", "PROFILES", "REPLAY_DESCRIPTION", "backend_options", "build_parser", "jobs_value"]
