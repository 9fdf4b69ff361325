"""Situations: what one lockstep run reached (anywhere, and on a replayed step), the tallies over a
search, the table in every output, and the steering that makes a ``--profile ci`` run reach every
situation on a replayed step at any seed."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, find, given, settings

from graphcheck.capture.devices import resolve
from graphcheck.check.applicable import applicability
from graphcheck.check.checker import Checker, check_scenario
from graphcheck.check.records import CheckOutcome, StepRecord
from graphcheck.check.situations import (
    SITUATION_NAMES,
    SITUATIONS,
    CoverageTally,
    SituationsReached,
    involved_situations,
    merged_coverage,
    situation_table,
    situations_hit,
    situations_reached,
)
from graphcheck.cli import main
from graphcheck.cli.console import situations_table
from graphcheck.cli.progress import suite_line
from graphcheck.reference import decode
from graphcheck.report.html import replayed_share
from graphcheck.scenario import (
    SEED_MODULUS,
    AcceptOverride,
    EngineConfig,
    ReasoningChange,
    RequestSpec,
    Scenario,
    validate,
)
from graphcheck.search.fuzz import fuzz_suite, write_fuzz_summary
from graphcheck.step_result import RequestStep, StepResult
from graphcheck.suites import SUITES
from graphcheck.suites.combinations import REASONING_TOUR, STOP_KINDS, combination_scenarios, plant_stop

from _layers import fast_first

CPU = resolve("cpu")


def _request(rid: str, arrival: int = 0, max_dec_len: int = 60, **kw: Any) -> RequestSpec:
    fields: dict[str, Any] = dict(
        request_id=rid,
        arrival_step=arrival,
        prompt=(1, 2, 3),
        max_dec_len=max_dec_len,
        eos_token_ids=(63,),
        temperature=1.0,
        top_p=1.0,
        top_k=0,
        seed=7,
    )
    fields.update(kw)
    return RequestSpec(**fields)


def _run(config: EngineConfig, requests: list[RequestSpec], steps: int, accepts: tuple = ()) -> CheckOutcome:
    scenario = validate(Scenario(config, tuple(requests), accepts, steps, "t"))
    outcome = check_scenario(scenario, CPU)
    assert outcome.clean, outcome.first.headline() if outcome.first else ""
    return outcome


def _hit(config: EngineConfig, requests: list[RequestSpec], steps: int, accepts: tuple = ()) -> frozenset[str]:
    outcome = _run(config, requests, steps, accepts)
    return situations_hit(outcome.scenario, outcome)


def _with_eager(outcome: CheckOutcome, *steps: int) -> SituationsReached:
    """What ``outcome`` reached had the graph engine run ``steps`` eagerly (their records' ``used_graph``
    cleared): how the count on replayed steps moves with the one record field it reads."""
    graph = [dataclasses.replace(r, used_graph=False) if r.step in steps else r for r in outcome.records["graph"]]
    changed = dataclasses.replace(outcome, records={**outcome.records, "graph": graph})
    return situations_reached(outcome.scenario, changed)


# --------------------------------------------------------------------------- reading a run


def test_one_long_request_reaches_only_its_configuration() -> None:
    hit = _hit(EngineConfig(), [_request("r0")], 4)
    assert hit == {"scope step", "k=3", "verify target_match", "policy normal", "R equals a capture size", "top_p = 1"}


def test_configuration_situations_follow_the_config() -> None:
    config = EngineConfig(
        num_speculative_tokens=3, num_model_steps=2, verify_strategy="topp", accept_policy="reject_all"
    )
    hit = _hit(dataclasses.replace(config, graph_scope="forward"), [_request("r0")], 3)
    assert {"scope forward", "k=3", "verify topp", "policy reject_all", "top_p = 1"} <= hit
    naive = _hit(dataclasses.replace(config, naive_mode=True, capture_sizes=()), [_request("r0")], 3)
    assert "NAIVE mode" in naive and not any(n.startswith(("k=", "verify", "policy", "scope")) for n in naive)


def test_slot_reuse_is_told_apart_by_how_the_slot_was_freed_and_what_was_left() -> None:
    config = EngineConfig(max_num_seqs=1)
    finished = _request("r0", max_dec_len=2, reasoning=(ReasoningChange(0, 2),), top_k=5)
    aborted = _request("r1", arrival=1, abort_step=4, top_k=5)
    last = _request("r2", arrival=2, top_k=5)
    accepts = (AcceptOverride(1, "r0", 1),)
    hit = _hit(config, [finished, aborted, last], 7, accepts)
    assert {"slot reuse after finish", "slot reuse after abort", "leftover reasoning status"} <= hit
    assert "leftover sampling params" not in hit  # same temperature, top_p and top_k throughout


def test_leftover_override_and_sampling() -> None:
    config = EngineConfig(max_num_seqs=1)
    first = _request("r0", max_dec_len=3)
    second = _request("r1", arrival=1, temperature=0.5)
    hit = _hit(config, [first, second], 6, (AcceptOverride(1, "r0", 1),))
    assert {"leftover accept override", "leftover sampling params", "slot reuse after finish"} <= hit


def test_batch_shapes() -> None:
    past = _hit(EngineConfig(capture_sizes=(1,), max_num_seqs=3), [_request(f"r{i}") for i in range(3)], 3)
    assert "R above every capture size" in past
    above = _hit(EngineConfig(capture_sizes=(1, 4), max_num_seqs=4), [_request(f"r{i}") for i in range(2)], 3)
    assert {"R one above a capture size"} <= above and "R equals a capture size" not in above
    shrink = [_request(f"r{i}", max_dec_len=60 if i < 2 else 2, eos_token_ids=(99 % 64,)) for i in range(4)]
    shrinks = _hit(EngineConfig(capture_sizes=(1, 2, 4), max_num_seqs=4), shrink, 5)
    assert "bucket shrinks" in shrinks
    mixed = _hit(EngineConfig(), [_request("r0"), _request("r1", arrival=2)], 4)
    assert "prefill among decodes" in mixed
    gap = _hit(EngineConfig(), [_request("r0", max_dec_len=2), _request("r1", arrival=4)], 6)
    assert "all finished then arrivals" in gap


def test_seed_near_the_modulus_and_sampling_extremes() -> None:
    config = EngineConfig(verify_strategy="topp")
    near = SEED_MODULUS - config.seed_increment * 2
    hit = _hit(config, [_request("r0", seed=near, top_k=1)], 4)
    assert {"seed near the modulus", "top_k = 1", "top_p = 1"} <= hit
    greedy = _hit(EngineConfig(verify_strategy="greedy"), [_request("r0", top_k=1)], 3)
    assert "top_k = 1" not in greedy and "seed near the modulus" not in greedy


def test_the_reasoning_tour_takes_every_transition() -> None:
    tour = REASONING_TOUR + REASONING_TOUR[:1]
    changes = tuple(ReasoningChange(t, s) for t, s in enumerate(tour))
    hit = _hit(EngineConfig(), [_request("r0", reasoning=changes, eos_token_ids=(0,))], len(tour))
    assert {n for n in SITUATION_NAMES if n.startswith("reasoning")} <= hit


@pytest.mark.parametrize("kind", STOP_KINDS)
def test_a_planted_stop_reaches_its_situation(kind: str) -> None:
    config = EngineConfig(accept_policy="accept_all", num_speculative_tokens=3, num_model_steps=3)
    base = validate(Scenario(config, (_request("r0", seed=0),), (), 8, "t"))
    planted, changed = plant_stop(base, kind, 1)
    assert changed == {"r0"} and planted != base
    outcome = check_scenario(planted, CPU)
    assert outcome.clean
    assert kind in situations_hit(planted, outcome)


def test_the_limit_never_falls_inside_the_drafts() -> None:
    """The drafter skips when step_idx + S >= max_dec_len, so under accept_all a request that reaches
    its limit in a step with drafts does so on the bonus token, never inside the drafts."""
    config = EngineConfig(accept_policy="accept_all", num_speculative_tokens=3, num_model_steps=3)
    limit_stops = 0
    for limit in range(2, 14):
        scenario = validate(Scenario(config, (_request("r0", max_dec_len=limit, seed=0),), (), 8, ""))
        drafts: tuple[int, ...] = ()
        emitted = 0
        for result in decode(scenario):
            for step in result.requests:
                emitted += len(step.accept_tokens)
                if step.stopped and emitted == limit and drafts:
                    limit_stops += 1
                    assert len(step.accept_tokens) == len(drafts) + 1
                drafts = step.draft_tokens
    assert limit_stops > 0


# --------------------------------------------------------------------------- on a replayed step


def test_without_graphs_nothing_is_reached_on_a_replay() -> None:
    outcome = _run(EngineConfig(capture_sizes=()), [_request("r0")], 4)
    reached = situations_reached(outcome.scenario, outcome)
    assert {"k=3", "top_p = 1"} <= reached.anywhere and reached.replayed == frozenset()


def test_a_seed_and_a_reasoning_change_count_on_the_step_they_take_effect_in() -> None:
    config = EngineConfig()
    # Enters step 2 (a replay) within one increment of the modulus: only step 2's advance crosses it.
    seed = SEED_MODULUS - 3 * config.seed_increment
    outcome = _run(config, [_request("r0", seed=seed, reasoning=(ReasoningChange(2, 1),))], 5)
    assert all(r.used_graph for r in outcome.records["graph"][1:])
    timed = {"seed near the modulus", "reasoning 0->1"}
    assert timed <= situations_reached(outcome.scenario, outcome).replayed
    eager_at_2 = _with_eager(outcome, 2)
    assert timed <= eager_at_2.anywhere and not timed & eager_at_2.replayed
    assert "k=3" in eager_at_2.replayed  # the other steps still replay
    assert timed <= _with_eager(outcome, 3).replayed


def _handover(second: int = 2, *, prefill: int | None = 2, arrival: int = 3) -> tuple[list[RequestSpec], tuple]:
    """r0 forced 2 accepted drafts on its last step (2) and aborted at 3; r1 arrives at ``arrival``
    (into slot 0: max_num_seqs 1), forced ``prefill`` on its prefill and ``second`` on the step after."""
    accepts = [AcceptOverride(2, "r0", 2), AcceptOverride(arrival + 1, "r1", second)]
    if prefill is not None:
        accepts.append(AcceptOverride(arrival, "r1", prefill))
    requests = [_request("r0", abort_step=3), _request("r1", arrival=arrival)]
    return requests, tuple(sorted(accepts, key=lambda a: (a.step, a.request_id)))


def test_a_slot_reuse_counts_on_the_new_occupants_first_decode_step() -> None:
    requests, accepts = _handover()
    outcome = _run(EngineConfig(max_num_seqs=1), requests, 6, accepts)
    reuse = {"slot reuse after abort", "leftover accept override", "leftover host override"}
    assert [r.used_graph for r in outcome.records["graph"]] == [False, True, True, False, True, True]
    assert reuse <= situations_reached(outcome.scenario, outcome).replayed
    first_decode_eager = _with_eager(outcome, 4)  # r1's prefill (3) is eager anyway
    assert reuse <= first_decode_eager.anywhere and not reuse & first_decode_eager.replayed
    assert reuse <= _with_eager(outcome, 2, 5).replayed  # the previous occupant's steps do not matter


@pytest.mark.parametrize(
    "change",
    [{"second": 1}, {"prefill": None}, {"prefill": 1}, {"arrival": 4}],
    ids=["other count on the decode step", "prefill not forced", "other count on the prefill", "slot empty a step"],
)
def test_the_host_override_needs_the_same_count_from_the_release_on(change: dict[str, Any]) -> None:
    requests, accepts = _handover(**change)
    hit = _hit(EngineConfig(max_num_seqs=1), requests, 7, accepts)
    assert "leftover accept override" in hit and "leftover host override" not in hit


def _forget_the_host_override(monkeypatch: pytest.MonkeyPatch) -> None:
    """A release that resets the slot's device row but forgets the engine's host copy of its override."""
    from graphcheck.backends.engine.engine import Engine

    release = Engine._release

    def forgetful(self: Any, requests: Any) -> None:
        kept = self._override_host.copy()
        release(self, requests)
        self._override_host = kept

    monkeypatch.setattr(Engine, "_release", forgetful)


def test_a_release_that_forgets_the_host_override_shows_in_the_situation(monkeypatch: pytest.MonkeyPatch) -> None:
    _forget_the_host_override(monkeypatch)
    config = EngineConfig(max_num_seqs=1)
    requests, accepts = _handover()
    outcome = check_scenario(validate(Scenario(config, tuple(requests), accepts, 6, "t")), CPU)
    assert outcome.first is not None and outcome.first.step == 4  # r1's first decode step
    requests, accepts = _handover(second=1)  # not the situation: the changed count is written
    assert check_scenario(validate(Scenario(config, tuple(requests), accepts, 6, "t")), CPU).clean


def test_events_that_force_an_eager_step_count_on_the_step_after() -> None:
    config = EngineConfig(capture_sizes=(1,), max_num_seqs=3)
    short = [_request(f"r{i}", max_dec_len=2) for i in (1, 2)]  # leave after step 1, the eager fallback
    outcome = _run(config, [_request("r0"), *short], 4)
    assert [r.used_graph for r in outcome.records["graph"]] == [False, False, True, True]
    assert "R above every capture size" in situations_reached(outcome.scenario, outcome).replayed
    assert "R above every capture size" not in _with_eager(outcome, 2).replayed
    mixed = _run(EngineConfig(), [_request("r0"), _request("r1", arrival=2)], 5)
    assert "prefill among decodes" in situations_reached(mixed.scenario, mixed).replayed
    assert "prefill among decodes" not in _with_eager(mixed, 3).replayed


def test_the_handover_recipe_reaches_the_host_override_on_a_replay() -> None:
    def handover(scenario: Scenario) -> bool:
        return scenario.requests[0].abort_step is not None  # only the handover shape aborts r0

    # The first handover the recipe draws, not shrunk: shrinking it cost ten times the search.
    config = settings(
        database=None,
        derandomize=True,
        max_examples=500,
        phases=(Phase.generate,),
        suppress_health_check=list(HealthCheck),
    )
    found = find(combination_scenarios(), handover, settings=config)
    outcome = check_scenario(found, CPU)
    assert outcome.clean
    assert "leftover host override" in situations_reached(found, outcome).replayed


# --------------------------------------------------------------------------- tallies and tables


def test_tallies_add_merge_and_round_trip() -> None:
    a, b = CoverageTally(), CoverageTally()
    a.add({"k=1", "NAIVE mode"}, diverged=False)
    a.add({"k=1"}, diverged=True)
    b.add({"k=2"}, diverged=False)
    total = merged_coverage([a, b])
    assert total.examples == 3 and total.hits == {"k=1": 2, "NAIVE mode": 1, "k=2": 1}
    assert total.diverging == {"k=1": 1}
    assert CoverageTally.from_dict(json.loads(json.dumps(total.to_dict()))) == total
    assert "k=1" not in total.missing() and total.missing()[0] == SITUATION_NAMES[0]
    rows = situation_table(total, involved={"k=1"})
    assert [r.situation for r in rows] == list(SITUATIONS)
    row = next(r for r in rows if r.situation.name == "k=1")
    assert (row.examples, row.diverging_examples, row.involved) == (2, 1, True)


def test_tallies_count_the_replayed_hits_apart() -> None:
    a, b = CoverageTally(), CoverageTally()
    a.add({"k=1", "bucket shrinks"}, diverged=False, replayed={"k=1"})
    a.add_reached(SituationsReached(frozenset({"k=1"}), frozenset({"k=1"})), diverged=True)
    b.add({"k=1", "NAIVE mode"}, diverged=False, replayed={"NAIVE mode", "k=4"})  # only what it hit counts
    total = merged_coverage([a, b])
    assert total.hits == {"k=1": 3, "bucket shrinks": 1, "NAIVE mode": 1}
    assert total.replayed == {"k=1": 2, "NAIVE mode": 1}
    assert CoverageTally.from_dict(json.loads(json.dumps(total.to_dict()))) == total
    assert CoverageTally.from_dict({"examples": 1, "hits": {"k=1": 1}}).replayed == {}  # an older job's file
    assert "bucket shrinks" in total.missing_on_replay() and "bucket shrinks" not in total.missing()
    assert "k=1" not in total.missing_on_replay()
    rows = {r.situation.name: r for r in situation_table(total)}
    assert (rows["k=1"].examples, rows["k=1"].replayed_examples) == (3, 2)
    assert rows["bucket shrinks"].to_dict()["replayed_examples"] == 0
    assert rows["k=1"].to_dict()["on_replay"] == rows["k=1"].situation.on_replay


def test_every_table_shows_the_replayed_column_next_to_the_count(tmp_path: Path) -> None:
    from rich.console import Console

    from graphcheck.report.html import PageHeader, render_html
    from graphcheck.report.model import RunInfo

    tally = CoverageTally()
    tally.add({"k=1", "bucket shrinks"}, diverged=False, replayed={"k=1"})
    tally.add({"k=1"}, diverged=False)
    rows = situation_table(tally)
    console = Console(record=True, width=400, color_system=None)
    console.print(situations_table(rows))
    text = console.export_text()
    n = len(SITUATIONS)
    assert f"situations reached: 2 of {n}, on a replayed step: 1 of {n}" in text
    assert "k=1 2/1" in text and "bucket shrinks 1/0" in text and "NAIVE mode 0/0" in text
    outcome = _run(EngineConfig(), [_request("r0")], 3)
    page = render_html(
        [outcome], RunInfo("t", "cpu", "emulated"), header=PageHeader("c", "r", "s.json"), situations=rows
    )
    table = page.split('id="situation-table"', 1)[1].split("</table>", 1)[0]
    assert '<th class="num">scenarios</th><th class="num">on a replay</th>' in table
    k1 = table.split('<td class="nowrap mono">k=1</td>', 1)[1].split("</tr>", 1)[0]
    assert '<td class="num">2</td><td class="num">1</td>' in k1
    assert f"reached 2 of {n} situations that graph-capture bugs hide in, 1 of them on a replayed step" in page


def test_involved_situations_come_from_failing_outcomes_only() -> None:
    scenario = validate(Scenario(EngineConfig(), (_request("r0"),), (), 3, "t"))
    clean = check_scenario(scenario, CPU)
    assert involved_situations([clean]) == frozenset()
    failing = check_scenario(scenario, CPU, faults=["stale-padding-rows", "seed-advance-outside-graph"])
    assert not failing.clean
    assert "k=3" in involved_situations([clean, failing])


def test_a_search_tallies_every_example_and_writes_the_table(tmp_path: Path) -> None:
    suite = SUITES["padding"]
    result = fuzz_suite(
        suite.name, suite.strategy(), Checker(CPU), examples=3, seed=0, pending_path=tmp_path / "p.json"
    )
    assert result.coverage.examples == result.examples > 0
    assert sum(result.coverage.hits.values()) > 0
    write_fuzz_summary(tmp_path / "fuzz.json", [result], involved={"k=1"}, seed=0)
    data = json.loads((tmp_path / "fuzz.json").read_text())
    assert [row["situation"] for row in data["situations"]] == list(SITUATION_NAMES)
    assert data["suites"][0]["situations"] == dict(sorted(result.coverage.hits.items()))
    assert data["situations_missing"] == result.coverage.missing()
    assert next(r for r in data["situations"] if r["situation"] == "k=1")["involved"] is True
    assert 0 < sum(result.coverage.replayed.values()) <= sum(result.coverage.hits.values())
    assert data["suites"][0]["situations_replayed"] == dict(sorted(result.coverage.replayed.items()))
    assert data["situations_missing_on_replay"] == result.coverage.missing_on_replay()
    assert [r["replayed_examples"] for r in data["situations"]] == [
        result.coverage.replayed.get(name, 0) for name in SITUATION_NAMES
    ]
    # every step of the built-in engine's graph twin is counted; the padding suite replays most of them
    assert 0 < result.coverage.replayed_steps < result.coverage.graph_steps <= result.steps
    assert (data["graph_steps"], data["replayed_steps"]) == (
        result.coverage.graph_steps,
        result.coverage.replayed_steps,
    )
    assert data["suites"][0]["replayed_steps"] == result.coverage.replayed_steps
    assert f"({result.coverage.replayed_steps:,} replayed a graph)" in suite_line(result).plain


def test_replayed_steps_are_counted_from_the_graph_records_and_shown_as_a_share() -> None:
    ran = (RequestStep("r0", (1,), (), 0, 1, 1, False),)

    def record(step: int, used_graph: bool, requests: tuple = ran) -> StepRecord:
        result = StepResult(step, requests)
        return StepRecord("graph", step, result, bucket=4 if used_graph else None, used_graph=used_graph)

    outcome = CheckOutcome(validate(Scenario(EngineConfig(), (_request("r0"),), (), 4, "t")), "cpu", "emulated")
    outcome.records["graph"] = [record(0, False), record(1, True), record(2, True), record(3, False, ())]  # 3: idle
    outcome.records["eager"] = [record(0, False)] * 3  # the eager twin's steps are not the graph engine's
    tally = CoverageTally()
    tally.add_steps(outcome)
    tally = tally.merge(tally)
    assert (tally.graph_steps, tally.replayed_steps) == (6, 4)
    assert CoverageTally.from_dict(json.loads(json.dumps(tally.to_dict()))) == tally
    assert CoverageTally.from_dict({"examples": 1}).graph_steps == 0  # an older job's file
    assert replayed_share(4, 6) == "4 (66 %)" and replayed_share(0, 0) == "—"


@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(scenario=combination_scenarios())
def test_combination_scenarios_are_valid(scenario: Scenario) -> None:
    assert validate(scenario) == scenario
    assert scenario.name == "combinations"


# --------------------------------------------------------------------------- a ci run reaches every situation


def _run_ci(seed: int, out: Path, capsys: Any) -> dict[str, Any]:
    code = main(
        ["run", "--profile", "ci", "--seed", str(seed), "--database", "none", "--report-dir", str(out), "--quiet"]
    )
    printed = capsys.readouterr().out
    assert code == 0, printed
    (run_dir,) = [p for p in out.iterdir() if p.is_dir()]
    data = json.loads((run_dir / "fuzz.json").read_text())
    html = (run_dir / "index.html").read_text()
    return {"fuzz": data, "html": html, "console": printed}


@pytest.mark.parametrize("seed", fast_first(range(5), 0))
def test_a_ci_run_reaches_every_situation_on_a_replayed_step(seed: int, tmp_path: Path, capsys: Any) -> None:
    found = _run_ci(seed, tmp_path, capsys)
    assert found["fuzz"]["situations_missing"] == []
    assert found["fuzz"]["situations_missing_on_replay"] == []
    assert 'id="situation-table"' in found["html"]
    n = len(SITUATIONS) - len(applicability(Checker(resolve("cpu")).engine.capabilities).left_out)
    assert f"situations reached: {n} of {n}, on a replayed step: {n} of {n}" in found["console"]


def test_a_parallel_job_carries_its_tally() -> None:
    from graphcheck.parallel.jobs import result_from_json, result_json
    from graphcheck.search.result import SuiteResult

    tally = CoverageTally()
    tally.add({"k=2", "bucket shrinks"}, diverged=True)
    back = result_from_json(result_json(SuiteResult("padding", 3, examples=1, coverage=tally)))
    assert back.coverage == tally


# --------------------------------------------------------------------------- what an engine can reach


def test_situations_an_engine_cannot_reach_are_left_out_with_the_reason(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    from graphcheck.engines.hf_cb.capabilities import CAPABILITIES as HF_CB

    builtin = applicability(Checker(resolve("cpu")).engine.capabilities)
    assert sorted(builtin.left_out) == sorted(s.name for s in SITUATIONS if s.group == "cache")
    assert "its cache never runs out" in builtin.left_out["prefilled again"]
    hf = applicability(HF_CB)
    reachable = [s.name for s in SITUATIONS if hf.applies(s.name)]
    assert reachable == [
        "slot reuse after finish",
        "slot reuse after abort",
        "eos as first token",
        "prefill among decodes",
        "all finished then arrivals",
        "bucket shrinks",
        "NAIVE mode",
        "cache allocation failed",
        "request waits for cache",
        "request offloaded",
        "prefilled again",
    ]
    assert "no drafts" in hf.left_out["k=2"] and "greedily" in hf.left_out["top_k = 1"]
    assert "graph_scope is not its knob" in hf.left_out["scope step"]
    tally = CoverageTally()
    tally.add({"NAIVE mode", "k=2"}, diverged=False)
    rows = situation_table(tally, applicable=hf)
    assert [r.situation.name for r in rows] == reachable and "k=2" not in tally.only(hf).hits
    assert tally.missing(hf) == [name for name in reachable if name != "NAIVE mode"]
    path = tmp_path / "fuzz.json"
    write_fuzz_summary(path, [], applicable=hf)
    data = json.loads(path.read_text())
    assert len(data["situations"]) == len(reachable) and data["situations_left_out"] == dict(hf.left_out)


def test_cache_pressure_is_read_from_the_schedule() -> None:
    from graphcheck.check.pressure import pressure_events
    from graphcheck.schedule import CacheReport, Schedule, ScheduledRun

    schedules = [
        (0, Schedule((ScheduledRun("a", 8, 0, True), ScheduledRun("b", 4, 0, True)))),
        (1, Schedule((ScheduledRun("a", 1, 8, True),), cache=CacheReport(4, 0, 1, ("b",), ("b",)))),
        (2, None),
        (3, Schedule((ScheduledRun("a", 1, 9, True), ScheduledRun("b", 5, 0, True)))),
    ]
    events = [(name, tuple(steps)) for name, steps in pressure_events(schedules)]
    assert events == [
        ("cache allocation failed", (1, 2)),
        ("request waits for cache", (1, 2)),
        ("request offloaded", (1, 2)),
        ("prefilled again", (3, 4)),
    ]
