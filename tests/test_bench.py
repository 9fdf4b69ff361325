"""``graphcheck bench``: the quick run writes its JSON, the overhead arithmetic, the verdict.

No timed assertions: the speed targets are what the benchmarks measure, not what tests check.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from graphcheck.bench.run import BenchSummary, LockstepRow, summarise
from graphcheck.capture.devices import resolve
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


def test_summarise_reads_the_op_level_emulator_rows() -> None:
    group = "op-level, decode step, 8 running"
    data = {
        "benchmarks": [
            {"group": group, "extra_info": {"kind": "op_graphs", "mode": m}, "stats": {"median": s}}
            for m, s in (("eager", 0.004), ("graph-kernel", 0.005), ("graph-ops", 0.008))
        ]
    }
    summary = summarise(data, backend="cpu", device="cpu", overhead_target=3.0)
    (row,) = summary.op_graphs
    assert row.group == group and row.versus_eager("graph-ops") == pytest.approx(2.0)
    assert summary.to_dict()["op_graphs"][0]["versus_eager"]["graph-kernel"] == pytest.approx(1.25)


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


def _suites(*figures: tuple[str, int, float]) -> tuple[tuple[str, int, float], ...]:
    return tuple(figures)


def test_the_fuzz_target_is_judged_against_a_baseline_on_the_suites_both_ran() -> None:
    from graphcheck.bench.run import FuzzRow

    fresh = FuzzRow("fresh", 72, 72, 574, 20.0)
    pooled = FuzzRow("pooled", 300, 24, 2000, 40.0, 8, _suites(("a", 100, 10.0), ("b", 100, 10.0), ("new", 100, 20.0)))
    old = FuzzRow("baseline", 24, 16, 200, 10.0, 1, _suites(("a", 12, 5.0), ("b", 12, 5.0)))  # 2.4/s on a and b
    slower = FuzzRow("baseline", 24, 16, 200, 4.0, 1, _suites(("a", 12, 2.0), ("b", 12, 2.0)))  # 6/s
    judged = BenchSummary("cpu", "cpu", "emulated", 3.0, fuzz=[fresh, pooled], baseline=old)
    gain = judged.fuzz_gain
    assert gain is not None and gain.suites == ("a", "b")  # "new" is left out: the baseline never ran it
    assert gain.pooled_rate == pytest.approx(10.0) and gain.ratio == pytest.approx(10.0 / 2.4)
    assert judged.passed and judged.to_dict()["fuzz"]["gain"]["ratio"] == pytest.approx(10.0 / 2.4)
    missed = BenchSummary("cpu", "cpu", "emulated", 3.0, fuzz=[fresh, pooled], baseline=slower)
    assert missed.problems == ["pooled fuzzing is 1.67x the baseline's, below the target 2.0x"]
    elsewhere = FuzzRow("baseline", 1, 1, 1, 1.0, 1, _suites(("z", 1, 1.0)))
    assert "shares no suite" in BenchSummary("cpu", "cpu", "e", 3.0, fuzz=[pooled], baseline=elsewhere).problems[0]


def test_without_a_baseline_the_fuzz_figures_are_shown_not_judged() -> None:
    from graphcheck.bench.console import verdict_line
    from graphcheck.bench.run import FuzzRow

    fresh = FuzzRow("fresh", 72, 72, 574, 20.0)
    pooled = FuzzRow("pooled", 513, 72, 4651, 80.0, per_config=8)  # 1.78x fresh: pooling alone, no verdict
    summary = BenchSummary("cpu", "cpu", "emulated", 3.0, fuzz=[fresh, pooled])
    assert summary.passed and summary.fuzz_speedup == pytest.approx(513 / 80 / 3.6)
    assert "pass --baseline" in verdict_line(summary)
    assert not BenchSummary("cpu", "cpu", "emulated", 3.0).passed  # nothing measured


def test_a_baseline_file_is_read_from_either_writer(tmp_path: Path) -> None:
    from graphcheck.bench.baseline import read_baseline

    script_out = {"source": "/old at 5b573ec", "fuzz": {"rows": [_baseline_row("baseline", a=(8, 2.0))]}}
    summary_json = {"command": "graphcheck bench", "fuzz": {"rows": [_baseline_row("fresh"), _baseline_row("pooled")]}}
    for data, mode in ((script_out, "baseline"), (summary_json, "pooled")):
        path = tmp_path / f"{mode}.json"
        path.write_text(json.dumps(data))
        row, source = read_baseline(path)
        assert row.mode == "baseline" and row.per_suite and f"({mode}" in source


def _baseline_row(mode: str, **suites: tuple[int, float]) -> dict:
    per_suite = {name: {"examples": n, "seconds": s} for name, (n, s) in (suites or {"a": (8, 1.0)}).items()}
    return {"mode": mode, "examples": 8, "configs": 8, "steps": 50, "seconds": 1.0, "per_suite": per_suite}


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "[]",
        json.dumps({"fuzz": {}}),
        json.dumps({"fuzz": {"rows": [{"mode": "other"}]}}),
        json.dumps({"fuzz": {"rows": [{"mode": "pooled", "examples": 8}]}}),  # no per-suite figures
        json.dumps({"fuzz": {"rows": [{"mode": "pooled", "per_suite": {"a": {"examples": "8", "seconds": 1}}}]}}),
        json.dumps({"fuzz": {"rows": [{"mode": "pooled", "per_suite": {"a": {"examples": 8, "seconds": -1}}}]}}),
    ],
)
def test_a_malformed_baseline_is_one_usage_error_before_any_benchmark_runs(
    text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "baseline.json"
    path.write_text(text)
    assert (
        main(["bench", "--backend", "cpu", "--out", str(tmp_path / "out"), "--baseline", str(path)]) == exitcodes.USAGE
    )
    err = capsys.readouterr().err
    assert "--baseline" in err and "Traceback" not in err
    assert not (tmp_path / "out" / "bench.json").exists()


def test_a_baseline_folder_must_be_a_graphcheck_checkout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--out", str(tmp_path / "out"), "--baseline", str(tmp_path)]) == exitcodes.USAGE
    assert "not a graphcheck checkout" in capsys.readouterr().err


def test_a_missing_baseline_file_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--baseline", str(tmp_path / "nope.json")]) == exitcodes.USAGE
    assert "cannot read it" in capsys.readouterr().err


def test_a_baseline_source_with_markup_is_shown_as_written() -> None:
    """The source line comes from the baseline file: rich markup in it is text, never style or a crash."""
    import io

    from rich.console import Console

    from graphcheck.bench.console import fuzz_table, verdict_line
    from graphcheck.bench.run import FuzzRow

    pooled = FuzzRow("pooled", 10, 2, 20, 1.0, 8, _suites(("a", 10, 1.0)))
    old = FuzzRow("baseline", 10, 2, 20, 1.0, 1, _suites(("a", 10, 1.0)))  # 1x: the target is missed
    summary = BenchSummary("cpu", "cpu", "e", 3.0, fuzz=[pooled], baseline=old, baseline_source="[/] [bold]x[/bold]")
    out = io.StringIO()
    console = Console(file=out, width=400, color_system=None)
    console.print(fuzz_table(summary))
    console.print(verdict_line(summary))
    assert "[/] [bold]x[/bold]" in out.getvalue() and "TARGETS NOT MET pooled fuzzing is 1.00x" in out.getvalue()


def test_the_startup_figure_is_judged_on_the_cpu_backend_only() -> None:
    data = {
        "benchmarks": [
            {"extra_info": {"kind": "startup", "seconds": 3.5, "rounds": 5, "watched_modules": 0}, "stats": {}}
        ]
    }
    cpu = summarise(data, backend="cpu", device="cpu", overhead_target=3.0)
    assert cpu.startup is not None and cpu.startup.seconds == 3.5 and cpu.startup.rounds == 5
    assert cpu.problems == ["start-up to the first example 3.50 s is above the target 3.0 s"]
    assert cpu.to_dict()["startup"]["target_s"] == 3.0
    cuda = summarise(data, backend="cuda", device="cuda:0", overhead_target=2.0)
    assert cuda.passed and cuda.to_dict()["startup"]["target_s"] is None  # shown there, not judged
