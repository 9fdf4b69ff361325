"""Fuzzing in batches: ``rebase`` keeps scenarios valid, and the batched search reports one scenario.

``fuzz_suite(options=SearchOptions(per_config=1, pool=None))`` is the search of one scenario per
example, as it was: the same draws as a plain seeded ``@given`` over the strategy.
"""

from __future__ import annotations

import random
from pathlib import Path

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed

from graphcheck.backends.engine import faults as fault
from graphcheck.capture.devices import resolve
from graphcheck.check.checker import Checker
from graphcheck.scenario import AcceptOverride, EngineConfig, RequestSpec, Scenario, validate
from graphcheck.search.batches import batches, rebase
from graphcheck.search.determinism import seed_only
from graphcheck.search.fuzz import SearchHooks, SearchOptions, fuzz_suite
from graphcheck.strategies import scenarios
from graphcheck.suites import SUITES

from _layers import slow

CPU = resolve("cpu")
SMALL = EngineConfig(
    max_num_seqs=2, num_speculative_tokens=1, capture_sizes=(1,), vocab_size=8, max_model_len=8, block_size=4
)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(scenario=scenarios(max_steps=8), target=scenarios(max_steps=2))
def test_rebase_gives_a_valid_scenario_on_the_new_config(scenario: Scenario, target: Scenario) -> None:
    for config in (target.config, SMALL):
        rebased = rebase(scenario, config)
        if rebased is None:
            continue
        assert rebased.config == config and validate(rebased) == rebased
        assert [r.request_id for r in rebased.requests] == [r.request_id for r in scenario.requests]
        assert rebased.num_steps == scenario.num_steps
        k = config.num_speculative_tokens
        assert all(a.accepted <= k for a in rebased.accepts)
        assert all(max(r.prompt) < config.vocab_size for r in rebased.requests)


def test_rebase_clamps_what_the_smaller_config_forbids() -> None:
    request = RequestSpec("a", 0, tuple(range(40, 60)), 50, (63,), top_k=40)
    scenario = validate(
        Scenario(
            EngineConfig(num_speculative_tokens=3, vocab_size=64, max_model_len=128),
            (request,),
            accepts=(AcceptOverride(1, "a", 3),),
            num_steps=4,
        )
    )
    rebased = rebase(scenario, SMALL)
    assert rebased is not None
    (got,) = rebased.requests
    room = SMALL.max_model_len - SMALL.tokens_per_request
    assert len(got.prompt) + got.max_dec_len <= room and got.max_dec_len >= 1
    assert all(t < SMALL.vocab_size for t in got.prompt + got.eos_token_ids) and got.top_k <= SMALL.vocab_size
    assert rebased.accepts == (AcceptOverride(1, "a", SMALL.num_speculative_tokens),)


@settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(batch=batches(scenarios(max_steps=4), 4))
def test_a_batch_shares_its_first_scenarios_config(batch: tuple[Scenario, ...]) -> None:
    assert 1 <= len(batch) <= 4
    assert {s.config for s in batch} == {batch[0].config}


def _plain_draws(strategy, seed: int, examples: int) -> list[Scenario]:
    """What a seeded ``@given`` draws from ``strategy``: the search of one scenario per example."""
    drawn: list[Scenario] = []

    def record(scenario: Scenario) -> None:
        drawn.append(scenario)

    config = settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
        phases=(Phase.generate, Phase.shrink),
    )
    test = config(hypothesis_seed(random.Random(seed).getrandbits(64))(given(strategy)(record)))
    with seed_only():  # as fuzz_suite draws (graphcheck.search.determinism)
        test()
    return drawn


def test_one_scenario_per_config_and_no_pool_is_the_old_search(tmp_path: Path) -> None:
    suite, seen = SUITES["seeds"], []
    result = fuzz_suite(
        suite.name,
        suite.strategy(),
        Checker(CPU),
        examples=4,
        seed=3,
        pending_path=tmp_path / "p.json",
        hooks=SearchHooks(on_example=lambda scenario, outcome: seen.append(scenario)),
        options=SearchOptions(per_config=1, pool=None),
    )
    assert result.outcome is None and result.examples == 4
    assert seen == _plain_draws(suite.strategy(), 3, 4)


@slow
def test_a_batched_search_reports_and_shrinks_the_diverging_scenario(tmp_path: Path) -> None:
    suite, name = SUITES["seeds"], fault.SEED_INDEXED_BY_TOKEN
    runs: list[tuple[Scenario, bool]] = []

    def search() -> object:
        runs.clear()
        return fuzz_suite(
            suite.name,
            suite.strategy(),
            Checker(CPU, faults=(name,)),
            examples=10,
            seed=0,
            pending_path=tmp_path / "p.json",
            hooks=SearchHooks(on_example=lambda scenario, outcome: runs.append((scenario, outcome.clean))),
            options=SearchOptions(per_config=4),
        )

    result = search()
    assert result.outcome is not None and not result.outcome.clean
    found = result.outcome.scenario
    assert Scenario.from_json((tmp_path / "p.json").read_text()) == found  # on disk before it ran
    assert any(s == found and not clean for s, clean in runs)  # the finding is one scenario, not the batch
    assert result.examples == len(runs) and result.first_failure_at is not None
    first_runs = list(runs)
    again = search()  # the same seed gives the same run
    assert again.outcome is not None and again.outcome.scenario == found and runs == first_runs
