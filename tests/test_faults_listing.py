"""``graphcheck faults`` fits a screen: one line per fault; ``--details`` gives the full table."""

from __future__ import annotations

import pytest

from graphcheck.backends.engine.faults import FAULTS
from graphcheck.cli import main


def test_faults_is_one_line_per_fault(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    assert main(["faults"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) <= len(FAULTS) + 8, "\n".join(lines)  # title, borders, header, the names line
    assert all(len(line) <= 120 for line in lines if "│" in line)
    assert main(["faults", "--details"]) == 0
    details = capsys.readouterr().out
    assert "signal" in details and "declared breaks" in details and len(details.splitlines()) > len(lines)


def test_each_line_names_its_fault_in_full(capsys: pytest.CaptureFixture[str]) -> None:
    """The summary gives way to the width; the name (what --inject takes) and the class never do."""
    from graphcheck.cli.console import PLAIN_WIDTH

    assert main(["faults"]) == 0
    lines = capsys.readouterr().out.splitlines()
    for name, fault in FAULTS.items():
        (line,) = [line for line in lines if line.split()[:1] == [name]]
        assert line.split()[1] == str(fault.bug_class) and len(line) <= PLAIN_WIDTH, line


def test_a_reader_that_closes_the_pipe_does_not_end_the_command_with_an_error() -> None:
    """``graphcheck faults | head -1``: rich's broken-pipe SystemExit is not an 'engine aborted' (exit 6)."""
    import subprocess
    import sys

    proc = subprocess.Popen(
        [sys.executable, "-m", "graphcheck.cli", "faults", "--details"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.readline()
    proc.stdout.close()  # the reader goes away after one line, as head -1 does
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0, err
    assert "aborted" not in err and "Traceback" not in err
