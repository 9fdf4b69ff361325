"""``graphcheck run -j N``: pytest-xdist workers, one seed each, one merged report, -j 1's exit codes.

The CLI runs in this process; its pytest-xdist run is a subprocess with two
local workers. The planning and merging helpers are tested without workers.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from graphcheck.check.diff import Divergence
from graphcheck.check.records import CheckOutcome
from graphcheck.cli import exitcodes, main
from graphcheck.errors import ResourceError
from graphcheck.parallel.jobs import BUILTIN, Job, JobList, plan_jobs, result_from_json, result_json
from graphcheck.parallel.run import merge_results, worker_args
from graphcheck.search.builtin import demo_scenario
from graphcheck.search.plan import RunPlan
from graphcheck.search.result import CRASH, Stop, SuiteResult

from _layers import slow

pytest.importorskip("xdist", reason="-j needs pytest-xdist (pip install 'graphcheck[parallel]')")

#: A fault the addresses suite finds at its first example and shrinks in two runs: the database
#: round trip is what these tests check, not the search.
FAULT, SUITE = "rebind-output-offsets", "addresses"


def _run(report_dir: Path, *extra: str) -> tuple[int, Path]:
    code = main(["run", "--suite", SUITE, "--profile", "ci", "--quiet", "--report-dir", str(report_dir), *extra])
    (run_dir,) = [p for p in report_dir.iterdir() if p.is_dir()]
    return code, run_dir


def _first_failure(run_dir: Path) -> dict:
    doc = json.loads((run_dir / "divergences.json").read_text())
    return next(o for o in doc["outcomes"] if not o["clean"])["failures"][0]


@slow
def test_j2_finds_the_fault_j1_finds_and_replays_it_from_the_database(tmp_path: Path) -> None:
    db = str(tmp_path / "db")
    code_1, run_1 = _run(tmp_path / "j1", "--inject", FAULT, "--database", db)
    assert code_1 == exitcodes.DIVERGENCE

    # With the database the -j 1 run filled, every worker's first example is the saved failure,
    # and the workers' findings merge into one report. (Workers searching on their own, without a
    # database, are what `graphcheck catalog --seeds -j 2` runs in tests/test_catalog_seeds.py.)
    code_2, run_2 = _run(tmp_path / "j2db", "--inject", FAULT, "-j", "2", "--seed", "5", "--database", db)
    assert code_2 == exitcodes.DIVERGENCE
    first_1, first_2 = _first_failure(run_1), _first_failure(run_2)
    assert (first_2["kind"], first_2["tensor"]) == (first_1["kind"], first_1["tensor"]) == ("address", "cu_seqlens_out")
    for name in ("index.html", "divergences.json", "scenario.json", "junit.xml", "fuzz.json"):
        assert (run_2 / name).is_file(), name
    assert not list(run_2.glob("jobs/pending-*.json"))
    fuzzed = json.loads((run_2 / "fuzz.json").read_text())["suites"]
    assert [f["suite"] for f in fuzzed] == [f"{SUITE} seed 5", f"{SUITE} seed 6"]
    assert [(f["first_failure_at"], f["examples"], f["clean"]) for f in fuzzed] == [(1, 1, False), (1, 1, False)]
    assert (run_2 / "scenario.json").read_text() == (run_1 / "scenario.json").read_text()


@slow
def test_j2_clean_run_exits_0_with_the_demo_scenarios(tmp_path: Path) -> None:
    code, run_dir = _run(tmp_path, "-j", "2", "--examples", "2", "--steps", "4", "--database", "none")
    assert code == exitcodes.CLEAN
    doc = json.loads((run_dir / "divergences.json").read_text())
    assert [o["scenario"] for o in doc["outcomes"]] == [
        f"builtin/demo-{m}" for m in ("greedy", "target_match", "topp", "naive")
    ]
    assert len(json.loads((run_dir / "fuzz.json").read_text())["suites"]) == 2


@pytest.mark.parametrize(
    "argv, words",
    [
        (["-j", "0"], "-j/--jobs"),
        (["--xdist-args=--tx popen"], "needs -j"),
        (["-j", "2", '--xdist-args=--tx "popen'], "--xdist-args"),
        (["-j", "2", "--xdist-args=--no-such-option"], "rejected"),
    ],
)
def test_parallel_usage_errors_exit_2(
    argv: list[str], words: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        main(["run", "--suite", "seeds", "--examples", "1", "--database", "none", "--report-dir", str(tmp_path), *argv])
        == exitcodes.USAGE
    )
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err
    if words != "rejected":  # caught before the run starts: no report folder
        assert not any(tmp_path.iterdir())


def test_jobs_are_suite_major_with_consecutive_seeds() -> None:
    jobs = plan_jobs(RunPlan(("a", "b"), 8, seed=7, workers=2))
    assert jobs == (Job("a", 7), Job("a", 8), Job("b", 7), Job("b", 8), Job(BUILTIN))
    assert [j.id for j in plan_jobs(RunPlan(("a",), 8))] == ["a-seed0", BUILTIN]


def test_workers_one_gpu_each_where_several_are_visible() -> None:
    cpu = SimpleNamespace(name="cpu", emulated=True)
    cuda = SimpleNamespace(name="cuda", emulated=False)
    assert worker_args(3, cpu, [], {}) == ["-n", "3"]
    shared = "//env:GRAPHCHECK_GPU_WORKERS=2"  # two workers on GPU 4: each bounds its memory to half
    assert worker_args(3, cuda, [], {"CUDA_VISIBLE_DEVICES": "4,5"}) == [
        "--tx",
        f"popen//env:CUDA_VISIBLE_DEVICES=4{shared}",
        "--tx",
        "popen//env:CUDA_VISIBLE_DEVICES=5",
        "--tx",
        f"popen//env:CUDA_VISIBLE_DEVICES=4{shared}",
    ]
    assert (
        worker_args(2, cuda, [], {"CUDA_VISIBLE_DEVICES": "0"})
        == ["--tx", f"popen//env:CUDA_VISIBLE_DEVICES=0{shared}"] * 2
    )
    npu = SimpleNamespace(name="npu", emulated=False)
    assert worker_args(2, npu, [], {"ASCEND_RT_VISIBLE_DEVICES": "0"}) == ["-n", "2"]  # no memory bound off cuda
    assert worker_args(2, cpu, ["--tx", "ssh=gpu1"], {}) == []  # the user's workers, other hosts included


def _outcome(name: str, requests: int, clean: bool) -> CheckOutcome:
    scenario = demo_scenario(num_steps=4)
    scenario = dataclasses.replace(scenario, name=name, requests=scenario.requests[:requests])
    divergences = [] if clean else [Divergence("seed", 0, "infer_seed", "reference vs eager", 4, 0)]
    return CheckOutcome(scenario, "cpu", "emulated", divergences=divergences)


def _jobs(tmp_path: Path, jobs: tuple[Job, ...], *, keep_going: bool = False) -> JobList:
    suites = tuple(dict.fromkeys(j.suite for j in jobs if j.suite != BUILTIN))
    return JobList(RunPlan(suites, 8, demo_steps=4, workers=2, keep_going=keep_going), jobs, str(tmp_path))


def _found(suite: str, seed: int, *outcomes: CheckOutcome, examples: int = 10) -> SuiteResult:
    return SuiteResult(suite, seed, examples, 10, outcomes=outcomes)


def _names(results: list[SuiteResult]) -> list[str]:
    """The scenario names the run reports, in its order."""
    return [o.scenario.name for r in results if r.reported for o in r.outcomes]


def test_merge_takes_the_smallest_shrunk_scenario_per_suite_in_suite_order(tmp_path: Path) -> None:
    jobs = plan_jobs(RunPlan(("seeds", "padding"), 8, workers=2))
    found = {
        "seeds-seed0": _found("seeds", 0, _outcome("a", 2, False)),
        "seeds-seed1": _found("seeds", 1, _outcome("b", 1, False)),
        "padding-seed0": _found("padding", 0, _outcome("c", 1, False)),
        "padding-seed1": _found("padding", 1),
        BUILTIN: SuiteResult(BUILTIN, 0, 4, 16, outcomes=(_outcome("builtin/demo", 1, True),)),
    }
    results = merge_results(_jobs(tmp_path, jobs), found)
    assert _names(results) == ["seeds/shrunk"]
    (shrunk,) = [r for r in results if r.reported and r.outcomes]
    assert len(shrunk.outcome.scenario.requests) == 1 and shrunk.seed == 1  # seed 1's, the smaller
    fuzzed = [r.name for r in results if not r.builtin]
    assert fuzzed == ["seeds seed 0", "seeds seed 1", "padding seed 0", "padding seed 1"]
    results = merge_results(_jobs(tmp_path, jobs, keep_going=True), found)
    assert _names(results) == ["seeds/shrunk", "padding/shrunk", "builtin/demo"]


def test_merge_labels_a_device_lost_scenario_unshrunk(tmp_path: Path) -> None:
    lost = _outcome("a", 2, False)
    lost.device_error = "AcceleratorError: CUDA error: device-side assert triggered"
    jobs = (Job("seeds", 0), Job(BUILTIN))
    found = {"seeds-seed0": _found("seeds", 0, lost, examples=3)}
    assert _names(merge_results(_jobs(tmp_path, jobs), found)) == ["seeds/unshrunk: device lost"]


def test_a_dead_worker_is_a_crash_divergence_on_its_pending_scenario(tmp_path: Path) -> None:
    job = Job("seeds", 0)
    (tmp_path / f"pending-{job.id}.json").write_text(demo_scenario(num_steps=4).to_json())
    dead = Stop(CRASH, "worker 'gw0' crashed while running 'test_job[seeds-seed0]'")
    found = {job.id: SuiteResult("seeds", 0, stop=dead)}
    (result,) = merge_results(_jobs(tmp_path, (job, Job(BUILTIN))), found)
    crash = result.outcome
    assert crash is not None and crash.first.kind == "crash" and "crashed" in crash.first.detail


def test_a_worker_out_of_memory_is_the_machine_s_limit_not_a_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from graphcheck.check.records import EngineOutOfMemory
    from graphcheck.cli.exitcodes import exit_for
    from graphcheck.parallel import jobs as jobs_module
    from graphcheck.search import suite_run

    def oom(*args: object, **kwargs: object) -> SuiteResult:
        raise EngineOutOfMemory("graph engine construction and capture ran out of memory: CUDA out of memory")

    monkeypatch.setattr(suite_run, "fuzz_suite", oom)
    job = Job("seeds", 0)
    jobs = _jobs(tmp_path, (job, Job(BUILTIN)))
    result = result_from_json(result_json(jobs_module.run_job(jobs, job)))
    assert result.stop is not None and result.stop.kind == "ResourceError" and not result.outcomes
    assert "out of memory" in result.stop.message
    (tmp_path / f"pending-{job.key}.json").write_text(demo_scenario(num_steps=4).to_json())  # as a worker leaves it
    with pytest.raises(ResourceError, match="out of memory") as raised:
        merge_results(jobs, {job.id: result})
    assert exit_for(raised.value).code == exitcodes.USAGE


@pytest.mark.parametrize("suite", ["myorg/padding", "..", "a" * 300, "tab\there", "ünïcode"])
def test_a_job_of_any_suite_name_gets_a_safe_distinct_file_name(suite: str) -> None:
    key = Job(suite, 3).key
    assert re.fullmatch(r"[A-Za-z0-9_-]{1,90}", key), key
    assert key != Job(suite, 4).key and key != Job(suite + "x", 3).key
    assert Job("padding", 3).key == "padding-seed3", "plain names are kept as they are"


def test_a_job_named_with_a_slash_writes_its_pending_scenario_in_the_results_folder(tmp_path: Path) -> None:
    from graphcheck.parallel.jobs import pending_path

    job = Job("myorg/padding", 0)
    path = pending_path(_jobs(tmp_path, (job,)), job)
    assert path.parent == tmp_path and "/" not in path.name
    path.write_text("{}")  # the folder exists: no FileNotFoundError for a missing "pending-myorg" folder


def test_a_job_that_failed_before_running_is_a_clear_error_not_a_divergence(tmp_path: Path) -> None:
    from graphcheck.parallel.run import ParallelRunError

    job = Job("myorg/padding", 0)
    died = Stop(CRASH, "Traceback (most recent call last):\n  ...\nImportError: no module x")
    found = {job.id: SuiteResult(job.suite, job.seed, stop=died)}
    with pytest.raises(ParallelRunError, match="ImportError: no module x") as raised:
        merge_results(_jobs(tmp_path, (job,)), found)
    ending = exitcodes.exit_for(raised.value)
    assert ending is not None and ending.code == exitcodes.INCOMPLETE != exitcodes.DIVERGENCE
    assert "\n" not in ending.message(raised.value)


def test_recorded_names_are_shown_on_one_line() -> None:
    from graphcheck.cli.progress import suite_line
    from graphcheck.display import one_line

    name = "org/pad\n::error::forged\u202eevil\udc80"
    assert one_line(name) == "org/pad\\n::error::forged\\u202eevil\\udc80"
    line = suite_line(SuiteResult(name, 1, 3, 9, label=f"{name} seed 1")).plain
    assert "\n" not in line and "\u202e" not in line and "::error::forged" in line


def test_ctrl_c_under_jobs_reports_what_the_finished_jobs_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from graphcheck.parallel import run as parallel_run

    def stopped_after_one_job(command, env, results, jobs, hooks):
        job = jobs.jobs[0]
        found = {job.id: SuiteResult(job.suite, job.seed, 5, 20, outcomes=(_outcome("seeds/shrunk", 1, False),))}
        raise parallel_run._Stopped(found)

    monkeypatch.setattr(parallel_run, "_run_pytest", stopped_after_one_job)
    args = ["run", "--suite", "seeds", "-j", "2", "--examples", "2", "--database", "none", "--quiet"]
    code = main([*args, "--report-dir", str(tmp_path)])
    assert code == exitcodes.INTERRUPTED
    assert "INTERRUPTED" in capsys.readouterr().out
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    for name in ("index.html", "divergences.json", "scenario.json", "fuzz.json"):
        assert (run_dir / name).is_file(), name
    assert json.loads((run_dir / "divergences.json").read_text())["verdict"] == "divergence"
    assert json.loads((run_dir / "fuzz.json").read_text())["run"]["interrupted"] is True
