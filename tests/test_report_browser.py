"""The HTML report as a user sees it: rendered by headless Chromium (skipped when none is installed)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

import report_samples as samples
from graphcheck.report import write_report

BROWSER = next((b for b in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if b), None)
pytestmark = pytest.mark.skipif(BROWSER is None, reason="no chromium / chromium-browser / google-chrome found")

FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
)


def chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    profile = tmp_path / "profile"
    profile.mkdir(exist_ok=True)
    command = [str(BROWSER), *FLAGS, f"--user-data-dir={profile}", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture
def report(tmp_path: Path) -> Path:
    paths = write_report([samples.diverged_outcome()], tmp_path / "report",
                         command="graphcheck run --emulate", run_info=samples.run_info())
    return paths.index_html


def test_screenshot_is_not_blank(tmp_path: Path, report: Path) -> None:
    png = tmp_path / "report.png"
    chromium(tmp_path, f"--screenshot={png}", "--window-size=1400,2400", report.as_uri())
    assert png.is_file(), "chromium wrote no screenshot"
    data = png.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    assert len(data) > 50_000  # a blank 1400x2400 page compresses to a few KiB


def test_rendered_dom_holds_the_headline(tmp_path: Path, report: Path) -> None:
    dom = chromium(tmp_path, "--dump-dom", report.as_uri()).stdout
    first = samples.diverged_outcome().first
    assert first is not None
    assert first.headline() in dom
    assert "Replay it" in dom and "graphcheck replay " in dom
    assert "<script>alert" not in dom
