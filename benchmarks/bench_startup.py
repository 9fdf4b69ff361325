"""Start-up: process start to the first example of ``graphcheck run``, and the modules loaded by then.

Run: ``graphcheck bench -k startup`` (or ``python3 -m pytest benchmarks/bench_startup.py``; the
backend comes from ``GRAPHCHECK_BENCH_BACKEND``, see benchmarks/conftest.py).

Each round starts ``benchmarks/startup_probe.py`` (``graphcheck run --suite seeds --examples 1
--seed 0 --database none --quiet`` on the bench backend and engine, ended by the probe once the
first scenario is checked) and times it from just before the process starts to the probe's
line: interpreter start, imports, the engine's construction and graph capture, and the first
scenario's lockstep run. The figure is the median of the rounds (one warm-up round first, so
that the byte-code caches are written); ``extra_info`` also keeps how many modules of
torch.compile's machinery (``startup_probe.WATCHED``) were loaded by then beyond those a bare
``import torch`` loads (``watched_modules``: 0 is the goal). The target (see
docs/benchmarks.md): at most 3 s on the CPU backend.
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

from bench_parallel import bench_run_args  # noqa: E402
from startup_probe import MARKER  # noqa: E402

QUICK = os.environ.get("GRAPHCHECK_BENCH_QUICK") == "1"  # see benchmarks/conftest.py
ROUNDS = 2 if QUICK else 5
PROBE = Path(__file__).resolve().parent / "startup_probe.py"


def probe_command(checker: Any, report_dir: Path) -> list[str]:
    return [
        sys.executable,
        str(PROBE),
        *bench_run_args(checker),
        "--suite",
        "seeds",
        "--examples",
        "1",
        "--seed",
        "0",
        "--database",
        "none",
        "--quiet",
        "--report-dir",
        str(report_dir),
    ]


def to_first_example(command: list[str]) -> tuple[float, dict[str, Any]]:
    """Wall seconds from process start to the probe's line, and what the line says."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    started = time.perf_counter()
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith(MARKER):
                seconds = time.perf_counter() - started
                proc.wait()
                return seconds, json.loads(line[len(MARKER) :])
        stderr = proc.stderr.read() if proc.stderr else ""
    raise AssertionError(f"no first example (exit {proc.returncode}):\n{stderr[-3000:]}")


def test_startup(benchmark: Any, bench_checker: Any, tmp_path: Path) -> None:
    command = probe_command(bench_checker, tmp_path)
    _, bare = to_first_example([sys.executable, str(PROBE), "--import-torch"])  # also warms the caches
    to_first_example(command)  # warm-up: byte-code caches
    seconds: list[float] = []
    report: dict[str, Any] = {}

    def run() -> None:
        elapsed, found = to_first_example(command)
        seconds.append(elapsed)
        report.update(found)

    benchmark.group = "startup"
    benchmark.pedantic(run, rounds=ROUNDS, iterations=1)
    benchmark.extra_info.update(
        kind="startup",
        seconds=sorted(seconds)[len(seconds) // 2],
        rounds=len(seconds),
        watched_modules=len(set(report.get("modules", [])) - set(bare["modules"])),
        engine=bench_checker.engine.spec,
        backend=bench_checker.backend.name,
        device=bench_checker.backend.device,
    )
