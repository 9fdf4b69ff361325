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

from graphcheck.check.diff import Divergence
from graphcheck.check.records import CheckOutcome
from graphcheck.files import write_atomic
from graphcheck.report import ReportPaths, RunInfo, default_replay_command, write_junit, write_report
from graphcheck.report.jsonout import jsonable
from graphcheck.scenario import Scenario
from graphcheck.search.result import SuiteResult

import report_samples as samples

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


def table_rows(path: Path, table_id: str) -> list[list[str]]:
    return samples.table_rows(path.read_text(encoding="utf-8"), table_id)


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
    outcomes = [
        named(samples.clean_outcome(), "alpha"),
        named(samples.diverged_outcome(), "beta"),
        named(samples.clean_outcome(), "gamma"),
    ]
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


def test_scenario_json_round_trips(
    diverged_report: ReportPaths, clean_report: ReportPaths, diverged: CheckOutcome
) -> None:
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
    out.divergences.append(
        Divergence("crash", 7, "worker", "eager vs graph", None, "died\x00\x1b[31m", detail="\x07bell")
    )
    path = write_junit([out], tmp_path / "ci" / "junit.xml", samples.run_info())
    suite = ET.parse(path).getroot()
    assert suite.find("testcase/failure") is not None
    assert suite.find("properties/property[@name='runner']").get("value") == "emulated"


def test_run_info_is_frozen() -> None:
    info = samples.run_info()
    with pytest.raises(dataclasses.FrozenInstanceError):
        info.seed = 1  # type: ignore[misc]
    assert isinstance(info, RunInfo)


# -- fuzzed suites ------------------------------------------------------------


def text_of(path: Path) -> str:
    return "".join(parse(path).text)


@pytest.fixture
def fuzzed_clean(tmp_path: Path) -> ReportPaths:
    return write(samples.builtin_outcomes(), tmp_path / "fuzzed-clean", suites=samples.clean_suite_runs())


@pytest.fixture
def fuzzed_diverged(tmp_path: Path) -> tuple[ReportPaths, list[CheckOutcome], list[SuiteResult]]:
    outcomes, suites = samples.fuzzed_divergence()
    return write(outcomes, tmp_path / "fuzzed-diverged", suites=suites), outcomes, suites


def test_clean_fuzzed_run_counts_suites_not_only_scenarios(fuzzed_clean: ReportPaths) -> None:
    text = text_of(fuzzed_clean.index_html)
    assert "7 suites fuzzed: 160 scenarios, 1,234 steps; 4 built-in scenarios checked" in text
    assert "4 scenarios clean" not in text
    assert "agreed on every step of 160 fuzzed scenarios over 7 suites and of 4 built-in scenarios" in text


def test_fuzzing_table_has_one_row_per_suite(fuzzed_clean: ReportPaths) -> None:
    header, *rows = table_rows(fuzzed_clean.index_html, "fuzz-table")
    assert header == [
        "suite",
        "scenarios",
        "steps",
        "replayed a graph",
        "seconds",
        "verdict",
        "shrink",
        "first divergence",
        "examples to first failure",
    ]
    assert [r[0] for r in rows] == [name for name, _, _ in samples.SUITE_FIGURES]
    assert rows[0] == ["addresses", "20", "150", "—", "1.50", "clean", "—", "—", "—"]
    assert rows[-1][:3] == ["lifecycle", "30", "220"]


def test_fuzzing_table_shows_the_divergence_and_links_its_scenario(fuzzed_diverged) -> None:
    paths, outcomes, suites = fuzzed_diverged
    html = paths.index_html.read_text(encoding="utf-8")
    rows = {r[0]: r for r in table_rows(paths.index_html, "fuzz-table")[1:]}
    assert rows["padding"] == [
        "padding",
        "37",
        "260",
        "—",
        "2.50",
        "divergence",
        "shrunk",
        outcomes[0].first.headline(),
        "3",
    ]
    assert '<a href="#outcome-0">padding</a>' in html
    text = text_of(paths.index_html)
    assert "7 suites fuzzed (1 diverged): 177 scenarios, 1,324 steps; 4 built-in scenarios checked" in text
    assert "DIVERGENCE" in text and "First divergence" in text


def test_fuzzing_table_names_every_shrink_state(tmp_path: Path) -> None:
    out = named(samples.diverged_outcome(), "memory/unshrunk: device lost")
    head = out.first.headline()
    out.device_error = "the device is lost"
    suites = [
        samples.suite_result("addresses", 8, 50, 0.5, coverage=samples.coverage(graph_steps=40, replayed_steps=30)),
        samples.suite_result(
            "padding", 9, 60, 0.5, samples.diverged_outcome(), interrupted=True, first_failure_at=2, reported=False
        ),
        samples.suite_result("memory", 4, 30, 0.5, out, first_failure_at=4),
    ]
    assert suites[1].headline == head
    paths = write([out], tmp_path / "states", suites=suites)
    shrink = [r[6] for r in table_rows(paths.index_html, "fuzz-table")[1:]]
    assert shrink == ["—", "interrupted", "unshrunk: device lost"]
    assert [r[3] for r in table_rows(paths.index_html, "fuzz-table")[1:]] == ["30 (75 %)", "—", "—"]
    text = text_of(paths.index_html)
    assert "smallest seen so far" in text and "poisoned the device" in text


def test_file_list_names_fuzz_json_and_summary_md(tmp_path: Path, fuzzed_clean: ReportPaths) -> None:
    def files(paths: ReportPaths) -> list[str]:
        return re.findall(r'<a href="([^"#]+)">', paths.index_html.read_text())

    assert files(fuzzed_clean) == [
        "fuzz.json",
        "index.html",
        "divergences.json",
        "scenario.json",
        "junit.xml",
        "fuzz.json",
    ]
    plain = write([samples.clean_outcome()], tmp_path / "plain")
    assert "fuzz.json" not in files(plain) and "summary.md" not in files(plain)
    (tmp_path / "plain" / "summary.md").write_text("# summary\n")
    (tmp_path / "plain" / "fuzz.json").write_text("{}\n")
    again = write([samples.clean_outcome()], tmp_path / "plain")
    assert files(again)[-2:] == ["fuzz.json", "summary.md"]
    later = write([samples.clean_outcome()], tmp_path / "later", extra_files=["summary.md"])
    assert files(later)[-1] == "summary.md"


def test_without_suites_the_page_is_as_before(clean_report: ReportPaths) -> None:
    html = clean_report.index_html.read_text(encoding="utf-8")
    assert 'id="fuzzing"' not in html and "suites fuzzed" not in html
    assert "1 scenario clean" in text_of(clean_report.index_html)


def test_junit_one_testcase_per_suite_and_per_other_outcome(fuzzed_diverged) -> None:
    paths, outcomes, suites = fuzzed_diverged
    root = ET.parse(paths.junit_xml).getroot()
    cases = root.findall("testcase")
    assert root.get("tests") == str(len(cases)) == str(7 + 4)
    assert root.get("failures") == "1"
    suite_cases = [c for c in cases if c.get("classname") == "graphcheck.cpu.suites"]
    assert [c.get("name") for c in suite_cases] == [s.suite for s in suites]
    assert [c.get("name") for c in cases if c.get("classname") == "graphcheck.cpu"] == [
        f"builtin/demo-{m}" for m in samples.BUILTIN_MODES
    ]
    assert "padding/shrunk" not in [c.get("name") for c in cases]  # reported once, as the suite's failure
    padding = next(c for c in suite_cases if c.get("name") == "padding")
    assert padding.get("time") == "2.500"
    [failure] = padding.findall("failure")
    assert failure.get("message") == outcomes[0].first.headline() and failure.get("type") == "address"
    assert samples.XSS in failure.text and "shrunk" in failure.text
    props = {p.get("name"): p.get("value") for p in padding.findall("properties/property")}
    assert props == {
        "examples": "37",
        "steps": "260",
        "first_failure_at": "3",
        "shrink": "shrunk",
        "scenario": "padding/shrunk",
    }
    assert "37 scenarios, 260 steps" in padding.find("system-out").text
    assert all(not c.findall("failure") for c in cases if c is not padding)


def test_junit_clean_fuzzed_run_counts_every_suite(fuzzed_clean: ReportPaths) -> None:
    root = ET.parse(fuzzed_clean.junit_xml).getroot()
    assert root.get("tests") == "11" and root.get("failures") == "0"


def test_write_junit_alone_takes_suites(tmp_path: Path) -> None:
    outcomes, suites = samples.fuzzed_divergence()
    path = write_junit(outcomes, tmp_path / "ci" / "junit.xml", samples.run_info(), suites=suites)
    root = ET.parse(path).getroot()
    assert root.get("tests") == "11" and root.get("failures") == "1"


def test_junit_suite_whose_scenario_is_not_reported_still_fails(tmp_path: Path) -> None:
    """-j N: two seeds of padding diverged; only the smaller scenario is an outcome."""
    outcomes, suites = samples.fuzzed_divergence()
    found = samples.localised_outcome()
    other = dataclasses.replace(suites[1], label="padding seed 2", outcomes=(found,), reported=False)
    suites = [suites[1], other]
    root = ET.parse(write(outcomes, tmp_path / "j", suites=suites).junit_xml).getroot()
    assert root.get("tests") == "6" and root.get("failures") == "2"
    [failure] = root.findall("testcase[@name='padding seed 2']/failure")
    assert failure.get("message") == found.first.headline() and "not in this report" in failure.text


def test_divergences_json_lists_the_suites(fuzzed_diverged) -> None:
    paths, outcomes, suites = fuzzed_diverged
    doc = json.loads(paths.divergences_json.read_text(encoding="utf-8"))
    assert doc["verdict"] == "divergence" and len(doc["outcomes"]) == 5
    assert [s["suite"] for s in doc["suites"]] == [s.suite for s in suites]
    padding = doc["suites"][1]
    assert padding == {
        "suite": "padding",
        "examples": 37,
        "steps": 260,
        "elapsed_s": 2.5,
        "clean": False,
        "shrink": "shrunk",
        "first": outcomes[0].first.headline(),
        "first_failure_at": 3,
        "scenario_name": "padding/shrunk",
        "situations_reached": 21,
        "situations_replayed": 17,
        "graph_steps": 0,
        "replayed_steps": 0,
        "outcome": 0,
    }
    assert doc["suites"][0]["outcome"] is None
    plain = json.loads(
        write([samples.clean_outcome()], paths.index_html.parent.parent / "plain").divergences_json.read_text()
    )
    assert plain["suites"] == []


# -- text no encoding can carry ----------------------------------------------


def hostile_outcome() -> CheckOutcome:
    """A scenario named by a lone surrogate, a request id with Rich markup and a GitHub workflow command."""
    out = samples.diverged_outcome()
    rid = "r0[/x]\n::error::x"
    scenario = out.scenario
    requests = tuple(dataclasses.replace(r, request_id=rid) if r.request_id == "r0" else r for r in scenario.requests)
    accepts = tuple(dataclasses.replace(a, request_id=rid) if a.request_id == "r0" else a for a in scenario.accepts)
    out = samples.outcome_for(
        dataclasses.replace(scenario, name="\ud800", requests=requests, accepts=accepts), faults=out.faults
    )
    out.divergences = [
        Divergence("token", 3, "accept_tokens", "eager vs graph", (1, 2), (63,), rid, 0, detail="\udcff bad bytes"),
        Divergence("crash", 4, "engine.step", "eager vs graph", "ok", "RuntimeError", detail="\ud800\n::error::x"),
    ]
    return out


@pytest.mark.parametrize("fuzzed", [False, True], ids=["outcome", "suite"])
def test_unencodable_text_still_gives_every_file(tmp_path: Path, fuzzed: bool) -> None:
    out = hostile_outcome()
    suites = [samples.suite_result("\ud800", 1, 4, 0.1, out, first_failure_at=1)] if fuzzed else []
    paths = write([out], tmp_path / "hostile", **({"suites": suites} if fuzzed else {}))
    for path in (paths.index_html, paths.divergences_json, paths.scenario_json, paths.junit_xml):
        assert path.stat().st_size > 0, path.name
        path.read_bytes().decode("utf-8")  # strict: valid UTF-8
    page = parse(paths.index_html)
    text = "".join(page.text)
    assert "\\ud800" in text and "r0[/x]" in text and "DIVERGENCE" in text
    assert page.tags[:3] == ["html", "head", "meta"] and "footer" in page.tags  # the page is whole
    doc = json.loads(paths.divergences_json.read_text(encoding="utf-8"))
    assert doc["outcomes"][0]["scenario"] == "\ud800"  # JSON keeps the very string (as an escape)
    # exactly the scenario (which graphcheck replay may refuse to load: names must be printable)
    assert json.loads(paths.scenario_json.read_text(encoding="utf-8")) == json.loads(out.scenario.to_json())
    root = ET.parse(paths.junit_xml).getroot()
    assert root.get("tests") == "1" and root.find("testcase/failure") is not None
    assert root.find("testcase").get("name") == "\\ud800"


def test_report_files_are_replaced_atomically(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    paths = write([samples.clean_outcome()], tmp_path / "atomic")
    before = {p: p.read_bytes() for p in tmp_path.joinpath("atomic").iterdir()}

    def fail(*args: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr("os.fsync", fail)
    with pytest.raises(OSError, match="disk full"):
        write([samples.diverged_outcome()], tmp_path / "atomic")
    assert {p: p.read_bytes() for p in tmp_path.joinpath("atomic").iterdir()} == before  # no half file, no temp left
    monkeypatch.undo()
    write_atomic(paths.index_html, "\ud800 ok")
    assert paths.index_html.read_bytes() == b"\\ud800 ok"


def test_write_atomic_overwrites_in_place_where_the_folder_refuses_new_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    target = tmp_path / "junit.xml"
    target.write_text("old")
    real_open = os.open

    def no_new_files(path: object, flags: int, *args: object) -> int:
        if flags & os.O_CREAT:
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, flags, *args)

    monkeypatch.setattr(os, "open", no_new_files)
    write_atomic(target, "new")
    assert target.read_text() == "new"
    with pytest.raises(PermissionError):
        write_atomic(tmp_path / "absent.xml", "x")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["junit.xml"]


# -- where it first diverged (the outcome's localisation) ----------------------

GITHUB_LINK_VARS = ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_SHA")


@pytest.fixture
def no_github_links(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in GITHUB_LINK_VARS:
        monkeypatch.delenv(name, raising=False)


def where_rows(html: str, anchor: str = "outcome-0") -> dict[str, str]:
    return {row[0]: row[1] for row in samples.table_rows(html, f"{anchor}-where-table")}


def test_html_where_it_first_diverged_sits_above_the_kind_tables(tmp_path: Path, no_github_links: None) -> None:
    paths = write([samples.localised_outcome()], tmp_path / "where")
    html = paths.index_html.read_text(encoding="utf-8")
    where = html.index('<section class="where" id="outcome-0-where">')
    assert html.index('id="outcome-0"') < where
    for later in ('id="outcome-0-timeline"', 'id="outcome-0-address"', 'id="outcome-0-token"', 'class="toks"'):
        assert where < html.index(later), later
    assert "Where it first diverged" in text_of(paths.index_html)
    # the run's headline card points down to it
    card = html[html.index('id="outcome-0-headline"') : html.index('id="replay"')]
    assert '<a href="#outcome-0-where"><code>target_forward</code></a>' in card


def test_html_where_section_shows_every_field_escaped(tmp_path: Path, no_github_links: None) -> None:
    loc = samples.LOCALISATION
    paths = write([samples.localised_outcome()], tmp_path / "where")
    html = paths.index_html.read_text(encoding="utf-8")
    rows = where_rows(html)
    assert rows == {
        "kernel": "target_forward",
        "position in the step": "kernel 2 of 12 of step 3 (graph engine) · inside graph #1 (target/4)",
        "step": "3",
        "found by": "kernel trace",
        "argument": "buf.slot_mapping (buffer slot_mapping)",
        "reason": loc.reason,
        "rows": "4, 5",
        "expected (eager)": "padding <sink> & co",
        "actual (graph)": "[19, 20]",
        "request / slot": "r0 / 0",
        "source": "backends/engine/forward.py:72",
        "called from": "Engine._run_graph (backends/engine/engine.py:493)",
    }
    assert loc.headline() in text_of(paths.index_html)
    assert "<script>alert" not in html and "<sink>" not in html
    assert "padding &lt;sink&gt; &amp; co" in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    # outside GitHub Actions the source line is text, not a link: the page stays self-contained
    assert "<code>backends/engine/forward.py:72</code>" in html
    assert "https://" not in html and "http://" not in html and "file://" not in html


#: Every bidi embedding, override, isolate and mark, and a zero-width joiner: format characters (Cf).
BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u200d"


def test_bidi_and_other_format_characters_reach_the_page_as_visible_escapes(tmp_path: Path) -> None:
    """A name can hold U+202E (the rest of its line reads backwards); the page shows it as ``\\u202e``."""
    import unicodedata

    out = named(samples.diverged_outcome(), f"padding{BIDI}/shrunk")
    head = out.first.headline()
    suites = [samples.suite_result(f"padding{BIDI}", 9, 60, 0.5, out, first_failure_at=2)]
    assert suites[0].headline == head
    info = samples.run_info(faults=(f"rebind{BIDI}",), engine=f"pkg.mod:Engine{BIDI}")
    paths = write_report([out], tmp_path / "bidi", command=COMMAND, run_info=info, suites=suites)
    html = paths.index_html.read_text(encoding="utf-8")
    assert [c for c in html if unicodedata.category(c) == "Cf"] == []
    escaped = "".join(f"\\u{ord(c):04x}" for c in BIDI)
    text = text_of(paths.index_html)
    assert f"padding{escaped}/shrunk" in text and f"rebind{escaped}" in text
    assert "\n" in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html  # line breaks and escaping stay


def test_html_where_section_links_the_source_to_the_commit_on_github(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_SERVER_URL", "https://github.com/")
    monkeypatch.setenv("GITHUB_REPOSITORY", "acme/engine")
    monkeypatch.setenv("GITHUB_SHA", "0123abcd")
    html = write([samples.localised_outcome()], tmp_path / "gh").index_html.read_text(encoding="utf-8")
    section = html[html.index('id="outcome-0-where"') :]
    assert (
        '<a class="mono" href="https://github.com/acme/engine/blob/0123abcd/backends/engine/forward.py#L72">'
        "backends/engine/forward.py:72</a>"
    ) in section
    assert 'href="https://github.com/acme/engine/blob/0123abcd/backends/engine/engine.py#L493"' in section


def test_html_where_section_links_an_absolute_path_as_a_file_and_refuses_odd_servers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_SERVER_URL", "javascript:alert(1)//")
    monkeypatch.setenv("GITHUB_REPOSITORY", "acme/engine")
    monkeypatch.setenv("GITHUB_SHA", "0123abcd")
    absolute = tmp_path / "my engine" / "kernels.py"
    loc = dataclasses.replace(samples.LOCALISATION, source_file=str(absolute), source_line=9, caller=None)
    html = write([samples.localised_outcome(loc)], tmp_path / "abs").index_html.read_text(encoding="utf-8")
    assert f'href="{absolute.as_uri()}#L9"' in html and "%20" in absolute.as_uri()
    assert "javascript:" not in html
    assert where_rows(html)["source"] == f"{absolute}:9"
    assert "called from" not in where_rows(html)  # no caller, no row
    relative = write([samples.localised_outcome()], tmp_path / "rel").index_html.read_text(encoding="utf-8")
    assert "<code>backends/engine/forward.py:72</code>" in relative  # the server is no http(s) URL: no link


def test_html_where_section_leaves_out_what_the_localisation_lacks(tmp_path: Path, no_github_links: None) -> None:
    from graphcheck.check.records import Localisation

    bare = Localisation(step=3, method="unavailable", reason="the kernel trace could not be completed: boom")
    html = write([samples.localised_outcome(bare)], tmp_path / "bare").index_html.read_text(encoding="utf-8")
    assert where_rows(html) == {
        "kernel": "—",
        "step": "3",
        "found by": "unavailable",
        "reason": "the kernel trace could not be completed: boom",
    }
    assert "No kernel named" in html


def test_html_without_a_localisation_has_no_where_section(diverged_report: ReportPaths, clean_report: ReportPaths):
    for paths in (diverged_report, clean_report):
        html = paths.index_html.read_text(encoding="utf-8")
        assert 'class="where"' not in html and "Where it first diverged" not in html


def test_html_where_sections_of_several_outcomes(tmp_path: Path, no_github_links: None) -> None:
    outcomes = [named(samples.clean_outcome(), "alpha"), named(samples.localised_outcome(), "beta")]
    clean_with_stale_localisation = named(samples.clean_outcome(), "gamma")
    clean_with_stale_localisation.localisation = samples.LOCALISATION  # a clean outcome shows none
    html = write([*outcomes, clean_with_stale_localisation], tmp_path / "multi").index_html.read_text()
    assert where_rows(html, "outcome-1")["kernel"] == "target_forward"
    assert html.count('<section class="where"') == 1


def test_value_sources_name_what_the_values_compare() -> None:
    from graphcheck.report.localisation import value_sources

    loc = samples.LOCALISATION
    hygiene = Divergence("state", 2, "infer_seed", "slot hygiene (graph engine)", 0, 77, "r1", 1)
    assert value_sources(dataclasses.replace(loc, expected=0, actual=77), hygiene) == ("idle value", "graph engine")
    assert value_sources(loc, hygiene) == ("eager", "graph")  # the kernel trace's own values
    reference = Divergence("token", 2, "accept_tokens", "reference vs graph", [1], [2], "r0", 0)
    assert value_sources(dataclasses.replace(loc, method="reference", expected=[1], actual=[2]), reference) == (
        "reference",
        "graph",
    )
    assert value_sources(dataclasses.replace(loc, method="reference"), None) == ("reference", "eager and graph")
    address = Divergence("address", 3, "cu_seqlens", "captured vs current", 1, 2)
    assert value_sources(dataclasses.replace(loc, method="graph inputs", expected=1, actual=2), address) == (
        "captured",
        "current",
    )


def test_state_divergences_get_their_table_and_slot_hygiene_its_labels(tmp_path: Path) -> None:
    out = samples.clean_outcome()
    out.divergences = [
        Divergence(
            "state",
            2,
            "infer_seed",
            "slot hygiene (graph engine)",
            0,
            77,
            "r1",
            1,
            detail="free slot 1 of infer_seed holds a non-idle value; left by request r1",
        ),
        Divergence("state", 2, "draft_tokens", "eager vs graph", [6, 15], [14, 9], "r0", 0, detail="row 0"),
        Divergence("token", 3, "accept_tokens", "eager vs graph", [6], [14], "r0", 0),
    ]
    paths = write([out], tmp_path / "state")
    html = paths.index_html.read_text(encoding="utf-8")
    text = text_of(paths.index_html)
    assert "State divergences (2)" in text and "slot hygiene" in text
    assert html.index('id="outcome-0-state"') < html.index('id="outcome-0-token"')  # the cause first
    assert 'href="#outcome-0-state">state × 2</a>' in html
    card = html[html.index('id="outcome-0-headline"') : html.index('id="replay"')]
    assert "<th>expected (idle value)</th>" in card and "<th>actual (graph engine)</th>" in card
    assert re.search(r'<tr class="row-first" id="outcome-0-step-2">.*?<td>state</td></tr>', html, re.S)


def test_divergences_json_carries_the_localisation(tmp_path: Path) -> None:
    from graphcheck.check.records import Localisation

    loc = samples.LOCALISATION
    paths = write([samples.localised_outcome(), samples.clean_outcome()], tmp_path / "json")
    doc = json.loads(paths.divergences_json.read_text(encoding="utf-8"))
    assert doc["format"] == 2
    got = doc["outcomes"][0]["localisation"]
    assert got == {
        **{f.name: jsonable(getattr(loc, f.name)) for f in dataclasses.fields(Localisation)},
        "headline": loc.headline(),
        "target": "target_forward / slot_mapping",
    }
    assert got["rows"] == [4, 5] and got["source_file"] == "backends/engine/forward.py" and got["source_line"] == 72
    assert got["caller"] == "Engine._run_graph" and got["caller_line"] == 493
    assert doc["outcomes"][1]["localisation"] is None  # clean
    plain = json.loads(write([samples.diverged_outcome()], tmp_path / "plain").divergences_json.read_text())
    assert plain["outcomes"][0]["localisation"] is None  # diverged, not localised


def test_junit_failure_text_says_where_it_began(tmp_path: Path) -> None:
    out = samples.localised_outcome()
    root = ET.parse(write([out], tmp_path / "j").junit_xml).getroot()
    [failure] = root.findall("testcase/failure")
    assert failure.get("message") == out.first.headline()
    lines = failure.text.splitlines()
    assert lines[:2] == [out.first.headline(), f"where: {samples.LOCALISATION.headline()}"]

    outcomes, suites = samples.fuzzed_divergence()
    outcomes[0].localisation = samples.LOCALISATION
    root = ET.parse(write(outcomes, tmp_path / "suites", suites=suites).junit_xml).getroot()
    [failure] = root.findall("testcase[@name='padding']/failure")
    assert f"where: {samples.LOCALISATION.headline()}" in failure.text


def test_fuzz_json_says_where_each_suite_diverged(tmp_path: Path) -> None:
    from graphcheck.search.fuzz import write_fuzz_summary

    results = [
        samples.suite_result("padding", 12, 80, 1.5, samples.localised_outcome(), first_failure_at=3),
        samples.suite_result("seeds", 4, 30, 0.5, samples.diverged_outcome(), first_failure_at=2),
        samples.suite_result("addresses", 8, 50, 0.5),
    ]
    write_fuzz_summary(tmp_path / "fuzz.json", results, seed=0)
    entries = json.loads((tmp_path / "fuzz.json").read_text())["suites"]
    assert [e["where"] for e in entries] == [samples.LOCALISATION.headline(), None, None]
    assert entries[0]["first"] == samples.diverged_outcome().first.headline()


# -- a float run's noise ------------------------------------------------------


def _float_outcome(drift_at: int | None = None) -> CheckOutcome:
    from graphcheck.check.noise import Calibration, NumericTrace

    outcome = samples.clean_outcome()
    cal = Calibration("float32", 1.8e-7, 2.9e-6, compared=12)
    steps = tuple((t, 0.0 if t < 2 else 4e-7 * t, t % 3 != 0) for t in range(8))
    if drift_at is not None:
        steps += ((drift_at, 5e-6, True),)
    outcome.numeric = NumericTrace(cal, steps)
    return outcome


def test_a_float_runs_noise_is_plotted_against_its_band(tmp_path: Path) -> None:
    paths = write([_float_outcome(drift_at=8)], tmp_path / "float")
    html = paths.index_html.read_text(encoding="utf-8")
    assert "Float differences, eager vs graph" in html
    assert "measured noise floor 1.8e-07" in html and "band 2.9e-06" in html and "largest difference" in html
    svg = html[html.index('<svg class="noise chart"') : html.index("</svg>")]
    assert svg.count("<circle") == 9 and svg.count('class="rep over"') == 1, "one step over the band"
    assert svg.count('<circle class="eag') == 3 and "band 2.9e-06" in svg and "floor 1.8e-07" in svg
    out = json.loads(paths.divergences_json.read_text(encoding="utf-8"))["outcomes"][0]["numeric"]
    assert (out["floor"], out["band"], out["ceiling"], out["largest"]) == (1.8e-7, 2.9e-6, 1e-3, 5e-6)
    assert out["steps"][2] == [2, 8e-7, True]


def test_the_exact_model_has_no_noise_section(clean_report: ReportPaths) -> None:
    assert "Float differences" not in clean_report.index_html.read_text(encoding="utf-8")
    assert json.loads(clean_report.divergences_json.read_text(encoding="utf-8"))["outcomes"][0]["numeric"] is None


def test_fuzz_json_keeps_the_calibration_and_the_largest_difference(tmp_path: Path) -> None:
    from graphcheck.check.noise import NumericTally
    from graphcheck.search.fuzz import write_fuzz_summary

    tallies = [NumericTally(), NumericTally()]
    tallies[0].add(_float_outcome().numeric)
    tallies[1].add(_float_outcome(drift_at=9).numeric)
    results = [samples.suite_result(f"s{i}", 3, 10, 0.5, numeric=t) for i, t in enumerate(tallies)]
    write_fuzz_summary(tmp_path / "fuzz.json", results)
    doc = json.loads((tmp_path / "fuzz.json").read_text(encoding="utf-8"))
    assert doc["numeric"]["largest"] == 5e-6 and doc["numeric"]["examples"] == 2
    [cal] = doc["numeric"]["calibrations"]
    assert (cal["floor"], cal["band"], cal["dtype"]) == (1.8e-7, 2.9e-6, "float32")
    assert doc["suites"][0]["numeric"]["largest"] == 2.8e-6
