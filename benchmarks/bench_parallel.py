"""Aggregate fuzz throughput of ``graphcheck run`` at ``-j 1`` and at the ``-j auto`` plan, and the GPU's busy fraction.

Run: ``graphcheck bench -k parallel`` (or ``python3 -m pytest benchmarks/bench_parallel.py``; the
backend comes from ``GRAPHCHECK_BENCH_BACKEND``, see benchmarks/conftest.py).

Each mode is one ``graphcheck run`` subprocess with seed 0, no example database and
``--quiet``: ``--profile ci`` (every suite, 8 examples each), or with ``--quick`` one suite,
one example and 4 demo steps. ``j1`` runs it in process; ``auto`` with the worker count of
``graphcheck.parallel.machine.auto_plan`` (every worker fuzzes every suite with its own
seed). The figure is the fuzz examples (lockstep runs, summed from ``fuzz.json``) over the
command's wall seconds, start-up included. On a real cuda backend the GPU's utilization is
sampled meanwhile (``graphcheck.bench.gpu_busy``); elsewhere the row says it is unavailable.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pytest_benchmark")

from graphcheck.bench.gpu_busy import gpu_sampler  # noqa: E402
from graphcheck.parallel.machine import auto_plan  # noqa: E402

QUICK = os.environ.get("GRAPHCHECK_BENCH_QUICK") == "1"  # see benchmarks/conftest.py
RUN_ARGS = ("--suite", "padding", "--examples", "1", "--steps", "4") if QUICK else ("--profile", "ci")
MODES = ("j1", "auto")


def bench_run_args(checker: Any) -> list[str]:
    """The ``graphcheck run`` options that pick the bench checker's backend, emulation and engine."""
    device = checker.backend
    return [
        "--backend",
        device.name,
        *(["--emulate"] if device.emulated and device.name != "cpu" else []),
        "--emulator",
        device.emulator,
        "--engine",
        checker.engine.spec,
    ]


def run_command(checker: Any, workers: int, report_dir: Path) -> list[str]:
    """``graphcheck run`` on the bench backend and engine with ``workers`` workers."""
    return [
        sys.executable,
        "-m",
        "graphcheck.cli",
        "run",
        *bench_run_args(checker),
        "--seed",
        "0",
        "--database",
        "none",
        "--quiet",
        "--report-dir",
        str(report_dir),
        "-j",
        str(workers),
        *RUN_ARGS,
    ]


def measure(checker: Any, workers: int, report_dir: Path) -> dict[str, Any]:
    """Run it once: examples, wall seconds and the GPU's busy fraction (JSON-ready)."""
    device = checker.backend
    with gpu_sampler(device.name, device.emulated, os.environ) as sampler:
        started = time.perf_counter()
        done = subprocess.run(run_command(checker, workers, report_dir), capture_output=True, text=True)
        seconds = time.perf_counter() - started
    assert done.returncode == 0, f"graphcheck run exit {done.returncode}:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
    (run_dir,) = [p for p in report_dir.iterdir() if p.is_dir()]
    suites = json.loads((run_dir / "fuzz.json").read_text(encoding="utf-8"))["suites"]
    busy = sampler.reading()
    return {
        "workers": workers,
        "examples": sum(s["examples"] for s in suites),
        "seconds": seconds,
        "gpu_busy": busy.fraction,
        "gpu_busy_source": busy.source,
        "gpu_busy_samples": busy.samples,
    }


@pytest.mark.parametrize("mode", MODES)
def test_parallel_run(benchmark: Any, bench_checker: Any, mode: str, tmp_path: Path) -> None:
    plan = auto_plan(bench_checker.backend, os.environ)
    workers = 1 if mode == "j1" else plan.count
    figures: dict[str, Any] = {}

    def run() -> None:
        figures.update(measure(bench_checker, workers, tmp_path))

    benchmark.group = "parallel"
    benchmark.pedantic(run, rounds=1, iterations=1)
    benchmark.extra_info.update(
        kind="parallel",
        mode=mode,
        plan=plan.reason if mode == "auto" else "",
        run_args=list(RUN_ARGS),
        engine=bench_checker.engine.spec,
        backend=bench_checker.backend.name,
        device=bench_checker.backend.device,
        **figures,
    )
