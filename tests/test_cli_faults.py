"""`graphcheck run --inject FAULT` exits 1 and its report names the right kind, step and tensor.

Each fault runs through the real CLI on the cpu backend with the suite that targets it;
the same command without the fault exits 0. The report's headline must agree with a replay
of the shrunk scenario it wrote.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from graphcheck.backends.engine.faults import FAULTS
from graphcheck.cli import exitcodes, main
from graphcheck.scenario import Scenario

from _layers import fast_first  # every case is slow: tests/test_cli_hardening.py runs a fault through the CLI fast

CASES = [
    # fault, suite, kind, tensor
    ("rebind-output-offsets", "addresses", "address", "cu_seqlens_out"),
    ("naive-seed-frozen", "seeds", "seed", "infer_seed"),
    ("clone-held-per-step", "memory", "memory", "memory_bytes"),
    ("stale-padding-rows", "padding", "state", "k_cache"),
]


def _run(tmp: Path, suite: str, *extra: str) -> tuple[int, Path]:
    code = main(
        [
            "run",
            "--suite",
            suite,
            "--examples",
            "30",
            "--seed",
            "0",
            "--steps",
            "6",
            "--quiet",
            "--report-dir",
            str(tmp),
            *extra,
        ]
    )
    (run_dir,) = [p for p in tmp.iterdir() if p.is_dir()]
    return code, run_dir


@pytest.mark.parametrize("fault, suite, kind, tensor", fast_first(CASES, lambda c: False, ids=[c[0] for c in CASES]))
def test_injected_fault_is_reported_with_kind_step_and_tensor(
    tmp_path: Path, fault: str, suite: str, kind: str, tensor: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, run_dir = _run(tmp_path / "bad", suite, "--inject", fault)
    assert code == exitcodes.DIVERGENCE
    doc = json.loads((run_dir / "divergences.json").read_text())
    failing = [o for o in doc["outcomes"] if not o["clean"]]
    assert failing, doc
    first = failing[0]["failures"][0]
    assert (first["kind"], first["tensor"]) == (kind, tensor)
    where = failing[0]["localisation"]
    assert where is not None and set(FAULTS[fault].breaks) & {where["kernel"], where["buffer"], where["argument"]}
    html = (run_dir / "index.html").read_text()
    assert tensor in html and f"step {first['step']}" in html and kind in html

    # The shrunk scenario on disk reproduces the same first divergence at the same step.
    shrunk = Scenario.from_json((run_dir / "scenario.json").read_text())
    assert len(shrunk.requests) <= 3 and shrunk.num_steps <= 10
    replay_code = main(["replay", str(run_dir), "--inject", fault, "--quiet", "--report-dir", str(tmp_path / "replay")])
    assert replay_code == exitcodes.DIVERGENCE
    (replay_dir,) = [p for p in (tmp_path / "replay").iterdir() if p.is_dir()]
    again = json.loads((replay_dir / "divergences.json").read_text())["outcomes"][0]["failures"][0]
    assert (again["kind"], again["step"], again["tensor"]) == (first["kind"], first["step"], first["tensor"])

    # The same suite without the fault: a few examples show the exit code (the suites' own tests fuzz them clean).
    clean_code, _ = _run(tmp_path / "good", suite, "--examples", "3")
    assert clean_code == exitcodes.CLEAN
