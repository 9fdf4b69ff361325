"""What a new user and a hostile input meet: replay of a report folder, safe console text, output
paths checked up front, unique report folders, Ctrl-C, progress in CI logs, one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import strategies as st
from rich.console import Console

from graphcheck.cli import common, exitcodes, main
from graphcheck.cli.console import plain
from graphcheck.cli.progress import RunProgress
from graphcheck.scenario import Scenario
from graphcheck.search import fuzz, suite_registry
from graphcheck.search.builtin import demo_scenario
from graphcheck.search.suite_registry import Suite

from _fault_scenarios import FAULT_SCENARIOS

FAULT = "stale-padding-rows"
ROOT = Path(__file__).resolve().parent.parent


def failing_scenario() -> Scenario:
    from graphcheck.backends.engine.faults import STALE_PADDING_ROWS

    assert STALE_PADDING_ROWS == FAULT
    return FAULT_SCENARIOS[STALE_PADDING_ROWS]()


@pytest.fixture
def one_scenario_suite(monkeypatch: pytest.MonkeyPatch) -> Any:
    """``run`` fuzzes one suite that draws exactly the given scenario (fast, shrinks at once)."""

    def install(scenario: Scenario) -> None:
        suite = Suite("fixed", "one fixed scenario", lambda: st.just(scenario), (3,))
        monkeypatch.setattr(suite_registry, "load_suites", lambda: {suite.name: suite})

    return install


def run_dirs(root: Path) -> list[Path]:
    return sorted(p for p in root.iterdir() if p.is_dir())


def run_args(tmp_path: Path, *extra: str) -> list[str]:
    return ["run", "--report-dir", str(tmp_path / "reports"), "--database", "none", "--quiet", "--steps", "4", *extra]


def test_replay_of_a_report_folder_uses_the_recorded_faults(
    tmp_path: Path, one_scenario_suite: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    one_scenario_suite(failing_scenario())
    assert main(run_args(tmp_path, "--inject", FAULT)) == exitcodes.DIVERGENCE
    out = capsys.readouterr().out
    (report,) = run_dirs(tmp_path / "reports")
    # the console names the replay command, with the run's settings
    assert f"replay: graphcheck replay {report / 'scenario.json'} --backend cpu --inject {FAULT}" in out
    # and, under the verdict, where the divergence began: the kernel the report localises it to
    where = json.loads((report / "divergences.json").read_text())["outcomes"][0]["localisation"]
    assert where["kernel"] == "target_forward"
    lines = out.splitlines()
    verdict = next(i for i, line in enumerate(lines) if line.startswith("DIVERGENCE "))
    assert lines[verdict + 1] == f"where: {where['headline']}"

    assert main(["replay", str(report), "--report-dir", str(tmp_path / "replays")]) == exitcodes.DIVERGENCE
    out = capsys.readouterr().out
    assert f"injected: {FAULT}" in out and "settings recorded in" in out and "divergence" in out
    lines = out.splitlines()
    verdict = next(i for i, line in enumerate(lines) if line.startswith("divergence "))
    assert lines[verdict + 1] == f"where: {where['headline']}"  # the replay finds the same place
    # an option on the command line overrides the recorded value; the scenario is clean without the fault
    assert main(["replay", str(report / "scenario.json"), "--report-dir", str(tmp_path / "replays")]) == exitcodes.CLEAN
    capsys.readouterr()


def test_replay_of_a_folder_that_is_no_report_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "not-a-report"
    folder.mkdir()
    assert main(["replay", str(folder), "--report-dir", str(tmp_path / "r")]) == exitcodes.USAGE
    assert "without scenario.json" in capsys.readouterr().err
    (folder / "scenario.json").write_text(demo_scenario(num_steps=3).to_json())
    (folder / "divergences.json").write_text(json.dumps({"run": {"backend": 7}}))
    assert main(["replay", str(folder), "--report-dir", str(tmp_path / "r")]) == exitcodes.USAGE
    err = capsys.readouterr().err
    assert "run.backend" in err and err.count("\n") == 1


def test_replay_help_describes_both_forms(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["replay", "--help"])
    out = capsys.readouterr().out
    assert "replay FILE.json" in out and "replay REPORT_DIR" in out and "recorded" in out


@pytest.mark.parametrize("name", ["x[/oops]", "[bold]loud[/bold]", "a\n::error::injected", "tab\there\r\x1b[31m"])
def test_scenario_text_is_neither_markup_nor_a_new_line(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = demo_scenario(num_steps=3)
    path = tmp_path / "s.json"
    path.write_text(Scenario(scenario.config, scenario.requests, scenario.accepts, scenario.num_steps, name).to_json())
    code = main(["replay", str(path), "--report-dir", str(tmp_path / "r"), "--github"])
    captured = capsys.readouterr()
    lines = (captured.out + captured.err).splitlines()
    assert not any(line.lstrip().startswith("::error") for line in lines)
    if any(ch < " " for ch in name):  # control characters: the name is rejected, in one line
        assert code == exitcodes.USAGE and captured.err.count("\n") == 1 and "name" in captured.err
    else:
        assert code == exitcodes.CLEAN
        assert f"replaying {name} (" in captured.out  # shown as written, not eaten as markup


def test_engine_text_is_printed_as_one_visible_line() -> None:
    from io import StringIO

    out = StringIO()
    message = "boom [/x]\n::error::x"
    Console(file=out, force_terminal=False, width=200).print(f"device lost {plain(message)}")
    assert out.getvalue() == "device lost boom [/x]\\n::error::x\n"


def test_the_where_line_is_one_visible_line_of_plain_text() -> None:
    from io import StringIO

    from graphcheck.check.records import Localisation
    from graphcheck.cli.console import where_line

    outcome = failing_outcome_stub()
    assert where_line(outcome) is None  # not localised: no line
    outcome.localisation = Localisation(
        step=2, method="kernel trace", reason="boom [/x]\n::error::x", kernel="k[bold]", argument="buf.x"
    )
    out = StringIO()
    Console(file=out, force_terminal=False, width=300).print(where_line(outcome))
    assert out.getvalue() == ("where: first diverged in k[bold], argument buf.x at step 2: boom [/x]\\n::error::x\n")
    outcome.divergences = []  # clean: nothing to locate
    assert where_line(outcome) is None
    assert where_line(None) is None


def failing_outcome_stub() -> Any:
    from graphcheck.check.diff import Divergence
    from graphcheck.check.records import CheckOutcome

    outcome = CheckOutcome(demo_scenario(num_steps=3), "cpu", "emulated")
    outcome.divergences = [Divergence("token", 2, "accept_tokens", "eager vs graph", [1], [2], "r0", 0)]
    return outcome


def test_github_mode_stops_workflow_commands_while_the_engine_runs(
    tmp_path: Path, one_scenario_suite: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    one_scenario_suite(failing_scenario())
    assert main(run_args(tmp_path, "--inject", FAULT, "--github")) == exitcodes.DIVERGENCE
    lines = capsys.readouterr().out.splitlines()
    (stop,) = [i for i, line in enumerate(lines) if line.startswith("::stop-commands::")]
    token = lines[stop].split("::")[2]
    (resume,) = [i for i, line in enumerate(lines) if line == f"::{token}::"]
    errors = [i for i, line in enumerate(lines) if line.startswith("::error")]
    assert stop == 0 and errors and min(errors) > resume  # our annotations come after commands resume


def test_an_unwritable_junit_path_fails_before_the_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    code = main(run_args(tmp_path, "--junit", str(blocker / "junit.xml")))
    assert code == exitcodes.USAGE
    assert "--junit" in capsys.readouterr().err
    assert not (tmp_path / "reports").exists(), "nothing runs (no report folder) when an output path is bad"


def test_an_unwritable_database_fails_up_front(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    args = [a for a in run_args(tmp_path) if a not in ("--database", "none")]
    assert main([*args, "--database", str(blocker / "db")]) == exitcodes.USAGE
    assert "--database" in capsys.readouterr().err


def test_an_unwritable_default_database_is_a_loud_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("GRAPHCHECK_DATABASE", raising=False)
    monkeypatch.chdir(tmp_path)
    Path(".hypothesis").write_text("a file where the default database folder would go")
    spec, db = common.open_database(None)
    assert spec.kind == "none" and db is None
    assert "warning" in capsys.readouterr().err


def test_report_folders_are_unique_within_one_second(tmp_path: Path) -> None:
    claimed = [common.claim_run_dir(tmp_path)[1] for _ in range(5)]
    assert len(set(claimed)) == 5 and all(p.is_dir() for p in claimed)


def test_two_replays_in_one_second_get_two_folders(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "s.json"
    path.write_text(demo_scenario(num_steps=2).to_json())
    for _ in range(2):
        assert main(["replay", str(path), "--report-dir", str(tmp_path / "r"), "--quiet"]) == exitcodes.CLEAN
    assert len(run_dirs(tmp_path / "r")) == 2
    capsys.readouterr()


@pytest.mark.parametrize("stop", ["ctrl-c", "SIGTERM", "SIGHUP"])
def test_a_stop_while_shrinking_writes_the_report_of_what_was_found(
    stop: str,
    tmp_path: Path,
    one_scenario_suite: Any,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Ctrl-C, and the SIGTERM of a time limit or a closed terminal's SIGHUP as Ctrl-C is treated."""
    import os
    import signal

    one_scenario_suite(failing_scenario())
    from graphcheck.check.checker import Checker

    real = Checker.run
    calls = []

    def stopped_after_the_first(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) > 1:
            if stop == "ctrl-c":
                raise KeyboardInterrupt
            os.kill(os.getpid(), getattr(signal, stop))
        return real(*args, **kwargs)

    before = signal.getsignal(signal.SIGTERM)
    monkeypatch.setattr(Checker, "run", stopped_after_the_first)
    assert main(run_args(tmp_path, "--inject", FAULT)) == exitcodes.INTERRUPTED
    assert signal.getsignal(signal.SIGTERM) is before, "the handler is put back"
    assert "INTERRUPTED" in capsys.readouterr().out
    (report,) = run_dirs(tmp_path / "reports")
    assert (report / "index.html").stat().st_size > 0
    assert Scenario.from_json((report / "scenario.json").read_text()).name == "fixed/interrupted"
    assert json.loads((report / "divergences.json").read_text())["verdict"] == "divergence"
    assert json.loads((report / "fuzz.json").read_text())["run"]["interrupted"] is True


def test_progress_prints_a_plain_line_every_interval_when_not_a_terminal() -> None:
    from io import StringIO

    now = [0.0]
    out = StringIO()
    console = Console(file=out, force_terminal=False, width=100)
    progress = RunProgress(console, interval_s=10, clock=lambda: now[0])
    with progress:
        progress.start_suite("padding", 8)
        for second in range(1, 26):
            now[0] = float(second)
            progress.search(
                fuzz.SearchProgress("padding", second, second * 4, 64, second > 12, (2, 3) if second > 12 else None)
            )
    lines = out.getvalue().splitlines()
    assert len(lines) == 2, lines  # at 10 s and 20 s
    assert "searching: scenario 10 of up to 64" in lines[0]
    assert "shrinking" in lines[1] and "smallest 2 req x 3 steps" in lines[1]


def test_an_unknown_suite_is_rejected_before_any_framework_is_imported() -> None:
    code = (
        "import sys; from graphcheck.cli import main; rc = main(['run', '--suite', 'nope']); "
        "print(rc, 'torch' in sys.modules, 'paddle' in sys.modules)"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env, check=True)
    assert out.stdout.split() == [str(exitcodes.USAGE), "False", "False"], out.stderr
    assert "unknown suite nope" in out.stderr


def test_an_allocation_failure_is_exit_2_never_a_divergence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from graphcheck import reference

    def no_memory(config: Any) -> Any:
        raise MemoryError("cannot allocate memory for the weights")

    monkeypatch.setattr(reference, "make_weights", no_memory)
    path = tmp_path / "s.json"
    path.write_text(demo_scenario(num_steps=2).to_json())
    assert main(["replay", str(path), "--report-dir", str(tmp_path / "r")]) == exitcodes.USAGE
    err = capsys.readouterr().err
    assert "out of memory" in err and "Not a divergence" in err and err.count("\n") == 1


def test_a_scenario_above_the_memory_limit_is_rejected_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "big.json"
    data = json.loads(demo_scenario(num_steps=2).to_json())
    data["config"].update(max_num_seqs=256, max_model_len=8192, hidden_size=128)
    path.write_text(json.dumps(data))
    assert main(["replay", str(path), "--report-dir", str(tmp_path / "r")]) == exitcodes.USAGE
    err = capsys.readouterr().err
    assert "GRAPHCHECK_MAX_ENGINE_MEMORY" in err and err.count("\n") == 1
    assert err.startswith("graphcheck: bad scenario: config: ") and "on the built-in engine" in err
    assert not (tmp_path / "r").exists()  # refused before anything was set up
    monkeypatch.setenv("GRAPHCHECK_MAX_ENGINE_MEMORY", "lots")
    assert main(["run", "--report-dir", str(tmp_path / "r")]) == exitcodes.USAGE
    assert "GRAPHCHECK_MAX_ENGINE_MEMORY" in capsys.readouterr().err


def test_a_drawn_scenario_above_the_memory_limit_is_not_run(
    tmp_path: Path, one_scenario_suite: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from graphcheck.backends.engine import Engine

    def never(self: Any, *args: Any, **kwargs: Any) -> None:
        raise AssertionError("an engine was built for a scenario above the memory limit")

    scenario = demo_scenario(num_steps=2)
    one_scenario_suite(scenario)
    monkeypatch.setattr(Engine, "__init__", never)
    monkeypatch.setenv("GRAPHCHECK_MAX_ENGINE_MEMORY", "1M")
    assert main(run_args(tmp_path)) == exitcodes.USAGE
    err = capsys.readouterr().err
    assert err.startswith("graphcheck: bad scenario: config: ") and err.count("\n") == 1
    assert "GRAPHCHECK_MAX_ENGINE_MEMORY=3M" in err
    (report,) = run_dirs(tmp_path / "reports")  # the refused scenario is named, and kept where the line says
    kept = report / "pending-scenario.json"
    assert err.endswith(f"; the refused scenario {scenario.name} is kept in {kept}\n")
    assert Scenario.from_json(kept.read_text()).requests == scenario.requests


@pytest.mark.parametrize("clean_on", ["its next run", "its localised run"])
def test_an_engine_that_gives_different_results_for_the_same_scenario_is_one_line_exit_1(
    clean_on: str,
    tmp_path: Path,
    one_scenario_suite: Any,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A divergence that does not repeat (Hypothesis's FlakyFailure; or the shrunk scenario's last run, after
    the search): one line, never a traceback, and the scenario that diverged kept on disk."""
    from graphcheck.check.checker import Checker

    real, runs = Checker.run, []

    def unrepeatable(self: Checker, scenario: Scenario, **kwargs: Any) -> Any:
        runs.append(scenario)
        clean = len(runs) > 1 if clean_on == "its next run" else kwargs.get("localise", False)
        return real(self, scenario, **{**kwargs, "faults": ()} if clean else kwargs)

    scenario = failing_scenario()
    one_scenario_suite(scenario)
    monkeypatch.setattr(Checker, "run", unrepeatable)
    assert main(run_args(tmp_path, "--inject", FAULT)) == exitcodes.DIVERGENCE
    err = capsys.readouterr().err
    assert err.startswith("graphcheck: suite fixed: the engine gave different results for the same scenario ")
    assert "Traceback" not in err and err.count("\n") == 1
    (report,) = run_dirs(tmp_path / "reports")
    kept = report / "pending-scenario.json"
    assert f"kept in {kept}" in err and Scenario.from_json(kept.read_text()).requests == scenario.requests


def test_a_suite_whose_strategy_draws_differently_for_the_same_example_is_one_usage_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Hypothesis's FlakyStrategyDefinition: the suite's fault, not the engine's."""
    import itertools

    drawn = itertools.count()  # state outside Hypothesis: how much a draw takes changes from one draw to the next
    sizes = st.integers(0, 3).flatmap(lambda _: st.lists(st.integers(0, 9), min_size=next(drawn) % 3, max_size=2))
    suite = Suite("drift", "draws differently", lambda: sizes.map(lambda _: failing_scenario()), (3,))
    monkeypatch.setattr(suite_registry, "load_suites", lambda: {suite.name: suite})
    assert main(run_args(tmp_path, "--inject", FAULT)) == exitcodes.USAGE
    err = capsys.readouterr().err
    assert err.startswith("graphcheck: error: suite drift: its strategy drew different scenarios for the same example")
    assert "Traceback" not in err and err.count("\n") == 1


def test_a_memory_limit_no_scenario_fits_is_one_usage_line_before_a_report_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GRAPHCHECK_MAX_ENGINE_MEMORY", "1")
    assert main(run_args(tmp_path)) == exitcodes.USAGE
    err = capsys.readouterr().err
    assert err.startswith("graphcheck: error: GRAPHCHECK_MAX_ENGINE_MEMORY: the limit of 1 B (1 bytes) is below")
    assert "the built-in engine" in err and "no scenario could run" in err and err.count("\n") == 1
    assert not (tmp_path / "reports").exists()


def test_a_clean_run_reports_its_fuzzing_per_suite(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import xml.etree.ElementTree as ET

    code = main(
        run_args(
            tmp_path,
            "--suite",
            "padding",
            "--suite",
            "seeds",
            "--examples",
            "2",
            "--junit",
            str(tmp_path / "junit.xml"),
        )
    )
    assert code == exitcodes.CLEAN, capsys.readouterr().out
    (report,) = run_dirs(tmp_path / "reports")
    suite = ET.parse(tmp_path / "junit.xml").getroot()
    names = [case.get("name") for case in suite.iter("testcase")]
    assert names[:2] == ["padding", "seeds"] and len(names) == 2 + 4 and suite.get("tests") == "6"
    html = (report / "index.html").read_text(encoding="utf-8")
    assert "Fuzzing" in html and 'href="fuzz.json"' in html and "2 suites fuzzed" in html
    fuzzed = json.loads((report / "divergences.json").read_text())["suites"]
    assert [s["suite"] for s in fuzzed] == ["padding", "seeds"] and all(s["examples"] >= 2 for s in fuzzed)


def test_summary_counts_are_singular_when_one() -> None:
    from graphcheck.cli.progress import plural

    assert plural(1, "request") == "1 request" and plural(2, "step") == "2 steps" and plural(1200, "x") == "1,200 xs"


def test_a_float_run_records_its_model_contract_and_oracle_and_replays_with_them(
    tmp_path: Path, one_scenario_suite: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    one_scenario_suite(failing_scenario())
    args = run_args(tmp_path, "--inject", FAULT, "--model", "float", "--contract", "fastdeploy")
    assert main(args) == exitcodes.DIVERGENCE
    capsys.readouterr()
    (report,) = run_dirs(tmp_path / "reports")
    scenario = json.loads((report / "scenario.json").read_text())
    assert (scenario["config"]["model"], scenario["config"]["contract"]) == ("float32", "fastdeploy")
    document = json.loads((report / "divergences.json").read_text())
    assert document["run"]["oracle"] == "auto"
    assert {o["oracle"] for o in document["outcomes"]} == {"model-agnostic"}
    assert "oracle model-agnostic" in (report / "index.html").read_text()
    # The report folder replays with the scenario's model and contract, and the recorded oracle.
    assert main(["replay", str(report), "--report-dir", str(tmp_path / "replays")]) == exitcodes.DIVERGENCE
    capsys.readouterr()
    (replayed,) = run_dirs(tmp_path / "replays")
    outcome = json.loads((replayed / "divergences.json").read_text())["outcomes"][0]
    assert (outcome["model"], outcome["contract"], outcome["oracle"]) == ("float32", "fastdeploy", "model-agnostic")


def test_the_exact_oracle_on_a_float_model_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(run_args(tmp_path, "--model", "bfloat16", "--oracle", "exact")) == exitcodes.USAGE
    err = capsys.readouterr().err
    assert "needs --oracle model-agnostic" in err and err.count("\n") == 1


def _report_folder(folder: Path, run: dict[str, Any]) -> Path:
    from graphcheck.search.builtin import demo_scenario

    folder.mkdir(parents=True)
    (folder / "scenario.json").write_text(demo_scenario(num_steps=3).to_json())
    (folder / "divergences.json").write_text(json.dumps({"run": run}))
    return folder


@pytest.mark.parametrize("tamper", ["dev-zero", "fifo", "directory"])
def test_a_tampered_report_folder_is_refused_without_reading_it(
    tamper: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import os

    folder = _report_folder(tmp_path / "report", {"backend": "cpu"})
    target = folder / "divergences.json"
    target.unlink()
    if tamper == "dev-zero":
        target.symlink_to("/dev/zero")
    elif tamper == "fifo":
        os.mkfifo(target)
    else:
        target.mkdir()
    code = main(["replay", str(folder), "--report-dir", str(tmp_path / "r"), "--quiet"])
    assert code == exitcodes.USAGE
    err = capsys.readouterr().err
    assert "divergences.json" in err and "Traceback" not in err and err.count("\n") == 1


def test_a_recorded_fault_name_with_a_newline_is_refused_on_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _report_folder(tmp_path / "report", {"backend": "cpu", "faults": ["x\n::error::forged"]})
    assert main(["replay", str(folder), "--report-dir", str(tmp_path / "r"), "--github"]) == exitcodes.USAGE
    captured = capsys.readouterr()
    assert "::error::forged" not in captured.err.replace("\\n::error::forged", "")
    assert captured.err.count("\n") == 1


def _format_chars(text: str) -> list[str]:
    import unicodedata

    return [c for c in text if unicodedata.category(c) == "Cf"]


def test_bidi_controls_in_names_reach_neither_the_console_nor_the_page_raw(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """U+202E in a suite's and a scenario's name, and in a name given on the command line: shown as ``\\u202e``."""
    import dataclasses

    scenario = dataclasses.replace(failing_scenario(), name="fixed\u202eevil\u2066")
    suite = Suite("fixed\u202eevil\u200f", "one fixed scenario", lambda: st.just(scenario), (3,))
    monkeypatch.setattr(suite_registry, "load_suites", lambda: {suite.name: suite})
    assert main(run_args(tmp_path, "--inject", FAULT)) == exitcodes.DIVERGENCE
    captured = capsys.readouterr()
    assert _format_chars(captured.out + captured.err) == [] and "fixed\\u202eevil\\u200f" in captured.out
    (report,) = run_dirs(tmp_path / "reports")
    page = (report / "index.html").read_text(encoding="utf-8")
    assert _format_chars(page) == [] and "fixed\\u202eevil\\u200f" in page

    monkeypatch.undo()
    assert main(["run", "--suite", "no\u202epe", "--report-dir", str(tmp_path / "r")]) == exitcodes.USAGE
    err = capsys.readouterr().err
    assert _format_chars(err) == [] and "unknown suite no\\u202epe" in err and err.count("\n") == 1


def test_a_report_recorded_with_the_engine_scheduled_oracle_replays_its_settings(tmp_path: Path) -> None:
    from graphcheck.cli.replay_target import recorded_run

    folder = _report_folder(tmp_path / "report", {"backend": "cpu", "oracle": "engine-scheduled", "engine": "hf-cb"})
    assert recorded_run(folder / "divergences.json")["oracle"] == "engine-scheduled"


def test_a_scenario_json_that_is_a_folder_is_named_as_such(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = _report_folder(tmp_path / "report", {"backend": "cpu"})
    (folder / "scenario.json").unlink()
    (folder / "scenario.json").mkdir()
    assert main(["replay", str(folder), "--report-dir", str(tmp_path / "r"), "--quiet"]) == exitcodes.USAGE
    assert "is not a regular file" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["run", "replay"])
def test_a_full_disk_prints_the_verdict_and_exits_with_its_own_code(
    command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import errno

    import graphcheck.report
    from graphcheck.search.builtin import demo_scenario

    def full(*args: Any, **kwargs: Any) -> Any:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(graphcheck.report, "write_report", full)
    real_open = open

    def no_pending(path: Any, *args: Any, **kwargs: Any) -> Any:
        if str(path).endswith("pending-scenario.tmp"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr("builtins.open", no_pending)
    if command == "run":
        args = ["run", "--suite", "seeds", "--examples", "2", "--database", "none", "--report-dir", str(tmp_path)]
    else:
        scenario = tmp_path / "s.json"
        scenario.write_text(demo_scenario(num_steps=3).to_json())
        args = ["replay", str(scenario), "--report-dir", str(tmp_path / "r")]
    code = main(args)
    out, err = capsys.readouterr()
    assert code == exitcodes.REPORT_UNWRITTEN != exitcodes.DIVERGENCE
    assert "NOT WRITTEN" in out and "No space left on device" in out and "Traceback" not in err
    assert ("CLEAN" in out) if command == "run" else ("clean" in out)
    assert not list(tmp_path.rglob("*.tmp")), "no partial pending file stays behind"


def test_a_batched_searchs_progress_never_runs_past_its_budget(tmp_path: Path) -> None:
    """Each Hypothesis example is a batch of up to ``per_config`` scenarios: the progress budget counts
    scenarios too (it read ``example 90/20``)."""
    from graphcheck.capture.devices import resolve
    from graphcheck.check.checker import Checker
    from graphcheck.search.suite_registry import load_suites

    seen: list[fuzz.SearchProgress] = []
    checker = Checker(resolve("cpu"))
    strategy = checker.strategy(load_suites()["seeds"].strategy())
    result = fuzz.fuzz_suite(
        "seeds",
        strategy,
        checker,
        examples=3,
        seed=0,
        pending_path=tmp_path / "p.json",
        hooks=fuzz.SearchHooks(on_progress=seen.append),
    )
    assert result.outcome is None and seen
    assert all(p.budget == 3 * fuzz.DEFAULT_PER_CONFIG for p in seen)
    assert all(p.examples <= p.budget for p in seen if not p.shrinking)
