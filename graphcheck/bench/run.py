"""``graphcheck bench``: run the pytest-benchmark suite in benchmarks/ and judge the targets.

The benchmarks run in a pytest subprocess (``--benchmark-json``), on the backend
passed through ``GRAPHCHECK_BENCH_BACKEND`` / ``GRAPHCHECK_BENCH_EMULATE`` /
``GRAPHCHECK_BENCH_QUICK``. This module reads the JSON back into a
:class:`BenchSummary`: the decode step per bucket (eager vs each graph scope),
the lockstep runner per scenario and over the whole set, with the checking
overhead judged against :func:`graphcheck.check.timings.overhead_target`, and
the fuzz throughput (lockstep runs per second) with fresh and with pooled
engines, their ratio (what pooling alone gives), and, given ``--baseline``, pooled
against the baseline's figure on the suites both ran: the fuzz target; and the aggregate
examples/s of ``graphcheck run`` at ``-j 1`` and at the ``-j auto`` plan, with the GPU's busy
fraction (``graphcheck.bench.gpu_busy``), shown and not judged.

Files of one run (``reports/bench/<run-id>/`` or ``--out``): ``bench.json``
(pytest-benchmark's own), ``summary.json`` (the figures below and the verdict),
``pytest.log``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Mapping, Sequence

from graphcheck.check.timings import LockstepTimings, checking_overhead, steps_per_second
from graphcheck.files import write_atomic

#: The decode-step modes in display order; "graph-<scope>" replays that graph_scope.
DECODE_MODES = ("eager", "graph-step", "graph-forward_sampling", "graph-forward")


@dataclass(frozen=True)
class DecodeRow:
    """Median seconds of one decode step at ``running`` requests, per mode."""

    running: int
    bucket: int | None
    median_s: dict[str, float]

    def speedup(self, mode: str) -> float | None:
        """Eager time over ``mode``'s time."""
        eager, other = self.median_s.get("eager"), self.median_s.get(mode)
        return eager / other if eager and other else None


@dataclass(frozen=True)
class OpGraphRow:
    """One group of the op-level emulator benchmark: median seconds per mode (eager, graph-kernel, graph-ops)."""

    group: str
    median_s: dict[str, float]

    def versus_eager(self, mode: str) -> float | None:
        """``mode``'s time over eager's (above 1: slower than eager)."""
        eager, other = self.median_s.get("eager"), self.median_s.get(mode)
        return other / eager if eager and other else None


@dataclass(frozen=True)
class LockstepRow:
    """One scenario of the lockstep benchmark: phase seconds summed over its rounds."""

    scenario: str
    batch: int
    timings: LockstepTimings


@dataclass(frozen=True)
class FuzzRow:
    """One mode of the fuzz benchmark: lockstep runs (scenarios checked) over its seconds."""

    mode: str  # "fresh" (a scenario per example, engines built for each) or "pooled"
    examples: int  # lockstep runs
    configs: int  # Hypothesis examples: engine configurations
    steps: int
    seconds: float
    per_config: int = 1
    per_suite: tuple[tuple[str, int, float], ...] = ()  # (suite, lockstep runs, seconds)

    @property
    def examples_per_s(self) -> float | None:
        return self.examples / self.seconds if self.seconds > 0 else None

    def rate_on(self, suites: Sequence[str]) -> float | None:
        """Lockstep runs per second over ``suites`` only (from ``per_suite``)."""
        chosen = [(n, s) for name, n, s in self.per_suite if name in suites]
        seconds = sum(s for _, s in chosen)
        return sum(n for n, _ in chosen) / seconds if chosen and seconds > 0 else None


@dataclass(frozen=True)
class ParallelRow:
    """One ``graphcheck run`` of the parallel benchmark: fuzz examples over its wall seconds, at ``workers``."""

    mode: str  # "j1" (-j 1) or "auto" (the -j auto plan's count)
    workers: int
    examples: int  # lockstep runs over all suites and workers
    seconds: float  # the command's wall time, start-up included
    plan: str = ""  # the -j auto plan's reason line
    gpu_busy: float | None = None  # mean utilization.gpu over the run, 0..1; None: unavailable
    gpu_busy_source: str = ""  # "nvml", "nvidia-smi", or why it is unavailable
    gpu_busy_samples: int = 0

    @property
    def examples_per_s(self) -> float | None:
        return self.examples / self.seconds if self.seconds > 0 else None


@dataclass(frozen=True)
class StartupRow:
    """The start-up benchmark: process start to the first example of ``graphcheck run`` (median of its rounds)."""

    seconds: float
    rounds: int
    watched_modules: int  # modules of torch.compile's machinery loaded by then beyond a bare ``import torch``'s


#: Process start to the first example on the CPU backend, at most (judged there only).
STARTUP_TARGET_S = 3.0


@dataclass(frozen=True)
class FuzzGain:
    """The pooled fuzz against a baseline (``--baseline``), on the suites both ran."""

    suites: tuple[str, ...]
    baseline_rate: float
    pooled_rate: float
    source: str = ""

    @property
    def ratio(self) -> float:
        return self.pooled_rate / self.baseline_rate


def fuzz_gain(pooled: FuzzRow, baseline: FuzzRow, source: str = "") -> FuzzGain | None:
    """``pooled`` over ``baseline`` on their common suites; None when they share none."""
    common = tuple(name for name, _, _ in pooled.per_suite if name in {b for b, _, _ in baseline.per_suite})
    mine, theirs = pooled.rate_on(common), baseline.rate_on(common)
    if not common or not mine or not theirs:
        return None
    return FuzzGain(common, theirs, mine, source)


#: What the pooled fuzz must reach over a baseline's (``graphcheck bench --baseline``: the fuzz verdict).
FUZZ_SPEEDUP_TARGET = 2.0


@dataclass
class BenchSummary:
    """What one ``graphcheck bench`` run measured, and whether the targets hold."""

    backend: str
    device: str
    runner: str
    overhead_target: float
    decode: list[DecodeRow] = field(default_factory=list)
    lockstep: list[LockstepRow] = field(default_factory=list)
    fuzz: list[FuzzRow] = field(default_factory=list)
    op_graphs: list[OpGraphRow] = field(default_factory=list)
    parallel: list[ParallelRow] = field(default_factory=list)
    startup: StartupRow | None = None
    pytest_rc: int = 0
    baseline: FuzzRow | None = None  # --baseline: the fuzz figure to beat by FUZZ_SPEEDUP_TARGET
    baseline_source: str = ""

    def fuzz_row(self, mode: str) -> FuzzRow | None:
        return next((r for r in self.fuzz if r.mode == mode), None)

    @property
    def fuzz_gain(self) -> FuzzGain | None:
        """Pooled against the baseline on the suites both ran (None without both)."""
        pooled = self.fuzz_row("pooled")
        if pooled is None or self.baseline is None:
            return None
        return fuzz_gain(pooled, self.baseline, self.baseline_source)

    @property
    def fuzz_speedup(self) -> float | None:
        """Pooled fuzz examples/s over fresh examples/s (None without both): what pooling alone gives.

        Not a verdict: whatever makes a scenario's own work cheaper speeds the fresh mode
        up as much, so this ratio leaves it out; the target is judged against a baseline."""
        fresh, pooled = self.fuzz_row("fresh"), self.fuzz_row("pooled")
        if fresh is None or pooled is None or not fresh.examples_per_s or pooled.examples_per_s is None:
            return None
        return pooled.examples_per_s / fresh.examples_per_s

    @property
    def parallel_speedup(self) -> float | None:
        """Aggregate examples/s at the -j auto plan over -j 1's (None without both)."""
        rates = {r.mode: r.examples_per_s for r in self.parallel}
        one, auto = rates.get("j1"), rates.get("auto")
        return auto / one if one and auto is not None else None

    @property
    def startup_judged(self) -> bool:
        """Whether the start-up figure has a target here: the CPU backend (not a device's emulation)."""
        return self.backend == "cpu"

    @property
    def total(self) -> LockstepTimings:
        """The phases summed over every lockstep scenario."""
        total = LockstepTimings()
        for row in self.lockstep:
            total.add(row.timings)
        return total

    @property
    def overhead(self) -> float | None:
        """Checking overhead of the whole scenario set: its loop wall / its engine time."""
        return checking_overhead(self.total)  # None without rows: no engine time

    @property
    def problems(self) -> list[str]:
        """Why the run does not meet its targets; empty when it does."""
        found = []
        overhead = self.overhead
        if self.pytest_rc != 0:
            found.append(f"the benchmark run failed (pytest exit {self.pytest_rc}; see pytest.log)")
        if not self.lockstep and not self.fuzz and not self.parallel and self.startup is None:
            found.append("no figures (every lockstep, fuzz, parallel and start-up benchmark skipped or failed)")
        elif self.lockstep and (overhead is None or overhead > self.overhead_target):
            shown = "n/a" if overhead is None else f"{overhead:.2f}"
            found.append(f"checking overhead {shown} is above the target {self.overhead_target:.1f}")
        if self.baseline is not None:
            gain = self.fuzz_gain
            if gain is None:
                found.append("the fuzz baseline shares no suite with this run's pooled fuzz figures")
            elif gain.ratio < FUZZ_SPEEDUP_TARGET:
                found.append(
                    f"pooled fuzzing is {gain.ratio:.2f}x the baseline's, below the target {FUZZ_SPEEDUP_TARGET:.1f}x"
                )
        startup = self.startup
        if startup is not None and self.startup_judged and startup.seconds > STARTUP_TARGET_S:
            found.append(
                f"start-up to the first example {startup.seconds:.2f} s is above the target {STARTUP_TARGET_S:.1f} s"
            )
        return found

    @property
    def passed(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: rows, per-scenario and whole-set figures, the verdict."""
        total, problems, gain = self.total, self.problems, self.fuzz_gain
        return {
            "backend": self.backend,
            "device": self.device,
            "runner": self.runner,
            "overhead_target": self.overhead_target,
            "overhead": checking_overhead(total),
            "steps_per_s": steps_per_second(total),  # None without rows: no wall time
            "passed": not problems,
            "problems": problems,
            "pytest_rc": self.pytest_rc,
            "decode_step": [
                {
                    "running": r.running,
                    "bucket": r.bucket,
                    "median_ms": {m: s * 1e3 for m, s in r.median_s.items()},
                    "speedup": {m: r.speedup(m) for m in r.median_s if m != "eager"},
                }
                for r in self.decode
            ],
            "op_graphs": [
                {
                    "group": r.group,
                    "median_ms": {m: s * 1e3 for m, s in r.median_s.items()},
                    "versus_eager": {m: r.versus_eager(m) for m in r.median_s if m != "eager"},
                }
                for r in self.op_graphs
            ],
            "lockstep": [{"scenario": r.scenario, "batch": r.batch, **r.timings.as_dict()} for r in self.lockstep],
            "lockstep_total": total.as_dict(),
            "fuzz": {
                "rows": [_row_dict(r) for r in self.fuzz],
                "speedup": self.fuzz_speedup,
                "speedup_target": FUZZ_SPEEDUP_TARGET,
                "baseline": None if self.baseline is None else _row_dict(self.baseline),
                "baseline_source": self.baseline_source,
                "gain": None if gain is None else {**asdict(gain), "ratio": gain.ratio},
            },
            "parallel": {
                "rows": [{**asdict(r), "examples_per_s": r.examples_per_s} for r in self.parallel],
                "speedup": self.parallel_speedup,
            },
            "startup": None
            if self.startup is None
            else {**asdict(self.startup), "target_s": STARTUP_TARGET_S if self.startup_judged else None},
        }


def _row_dict(row: FuzzRow) -> dict[str, Any]:
    data = asdict(row)
    data["per_suite"] = {name: {"examples": n, "seconds": s} for name, n, s in row.per_suite}
    return {**data, "examples_per_s": row.examples_per_s}


def _timings_of(extra: Mapping[str, Any]) -> LockstepTimings:
    known = {f.name for f in fields(LockstepTimings)}
    return LockstepTimings(**{k: v for k, v in extra.items() if k in known})


def _fuzz_row(extra: Mapping[str, Any]) -> FuzzRow:
    per_suite = extra.get("per_suite") or {}
    return FuzzRow(
        extra["mode"],
        int(extra["examples"]),
        int(extra["configs"]),
        int(extra.get("steps", 0)),
        float(extra["seconds"]),
        int(extra.get("per_config", 1)),
        tuple((str(name), int(f["examples"]), float(f["seconds"])) for name, f in per_suite.items()),
    )


def _parallel_row(extra: Mapping[str, Any]) -> ParallelRow:
    busy = extra.get("gpu_busy")
    return ParallelRow(
        str(extra["mode"]),
        int(extra["workers"]),
        int(extra["examples"]),
        float(extra["seconds"]),
        str(extra.get("plan", "")),
        None if busy is None else float(busy),
        str(extra.get("gpu_busy_source", "")),
        int(extra.get("gpu_busy_samples", 0)),
    )


def summarise(
    data: Mapping[str, Any], *, backend: str, device: str, overhead_target: float, pytest_rc: int = 0
) -> BenchSummary:
    """A BenchSummary from pytest-benchmark JSON (``--benchmark-json``) of benchmarks/."""
    decode: dict[int, dict[str, Any]] = {}
    op_groups: dict[str, dict[str, float]] = {}
    summary = BenchSummary(backend, device, "none", overhead_target, pytest_rc=pytest_rc)
    for bench in data.get("benchmarks", []):
        extra = bench.get("extra_info", {})
        if extra.get("kind") == "decode_step":
            row = decode.setdefault(extra["running"], {"bucket": None, "median_s": {}})
            row["median_s"][extra["mode"]] = bench["stats"]["median"]
            row["bucket"] = row["bucket"] or extra.get("bucket")
        elif extra.get("kind") == "fuzz":
            summary.fuzz.append(_fuzz_row(extra))
        elif extra.get("kind") == "parallel":
            summary.parallel.append(_parallel_row(extra))
        elif extra.get("kind") == "startup":
            summary.startup = StartupRow(float(extra["seconds"]), int(extra["rounds"]), int(extra["watched_modules"]))
        elif extra.get("kind") == "op_graphs":
            op_groups.setdefault(bench.get("group") or "op-level", {})[extra["mode"]] = bench["stats"]["median"]
        elif extra.get("kind") == "lockstep":
            summary.runner = extra.get("runner", summary.runner)
            summary.lockstep.append(LockstepRow(extra["scenario"], extra["batch"], _timings_of(extra["timings"])))
    order = {m: i for i, m in enumerate(DECODE_MODES)}
    summary.decode = [
        DecodeRow(n, row["bucket"], dict(sorted(row["median_s"].items(), key=lambda kv: order.get(kv[0], 99))))
        for n, row in sorted(decode.items())
    ]
    summary.op_graphs = [OpGraphRow(group, medians) for group, medians in sorted(op_groups.items())]
    summary.lockstep.sort(key=lambda r: (r.batch, r.scenario))
    summary.fuzz.sort(key=lambda r: r.mode != "fresh")
    summary.parallel.sort(key=lambda r: r.mode != "j1")
    return summary


def benchmarks_dir() -> Path:
    """benchmarks/ of this source checkout (it is not part of the installed package)."""
    return Path(__file__).resolve().parents[2] / "benchmarks"


@dataclass(frozen=True)
class BenchRun:
    """How to run the benchmark subprocess."""

    backend: str
    emulate: bool
    quick: bool
    out_dir: Path
    select: str | None = None  # pytest -k expression
    engine: str = "builtin"  # --engine SPEC (GRAPHCHECK_BENCH_ENGINE)
    emulator: str = "kernel"  # --emulator (GRAPHCHECK_BENCH_EMULATOR)


def pytest_command(run: BenchRun, files: Sequence[Path]) -> list[str]:
    command = [
        # never under xdist: pytest-benchmark switches itself off there
        sys.executable,
        "-m",
        "pytest",
        *map(str, files),
        "-q",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:xdist",
        f"--benchmark-json={run.out_dir / 'bench.json'}",
        "--benchmark-columns=median,iqr,rounds",
        "--benchmark-sort=name",
    ]
    return command + (["-k", run.select] if run.select else [])


def pytest_env(run: BenchRun) -> dict[str, str]:
    root = str(benchmarks_dir().parent)
    # A parent pytest-xdist worker's variables would make the child believe it is a worker too.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    env.update(
        GRAPHCHECK_BENCH_BACKEND=run.backend,
        GRAPHCHECK_BENCH_EMULATE="1" if run.emulate else "0",
        GRAPHCHECK_BENCH_QUICK="1" if run.quick else "0",
        GRAPHCHECK_BENCH_ENGINE=run.engine,
        GRAPHCHECK_BENCH_EMULATOR=run.emulator,
        PYTHONPATH=root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""),
    )
    return env


def run_benchmarks(run: BenchRun) -> tuple[int, dict[str, Any]]:
    """Run benchmarks/bench_*.py under pytest; (pytest exit code, the benchmark JSON or {})."""
    files = sorted(benchmarks_dir().glob("bench_*.py"))
    run.out_dir.mkdir(parents=True, exist_ok=True)
    path = run.out_dir / "bench.json"
    path.unlink(missing_ok=True)  # an earlier run's figures must not pass for this one's
    with open(run.out_dir / "pytest.log", "w", encoding="utf-8") as log:
        rc = subprocess.call(
            pytest_command(run, files),
            cwd=benchmarks_dir().parent,
            env=pytest_env(run),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    return rc, _read_json(path)


def _read_json(path: Path) -> dict[str, Any]:
    """The benchmark JSON; {} when missing or empty (pytest-benchmark creates the file
    at start-up and leaves it empty when no benchmark ran)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def log_tail(out_dir: Path, lines: int = 20) -> str:
    """The last ``lines`` lines of the run's pytest.log ('' when there is none)."""
    path = out_dir / "pytest.log"
    if not path.exists():
        return ""
    return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])


def write_summary(summary: BenchSummary, out_dir: Path, extra: Mapping[str, Any]) -> Path:
    """``summary.json``: ``extra`` (run id, command, ...) and the summary's figures and verdict."""
    path = out_dir / "summary.json"
    write_atomic(path, json.dumps({**extra, **summary.to_dict()}, indent=2) + "\n")
    return path


__all__ = [
    "DECODE_MODES",
    "BenchRun",
    "BenchSummary",
    "DecodeRow",
    "FuzzGain",
    "FuzzRow",
    "LockstepRow",
    "ParallelRow",
    "STARTUP_TARGET_S",
    "StartupRow",
    "fuzz_gain",
    "benchmarks_dir",
    "log_tail",
    "run_benchmarks",
    "summarise",
    "write_summary",
]
