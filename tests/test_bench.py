"""``graphcheck bench``: the quick run writes its JSON, the overhead arithmetic, the verdict.

No timed assertions: the speed targets are what the benchmarks measure, not what tests check.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from graphcheck.backends.devices import resolve
from graphcheck.bench.run import BenchSummary, LockstepRow, summarise
from graphcheck.check.lockstep import Lockstep
from graphcheck.check.timings import STEP_PHASES, LockstepTimings, checking_overhead, overhead_target, steps_per_second
from graphcheck.cli import exitcodes, main
from graphcheck.search.builtin import demo_scenario

from _layers import slow


def _timings(**phases: float) -> LockstepTimings:
    return LockstepTimings(**phases)


def test_overhead_is_loop_wall_over_engine_time() -> None:
    t = _timings(
        reference=1.0, eager=2.0, graph=1.0, record=0.5, diff=0.25, wall=5.0, steps=10, runs=2, setup_graph=100.0
    )  # construction and capture stay out of the ratio
    assert t.engine == 3.0 and t.checking == 2.0
    assert checking_overhead(t) == pytest.approx(5.0 / 3.0)
    assert steps_per_second(t) == 2.0
    assert checking_overhead(LockstepTimings()) is None and steps_per_second(LockstepTimings()) is None
    assert t.as_dict()["overhead"] == pytest.approx(5.0 / 3.0)


def test_whole_set_overhead_sums_phases_before_dividing() -> None:
    a = _timings(eager=1.0, graph=1.0, wall=3.0, steps=10)  # 1.5 alone
    b = _timings(eager=0.5, graph=0.5, wall=4.0, steps=10)  # 4.0 alone
    summary = BenchSummary("cpu", "cpu", "emulated", 3.0, lockstep=[LockstepRow("a", 1, a), LockstepRow("b", 4, b)])
    assert summary.overhead == pytest.approx(7.0 / 3.0)  # not the mean of 1.5 and 4.0
    assert summary.passed
    summary.overhead_target = 2.0
    assert not summary.passed and "above the target 2.0" in summary.problems[0]


def test_verdict_needs_lockstep_figures_and_a_clean_pytest_run() -> None:
    assert not BenchSummary("cpu", "cpu", "emulated", 3.0).passed
    ok = [LockstepRow("a", 1, _timings(eager=1.0, graph=1.0, wall=2.5, steps=4))]
    assert not BenchSummary("cpu", "cpu", "emulated", 3.0, lockstep=ok, pytest_rc=1).passed


def test_targets_by_device() -> None:
    assert overhead_target("cpu") == 3.0
    assert overhead_target("cuda") == overhead_target("xpu:0") == 2.0


def test_summarise_reads_pytest_benchmark_json() -> None:
    timing = _timings(reference=0.2, eager=1.0, graph=0.5, wall=2.0, steps=8, runs=1).as_dict()
    data = {
        "benchmarks": [
            {"extra_info": {"kind": "decode_step", "running": 8, "mode": "eager"}, "stats": {"median": 0.004}},
            {
                "extra_info": {"kind": "decode_step", "running": 8, "mode": "graph-step", "bucket": 8},
                "stats": {"median": 0.001},
            },
            {
                "extra_info": {
                    "kind": "lockstep",
                    "scenario": "steady-b4",
                    "batch": 4,
                    "runner": "cuda",
                    "timings": timing,
                },
                "stats": {"median": 2.0},
            },
        ]
    }
    summary = summarise(data, backend="cuda", device="cuda", overhead_target=2.0)
    (row,) = summary.decode
    assert row.bucket == 8 and row.speedup("graph-step") == pytest.approx(4.0)
    assert summary.runner == "cuda" and summary.lockstep[0].timings == _timings(
        **{k: timing[k] for k in ("reference", "eager", "graph", "wall", "steps", "runs")}
    )
    assert summary.overhead == pytest.approx(2.0 / 1.5) and summary.passed


def test_lockstep_timing_hook_accounts_for_the_loop() -> None:
    timings = LockstepTimings()
    outcome = Lockstep(demo_scenario(num_steps=6), resolve("cpu"), timings=timings).run()
    assert outcome.clean and timings.steps == 6 and timings.runs == 1
    assert all(getattr(timings, phase) > 0 for phase in STEP_PHASES)
    assert timings.setup_graph > 0 and timings.wall == outcome.elapsed_s
    assert sum(getattr(timings, phase) for phase in STEP_PHASES) <= timings.wall


def test_lockstep_without_timings_times_nothing() -> None:
    lockstep = Lockstep(demo_scenario(num_steps=2), resolve("cpu"))
    assert lockstep.timings is None and lockstep.run().clean


@slow
def test_quick_bench_on_cpu_writes_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("pytest_benchmark")
    out = tmp_path / "bench"
    code = main(
        ["bench", "--backend", "cpu", "--quick", "--out", str(out), "-k", "steady-b1 or 1-eager or 1-graph-step"]
    )
    printed = capsys.readouterr().out
    log = (out / "pytest.log").read_text() if (out / "pytest.log").exists() else ""
    assert code in (exitcodes.CLEAN, exitcodes.DIVERGENCE), printed + log  # the target is the benchmark's to judge
    raw = json.loads((out / "bench.json").read_text())
    kinds = sorted(b["extra_info"]["kind"] for b in raw["benchmarks"])
    assert kinds == ["decode_step", "decode_step", "lockstep"], log
    summary = json.loads((out / "summary.json").read_text())
    assert summary["backend"] == "cpu" and summary["overhead_target"] == 3.0 and summary["pytest_rc"] == 0
    (row,) = summary["lockstep"]
    assert row["scenario"] == "steady-b1" and row["steps"] > 0 and row["overhead"] >= 1.0
    assert summary["passed"] == (code == exitcodes.CLEAN)
    assert "lockstep runner" in printed and "decode step" in printed


def test_bench_on_a_missing_backend_exits_3(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--backend", "npu", "--quick"]) == exitcodes.BACKEND_UNAVAILABLE
    assert "backend unavailable" in capsys.readouterr().err


def test_the_fuzz_speedup_is_judged_when_both_modes_ran() -> None:
    from graphcheck.bench.run import FuzzRow

    fresh = FuzzRow("fresh", 72, 72, 574, 20.0)
    slow_pool = FuzzRow("pooled", 513, 72, 4651, 80.0, per_config=8)  # 6.4/s against 3.6/s: 1.78x
    fast_pool = FuzzRow("pooled", 513, 72, 4651, 70.0, per_config=8)  # 7.3/s: 2.03x
    only_fuzz = BenchSummary("cpu", "cpu", "emulated", 3.0, fuzz=[fresh, slow_pool])
    assert only_fuzz.problems == ["pooled fuzzing is 1.78x the fresh one, below the target 2.0x"]
    assert BenchSummary("cpu", "cpu", "emulated", 3.0, fuzz=[fresh, fast_pool]).passed
    assert not BenchSummary("cpu", "cpu", "emulated", 3.0).passed  # nothing measured
