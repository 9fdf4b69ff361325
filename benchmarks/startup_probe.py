"""Run ``graphcheck run ARGS`` up to its first example, report it on stdout and exit there.

Usage: ``python benchmarks/startup_probe.py [graphcheck run options]`` (``run`` is implied);
``python benchmarks/startup_probe.py --import-torch`` reports what ``import torch`` alone loads
(some of torch.distributed, on torch 2.13), the floor a run is compared with.

The probe imports ``graphcheck.cli`` and runs the command as ``graphcheck run`` does, with
``Checker.run`` wrapped: when the first scenario has been checked (the first example of a
fuzzed suite, or the first built-in scenario), it prints one line, ``MARKER`` followed by JSON
(``modules``: the modules of :data:`WATCHED` loaded by then; ``seconds``: since the probe's
first line), and ends the process at once. The caller times process start to that line
(``benchmarks/bench_startup.py``); ``tests/test_startup_imports.py`` checks the modules.
Standard library only until ``graphcheck.cli`` is imported.
"""

from __future__ import annotations

import json
import os
import sys
import time

STARTED = time.perf_counter()

#: printed before the JSON, on a line of its own
MARKER = "GRAPHCHECK-STARTUP "
#: module families a run must not import unless its engine uses them (torch.compile's machinery)
WATCHED = ("torch._dynamo", "torch._inductor", "torch.distributed", "triton", "sympy")


def watched_modules() -> list[str]:
    """The modules of :data:`WATCHED` (a family: the package and its submodules) loaded now."""
    return sorted(m for m in sys.modules if any(m == f or m.startswith(f + ".") for f in WATCHED))


def report() -> None:
    """Print the probe's line and end the process at once (no clean-up, no report files)."""
    found = {"modules": watched_modules(), "seconds": time.perf_counter() - STARTED}
    sys.stdout.write(MARKER + json.dumps(found) + "\n")
    sys.stdout.flush()
    os._exit(0)


def main(argv: list[str]) -> int:
    if argv == ["--import-torch"]:
        import torch  # noqa: F401

        report()
    from graphcheck.check.checker import Checker
    from graphcheck.cli import main as graphcheck_main

    checked = Checker.run

    def first_example(self, *args, **kwargs):
        checked(self, *args, **kwargs)
        report()

    Checker.run = first_example
    Checker.__call__ = first_example
    return graphcheck_main(["run", *argv])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
