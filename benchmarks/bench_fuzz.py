"""Fuzz throughput: lockstep runs (scenarios checked) per second, fresh engines vs pooled ones.

Run: ``graphcheck bench`` (or ``python3 -m pytest benchmarks/bench_fuzz.py``; the
backend comes from ``GRAPHCHECK_BENCH_BACKEND``, see benchmarks/conftest.py).

Both modes fuzz the same suites (``graphcheck.suites.SUITES``) with the same seed
and example count, no example database, on one compute thread like ``graphcheck
run``: ``fresh`` is one scenario per Hypothesis example, engines built and
captured for each (``SearchOptions(per_config=1, pool=None)``); ``pooled`` is ``fuzz_suite``'s
default, a batch of scenarios per example on one engine configuration, run on
pooled engines (``graphcheck.search.batches``, ``graphcheck.check.pool``). Each
mode is one timed round over every suite (a clean engine: no shrinking); the
figure is ``examples / seconds``. ``graphcheck bench`` prints both and their ratio.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pytest_benchmark")

from graphcheck.check.threads import single_threaded  # noqa: E402
from graphcheck.search.fuzz import SearchOptions, fuzz_suite  # noqa: E402
from graphcheck.suites import SUITES  # noqa: E402

QUICK = os.environ.get("GRAPHCHECK_BENCH_QUICK") == "1"  # see benchmarks/conftest.py
SUITE_NAMES = ("padding", "seeds") if QUICK else tuple(SUITES)
EXAMPLES = 2 if QUICK else 8  # per suite: the ci profile's count
SEED = 0
MODES = {"fresh": SearchOptions(per_config=1, pool=None), "pooled": SearchOptions()}


@pytest.fixture(scope="module")
def warm(bench_checker: Any, tmp_path_factory: pytest.TempPathFactory) -> None:
    """First-use costs (imports, allocator, kernels) outside either mode's timing."""
    with single_threaded(bench_checker.backend):
        fuzz_suite(
            "warm-up",
            bench_checker.strategy(SUITES["padding"].strategy()),
            bench_checker,
            examples=1,
            seed=SEED + 1,
            pending_path=tmp_path_factory.mktemp("warm") / "pending-scenario.json",
            options=MODES["fresh"],
        )


def fuzz_all(checker: Any, pending: Path, mode: SearchOptions) -> dict[str, Any]:
    """Fuzz every suite once; lockstep runs, Hypothesis examples, steps, seconds, and per suite
    its lockstep runs and seconds (``per_suite``: a ``--baseline`` is compared on the suites both ran)."""
    runs = configs = steps = 0
    per_suite: dict[str, dict[str, float]] = {}
    started = time.perf_counter()
    with single_threaded(checker.backend):
        for name in SUITE_NAMES:
            suite = SUITES[name]
            if checker.missing_for(suite.requires):
                continue  # a suite this engine cannot run (graphcheck run skips it too)
            begun = time.perf_counter()
            strategy = checker.strategy(suite.strategy())
            result = fuzz_suite(
                name, strategy, checker, examples=EXAMPLES, seed=SEED, pending_path=pending, options=mode
            )
            assert result.outcome is None, f"{name}: {result.outcome.first.headline() if result.outcome.first else ''}"
            per_suite[name] = {"examples": result.examples, "seconds": time.perf_counter() - begun}
            runs, configs, steps = runs + result.examples, configs + EXAMPLES, steps + result.steps
    seconds = time.perf_counter() - started
    return {"examples": runs, "configs": configs, "steps": steps, "seconds": seconds, "per_suite": per_suite}


@pytest.mark.parametrize("mode", list(MODES))
def test_fuzz(benchmark: Any, bench_checker: Any, warm: None, mode: str, tmp_path: Path) -> None:
    figures: dict[str, Any] = {}
    bench_device = bench_checker.backend

    def run() -> None:
        figures.update(fuzz_all(bench_checker, tmp_path / "pending-scenario.json", MODES[mode]))

    benchmark.group = "fuzz"
    benchmark.pedantic(run, rounds=1, iterations=1)
    benchmark.extra_info.update(
        kind="fuzz",
        mode=mode,
        per_config=MODES[mode].per_config,
        suites=list(figures.get("per_suite", SUITE_NAMES)),
        engine=bench_checker.engine.spec,
        examples_per_suite=EXAMPLES,
        seed=SEED,
        backend=bench_device.name,
        device=bench_device.device,
        **figures,
    )
