"""``graphcheck catalog --seeds N``: each fault checked as ``graphcheck run --profile ci --seed s`` would, at N seeds.

The per-seed runs are real (a few faults that the first suite catches, so the
fast layer can afford them) and checked against the run loop itself; the
report shapes and the exit code use synthetic results; the whole command over
two faults and two seeds, clean engine included, is slow.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from test_catalog import assert_well_formed

from graphcheck.catalog import run as catalog_run
from graphcheck.catalog import seeds as catalog_seeds
from graphcheck.catalog.console import print_table
from graphcheck.catalog.seeds import CleanSeeds, FaultSeeds, SeedRun, SeedsResult, SeedsSettings, run_seed
from graphcheck.catalog.seeds_console import seeds_table, totals_lines
from graphcheck.check.checker import Checker
from graphcheck.cli import exitcodes, main
from graphcheck.report.catalog_model import CatalogInfo
from graphcheck.report.catalog_seeds import write_seeds_catalog
from graphcheck.search.plan import RUN_PROFILE_EXAMPLES, ResolvedPlan, make_plan
from graphcheck.search.suite_registry import load_suites
from graphcheck.search.suite_run import RunHooks, SuiteRunner
from graphcheck.suites.properties import backend_from_env

from _layers import fast_first, slow

#: Two faults the first suite (addresses) catches at once at every seed: cheap enough for the fast layer.
QUICK_FAULTS = ("rebind-output-offsets", "host-sync-in-capture")
CI = SeedsSettings(seeds=2, examples=RUN_PROFILE_EXAMPLES["ci"], profile="ci")


def _run_loop(fault: str, seed: int, tmp_path: Path, clean: list[bool]) -> SuiteRunner:
    """What ``graphcheck run --profile ci --seed SEED --inject FAULT --database none`` runs, shrinking included;
    ``clean`` gets whether each lockstep run of a search was clean."""
    checker = Checker(backend_from_env(), faults=(fault,))
    plan = make_plan(suites=None, examples=CI.examples, faults=(fault,), seed=seed)
    suites = tuple(load_suites()[name] for name in plan.suites)
    hooks = RunHooks(on_example=lambda scenario, outcome: clean.append(outcome.clean))
    run = SuiteRunner.of(ResolvedPlan(plan, checker, checker.engine, suites), tmp_path / "run.json", hooks)
    run.run()
    return run


def test_per_seed_runs_over_two_faults_and_two_seeds(tmp_path: Path) -> None:
    backend = backend_from_env()
    runs = [run_seed(fault, seed, backend, CI, tmp_path) for fault in QUICK_FAULTS for seed in CI.seed_list]
    assert [(r.fault, r.seed) for r in runs] == [(f, s) for f in QUICK_FAULTS for s in (0, 1)]
    for run in runs:
        assert run.caught and run.caught_by == "addresses" and run.kind and run.headline, run
        assert 1 <= (run.suite_example or 0) == run.examples <= CI.examples and 0 <= run.seconds < 60
    assert not list(tmp_path.glob("pending-*.json")), "a run that came back leaves no pending scenario"


@pytest.mark.parametrize("fault, seed", fast_first([(f, s) for f in QUICK_FAULTS for s in (0, 1)]))
def test_a_seed_run_stops_where_graphcheck_run_first_diverges(tmp_path: Path, fault: str, seed: int) -> None:
    """The same suite, the same example in it, the same examples before it as the run loop (which shrinks after)."""
    mine = run_seed(fault, seed, backend_from_env(), CI, tmp_path)
    clean: list[bool] = []
    full = _run_loop(fault, seed, tmp_path, clean)
    searched = [r for r in full.results if not r.builtin]
    found = searched[-1]
    assert found.outcome is not None and not found.outcome.clean
    before = sum(r.examples for r in searched[:-1])
    first_run = clean.index(False) + 1  # lockstep runs of the whole run up to its first divergence
    assert (mine.caught_by, mine.suite_example) == (found.suite, first_run - before)
    assert mine.examples == first_run


def test_a_divergence_in_a_demo_scenario_counts_with_its_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No suite diverged (here: none ran), so the demo scenarios decide, as in ``graphcheck run``."""
    monkeypatch.setattr("graphcheck.search.suite_registry.load_suites", lambda: {})
    run = run_seed("host-sync-in-capture", 0, backend_from_env(), CI, tmp_path)
    assert run.caught_by is not None and run.caught_by.startswith("builtin/demo-")
    assert (run.examples, run.suite_example, run.kind) == (1, 1, "capture")


# ---------------------------------------------------------------------------
# Synthetic results: the report files, the console, the verdict
# ---------------------------------------------------------------------------


def _caught(fault: str, seed: int, suite: str = "padding", examples: int = 9, seconds: float = 2.0) -> SeedRun:
    return SeedRun(fault, seed, suite, examples, seconds, examples - 8, "token", f"step 3: token differs ({fault})")


def _missed(fault: str, seed: int) -> SeedRun:
    return SeedRun(fault, seed, None, 68, 25.0)


def _result(*, miss: bool = True, false_positive: bool = True) -> SeedsResult:
    """f-one caught at both seeds; f-two missed at seed 1 (or caught); the clean engine diverged at seed 1 (or not)."""
    cfg = SeedsSettings(seeds=2, examples=8, first_seed=0)
    one = FaultSeeds("f-one", 1, "address", (_caught("f-one", 0, "addresses", 1, 0.5), _caught("f-one", 1)))
    second = _missed("f-two", 1) if miss else _caught("f-two", 1, "all", 60, 20.0)
    two = FaultSeeds("f-two", 8, "seed", (_caught("f-two", 0, "seeds", 30, 9.0), second))
    clean = CleanSeeds((_missed("", 0), _caught("", 1, "memory") if false_positive else _missed("", 1)))
    return SeedsResult("cpu", "fake engine", cfg, (one, two), clean, 40.0)


def test_seed_figures_and_the_verdict() -> None:
    result = _result()
    one, two = result.faults
    assert (one.caught, one.detected, one.missed_seeds) == (2, True, ())
    assert (two.caught, two.detected, two.missed_seeds) == (1, False, (1,))
    assert (one.median_examples, one.median_seconds) == (5.0, 1.25)
    assert (two.median_examples, two.median_seconds) == (30.0, 9.0)  # over the caught seeds only
    s = result.summary
    assert (s.faults, s.caught_everywhere, s.pairs, s.pairs_caught, s.pair_rate) == (2, 1, 4, 3, 0.75)
    assert (s.clean_runs, s.clean_runs_clean, result.clean.false_positive_seeds) == (2, 1, (1,))
    assert (s.median_examples, s.median_seconds) == (9.0, 2.0)
    assert not result.passed
    assert not _result(miss=False).passed and not _result(false_positive=False).passed
    assert _result(miss=False, false_positive=False).passed


def _console_text(result: SeedsResult) -> str:
    out = io.StringIO()
    console = Console(file=out, width=100, color_system=None)
    print_table(console, seeds_table(result))
    for line in totals_lines(result):
        console.print(line)
    return out.getvalue()


def test_console_table_has_a_column_per_seed_and_the_totals() -> None:
    text = _console_text(_result())
    for expected in (
        "seed 0",
        "seed 1",
        "1/2",
        "2/2",
        "missed",
        "addresses",
        "diverged: memory",
        "1/2 clean",
        "caught at every seed: 1/2 faults; (fault, seed) pairs caught: 3/4 (75%); clean runs clean: 1/2",
        "MISSED f-two (seeds 1)",
        "CLEAN ENGINE DIVERGED at seeds 1",
        "FAIL in 40.0s",
    ):
        assert expected in text, expected
    assert "PASS in 40.0s" in _console_text(_result(miss=False, false_positive=False))


def test_report_files_of_a_synthetic_seeds_catalog(tmp_path: Path) -> None:
    paths = write_seeds_catalog(_result(), tmp_path, CatalogInfo("graphcheck catalog --seeds 2", "2026-01-01"))
    doc = json.loads(paths.catalog_json.read_text())
    assert (doc["format"], doc["mode"], doc["passed"]) == (3, "seeds", False)
    assert doc["settings"]["seed_list"] == [0, 1] and doc["settings"]["profile"] == "ci"
    assert doc["summary"] == {
        **doc["summary"],
        "faults": 2,
        "detected": 1,
        "pairs": 4,
        "pairs_caught": 3,
        "pair_rate": 0.75,
        "clean_runs": 2,
        "clean_runs_clean": 1,
    }
    one, two = doc["faults"]
    assert (one["detected"], one["caught"], one["seeds"], one["missed_seeds"]) == (True, 2, 2, [])
    assert (two["detected"], two["caught"], two["missed_seeds"]) == (False, 1, [1])
    assert one["runs"][0] == {
        "seed": 0,
        "caught": True,
        "suite": "addresses",
        "examples": 1,
        "suite_example": -7,
        "seconds": 0.5,
        "kind": "token",
        "headline": "step 3: token differs (f-one)",
    }
    assert two["runs"][1]["caught"] is False and two["runs"][1]["suite"] is None
    assert doc["clean"] == {**doc["clean"], "clean": False, "false_positive_seeds": [1]}
    html = assert_well_formed(paths.index_html)
    for text in ("FAIL", "seed 0</th>", "seed 1</th>", "1/2", "missed", "diverged: memory", "f-two", "3 / 4"):
        assert text in html, text


# ---------------------------------------------------------------------------
# The command line
# ---------------------------------------------------------------------------


def _fake_runs(monkeypatch: pytest.MonkeyPatch, missed: set[tuple[str, int]]) -> list[tuple[str, int]]:
    """Replace the per-seed run: every fault caught by ``addresses``, except the (fault, seed) pairs in ``missed``."""
    calls: list[tuple[str, int]] = []

    def fake(fault: str, seed: int, backend: Any, cfg: SeedsSettings, work_dir: Path) -> SeedRun:
        calls.append((fault, seed))
        caught = bool(fault) and (fault, seed) not in missed
        return _caught(fault, seed, "addresses") if caught else _missed(fault, seed)

    monkeypatch.setattr(catalog_seeds, "run_seed", fake)
    return calls


@pytest.mark.parametrize(
    "missed, code",
    [(set(), exitcodes.CLEAN), ({(QUICK_FAULTS[1], 4)}, exitcodes.DIVERGENCE)],
    ids=["all-caught", "one-seed-missed"],
)
def test_exit_code_needs_every_fault_at_every_seed(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    missed: set[tuple[str, int]],
    code: int,
) -> None:
    calls = _fake_runs(monkeypatch, missed)
    argv = ["catalog", "--seeds", "3", "--seed", "2", "-j", "1", "--report-dir", str(tmp_path)]
    assert main([*argv, "--fault", QUICK_FAULTS[1], "--fault", QUICK_FAULTS[0]]) == code
    # the clean engine first, then the faults in registry order, each at seeds 2, 3, 4
    assert calls == [(name, seed) for name in ("", *QUICK_FAULTS) for seed in (2, 3, 4)]
    doc = json.loads((tmp_path / "catalog" / "catalog.json").read_text())
    assert doc["passed"] is (code == exitcodes.CLEAN) and doc["settings"]["seed_list"] == [2, 3, 4]
    out = capsys.readouterr().out
    assert "seed 4" in out and ("MISSED" in out) is (code != exitcodes.CLEAN)


def test_a_false_positive_fails_the_catalog(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        catalog_seeds,
        "run_seed",
        lambda fault, seed, *rest: _caught(fault, seed) if fault or seed == 1 else _missed("", 0),
    )
    argv = ["catalog", "--seeds", "2", "-j", "1", "--fault", QUICK_FAULTS[0], "--report-dir", str(tmp_path)]
    assert main(argv) == exitcodes.DIVERGENCE
    doc = json.loads((tmp_path / "catalog" / "catalog.json").read_text())
    assert doc["clean"]["false_positive_seeds"] == [1] and doc["faults"][0]["detected"]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--seeds", "0"], "--seeds must be in [1, 1000], got 0"),
        (["--seeds", "-2"], "--seeds must be in [1, 1000], got -2"),
        (["--seeds", "two"], "invalid int value"),
        (["--profile", "ci"], "--profile needs --seeds"),
        (["-j", "2"], "--jobs needs --seeds"),
        (["--seeds", "2", "--budget", "5"], "--budget does not apply with --seeds"),
        (["--seeds", "2", "--shrink-budget", "5"], "--shrink-budget does not apply with --seeds"),
        (["--seeds", "2", "--clean-budget", "5"], "--clean-budget does not apply with --seeds"),
        (["--seeds", "2", "-j", "0"], "--jobs must be in [1, 256], got 0"),
        (["--seeds", "2", "--profile", "nightly"], "invalid choice"),
    ],
)
def test_seeds_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    assert main(["catalog", "--report-dir", str(tmp_path), *argv]) == exitcodes.USAGE
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err
    assert not (tmp_path / "catalog").exists(), "nothing runs, nothing is written"


def test_without_seeds_the_catalog_is_the_budget_catalog(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The defaults, the settings and the format-2 report of the budget catalog are what they were."""
    seen: list[Any] = []

    def fake(names: Any, backend: Any, cfg: Any, work_dir: Path, *, on_done: Any = None) -> Any:
        seen.append((list(names), cfg))
        return catalog_run.CatalogResult("cpu", "fake", cfg, (), _clean_budget_result(), 1.0)

    monkeypatch.setattr(catalog_run, "run_catalog", fake)
    monkeypatch.setattr(catalog_seeds, "run_seed", lambda *a: pytest.fail("--seeds ran without --seeds"))
    assert main(["catalog", "--fault", QUICK_FAULTS[0], "--report-dir", str(tmp_path)]) == exitcodes.CLEAN
    assert seen == [([QUICK_FAULTS[0]], catalog_run.CatalogSettings())]
    doc = json.loads((tmp_path / "catalog" / "catalog.json").read_text())
    assert doc["format"] == 2 and "mode" not in doc and doc["settings"]["budget_s"] == catalog_run.DEFAULT_BUDGET_S


def _clean_budget_result() -> catalog_run.CleanResult:
    from graphcheck.catalog.baseline import BaselineResult
    from graphcheck.search.timed_search import SearchResult

    return catalog_run.CleanResult(SearchResult(("all",), 8, 1.0, None, None), BaselineResult((), 0.1))


@slow
def test_catalog_seeds_end_to_end_in_worker_processes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """2 faults and the clean engine at seed 1 (one whole clean ci run: the costly part), over 2 worker
    processes: the same runs as in process. Seeds past the first are the in-process tests' business."""
    argv = ["catalog", "--seeds", "1", "--seed", "1", "-j", "2", "--report-dir", str(tmp_path)]
    assert main([*argv, "--fault", QUICK_FAULTS[0], "--fault", QUICK_FAULTS[1]]) == exitcodes.CLEAN
    doc = json.loads((tmp_path / "catalog" / "catalog.json").read_text())
    assert doc["passed"] and doc["clean"]["clean"] and doc["summary"]["pairs_caught"] == 2
    # 9 suites x 8 examples x a batch of up to 8 scenarios (duplicates and invalid rebases not run), 4 demos
    assert [(r["seed"], r["examples"]) for r in doc["clean"]["runs"]] == [(1, 517)]
    backend = backend_from_env()
    for fault in doc["faults"]:
        for run in fault["runs"]:
            here = run_seed(fault["fault"], run["seed"], backend, CI, tmp_path)
            assert (run["suite"], run["examples"], run["kind"]) == (here.caught_by, here.examples, here.kind)
    assert not list((tmp_path / "catalog").glob("pending-*.json"))
    assert "caught at every seed: 2/2 faults" in capsys.readouterr().out
    assert all([r["seed"] for r in f["runs"]] == [1] for f in doc["faults"])
