"""The command line: exit codes, reports on disk, one-line errors, never tracebacks."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from graphcheck.cli import exitcodes, main
from graphcheck.scenario import Scenario
from graphcheck.search.builtin import demo_scenario

from _layers import slow


def _run_dirs(root: Path) -> list[Path]:
    return sorted(p for p in root.iterdir() if p.is_dir())


def test_run_small_is_clean_and_writes_a_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "run",
            "--suite",
            "padding",
            "--examples",
            "2",
            "--steps",
            "8",
            "--report-dir",
            str(tmp_path),
            "--quiet",
            "--junit",
            str(tmp_path / "j.xml"),
        ]
    )
    out = capsys.readouterr().out
    assert code == exitcodes.CLEAN, out
    assert "CLEAN" in out and "builtin/demo-greedy" in out
    (run_dir,) = _run_dirs(tmp_path)
    for name in ("index.html", "divergences.json", "scenario.json", "junit.xml"):
        assert (run_dir / name).is_file(), name
    assert not (run_dir / "pending-scenario.json").exists()
    assert (tmp_path / "j.xml").is_file()
    assert json.loads((run_dir / "divergences.json").read_text())


def test_replay_of_a_scenario_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "s.json"
    path.write_text(demo_scenario(num_steps=6).to_json())
    assert main(["replay", str(path), "--report-dir", str(tmp_path / "r")]) == exitcodes.CLEAN
    assert "clean" in capsys.readouterr().out


def test_malformed_scenario_is_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.json"
    data = json.loads(demo_scenario(num_steps=5).to_json())
    data["requests"][0]["top_p"] = 3
    path.write_text(json.dumps(data))
    assert main(["replay", str(path), "--report-dir", str(tmp_path)]) == exitcodes.USAGE
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert "requests[0].top_p" in err and "Traceback" not in err


@pytest.mark.parametrize(
    "argv, words",
    [
        (["run", "--profile", "fast"], "invalid choice"),
        (["run", "--steps", "0"], "--steps"),
        (["run", "--examples", "0"], "--examples"),
        (["run", "--backend", "tpu"], "unknown backend"),
        (["run", "--suite", "nope"], "unknown suite"),
        (["run", "--inject", "nope"], "unknown fault"),
        (["replay", "/nonexistent/s.json"], "cannot read"),
        (["explode"], "invalid choice"),
        ([], "required"),
    ],
)
def test_usage_errors_exit_2(argv: list[str], words: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main([*argv, "--report-dir", str(tmp_path)] if argv and argv[0] in ("run", "replay") else argv)
        == exitcodes.USAGE
    )
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err
    assert not any(tmp_path.iterdir()), "no report folder for a rejected command line"


def test_missing_device_exits_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    assert main(["run", "--backend", "cuda", "--report-dir", str(tmp_path)]) == exitcodes.BACKEND_UNAVAILABLE
    err = capsys.readouterr().err
    assert "--emulate" in err and "Traceback" not in err


def test_doctor_and_faults_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor"]) == exitcodes.CLEAN
    out = capsys.readouterr().out
    assert "cpu" in out and "cuda" in out and "xpu" in out
    assert main(["faults"]) == exitcodes.CLEAN
    assert "rebind-output-offsets" in capsys.readouterr().out


def test_faults_table_lists_what_each_fault_declares_it_breaks() -> None:
    from rich.console import Console

    from graphcheck.backends.engine.faults import FAULTS
    from graphcheck.cli.console import faults_table

    console = Console(width=1000, record=True, color_system=None, file=io.StringIO())
    console.print(faults_table(FAULTS))
    lines = console.export_text().splitlines()
    assert "declared breaks" in lines[2]  # title, top border, header
    for name, fault in FAULTS.items():
        assert fault.breaks, name
        (row,) = [line for line in lines if line.startswith(f"│ {name} ")]
        assert row.rstrip(" │").endswith(", ".join(fault.breaks)), row


@slow
def test_console_script_runs_as_a_module(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "graphcheck.cli",
            "run",
            "--suite",
            "seeds",
            "--examples",
            "1",
            "--steps",
            "4",
            "--report-dir",
            str(tmp_path),
            "--seed",
            "3",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == exitcodes.CLEAN, proc.stdout + proc.stderr
    (run_dir,) = _run_dirs(tmp_path)
    assert Scenario.from_json((run_dir / "scenario.json").read_text())


@slow
def test_run_localises_stale_padding_rows_to_the_target_forward(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["run", "--suite", "padding", "--inject", "stale-padding-rows", "--examples", "3", "--database", "none"]
    assert main([*argv, "--report-dir", str(tmp_path), "--quiet"]) == exitcodes.DIVERGENCE
    out = capsys.readouterr().out
    (run_dir,) = _run_dirs(tmp_path)
    doc = json.loads((run_dir / "divergences.json").read_text())
    assert doc["format"] == 2
    (failing,) = [o for o in doc["outcomes"] if not o["clean"]]
    where = failing["localisation"]
    # stale padding rows: the target forward reads buf.slot_mapping's padding, which points at request rows
    assert where["kernel"] == "target_forward" and where["argument"] == "buf.slot_mapping"
    assert where["buffer"] == "slot_mapping" and where["step"] == failing["first"]["step"]
    assert where["source_file"] and where["source_line"]
    assert f"where: {where['headline']}" in out.splitlines()
    html = (run_dir / "index.html").read_text()
    assert 'id="outcome-0-where"' in html and "target_forward" in html
    fuzzed = json.loads((run_dir / "fuzz.json").read_text())["suites"]
    assert fuzzed[0]["where"] == where["headline"]
    junit = (run_dir / "junit.xml").read_text()
    assert "where: first diverged in target_forward" in junit
