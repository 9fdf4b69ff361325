"""The HTML report as a user sees it: rendered by headless Chromium.

Without a Chromium these tests skip, unless ``GRAPHCHECK_REQUIRE_BROWSER=1`` or
``CI=true`` (``.ci/run`` sets the first and installs Chromium): then they fail,
so CI never passes without having rendered the report.

Two reports are opened: a fuzzed run that diverged (first-divergence card,
timeline, per-kind tables, the Fuzzing and Scenarios tables) and a clean fuzzed
run (the clean card and the Fuzzing table). Chromium's ``--dump-dom`` gives the
DOM after the page's script ran. The copy button is driven in a test-only copy
of the report (``index.test-<mode>.html``, beside it): a script injected at the
top of its <head> stubs ``navigator.clipboard``, records script errors, clicks
the button once the page has loaded and writes what happened into the DOM.
Console messages of the page (Chromium's ``--enable-logging=stderr`` prints
each as ``CONSOLE``) fail the test. A screenshot of each report is kept under
the test's tmp_path and copied to ``reports/browser-test/``.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from graphcheck.report import ReportPaths, default_replay_command, write_report

import report_samples as samples

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
BROWSER = next((b for b in map(shutil.which, BROWSERS) if b), None)
REQUIRE_ENV = "GRAPHCHECK_REQUIRE_BROWSER"
SCREENSHOT_DIR = Path(__file__).resolve().parents[1] / "reports" / "browser-test"

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
WINDOW = (1400, 2400)

#: Injected into the test copy of a report. MODE: "ok" (writeText resolves), "reject" (it rejects: the page
#: must fall back to selecting the text) or "none" (no clipboard API). Results land in <pre id="test-log">.
HARNESS = """<script>
(function () {
  var MODE = "%(mode)s";
  var log = {errors: [], copied: null, feedback: null, selection: null, visible: null, rendered: {}};
  window.addEventListener("error", function (e) { log.errors.push("error: " + e.message); });
  window.addEventListener("unhandledrejection", function (e) { log.errors.push("unhandled rejection: " + e.reason); });
  ["error", "warn"].forEach(function (level) {
    var original = console[level];
    console[level] = function () {
      log.errors.push("console." + level + ": " + Array.prototype.join.call(arguments, " "));
      return original.apply(console, arguments);
    };
  });
  var clip = MODE === "none" ? undefined : {writeText: function (text) {
    log.copied = text;
    return MODE === "ok" ? Promise.resolve() : Promise.reject(new Error("clipboard denied by the test"));
  }};
  Object.defineProperty(navigator, "clipboard", {configurable: true, get: function () { return clip; }});
  window.addEventListener("load", function () {
    var button = document.getElementById("copy-replay");
    var box = button ? button.getBoundingClientRect() : null;
    log.visible = button ? !button.hidden && box.width > 0 && box.height > 0 : null;
    %(ids)s.forEach(function (id) {
      var node = document.getElementById(id);
      log.rendered[id] = node ? Math.round(node.getBoundingClientRect().height) : -1;
    });
    log.charts = Array.prototype.map.call(document.querySelectorAll("svg.chart"), function (svg) {
      var r = svg.getBoundingClientRect();
      return {id: svg.id, width: r.width, height: r.height, right: r.right, shapes: svg.querySelectorAll("rect, circle").length};
    });
    log.page_width = document.documentElement.scrollWidth;
    log.viewport = window.innerWidth;
    if (button) { button.click(); }
    setTimeout(function () {
      log.feedback = button ? button.textContent : null;
      log.selection = String(window.getSelection());
      var out = document.createElement("pre");
      out.id = "test-log";
      out.textContent = JSON.stringify(log);
      document.body.appendChild(out);
    }, 200);
  });
})();
</script>
"""


def browser_required() -> bool:
    """Whether a missing browser is a failure: ``GRAPHCHECK_REQUIRE_BROWSER=1`` or ``CI=true``."""
    return os.environ.get(REQUIRE_ENV, "").strip() == "1" or os.environ.get("CI", "").strip().lower() == "true"


def need_browser(found: str | None) -> str:
    """``found``, or skip (fail where the browser is required) with how to get one."""
    if found is not None:
        return found
    message = f"no {' / '.join(BROWSERS)} on PATH, so the HTML report was not rendered"
    if browser_required():
        pytest.fail(
            f"{message}; a browser is required here ({REQUIRE_ENV}=1 or CI=true): install one, e.g. "
            "`apt-get install -y --no-install-recommends chromium` (.ci/run does)",
            pytrace=False,
        )
    pytest.skip(message)


@pytest.fixture(scope="module")
def browser() -> str:
    return need_browser(BROWSER)


def chromium(browser: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    profile = tmp_path / "profile"
    profile.mkdir(exist_ok=True)
    command = [browser, *FLAGS, f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


def page_console(result: subprocess.CompletedProcess[str], page: Path) -> list[str]:
    """The console messages (errors, uncaught exceptions, anything logged) of ``page`` in Chromium's log."""
    return [
        line
        for line in result.stderr.splitlines()
        if "CONSOLE" in line and (page.as_uri() in line or "Uncaught" in line)
    ]


@pytest.fixture
def diverged(tmp_path: Path) -> ReportPaths:
    outcomes, suites = samples.fuzzed_divergence()
    return write_report(
        outcomes,
        tmp_path / "diverged",
        command="graphcheck run --emulate --keep-going",
        run_info=samples.run_info(),
        suites=suites,
    )


@pytest.fixture
def clean(tmp_path: Path) -> ReportPaths:
    return write_report(
        samples.builtin_outcomes(),
        tmp_path / "clean",
        command="graphcheck run --emulate",
        run_info=samples.run_info(),
        suites=samples.clean_suite_runs(),
    )


def replay_of(paths: ReportPaths) -> str:
    return default_replay_command(samples.run_info())(paths.scenario_json)


def harnessed(paths: ReportPaths, mode: str, ids: tuple[str, ...]) -> Path:
    """A copy of the report, beside it, with the test harness at the top of its <head>."""
    text = paths.index_html.read_text(encoding="utf-8")
    marker = '<meta charset="utf-8">'
    assert text.count(marker) == 1
    page = paths.index_html.with_name(f"index.test-{mode}.html")
    page.write_text(
        text.replace(marker, marker + HARNESS % {"mode": mode, "ids": json.dumps(list(ids))}), encoding="utf-8"
    )
    return page


def drive(browser: str, tmp_path: Path, paths: ReportPaths, mode: str, ids: tuple[str, ...]) -> tuple[str, dict]:
    """Open the harnessed copy; the DOM after the click, and the harness's log."""
    page = harnessed(paths, mode, ids)
    result = chromium(browser, tmp_path, "--virtual-time-budget=2000", "--dump-dom", page.as_uri())
    found = re.search(r'<pre id="test-log">(.*?)</pre>', result.stdout, re.S)
    assert found, f"the harness logged nothing (rc {result.returncode}):\n{result.stderr[-3000:]}"
    log = json.loads(html.unescape(found.group(1)))
    assert log["errors"] == [], log["errors"]
    assert page_console(result, page) == []
    return result.stdout, log


def screenshot(browser: str, tmp_path: Path, paths: ReportPaths, name: str) -> Path:
    png = tmp_path / "screens" / f"{name}.png"
    png.parent.mkdir(exist_ok=True)
    result = chromium(
        browser, tmp_path, f"--screenshot={png}", f"--window-size={WINDOW[0]},{WINDOW[1]}", paths.index_html.as_uri()
    )
    assert png.is_file(), f"chromium wrote no screenshot (rc {result.returncode}):\n{result.stderr[-3000:]}"
    assert page_console(result, paths.index_html) == []
    try:  # keep it where a person can look at it; reports/ is not committed
        SCREENSHOT_DIR.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(png, SCREENSHOT_DIR / png.name)
    except OSError:
        pass
    return png


def png_size(data: bytes) -> tuple[int, int]:
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def body_rows(dom: str, table_id: str) -> list[list[str]]:
    return samples.table_rows(dom, table_id)[1:]


# -- the requirement ----------------------------------------------------------


def test_missing_browser_fails_where_required(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(REQUIRE_ENV, raising=False)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception):
        need_browser(None)
    for name, value in ((REQUIRE_ENV, "1"), ("CI", "true")):
        with monkeypatch.context() as env:
            env.setenv(name, value)
            with pytest.raises(pytest.fail.Exception, match="a browser is required here"):
                need_browser(None)
    assert need_browser("/usr/bin/chromium") == "/usr/bin/chromium"


# -- the pages ----------------------------------------------------------------

DIVERGED_IDS = (
    "outcome-0-headline",
    "outcome-0-timeline",
    "outcome-0-chart",
    "coverage-chart",
    "outcome-0-step-3",
    "outcome-0-address",
    "fuzz-table",
    "scenario-table",
    "replay-command",
)
CLEAN_IDS = ("clean", "fuzz-table", "coverage-chart", "counts", "files")


def test_divergence_report_renders_and_copies(browser: str, tmp_path: Path, diverged: ReportPaths) -> None:
    dom, log = drive(browser, tmp_path, diverged, "ok", DIVERGED_IDS)
    assert all(log["rendered"][i] > 0 for i in DIVERGED_IDS), log["rendered"]  # present and laid out
    outcomes, suites = samples.fuzzed_divergence()
    first = outcomes[0].first
    assert first is not None
    # the first-divergence card, and the timeline row it links to
    card = re.search(r'<section class="card headline" id="outcome-0-headline">(.*?)</section>', dom, re.S)
    assert card and "First divergence" in card.group(1) and html.escape(first.headline(), quote=False) in card.group(1)
    assert 'href="#outcome-0-step-3"' in card.group(1)
    assert re.search(r'<tr class="row-first" id="outcome-0-step-3"><td class="num">3</td>', dom)
    # the tables
    fuzz = body_rows(dom, "fuzz-table")
    assert [r[0] for r in fuzz] == [s.suite for s in suites]
    assert fuzz[1][5:7] == ["divergence", "shrunk"]  # after scenarios, steps, replayed a graph, seconds
    assert [r[0] for r in body_rows(dom, "scenario-table")] == [o.scenario.name for o in outcomes]
    assert "7 suites fuzzed (1 diverged)" in dom and "DIVERGENCE" in dom
    assert "<script>alert" not in dom
    # the copy button: visible, copies the replay command, says so
    assert log["visible"] is True
    assert log["copied"] == replay_of(diverged) and log["copied"].startswith("graphcheck replay ")
    assert log["feedback"] == "Copied"


def test_charts_render_within_a_1280_pixel_window(browser: str, tmp_path: Path, diverged: ReportPaths) -> None:
    """The step chart and the coverage chart are drawn, and nothing on the page is wider than 1,280 pixels."""
    result = chromium(
        browser,
        tmp_path,
        "--window-size=1280,900",
        "--virtual-time-budget=2000",
        "--dump-dom",
        harnessed(diverged, "ok", DIVERGED_IDS).as_uri(),
    )
    found = re.search(r'<pre id="test-log">(.*?)</pre>', result.stdout, re.S)
    assert found, result.stderr[-3000:]
    log = json.loads(html.unescape(found.group(1)))
    charts = {c["id"]: c for c in log["charts"]}
    assert {"outcome-0-chart", "coverage-chart"} <= set(charts), charts
    for chart in charts.values():
        assert chart["width"] > 200 and chart["height"] >= 40 and chart["shapes"] > 3, chart
        assert chart["right"] <= log["viewport"], chart
    assert log["page_width"] <= log["viewport"], log["page_width"]
    assert 'class="c-graph' in result.stdout and "c-first" in result.stdout  # the divergence cells, first outlined


def test_clean_report_renders(browser: str, tmp_path: Path, clean: ReportPaths) -> None:
    dom, log = drive(browser, tmp_path, clean, "ok", CLEAN_IDS)
    assert all(log["rendered"][i] > 0 for i in CLEAN_IDS), log["rendered"]
    assert 'class="card headline"' not in dom and "First divergence" not in dom
    assert re.search(r'<section class="card clean-card" id="clean"><h2>No divergences</h2>', dom)
    counts = re.search(r'<span class="counts" id="counts">(.*?)</span>', dom, re.S)
    assert counts and "7 suites fuzzed: 160 scenarios, 1,234 steps; 4 built-in scenarios checked" in counts.group(1)
    fuzz = body_rows(dom, "fuzz-table")
    assert [(r[0], r[1], r[5]) for r in fuzz] == [(n, str(e), "clean") for n, e, _ in samples.SUITE_FIGURES]
    assert '<a href="fuzz.json">fuzz.json</a>' in dom
    # nothing diverged, so there is nothing to replay: no replay section, no copy button
    assert 'id="replay"' not in dom and log["visible"] is None and log["copied"] is None


@pytest.mark.parametrize("mode", ["reject", "none"])
def test_copy_without_clipboard_selects_the_command(
    browser: str, tmp_path: Path, diverged: ReportPaths, mode: str
) -> None:
    """A denied or absent clipboard API: the command is selected for Ctrl+C, and no error escapes."""
    _, log = drive(browser, tmp_path, diverged, mode, DIVERGED_IDS)
    assert log["visible"] is True
    assert log["selection"] == replay_of(diverged)
    assert log["feedback"] in ("Copied", "Selected: press Ctrl+C")
    assert log["copied"] == (replay_of(diverged) if mode == "reject" else None)


def test_screenshots_are_not_blank(browser: str, tmp_path: Path, diverged: ReportPaths, clean: ReportPaths) -> None:
    for name, paths in (("diverged", diverged), ("clean", clean)):
        data = screenshot(browser, tmp_path, paths, name).read_bytes()
        assert png_size(data) == WINDOW
        assert len(data) > 50_000, name  # a blank 1400x2400 page compresses to a few KiB


def test_unmodified_report_logs_nothing(browser: str, tmp_path: Path, diverged: ReportPaths) -> None:
    """The report as written (no harness): no console message, and its script ran (the button shows)."""
    result = chromium(browser, tmp_path, "--dump-dom", diverged.index_html.as_uri())
    assert page_console(result, diverged.index_html) == []
    button = re.search(r'<button [^>]*id="copy-replay"[^>]*>', result.stdout)
    assert button and " hidden" not in button.group(0)
