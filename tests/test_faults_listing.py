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
