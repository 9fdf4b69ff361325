"""Today's fuzz throughput, for ``graphcheck bench --baseline``: run it on the checkout to compare with.

    PYTHONPATH=/path/to/older/checkout python3 benchmarks/fuzz_baseline.py --out baseline.json

It imports graphcheck from wherever Python finds it (PYTHONPATH first), so the same
script measures an older checkout, one without ``benchmarks/bench_fuzz.py``. It runs
the loop of ``bench_fuzz.py`` on that checkout's default fuzz path: every suite, the ci
profile's 8 examples, seed 0, no example database, one compute thread, after a one-example
warm-up. It only calls ``fuzz_suite(name, checker.strategy(strategy), checker, examples=, seed=,
pending_path=)`` with a ``Checker(backend)``, which every graphcheck since the Checker has (the
device resolver is looked up where the checkout keeps it). The file it writes has the shape of a
``graphcheck bench`` summary.json's ``fuzz`` part (one row, mode ``baseline``, with per-suite
figures), so a summary.json of an earlier ``graphcheck bench`` run works as a baseline too.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

EXAMPLES = 8
SEED = 0


def _revision(checkout: Path) -> str:
    """The commit of ``checkout`` when it is a git work tree of its own, else "no git revision"."""

    def git(*args: str) -> str:
        try:
            done = subprocess.run(["git", "-C", str(checkout), *args], capture_output=True, text=True, check=False)
        except OSError:
            return ""
        return done.stdout.strip()

    top = git("rev-parse", "--show-toplevel")
    if not top or Path(top).resolve() != checkout.resolve():  # a copy inside another repository
        return "no git revision"
    return git("rev-parse", "--short", "HEAD") or "no git revision"


def _resolver() -> Any:
    """``resolve`` of the checkout measured: ``graphcheck.capture.devices`` now, ``graphcheck.backends.devices``
    in checkouts before the capture package."""
    try:
        from graphcheck.capture.devices import resolve
    except ImportError:
        from graphcheck.backends.devices import resolve  # type: ignore[no-redef]
    return resolve


def measure(backend_name: str, emulate: bool = False) -> dict:
    import graphcheck
    from graphcheck.check.checker import Checker
    from graphcheck.check.threads import single_threaded
    from graphcheck.search.fuzz import fuzz_suite
    from graphcheck.suites import SUITES

    resolve = _resolver()
    backend = resolve(backend_name, emulate=True) if emulate else resolve(backend_name)
    checker = Checker(backend)
    pending = Path(tempfile.mkdtemp()) / "pending-scenario.json"
    per_suite: dict[str, dict[str, float]] = {}
    runs = steps = 0
    with single_threaded(backend):
        warm_up = checker.strategy(SUITES["padding"].strategy())
        fuzz_suite("warm-up", warm_up, checker, examples=1, seed=SEED + 1, pending_path=pending)
        started = time.perf_counter()
        for name, suite in SUITES.items():
            begun = time.perf_counter()
            strategy = checker.strategy(suite.strategy())
            result = fuzz_suite(name, strategy, checker, examples=EXAMPLES, seed=SEED, pending_path=pending)
            if result.outcome is not None:
                raise SystemExit(f"suite {name} diverged on the clean engine: not a throughput baseline")
            per_suite[name] = {"examples": result.examples, "seconds": time.perf_counter() - begun}
            runs, steps = runs + result.examples, steps + result.steps
        seconds = time.perf_counter() - started
    checkout = Path(graphcheck.__file__).resolve().parent.parent
    row = {
        "mode": "baseline",
        "examples": runs,
        "configs": EXAMPLES * len(SUITES),
        "steps": steps,
        "seconds": seconds,
        "per_config": 1,
        "per_suite": per_suite,
        "examples_per_s": runs / seconds,
    }
    return {"backend": backend.name, "source": f"{checkout} at {_revision(checkout)}", "fuzz": {"rows": [row]}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="the JSON file to write")
    parser.add_argument("--backend", default="cpu")
    parser.add_argument("--emulate", action="store_true", help="the backend's framework on the CPU, emulated graphs")
    args = parser.parse_args(argv)
    data = measure(args.backend, args.emulate)
    Path(args.out).write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    row = data["fuzz"]["rows"][0]
    print(f"{data['source']}: {row['examples']} scenarios in {row['seconds']:.1f} s, {row['examples_per_s']:.2f}/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
