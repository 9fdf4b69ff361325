"""Situations: what one lockstep run reached, the tallies over a search, the table in every output,
and the steering that makes a ``--profile ci`` run reach every situation at any seed."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from graphcheck.backends.devices import resolve
from graphcheck.check.checker import Checker, check_scenario
from graphcheck.check.situations import (
    SITUATION_NAMES,
    SITUATIONS,
    CoverageTally,
    involved_situations,
    merged_coverage,
    situation_table,
    situations_hit,
)
from graphcheck.cli import main
from graphcheck.reference import decode
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


def _hit(config: EngineConfig, requests: list[RequestSpec], steps: int, accepts: tuple = ()) -> frozenset[str]:
    scenario = validate(Scenario(config, tuple(requests), accepts, steps, "t"))
    outcome = check_scenario(scenario, CPU)
    assert outcome.clean, outcome.first.headline() if outcome.first else ""
    return situations_hit(scenario, outcome)


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
def test_a_ci_run_reaches_every_situation(seed: int, tmp_path: Path, capsys: Any) -> None:
    found = _run_ci(seed, tmp_path, capsys)
    assert found["fuzz"]["situations_missing"] == []
    assert 'id="situation-table"' in found["html"]
    assert f"situations reached: {len(SITUATIONS)} of {len(SITUATIONS)}" in found["console"]


def test_a_parallel_job_carries_its_tally() -> None:
    from graphcheck.parallel.jobs import Job, JobResult

    tally = CoverageTally()
    tally.add({"k=2", "bucket shrinks"}, diverged=True)
    job = JobResult(Job("padding", 3), examples=1, coverage=tally)
    back = JobResult.from_json(job.to_json())
    assert back.coverage == tally and back.fuzz_result().coverage == tally
