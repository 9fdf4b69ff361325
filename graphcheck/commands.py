"""What ``graphcheck run`` does: pick scenarios, decode them, print, exit."""

from __future__ import annotations

import argparse
import dataclasses
import time

from graphcheck import exitcodes
from graphcheck.cli_errors import BACKENDS, UsageError
from graphcheck.console import decode_table, make_console
from graphcheck.examples import demo_scenario
from graphcheck.scenario import Scenario, load_scenario


def selected_scenarios(args: argparse.Namespace) -> list[tuple[str, Scenario]]:
    """The scenario file, or the built-in demo once per verify mode."""
    if args.scenario:
        scenario = load_scenario(args.scenario)
        return [(args.scenario, scenario)]
    if not 1 <= args.steps <= 10_000:
        raise UsageError(f"--steps must be in [1, 10000], got {args.steps}")
    modes = args.mode or ["greedy", "target_match", "topp", "naive"]
    picked = []
    for mode in dict.fromkeys(modes):
        naive = mode == "naive"
        strategy = "target_match" if naive else mode
        scenario = demo_scenario(verify_strategy=strategy, naive_mode=naive, num_steps=args.steps)
        picked.append((f"demo/{mode}", dataclasses.replace(scenario, name=f"demo/{mode}")))
    return picked


def run_command(args: argparse.Namespace) -> int:
    from reference import decode

    if args.backend not in BACKENDS:
        raise UsageError(f"unknown backend {args.backend!r}; choose one of {', '.join(BACKENDS)}")

    console = make_console()
    for label, scenario in selected_scenarios(args):
        started = time.perf_counter()
        results = decode(scenario)
        elapsed = time.perf_counter() - started
        if not args.quiet:
            console.print(decode_table(f"{label}: reference decode, {len(results)} steps, {elapsed:.2f}s", scenario, results))
    return exitcodes.CLEAN
