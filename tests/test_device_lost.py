"""A device poisoned by an engine failure stops the search instead of shrinking garbage.

On a real GPU a device-side assert is sticky: every later kernel of the process
fails with it, so every shrink candidate would "fail" too. These tests stand in
for such a device with a CPU backend that reports itself non-emulated and whose
``device_error`` probe says the context is gone once an engine has failed.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from graphcheck.backends.engine.faults import HOST_SYNC_IN_CAPTURE
from graphcheck.capture.devices import Device, resolve
from graphcheck.check.checker import Checker, check_scenario
from graphcheck.search.builtin import demo_scenario
from graphcheck.search.fuzz import fuzz_suite
from graphcheck.search.timed_search import TimeBudget, timed_search
from graphcheck.suites import SUITES

STICKY = "AcceleratorError: CUDA error: device-side assert triggered"


@dataclasses.dataclass(frozen=True)
class PoisonedDevice(Device):
    """The cpu backend, posing as a device whose context an engine failure has poisoned."""

    def device_error(self) -> str | None:
        return STICKY


@dataclasses.dataclass(frozen=True)
class HealthyDevice(Device):
    def device_error(self) -> str | None:
        return None


def as_device(kind: type[Device]) -> Device:
    cpu = resolve("cpu")
    return kind(**{f.name: getattr(cpu, f.name) for f in dataclasses.fields(Device)} | {"emulated": False})


def test_the_real_probe_says_nothing_on_cpu() -> None:
    assert resolve("cpu").device_error() is None


def test_a_failure_on_a_poisoned_device_is_marked() -> None:
    scenario = demo_scenario(num_steps=3)
    outcome = check_scenario(scenario, as_device(PoisonedDevice), faults=[HOST_SYNC_IN_CAPTURE])
    assert outcome.first.kind == "capture" and outcome.device_error == STICKY
    healthy = check_scenario(scenario, as_device(HealthyDevice), faults=[HOST_SYNC_IN_CAPTURE])
    assert healthy.first.kind == "capture" and healthy.device_error is None


def test_fuzzing_stops_at_the_first_poisoning_failure_unshrunk(tmp_path: Path) -> None:
    result = fuzz_suite(
        "addresses",
        SUITES["addresses"].strategy(),
        Checker(as_device(PoisonedDevice), faults=(HOST_SYNC_IN_CAPTURE,)),
        examples=20,
        seed=0,
        pending_path=tmp_path / "pending.json",
    )
    assert result.examples == 1 and result.first_failure_at == 1
    assert result.outcome is not None and result.outcome.device_error == STICKY
    assert (tmp_path / "pending.json").exists()  # the failing scenario is on disk


def test_the_catalog_search_stops_too(tmp_path: Path) -> None:
    backend = as_device(PoisonedDevice)
    result = timed_search(
        [SUITES["addresses"]],
        lambda s: check_scenario(s, backend, faults=[HOST_SYNC_IN_CAPTURE]),
        budget=TimeBudget(search_s=30, shrink_s=10),
        seed="0",
        pending_path=tmp_path / "pending.json",
    )
    assert result.examples == 1 and result.detection is not None
    assert result.detection.outcome.device_error == STICKY and not result.shrunk.complete


def test_graphcheck_run_stops_and_reports_the_scenario_unshrunk(tmp_path: Path, monkeypatch, capsys) -> None:
    """`graphcheck run` on a device an engine failure poisoned: exit 1, one unshrunk outcome, no later checks."""
    import json

    from graphcheck import cli
    from graphcheck.capture import devices

    monkeypatch.setattr(devices, "resolve", lambda name, emulate, emulator="kernel": as_device(PoisonedDevice))
    code = cli.main(
        [
            "run",
            "--suite",
            "addresses",
            "--suite",
            "padding",
            "--inject",
            HOST_SYNC_IN_CAPTURE,
            "--examples",
            "5",
            "--database",
            "none",
            "--quiet",
            "--keep-going",
            "--report-dir",
            str(tmp_path),
        ]
    )
    assert code == 1
    out = capsys.readouterr().out
    assert "device lost" in out and "unshrunk" in out
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    fuzz = json.loads((run_dir / "fuzz.json").read_text())
    assert [s["suite"] for s in fuzz["suites"]] == ["addresses"]  # even with --keep-going, padding never ran
    assert json.loads((run_dir / "scenario.json").read_text())["name"] == "addresses/unshrunk: device lost"


def test_an_unshrunk_outcome_is_shown_in_its_suites_row_only() -> None:
    from graphcheck.cli.console import summary_table
    from graphcheck.search.fuzz import label_found
    from graphcheck.search.result import SuiteResult

    outcome = check_scenario(demo_scenario(num_steps=3), as_device(PoisonedDevice), faults=[HOST_SYNC_IN_CAPTURE])
    assert label_found(outcome, "addresses") is True
    assert outcome.scenario.name == "addresses/unshrunk: device lost"
    table = summary_table([outcome], [SuiteResult("addresses", 0, 1, 0, 0.1, (outcome,), 1)])
    assert table.row_count == 1  # the suite's row, not a second one for its outcome
