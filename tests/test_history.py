"""Findings that need the engine pair's history (``Scenario.history``, graphcheck.search.history).

The test engine (``_history_engine.KeyMemo``) keeps across ``reset()`` the batch size each graph
bucket was first replayed with; a later scenario that replays the bucket with a larger batch loses
tokens. Only a pooled pair that ran such an earlier scenario shows it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from graphcheck.capture.devices import resolve
from graphcheck.check.checker import Checker
from graphcheck.check.engines import resolve_engine
from graphcheck.check.pool import EnginePool
from graphcheck.cli import exitcodes, main
from graphcheck.scenario import EngineConfig, RequestSpec, Scenario, ScenarioError
from graphcheck.search.history import cut_steps, drop_request

HERE = Path(__file__).resolve().parent
SPEC = "_history_engine:KeyMemo"


def _scenario(n: int, name: str) -> Scenario:
    requests = tuple(RequestSpec(f"{name}{i}", 0, (1, 2, 3), 6, (63,)) for i in range(n))
    return Scenario(EngineConfig(), requests, num_steps=6, name=name)


@pytest.fixture(scope="module")
def checker() -> Checker:
    return Checker(resolve("cpu"), resolve_engine(SPEC))


def test_a_pooled_pair_records_its_history_and_a_scenario_with_history_replays_it(checker):
    small, large = _scenario(3, "small"), _scenario(4, "large")
    pooled = checker.with_pool(EnginePool())
    assert pooled.run(small).clean
    after = pooled.run(large)
    assert not after.clean and [s.name for s in after.history] == ["small"]
    assert checker.run(large).clean, "a fresh pair runs it clean: the divergence needs the history"
    chained = large.with_history([small])
    again = Scenario.from_json(chained.to_json())
    assert again == chained and again.preludes()[0].requests == small.requests
    outcome = checker.run(again)
    assert not outcome.clean and outcome.scenario.history == chained.history
    assert outcome.first.tensor == "accept_tokens" and outcome.first.step == 1


def test_a_history_is_validated_like_the_scenario_and_left_out_of_files_without_one():
    assert "history" not in json.loads(_scenario(1, "a").to_json())
    data = json.loads(_scenario(1, "a").with_history([_scenario(1, "b")]).to_json())
    data["history"][0]["requests"][0]["prompt"] = [4096]
    with pytest.raises(ScenarioError, match=r"^history\[0\]\.requests\[0\]\.prompt"):
        Scenario.from_dict(data)


def test_the_shrinker_cuts_steps_and_drops_requests_validly():
    scenario = _scenario(3, "r")
    assert cut_steps(scenario, 2).num_steps == 2
    assert [r.request_id for r in drop_request(scenario, "r1").requests] == ["r0", "r2"]
    late = Scenario(scenario.config, (RequestSpec("x", 4, (1,), 2, (63,)),), num_steps=6)
    assert cut_steps(late, 3) is None, "no request left"


def test_a_search_ends_in_a_shrunk_localised_finding_with_its_history_that_replays_in_a_fresh_process(
    tmp_path, monkeypatch
):
    monkeypatch.syspath_prepend(str(HERE))
    args = ["run", "--engine", SPEC, "--suite", "padding", "--examples", "4", "--seed", "0"]
    args += ["--database", "none", "--report-dir", str(tmp_path), "--quiet"]
    assert main(args) == exitcodes.DIVERGENCE
    (report,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    found = Scenario.from_json((report / "scenario.json").read_text())
    assert found.name == "padding/shrunk" and len(found.history) == 1
    assert len(found.requests) <= 2, "shrunk"
    divergences = json.loads((report / "divergences.json").read_text())
    first = divergences["outcomes"][0]
    assert first["localisation"] is not None
    html = (report / "index.html").read_text()
    assert '-history">History</h3>' in html
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]))
    replay = [sys.executable, "-m", "graphcheck.cli", "replay", str(report), "--report-dir", str(tmp_path / "again")]
    done = subprocess.run(replay, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == exitcodes.DIVERGENCE, done.stdout + done.stderr
    assert "after its history: 1 earlier scenario" in done.stdout
    assert "token divergence in accept_tokens" in done.stdout
