"""One vocabulary for what a run counts, everywhere it is shown.

* an **example** is one drawn engine configuration (what ``--examples N`` counts per suite, and
  Hypothesis draws and shrinks), checked with a batch of up to 8 scenarios;
* a **scenario** is one checked scenario: a lockstep run of eager, graph and reference.

The header counts examples; the progress line, each suite's line, the summary table and the
verdict count scenarios; ``--help`` and the docs say the same.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from graphcheck.cli import main
from graphcheck.cli.console import summary_table
from graphcheck.cli.progress import RunProgress, suite_line
from graphcheck.cli.run import _checked
from graphcheck.search.fuzz import SearchProgress
from graphcheck.search.result import SuiteResult

ROOT = Path(__file__).resolve().parent.parent


def test_help_says_what_an_example_is(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--examples N examples per suite: an example is one drawn engine configuration" in text
    assert "up to 8 scenarios" in text


def test_suite_line_progress_and_summary_count_scenarios() -> None:
    result = SuiteResult("padding", examples=37, steps=260, elapsed_s=2.0)
    assert suite_line(result).plain == "suite padding: clean, 37 scenarios, 260 steps, 2.0s"
    out = io.StringIO()
    console = Console(file=out, width=200, force_terminal=False)
    progress = RunProgress(console, interval_s=0.0, clock=lambda: 0.0)
    progress.start_suite("padding", 160)
    progress.search(SearchProgress("padding", 8, 40, 160, False, None))
    assert "searching: scenario 8 of up to 160  (8 scenarios checked in all" in out.getvalue()
    console.print(summary_table([], [result]))
    assert "scenarios" in out.getvalue() and "examples" not in out.getvalue()


def test_the_verdict_counts_every_scenario_checked() -> None:
    assert (
        _checked([], [SuiteResult("a", examples=895, steps=1, elapsed_s=1.0)])
        == "895 scenarios checked (895 fuzzed, 0 built-in)"
    )


def test_the_docs_define_both_words() -> None:
    page = (ROOT / "docs" / "running.md").read_text(encoding="utf-8")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for text in (page, readme):
        assert "**example**" in text and "**scenario" in text
