"""The command line: exit codes and one-line errors, never tracebacks."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from graphcheck import exitcodes
from graphcheck.cli import main
from graphcheck.examples import demo_scenario


def test_run_builtin_demo_exits_clean(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--mode", "greedy", "--steps", "6"]) == exitcodes.CLEAN
    out = capsys.readouterr().out
    assert "demo/greedy" in out


def test_run_scenario_file(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "s.json"
    path.write_text(demo_scenario(num_steps=5).to_json())
    assert main(["run", "--scenario", str(path)]) == exitcodes.CLEAN
    assert str(path) in capsys.readouterr().out


def test_malformed_scenario_is_one_line_exit_2(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.json"
    data = json.loads(demo_scenario(num_steps=5).to_json())
    data["requests"][0]["top_p"] = 3
    path.write_text(json.dumps(data))
    assert main(["run", "--scenario", str(path)]) == exitcodes.USAGE
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert "requests[0].top_p" in err and "Traceback" not in err


@pytest.mark.parametrize(
    "argv, words",
    [
        (["run", "--mode", "fast"], "invalid choice"),
        (["run", "--steps", "0"], "--steps"),
        (["run", "--backend", "tpu"], "unknown backend"),
        (["explode"], "invalid choice"),
        ([], "required"),
    ],
)
def test_usage_errors_exit_2(argv: list[str], words: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == exitcodes.USAGE
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err


def test_console_script_entry_point_runs() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "graphcheck.cli", "run", "--mode", "naive", "--steps", "4", "--quiet"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == exitcodes.CLEAN, proc.stderr
