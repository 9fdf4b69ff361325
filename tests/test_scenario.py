"""Scenario: lossless JSON round trip and one clear error per malformed field."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from graphcheck.scenario import (
    SEED_MODULUS,
    AcceptOverride,
    EngineConfig,
    RequestSpec,
    Scenario,
    ScenarioError,
    load_scenario,
    validate,
)
from graphcheck.strategies import scenarios


def _base() -> dict:
    return {
        "config": {"num_speculative_tokens": 3, "num_model_steps": 2, "vocab_size": 64},
        "requests": [
            {
                "request_id": "a",
                "arrival_step": 0,
                "prompt": [1, 2, 3],
                "max_dec_len": 10,
                "eos_token_ids": [2],
                "temperature": 0.7,
                "top_p": 0.9,
                "top_k": 5,
                "seed": SEED_MODULUS - 1,
                "reasoning": [{"step": 3, "status": 1}],
                "abort_step": 9,
            }
        ],
        "accepts": [{"step": 1, "request_id": "a", "accepted": 2}],
        "num_steps": 12,
    }


def _error(data: object) -> ScenarioError:
    with pytest.raises(ScenarioError) as info:
        Scenario.from_dict(data)
    return info.value


@given(scenarios())
def test_json_round_trip_is_lossless(scenario: Scenario) -> None:
    text = scenario.to_json()
    again = Scenario.from_json(text)
    assert again == scenario
    assert again.to_json() == text


@given(scenarios())
def test_generated_scenarios_are_valid(scenario: Scenario) -> None:
    assert validate(scenario) == scenario


def test_dict_round_trip_keeps_every_field() -> None:
    scenario = Scenario.from_dict(_base())
    spec = scenario.requests[0]
    assert spec.seed == SEED_MODULUS - 1
    assert spec.reasoning[0].status == 1
    assert spec.abort_step == 9
    assert scenario.accepts == (AcceptOverride(1, "a", 2),)
    assert scenario.config.num_model_steps == 2
    assert Scenario.from_json(scenario.to_json()) == scenario


@pytest.mark.parametrize(
    "path, value, field, words",
    [
        (("config", "num_speculative_tokens"), 9, "config.num_speculative_tokens", "[1, 5]"),
        (("config", "num_model_steps"), 4, "config.num_model_steps", "[1, 3]"),
        (("config", "verify_strategy"), "fast", "config.verify_strategy", "greedy"),
        (("config", "graph_scope"), 3, "config.graph_scope", "forward"),
        (("config", "capture_sizes"), [1, 1], "config.capture_sizes", "distinct"),
        (("config", "capture_sizes"), [0], "config.capture_sizes[0]", "[1, 512]"),
        (("config", "naive_mode"), "yes", "config.naive_mode", "true or false"),
        (("config", "max_num_seqs"), True, "config.max_num_seqs", "integer"),
        (("requests", 0, "top_p"), 0.0, "requests[0].top_p", "(0.0, 1.0]"),
        (("requests", 0, "top_p"), float("nan"), "requests[0].top_p", "(0.0, 1.0]"),
        (("requests", 0, "temperature"), 0.0, "requests[0].temperature", "[0.05, 10.0]"),
        (("requests", 0, "prompt"), [], "requests[0].prompt", "1 to"),
        (("requests", 0, "prompt"), [1, 64], "requests[0].prompt[1]", "[0, 63]"),
        (("requests", 0, "eos_token_ids"), [], "requests[0].eos_token_ids", "1 to 8"),
        (("requests", 0, "seed"), SEED_MODULUS, "requests[0].seed", "must be in"),
        (("requests", 0, "max_dec_len"), 200, "requests[0].max_dec_len", "must be in"),
        (("requests", 0, "arrival_step"), 12, "requests[0].arrival_step", "[0, 11]"),
        (("requests", 0, "abort_step"), -1, "requests[0].abort_step", "[1, 12]"),
        (("requests", 0, "abort_step"), 0, "requests[0].abort_step", "[1, 12]"),
        (("requests", 0, "top_k"), 65, "requests[0].top_k", "[0, 64]"),
        (("accepts", 0, "accepted"), 4, "accepts[0].accepted", "[0, 3]"),
        (("accepts", 0, "request_id"), "zz", "accepts[0].request_id", "names no request"),
        (("num_steps",), 0, "num_steps", "[1, 10000]"),
    ],
)
def test_each_bad_field_is_named_with_its_range(path: tuple, value: object, field: str, words: str) -> None:
    data = _base()
    target = data
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    err = _error(data)
    assert err.field == field
    assert words in str(err)


def test_unknown_and_missing_fields() -> None:
    data = _base()
    data["requests"][0]["colour"] = "red"
    assert _error(data).field == "requests[0].colour"
    data = _base()
    del data["requests"][0]["prompt"]
    assert _error(data).field == "requests[0].prompt"
    assert "required" in str(_error(data))


def test_duplicate_request_ids_and_overrides() -> None:
    data = _base()
    data["requests"].append(dict(data["requests"][0]))
    assert "duplicate" in str(_error(data))
    data = _base()
    data["accepts"].append(dict(data["accepts"][0]))
    assert "second override" in str(_error(data))


def test_prompt_plus_decode_must_fit_model_len() -> None:
    data = _base()
    data["config"]["max_model_len"] = 16
    data["requests"][0]["prompt"] = [1] * 10
    data["requests"][0]["max_dec_len"] = 3
    err = _error(data)
    assert err.field == "requests[0].max_dec_len"


def test_load_scenario_reports_unreadable_files(tmp_path) -> None:
    with pytest.raises(ScenarioError, match="cannot read"):
        load_scenario(str(tmp_path / "missing.json"))
    bad = tmp_path / "bad.json"
    bad.write_bytes(b"\xff\xfe{")
    with pytest.raises(ScenarioError, match="UTF-8"):
        load_scenario(str(bad))
    good = tmp_path / "good.json"
    good.write_text(json.dumps(_base()))
    assert load_scenario(str(good)).requests[0].request_id == "a"


def test_engine_config_derived_sizes() -> None:
    cfg = EngineConfig(max_num_seqs=6, capture_sizes=(1, 2, 4, 8, 16), num_speculative_tokens=3)
    assert cfg.max_padded_reqs == 17
    assert cfg.tokens_per_request == 4
    assert cfg.seed_increment == 16
    assert EngineConfig(naive_mode=True).seed_increment == 4
    assert EngineConfig(max_num_seqs=6, capture_sizes=()).max_padded_reqs == 7


_json_leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.text(max_size=5))
_json = st.recursive(
    _json_leaf,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@given(_json)
def test_junk_json_gets_a_scenario_error_never_a_traceback(junk: object) -> None:
    try:
        Scenario.from_dict(junk)
    except ScenarioError as err:
        assert err.field and str(err)


@given(st.dictionaries(st.sampled_from(["config", "requests", "accepts", "num_steps", "x"]), _json, max_size=5))
def test_junk_in_known_places_gets_a_scenario_error(junk: dict) -> None:
    try:
        Scenario.from_dict(junk)
    except ScenarioError as err:
        assert str(err).startswith(err.field)


@given(st.text(max_size=40))
def test_junk_text_gets_a_scenario_error(text: str) -> None:
    try:
        Scenario.from_json(text)
    except ScenarioError:
        pass


def test_deeply_nested_json_is_a_clear_error() -> None:
    with pytest.raises(ScenarioError):
        Scenario.from_json("[" * 100_000 + "]" * 100_000)


def test_request_spec_fields_are_tuples() -> None:
    scenario = Scenario.from_dict(_base())
    assert isinstance(scenario.requests[0], RequestSpec)
    assert isinstance(scenario.requests[0].prompt, tuple)
