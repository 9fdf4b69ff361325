"""The report writer: index.html, divergences.json, scenario.json and junit.xml from CheckOutcomes."""

from __future__ import annotations

import dataclasses
import json
import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

import report_samples as samples
from graphcheck.diff import Divergence
from graphcheck.records import CheckOutcome
from graphcheck.report import ReportPaths, RunInfo, default_replay_command, write_junit, write_report
from graphcheck.report.jsonout import jsonable
from graphcheck.scenario import Scenario

COMMAND = "graphcheck run --backend cpu --emulate --inject rebind_cu_seqlens"


class _Page(HTMLParser):
    """Collects the text, the tags and every src/href of a page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.text: list[str] = []
        self.tags: list[str] = []
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.links += [value or "" for name, value in attrs if name in ("src", "href", "action", "poster")]

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parse(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text(encoding="utf-8"))
    page.close()
    return page


def named(outcome: CheckOutcome, name: str) -> CheckOutcome:
    outcome.scenario = dataclasses.replace(outcome.scenario, name=name)
    return outcome


def write(outcomes: list[CheckOutcome], out_dir: Path, **kwargs: object) -> ReportPaths:
    info = samples.run_info(faults=("rebind_cu_seqlens",))
    return write_report(outcomes, out_dir, command=COMMAND, run_info=info, **kwargs)


@pytest.fixture
def diverged() -> CheckOutcome:
    return samples.diverged_outcome()


@pytest.fixture
def diverged_report(tmp_path: Path, diverged: CheckOutcome) -> ReportPaths:
    return write([diverged], tmp_path / "diverged")


@pytest.fixture
def clean_report(tmp_path: Path) -> ReportPaths:
    return write([samples.clean_outcome()], tmp_path / "clean")


# -- files ------------------------------------------------------------------

def test_all_files_are_written(diverged_report: ReportPaths, clean_report: ReportPaths) -> None:
    for paths in (diverged_report, clean_report):
        for path in (paths.index_html, paths.divergences_json, paths.scenario_json, paths.junit_xml):
            assert path.is_file() and path.stat().st_size > 0
        assert paths.index_html.parent.name in ("diverged", "clean")


def test_no_outcomes_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        write([], tmp_path / "none")


# -- index.html ---------------------------------------------------------------

def test_html_headline_and_replay_command(diverged_report: ReportPaths, diverged: CheckOutcome) -> None:
    page = parse(diverged_report.index_html)
    text = "".join(page.text)
    assert "DIVERGENCE" in text
    assert diverged.first is not None and diverged.first.headline() in text
    replay = default_replay_command(samples.run_info(faults=("rebind_cu_seqlens",)))(diverged_report.scenario_json)
    assert replay.startswith("graphcheck replay ") and "--backend cpu --emulate" in replay
    assert replay in text
    assert "emulated" in text and "rebind_cu_seqlens" in text  # which runner, which faults


def test_html_address_section_shows_buffer_and_pointers(diverged_report: ReportPaths) -> None:
    text = "".join(parse(diverged_report.index_html).text)
    assert "cu_seqlens_q_output" in text
    assert f"0x{samples.STALE_CAPTURED:012x}" in text and f"0x{samples.STALE_CURRENT:012x}" in text


def test_html_highlights_the_mismatching_token(diverged_report: ReportPaths) -> None:
    html = diverged_report.index_html.read_text(encoding="utf-8")
    assert re.search(r'<span class="bad" title="position \d+, step 3">63</span>', html)
    assert re.search(r'<tr class="row-first" id="outcome-0-step-3"><td class="num">3</td>', html)
    assert re.search(r'<tr class="row-amb" id="outcome-0-step-5"><td class="num">5</td>', html)
    assert 'href="#outcome-0-step-3"' in html  # the headline links to its step


def test_html_lists_ambiguous_mismatches_apart(diverged_report: ReportPaths) -> None:
    text = "".join(parse(diverged_report.index_html).text)
    assert "Ambiguous mismatches (1)" in text
    assert "within 1e-9 of a float boundary" in text and "never fails the run" in text


def test_html_escapes_tracebacks(diverged_report: ReportPaths) -> None:
    html = diverged_report.index_html.read_text(encoding="utf-8")
    assert "<script>alert" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&amp; friends" in html
    assert samples.XSS in "".join(parse(diverged_report.index_html).text)  # shown to the reader as text


def test_html_is_self_contained(diverged_report: ReportPaths, clean_report: ReportPaths) -> None:
    for paths in (diverged_report, clean_report):
        page = parse(paths.index_html)
        html = paths.index_html.read_text(encoding="utf-8")
        assert not [link for link in page.links if re.match(r"\s*(https?:)?//", link, re.I)]
        assert "http://" not in html and "https://" not in html
        assert "@import" not in html and "<link" not in html
        assert page.tags[:3] == ["html", "head", "meta"]


def test_clean_report_says_clean(clean_report: ReportPaths) -> None:
    text = "".join(parse(clean_report.index_html).text)
    assert "CLEAN" in text and "No divergences" in text
    assert "First divergence" not in text


def test_every_kind_gets_its_table(tmp_path: Path) -> None:
    paths = write([samples.every_kind_outcome()], tmp_path / "every")
    text = "".join(parse(paths.index_html).text)
    for title in ("Address", "Shape", "Seed", "Token", "Value", "Memory", "Crash", "Capture"):
        assert f"{title} divergences (1)" in text
    assert "expected bucket" in text and "HostSyncError" in text
    assert "3.02 MiB (3,170,304 B)" in text  # memory values in bytes, readable


def test_absent_kinds_have_no_table(clean_report: ReportPaths, diverged_report: ReportPaths) -> None:
    assert "divergences (" not in "".join(parse(clean_report.index_html).text)
    text = "".join(parse(diverged_report.index_html).text)
    assert "Seed divergences" not in text and "Memory divergences" not in text


def test_several_outcomes_get_a_summary(tmp_path: Path) -> None:
    outcomes = [named(samples.clean_outcome(), "alpha"), named(samples.diverged_outcome(), "beta"),
                named(samples.clean_outcome(), "gamma")]
    paths = write(outcomes, tmp_path / "multi")
    html = paths.index_html.read_text(encoding="utf-8")
    text = "".join(parse(paths.index_html).text)
    assert "Scenarios" in text and "1 of 3 scenarios" in text
    assert 'id="outcome-1"' in html and 'href="#outcome-1"' in html
    assert "gamma: 8 steps" in text  # a clean outcome in one line
    assert Scenario.from_json(paths.scenario_json.read_text()).name == "beta"


def test_long_runs_are_capped(tmp_path: Path) -> None:
    paths = write([samples.long_outcome(500, diverge_at=450)], tmp_path / "long")
    html = paths.index_html.read_text(encoding="utf-8")
    assert len(html.encode()) < 2_000_000
    rows = re.findall(r'<tr class="row-(?:ok|first|fail|amb)"[^>]*><td class="num">(\d+)</td>', html)
    assert 100 <= len(rows) <= 200
    assert "450" in rows  # the failing step is kept beyond the cap
    assert re.search(r"… \d+ steps not shown", html)
    assert "Showing 200 of 500 steps" in "".join(parse(paths.index_html).text)


def test_custom_replay_command(tmp_path: Path) -> None:
    paths = write([samples.diverged_outcome()], tmp_path / "r", replay_command=lambda p: f"make replay FILE={p.name}")
    assert "make replay FILE=scenario.json" in paths.index_html.read_text(encoding="utf-8")


# -- JSON ---------------------------------------------------------------------

def test_divergences_json_matches(diverged_report: ReportPaths, diverged: CheckOutcome) -> None:
    doc = json.loads(diverged_report.divergences_json.read_text(encoding="utf-8"))
    assert doc["verdict"] == "divergence"
    assert doc["run"]["run_id"] == "20260509-073525" and doc["run"]["faults"] == ["rebind_cu_seqlens"]
    [out] = doc["outcomes"]
    assert out["scenario"] == diverged.scenario.name and out["clean"] is False and out["runner"] == "emulated"
    assert [(d["kind"], d["step"], d["tensor"]) for d in out["failures"]] == [
        (d.kind, d.step, d.tensor) for d in diverged.failures
    ]
    for got, want in zip(out["failures"] + out["ambiguous"], diverged.failures + diverged.ambiguous):
        for f in dataclasses.fields(Divergence):
            assert got[f.name] == jsonable(getattr(want, f.name))
        assert got["headline"] == want.headline()
    assert len(out["ambiguous"]) == 1 and out["ambiguous"][0]["ambiguous"] is True
    assert out["failures"][1]["expected"] == list(diverged.failures[1].expected)
    assert out["first"]["headline"] == diverged.first.headline()


def test_clean_divergences_json(clean_report: ReportPaths) -> None:
    doc = json.loads(clean_report.divergences_json.read_text(encoding="utf-8"))
    assert doc["verdict"] == "clean"
    assert doc["outcomes"][0]["failures"] == [] and doc["outcomes"][0]["first"] is None


def test_jsonable_numpy_and_tuples() -> None:
    value = {"a": (np.int64(3), np.float32(0.5)), 1: np.array([1, 2]), "b": float("nan"), "c": np.bool_(True)}
    got = jsonable(value)
    assert got == {"a": [3, 0.5], "1": [1, 2], "b": "nan", "c": True}
    assert type(got["a"][0]) is int
    json.dumps(got, allow_nan=False)


def test_numpy_values_in_divergences_are_written(tmp_path: Path) -> None:
    out = samples.clean_outcome()
    out.divergences = [Divergence("seed", 2, "infer_seed", "reference vs graph", np.int64(7), np.uint64(9), "r0", 0)]
    doc = json.loads(write([out], tmp_path / "np").divergences_json.read_text())
    assert doc["outcomes"][0]["failures"][0]["expected"] == 7


def test_scenario_json_round_trips(diverged_report: ReportPaths, clean_report: ReportPaths, diverged: CheckOutcome) -> None:
    text = diverged_report.scenario_json.read_text(encoding="utf-8")
    assert text == diverged.scenario.to_json()
    assert Scenario.from_json(text) == diverged.scenario
    assert Scenario.from_json(clean_report.scenario_json.read_text()) == samples.clean_outcome().scenario


# -- JUnit --------------------------------------------------------------------

def test_junit_one_failure_for_the_diverged_outcome(tmp_path: Path) -> None:
    outcomes = [named(samples.clean_outcome(), "clean-one"), named(samples.diverged_outcome(), "broken-one")]
    paths = write(outcomes, tmp_path / "j")
    suite = ET.parse(paths.junit_xml).getroot()
    assert suite.tag == "testsuite" and suite.get("name") == "graphcheck"
    assert suite.get("tests") == "2" and suite.get("failures") == "1"
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert {c.get("classname") for c in cases.values()} == {"graphcheck.cpu"}
    assert cases["clean-one"].findall("failure") == []
    [failure] = cases["broken-one"].findall("failure")
    assert failure.get("message") == outcomes[1].first.headline()
    assert samples.XSS in failure.text and "ambiguous" in failure.text


def test_write_junit_alone_survives_control_characters(tmp_path: Path) -> None:
    out = samples.diverged_outcome()
    out.divergences.append(Divergence("crash", 7, "worker", "eager vs graph", None, "died\x00\x1b[31m", detail="\x07bell"))
    path = write_junit([out], tmp_path / "ci" / "junit.xml", samples.run_info())
    suite = ET.parse(path).getroot()
    assert suite.find("testcase/failure") is not None
    assert suite.find("properties/property[@name='runner']").get("value") == "emulated"


def test_run_info_is_frozen() -> None:
    info = samples.run_info()
    with pytest.raises(dataclasses.FrozenInstanceError):
        info.seed = 1  # type: ignore[misc]
    assert isinstance(info, RunInfo)
