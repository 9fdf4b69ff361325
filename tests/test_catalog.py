"""`graphcheck catalog`: every registered fault is caught on cpu and the clean engine stays clean.

* ``test_catalog_catches_every_fault`` is the CI gate: the real command over ALL
  faults of ``graphcheck.backends.engine.faults.FAULTS`` (so it grows as faults are added),
  with a small budget; it fails when a fault goes undetected or the clean engine
  diverges, and checks the JSON, the HTML and the shrunk scenario files.
* ``test_catalog_localises_two_faults_to_what_they_declare`` runs the real command
  over two faults with a small budget: both shrunk divergences are localised to a
  kernel, function or buffer the fault declares it breaks (``Fault.breaks``).
* The rest are fast tests of the pieces: the peer-style baseline, the budgeted
  search (with a fake checker, no engine), the summary math, the localisation
  match, the suite plan, the report writer and the console table on a synthetic
  result, and the command's usage errors.
"""

from __future__ import annotations

import dataclasses
import io
import json
import time
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from hypothesis import strategies as st

from graphcheck.backends.engine.faults import FAULTS
from graphcheck.catalog import baseline
from graphcheck.catalog import run as catalog_run
from graphcheck.catalog.baseline import BaselineResult, CaseResult, first_difference, generated_tokens, run_baseline
from graphcheck.catalog.console import FIRST_KIND_HEADER, catalog_table, print_table, totals_lines
from graphcheck.catalog.run import (
    CatalogResult,
    CatalogSettings,
    CleanResult,
    FaultResult,
    StepsToDivergence,
    localisation_matches,
    suite_plan,
    summarize,
)
from graphcheck.check.checker import check_scenario
from graphcheck.check.diff import Divergence
from graphcheck.check.records import CheckOutcome, Localisation
from graphcheck.cli import exitcodes, main
from graphcheck.report.catalog import write_catalog
from graphcheck.report.catalog_model import CatalogInfo
from graphcheck.scenario import EngineConfig, RequestSpec, Scenario
from graphcheck.search.timed_search import Detection, SearchResult, Shrunk, TimeBudget, timed_search
from graphcheck.step_result import RequestStep, StepResult
from graphcheck.suites import SUITES
from graphcheck.suites.properties import backend_from_env

from _layers import slow

#: Seconds of fuzzing per fault in CI: every fault is caught within a few seconds on cpu,
#: so this leaves room for a loaded 2-core box. Shrinking gets a short budget of its own.
CI_BUDGET_S = 60
CI_SHRINK_S = 3
#: The clean engine spends its whole budget (nothing ends its search early); whole clean ci runs
#: (tests/test_situations.py) check it at length, so the catalog's own clean search stays short.
CI_CLEAN_BUDGET_S = 10

VOID = {"meta", "br", "hr", "img", "input", "link", "wbr", "col", "area", "base", "source", "track", "embed", "param"}


class _Balance(HTMLParser):
    """Fails on a closing tag that does not match the open one; collects external links."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.external: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in VOID:
            self.stack.append(tag)
        self.external += [v or "" for k, v in attrs if k in ("src", "href") and "://" in (v or "")]

    def handle_endtag(self, tag: str) -> None:
        assert self.stack and self.stack[-1] == tag, f"</{tag}> closes <{self.stack[-1] if self.stack else None}>"
        self.stack.pop()


def assert_well_formed(path: Path) -> str:
    text = path.read_text(encoding="utf-8")
    page = _Balance()
    page.feed(text)
    page.close()
    assert page.stack == [], f"unclosed tags {page.stack}"
    assert page.external == [], "the page must be self-contained"
    return text


# ---------------------------------------------------------------------------
# The CI gate
# ---------------------------------------------------------------------------


@slow
def test_catalog_catches_every_fault(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    started = time.perf_counter()
    code = main(
        [
            "catalog",
            "--budget",
            str(CI_BUDGET_S),
            "--shrink-budget",
            str(CI_SHRINK_S),
            "--clean-budget",
            str(CI_CLEAN_BUDGET_S),
            "--seed",
            "0",
            "--quiet",
            "--report-dir",
            str(tmp_path),
        ]
    )
    folder = tmp_path / "catalog"
    doc = json.loads((folder / "catalog.json").read_text())
    missed = [f["fault"] for f in doc["faults"] if not f["detected"]]
    assert not missed, f"undetected within {CI_BUDGET_S}s: {missed}"
    assert doc["clean"]["clean"], doc["clean"]
    assert doc["settings"]["clean_budget_s"] == CI_CLEAN_BUDGET_S
    assert code == exitcodes.CLEAN and doc["passed"]
    assert [f["fault"] for f in doc["faults"]] == list(FAULTS)
    assert doc["summary"]["detected"] == doc["summary"]["faults"] == len(FAULTS)
    assert doc["summary"]["median_seconds_to_detect"] is not None
    # localisation misses are shown, not failed: only that every fault was localised somewhere is checked here
    assert doc["format"] == 2 and 0 <= doc["summary"]["localised_matching"] <= len(FAULTS)
    assert all(f["localisation"] is not None and f["declared"] for f in doc["faults"]), doc["summary"]

    assert not list(folder.glob("pending-*.json")), "a search that came back leaves no pending scenario"
    html = assert_well_formed(folder / "index.html")
    backend = backend_from_env()
    for fault in doc["faults"]:
        assert fault["fault"] in html
        first, shrunk = fault["search"]["first"], fault["search"]["shrunk"]
        assert first["seconds"] <= CI_BUDGET_S + 30 and first["examples"] >= 1
        # The shrunk scenario on disk still diverges with the fault injected, the same way.
        scenario = Scenario.from_json((folder / fault["scenario_file"]).read_text())
        assert (len(scenario.requests), scenario.num_steps) == (shrunk["requests"], shrunk["steps"])
        again = check_scenario(scenario, backend, faults=(fault["fault"],))
        assert not again.clean and again.first.kind == shrunk["kind"]
    out = capsys.readouterr().out
    assert "detection rate" in out and "baseline" in out
    print(f"catalog of {len(FAULTS)} faults: {time.perf_counter() - started:.0f}s")


@slow
def test_catalog_localises_two_faults_to_what_they_declare(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A real run over two faults: each shrunk divergence is localised to a kernel, function or buffer it declares.

    Two faults whose localisation does not depend on how far the (wall-clock) shrink got:
    even their unshrunk detections localise the same. stale-padding-rows does not qualify:
    depending on the scenario the shrink reaches it localises to target_forward / slot_mapping
    (declared), target_forward / ids or write_block_entries / k_cache (not declared).
    """
    faults = ("seed-advance-outside-graph", "warmup-state-leaks")
    # The peer-style baseline (tested on its own below) is most of a catalog's time, and says nothing here.
    monkeypatch.setattr(catalog_run, "run_baseline", lambda backend, faults=(), engine=None: BaselineResult((), 0.0))
    argv = [
        "catalog",
        "--budget",
        "10",
        "--shrink-budget",
        "3",
        "--seed",
        "0",
        "--quiet",
        "--report-dir",
        str(tmp_path),
    ]
    assert main([*argv, *(x for f in faults for x in ("--fault", f))]) == exitcodes.CLEAN
    doc = json.loads((tmp_path / "catalog" / "catalog.json").read_text())
    assert [f["fault"] for f in doc["faults"]] == list(faults)
    for fault in doc["faults"]:
        loc = fault["localisation"]
        assert loc is not None and loc["method"] != "unavailable", (fault["fault"], loc)
        assert fault["declared"] == list(FAULTS[fault["fault"]].breaks)
        assert fault["localisation_matches"] is True, (fault["fault"], loc["headline"], fault["declared"])
        steps = fault["steps_to_first_divergence"]
        assert steps["detection"] == fault["search"]["first"]["divergence"]["step"] + 1 >= 1
        assert (
            steps["shrunk"] == fault["search"]["shrunk"]["divergence"]["step"] + 1 <= fault["search"]["shrunk"]["steps"]
        )
    assert doc["summary"]["localised_matching"] == 2 and doc["summary"]["localisation_misses"] == []


# ---------------------------------------------------------------------------
# The peer-style baseline
# ---------------------------------------------------------------------------


def test_baseline_finds_nothing_on_the_clean_engine() -> None:
    result = run_baseline(backend_from_env())
    assert len(result.cases) == len(baseline.BATCH_SIZES) * len(baseline.MODES)
    assert not result.detected, result.first_failure


def test_baseline_counts_an_engine_error_as_detected(monkeypatch: pytest.MonkeyPatch) -> None:
    def crash(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("capture failed")

    monkeypatch.setattr(baseline, "_decode", crash)
    case = baseline.run_case(2, "greedy", backend_from_env())
    assert not case.passed and "RuntimeError: capture failed" in case.reason


def test_baseline_compares_generated_tokens_only() -> None:
    def step(t: int, *rows: tuple[str, tuple[int, ...], int]) -> StepResult:
        return StepResult(t, tuple(RequestStep(rid, toks, (), seed, t, t, False) for rid, toks, seed in rows))

    eager = generated_tokens([step(0, ("a", (5,), 1)), step(1, ("a", (6, 7), 2), ("b", (1,), 3))])
    assert eager == {"a": (5, 6, 7), "b": (1,)}
    # Seeds and other state may differ: a peer test never sees them.
    same = generated_tokens([step(0, ("a", (5,), 99)), step(1, ("a", (6, 7), 98), ("b", (1,), 97))])
    assert first_difference(eager, same) == ""
    assert "request a differs at token 1" in first_difference(eager, {"a": (5, 9, 7), "b": (1,)})
    assert "request b differs at token 0 (eager 1 tokens, graph 0)" in first_difference(eager, {"a": (5, 6, 7)})


def test_baseline_scenarios_are_valid_and_fit_the_engine() -> None:
    from graphcheck.scenario import validate

    for mode in baseline.MODES:
        for size in baseline.BATCH_SIZES:
            scenario = baseline.baseline_scenario(size, mode)
            assert validate(scenario) == scenario and len(scenario.requests) == size
            assert size <= scenario.config.max_num_seqs and size in scenario.config.capture_sizes


# ---------------------------------------------------------------------------
# The budgeted search (fake checker: no engine)
# ---------------------------------------------------------------------------


class _Suite:
    def __init__(self, name: str) -> None:
        self.name = name

    def strategy(self) -> Any:
        requests = st.integers(1, 6).map(lambda n: tuple(RequestSpec(f"r{i}", 0, (1, 2), 8, (0,)) for i in range(n)))
        return st.builds(lambda reqs, steps: Scenario(EngineConfig(), reqs, (), steps), requests, st.integers(2, 12))


def _outcome(scenario: Scenario, failing: bool, step: int = 1, loc: Localisation | None = None) -> CheckOutcome:
    divs = [Divergence("token", step, "accept_tokens", "eager vs graph", 1, 2)] if failing else []
    return CheckOutcome(scenario, "fake", "none", divergences=divs, localisation=loc)


def _search(check: Any, tmp_path: Path, budget: TimeBudget | None = None, draws: Any = None) -> SearchResult:
    budget = budget or TimeBudget(5.0, 5.0)
    plan = [_Suite("first"), _Suite("second")]
    pending = tmp_path / "pending.json"
    return timed_search(plan, check, budget=budget, seed="0", pending_path=pending, slice_examples=10, draws=draws)


def test_search_detects_then_shrinks_to_the_smallest(tmp_path: Path) -> None:
    seen: list[Scenario] = []

    def check(scenario: Scenario) -> CheckOutcome:
        seen.append(scenario)
        assert (tmp_path / "pending.json").read_text() == scenario.to_json()  # on disk before it runs
        return _outcome(scenario, len(scenario.requests) >= 3 and scenario.num_steps >= 5)

    result = _search(check, tmp_path)
    assert result.detected and result.shrunk is not None and result.shrunk.complete
    det = result.detection
    assert det.examples == result.examples and det.kind == "token"
    assert seen.index(det.outcome.scenario) == det.examples - 1  # examples count up to detection only
    assert result.shrunk.size == (3, 5)
    assert result.shrunk.examples == len(seen) - det.examples > 0


def test_search_same_seed_same_examples(tmp_path: Path) -> None:
    def run() -> list[str]:
        seen: list[str] = []

        def check(scenario: Scenario) -> CheckOutcome:
            seen.append(scenario.to_json())
            return _outcome(scenario, len(scenario.requests) == 6 and scenario.num_steps > 10)

        _search(check, tmp_path)
        return seen

    assert run() == run()


class _Clock:
    """Seconds that pass only when an example runs: a budget that does not depend on the machine."""

    def __init__(self, per_example: float) -> None:
        self.now, self.per_example = 0.0, per_example

    def __call__(self) -> float:
        return self.now

    def tick(self) -> None:
        self.now += self.per_example


def test_search_stops_at_its_budget_and_cycles_the_plan(tmp_path: Path) -> None:
    clock = _Clock(0.01)
    result = _search(lambda s: (clock.tick(), _outcome(s, False))[1], tmp_path, TimeBudget(0.6, 5.0, clock))
    assert not result.detected and result.shrunk is None
    assert result.examples == 60 and result.seconds == pytest.approx(0.6)
    assert result.suites == ("first", "second"), "a slice of 10, then the next suite, round and round"


def test_search_draws_through_the_checkers_strategy(tmp_path: Path) -> None:
    """The catalog fuzzes an engine's own options as ``graphcheck run`` does (``Checker.strategy``)."""
    marked = EngineConfig(max_num_seqs=3)

    def draws(strategy: Any) -> Any:
        return strategy.map(lambda sc: dataclasses.replace(sc, config=marked))

    seen: list[EngineConfig] = []
    result = _search(lambda s: (seen.append(s.config), _outcome(s, True))[1], tmp_path, draws=draws)
    assert result.detected and seen and all(c == marked for c in seen)


def test_search_keeps_the_best_when_the_shrink_budget_runs_out(tmp_path: Path) -> None:
    result = _search(lambda s: _outcome(s, len(s.requests) >= 2), tmp_path, TimeBudget(5.0, 0.0))
    assert result.detected and result.shrunk is not None
    assert not result.shrunk.complete and result.shrunk.examples == 0
    assert result.shrunk.outcome is result.detection.outcome


# ---------------------------------------------------------------------------
# Plan, summary and report
# ---------------------------------------------------------------------------


def test_suite_plan_targets_the_class_then_the_general_suite() -> None:
    names = lambda plan: [s.name for s in plan]  # noqa: E731
    assert names(suite_plan(3, SUITES)) == [n for n, s in SUITES.items() if 3 in s.bug_classes and n != "all"] + ["all"]
    assert names(suite_plan(8, SUITES))[-1] == "all" and "seeds" in names(suite_plan(8, SUITES))
    assert names(suite_plan(99, SUITES)) == ["all"]
    assert names(suite_plan(None, SUITES)) == list(SUITES)


def _scenario(requests: int, steps: int) -> Scenario:
    reqs = tuple(RequestSpec(f"r{i}", 0, (1, 2), 8, (0,)) for i in range(requests))
    return Scenario(EngineConfig(), reqs, (), steps, "synthetic")


#: Where a synthetic shrunk divergence began: a kernel argument that is a declared buffer.
SLOT_MAPPING = Localisation(
    step=1,
    method="kernel trace",
    reason="padding rows point at request rows",
    kernel="target_forward",
    argument="buf.slot_mapping",
    buffer="slot_mapping",
    position="kernel 2 of 12 of step 1 (graph engine)",
    where="inside graph #1 (step[4])",
    rows=(2,),
    source_file="backends/engine/forward.py",
    source_line=72,
)
#: ... and one in a kernel, called from an engine function, that f-two does not declare.
ELSEWHERE = Localisation(
    step=0,
    method="kernel trace",
    reason="the last call to write it leaves a free slot dirty",
    kernel="overwrite",
    argument="dst",
    buffer="accept_override",
    position="kernel 1 of construction (graph engine)",
    where="called directly (eager)",
    caller="Engine._warm_replay",
)


def _found(
    seconds: float,
    examples: int,
    size: tuple[int, int],
    *,
    complete: bool = True,
    steps: tuple[int, int] = (1, 1),
    loc: Localisation | None = None,
) -> SearchResult:
    first = _outcome(_scenario(4, 9), True, steps[0])
    small = _outcome(_scenario(*size), True, steps[1], loc)
    return SearchResult(
        ("padding", "all"),
        examples,
        seconds,
        Detection("padding", seconds, examples, first),
        Shrunk(small, 7, 1.5, complete),
    )


def _base(detected: bool) -> BaselineResult:
    return BaselineResult(
        (CaseResult(1, "greedy", True), CaseResult(2, "greedy", not detected, "request p1 differs")), 0.1
    )


MISSED = SearchResult(("seeds", "all"), 40, 30.0, None, None)


def _results() -> tuple[FaultResult, ...]:
    """f-one localised to a buffer it declares; f-two elsewhere; f-three not localised; f-four missed."""
    return (
        FaultResult(
            "f-one",
            1,
            "address",
            _found(1.0, 2, (1, 2), steps=(5, 1), loc=SLOT_MAPPING),
            _base(False),
            ("pack_target_inputs", "slot_mapping"),
        ),
        FaultResult(
            "f-two",
            3,
            "token",
            _found(3.0, 9, (2, 3), complete=False, steps=(2, 0), loc=ELSEWHERE),
            _base(True),
            ("bucket_for", "bucket"),
        ),
        FaultResult("f-three", 8, "seed", _found(2.0, 4, (1, 5), steps=(7, 3)), _base(False), ("infer_seed",)),
        FaultResult("f-four", 10, "token", MISSED, _base(True), ("verify_drafts",)),
    )


def test_summary_math() -> None:
    s = summarize(_results())
    assert (s.faults, s.detected, s.baseline_detected) == (4, 3, 2)
    assert (s.rate, s.baseline_rate) == (0.75, 0.5)
    assert (s.median_seconds, s.median_examples) == (2.0, 4.0)  # over detected faults only
    assert (s.median_shrunk_requests, s.median_shrunk_steps) == (1.0, 3.0)
    empty = summarize(())
    assert (empty.rate, empty.median_seconds, empty.median_shrunk_steps) == (0.0, None, None)


def test_steps_to_first_divergence_and_their_medians() -> None:
    one, two, three, four = _results()
    # step + 1 of the first failing divergence: of the example that first failed, and of the shrunk one
    assert one.steps_to_divergence == StepsToDivergence(detection=6, shrunk=2)
    assert two.steps_to_divergence == StepsToDivergence(3, 1)
    assert four.steps_to_divergence == StepsToDivergence(None, None)  # missed: no divergence to count to
    s = summarize(_results())
    assert (s.median_steps_detection, s.median_steps_shrunk) == (6.0, 2.0)  # over detected faults: 3, 6, 8 and 1, 2, 4
    assert (summarize(()).median_steps_detection, summarize(()).median_steps_shrunk) == (None, None)


def test_a_localisation_matches_when_it_names_what_the_fault_declares() -> None:
    # the buffer (or a kernel argument's root, a kernel, the caller or its last part) is declared
    assert localisation_matches(SLOT_MAPPING, ("pack_target_inputs", "slot_mapping")) is True
    assert localisation_matches(SLOT_MAPPING, ("target_forward",)) is True
    assert localisation_matches(ELSEWHERE, ("_warm_replay",)) is True
    # an op-level call names its kernel before the op
    op_level = Localisation(0, "kernel trace", "written differently", kernel="pack_target_inputs/aten.copy_.default")
    assert localisation_matches(op_level, ("pack_target_inputs",)) is True
    # nothing it names is declared
    assert localisation_matches(SLOT_MAPPING, ("bucket_for", "bucket")) is False
    assert localisation_matches(Localisation(0, "unavailable", "the trace failed"), ("slot_mapping",)) is False
    # unknown: not localised, or nothing declared to check it against
    assert localisation_matches(None, ("slot_mapping",)) is None
    assert localisation_matches(SLOT_MAPPING, ()) is None
    one, two, three, four = _results()
    assert (one.localisation, two.localisation, three.localisation, four.localisation) == (
        SLOT_MAPPING,
        ELSEWHERE,
        None,
        None,
    )
    assert [f.localisation_matches for f in _results()] == [True, False, None, None]
    s = summarize(_results())
    assert s.localised_matching == 1 and s.localisation_misses == ("f-two", "f-three", "f-four")


def test_console_table_and_totals_show_where_each_fault_was_localised() -> None:
    from rich.console import Console

    clean = CleanResult(SearchResult(("addresses",), 30, 30.0, None, None), _base(False))
    result = CatalogResult("cpu", "fake", CatalogSettings(), _results(), clean, 1.0)
    # no terminal (a log, CI): the table at its natural width, nothing folded, the console's width kept
    console = Console(width=120, record=True, color_system=None, file=io.StringIO())
    print_table(console, catalog_table(result))
    assert console.width == 120
    text = console.export_text()
    rows = {line.split("│")[1].strip(): line for line in text.splitlines() if line.count("│") > 5}
    assert FIRST_KIND_HEADER == "first kind (state diff on)" and FIRST_KIND_HEADER in text
    cells = lambda name: [c.strip() for c in rows[name].split("│")[1:-1]]  # noqa: E731
    header = [c.strip() for c in text.splitlines()[2].split("┃")[1:-1]]
    col = {name: header.index(name) for name in ("localised to (shrunk)", "declared", "steps to first div")}
    assert cells("f-one")[col["localised to (shrunk)"]] == "target_forward / slot_mapping"
    assert [cells(f)[col["declared"]] for f in ("f-one", "f-two", "f-three", "f-four")] == ["yes", "no", "—", "—"]
    assert [cells(f)[col["steps to first div"]] for f in ("f-one", "f-two", "f-four")] == ["6", "3", "—"]
    assert cells("clean engine")[col["localised to (shrunk)"]] == "—"
    lines = totals_lines(result)
    localised = next(line for line in lines if line.startswith("localised to the declared kernel/buffer: 1/4"))
    assert "f-two (localised to overwrite / accept_override, kernel trace)" in localised
    assert "f-three (not localised)" in localised and "f-four (not detected)" in localised
    assert "median steps to first divergence: 6 (detection), 2 (shrunk)" in lines
    assert lines[-1].startswith("[bold red]FAIL")  # f-four was missed


def test_passed_needs_every_fault_and_a_clean_engine() -> None:
    clean = CleanResult(SearchResult(("addresses",), 30, 30.0, None, None), _base(False))
    result = CatalogResult("cpu", "fake", CatalogSettings(), _results()[:3], clean, 1.0)
    assert result.passed and result.clean.clean
    assert result.summary.localised_matching == 1  # localisation misses are shown, never failed
    assert not CatalogResult("cpu", "fake", CatalogSettings(), _results(), clean, 1.0).passed
    dirty = CleanResult(clean.search, _base(True))
    assert not dirty.clean and not CatalogResult("cpu", "fake", CatalogSettings(), _results()[:3], dirty, 1.0).passed


def test_report_files_of_a_synthetic_catalog(tmp_path: Path) -> None:
    diverged = CleanResult(_found(4.0, 11, (1, 2)), _base(False))
    result = CatalogResult("cpu", "fake engine", CatalogSettings(budget_s=30, shrink_s=3), _results(), diverged, 12.5)
    old = tmp_path / "scenarios" / "gone.json"
    old.parent.mkdir(parents=True)
    old.write_text("{}")
    paths = write_catalog(result, tmp_path, CatalogInfo("graphcheck catalog --budget 30", "2026-01-01T00:00:00+00:00"))
    doc = json.loads(paths.catalog_json.read_text())
    assert not doc["passed"] and doc["summary"]["detected"] == 3 and doc["summary"]["baseline_rate"] == 0.5
    assert [f["detected"] for f in doc["faults"]] == [True, True, True, False]
    assert doc["faults"][1]["search"]["shrunk"] == {
        **doc["faults"][1]["search"]["shrunk"],
        "requests": 2,
        "steps": 3,
        "complete": False,
    }
    assert "scenario_file" not in doc["faults"][3] and doc["settings"]["budget_s"] == 30
    assert not doc["clean"]["clean"] and doc["clean"]["search"]["first"]["kind"] == "token"
    # format 2: where each shrunk divergence began and whether the fault declares it
    assert doc["format"] == 2
    one, two, three, four = doc["faults"]
    assert one["localisation"] == {
        **one["localisation"],
        "kernel": "target_forward",
        "argument": "buf.slot_mapping",
        "buffer": "slot_mapping",
        "method": "kernel trace",
        "position": "kernel 2 of 12 of step 1 (graph engine)",
        "rows": [2],
        "source_line": 72,
        "caller": None,
        "target": "target_forward / slot_mapping",
        "headline": SLOT_MAPPING.headline(),
    }
    assert set(one["localisation"]) >= {f for f in Localisation.__dataclass_fields__}
    assert [f["localisation_matches"] for f in doc["faults"]] == [True, False, None, None]
    assert (three["localisation"], four["localisation"]) == (None, None)
    assert one["declared"] == ["pack_target_inputs", "slot_mapping"] and four["declared"] == ["verify_drafts"]
    assert one["steps_to_first_divergence"] == {"detection": 6, "shrunk": 2}
    assert four["steps_to_first_divergence"] == {"detection": None, "shrunk": None}
    assert doc["summary"]["localised_matching"] == 1
    assert doc["summary"]["localisation_misses"] == ["f-two", "f-three", "f-four"]
    assert doc["summary"]["median_steps_to_first_divergence"] == {"detection": 6, "shrunk": 2}
    assert doc["clean"]["localisation"] is None and doc["clean"]["steps_to_first_divergence"]["detection"] == 2
    assert sorted(p.name for p in paths.scenario_dir.iterdir()) == [
        "clean.json",
        "f-one.json",
        "f-three.json",
        "f-two.json",
    ]
    assert Scenario.from_json((paths.scenario_dir / "f-two.json").read_text()).num_steps == 3
    html = assert_well_formed(paths.index_html)
    for text in (
        "FAIL",
        "3 of 4 faults",
        "f-four",
        "missed",
        "diverged",
        "2 × 3",
        "cut at the shrink budget",
        "graphcheck replay",
        "--inject f-one",
        "request p1 differs",
        "first kind",
        "(state diff on)",
        "steps to first divergence",
        "target_forward / slot_mapping",
        'title="inside graph #1 (step[4])">kernel 2 of 12 of step 1 (graph engine)</span>',
        'title="declares: pack_target_inputs, slot_mapping"',
        "overwrite / accept_override",
        "not declared",
        "not localised",
        'localised to the declared kernel/buffer; misses: <span class="mono">f-two, f-three, f-four</span>',
        "median steps to first divergence: 6 (detection), 2 (shrunk)",
        "called from <code>Engine._warm_replay</code>",
    ):
        assert text in html, text


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--fault", "no-such-fault"], "unknown fault"),
        (["--budget", "0"], "--budget"),
        (["--shrink-budget", "-1"], "--shrink-budget"),
        (["--clean-budget", "nan"], "--clean-budget"),
        (["--backend", "nope"], "nope"),
    ],
)
def test_catalog_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    assert main(["catalog", "--report-dir", str(tmp_path), *argv]) == exitcodes.USAGE
    assert message in capsys.readouterr().err


@slow
def test_a_job_runs_isolated_in_its_own_process(tmp_path) -> None:
    """Real devices run each fault in a spawned process; the result comes back whole."""
    from graphcheck.capture.devices import resolve
    from graphcheck.catalog.run import CatalogSettings, _isolated

    cfg = CatalogSettings(budget_s=10, shrink_s=2)
    search = _isolated("search", "host-sync-in-capture", resolve("cpu"), cfg, tmp_path)
    assert search.detection is not None and search.detection.outcome.first.kind == "capture"
    baseline = _isolated("baseline", "host-sync-in-capture", resolve("cpu"), cfg, tmp_path)
    assert baseline.detected
