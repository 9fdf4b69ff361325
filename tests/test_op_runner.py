"""The built-in engine on the op-level graph emulator (``--emulator ops``) gives the kernel emulator's verdicts.

``resolve("cpu", emulator="ops")`` runs the engine's graphs on
``OpGraphRunner``: every aten op of a captured region is recorded and replayed,
instead of every ``@kernel`` call. Both must agree: the same scenarios clean,
and for each injected fault (tests/_fault_scenarios.py) the same first failing
divergence: kind, step and tensor. Where several static inputs of one graph go
stale in the same step, the two emulators may name them in another order (the
kernel emulator lists a graph's inputs in kernel-argument order, the op-level
one in the order ops first read them), so the tensor is compared against the
tie: every tensor of that kind diverging at that step.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from graphcheck.backends.engine.faults import FAULTS
from graphcheck.capture.devices import UnsupportedEmulator, resolve
from graphcheck.check.checker import Checker, builtin_engine, check_scenario
from graphcheck.check.records import CheckOutcome, replay_command_line
from graphcheck.cli.replay_target import recorded_run
from graphcheck.scenario import Scenario
from graphcheck.search.builtin import demo_scenario, late_joiner, shrinking_batch

from _fault_scenarios import FAULT_SCENARIOS
from _layers import fast_first

#: Faults whose comparison stays in the fast layer (one per divergence kind that is cheap to reach).
FAST_FAULTS = ("captured-temporary-freed", "unsliced-graph-output", "host-max-seq-len-baked")


@pytest.fixture(scope="module")
def kernel():
    return resolve("cpu")


@pytest.fixture(scope="module")
def ops():
    return resolve("cpu", emulator="ops")


@dataclass(frozen=True)
class FirstDivergence:
    """What must agree between the emulators: the first failure's kind and step, its tensor, and the tie."""

    kind: str
    step: int
    tensor: str
    tie: frozenset[str]  # every failing tensor of that kind at that step

    @classmethod
    def of(cls, outcome: CheckOutcome) -> FirstDivergence:
        first = outcome.first
        assert first is not None, f"{outcome.scenario.name} is clean"
        tie = frozenset(d.tensor for d in outcome.failures if (d.kind, d.step) == (first.kind, first.step))
        return cls(first.kind, first.step, first.tensor, tie)

    def agrees_with(self, other: FirstDivergence) -> bool:
        return (self.kind, self.step, self.tie) == (other.kind, other.step, other.tie) and other.tensor in self.tie


# --------------------------------------------------------------------------- the option


def test_resolve_names_the_runner(kernel, ops) -> None:
    assert ops.emulator == "ops" and ops.op_level and ops.emulated
    assert kernel.emulator == "kernel" and not kernel.op_level
    assert ops.runner_factory().name == "emulated-ops"
    assert kernel.runner_factory().name == "emulated"
    assert "op-level" in ops.description and "op-level" not in kernel.description
    assert resolve("cuda", emulate=True, emulator="ops").runner_factory().name == "emulated-ops"


@pytest.mark.parametrize(
    ("name", "emulate", "emulator", "says"),
    [
        ("cuda", False, "ops", "needs a CPU emulation"),
        ("xpu", True, "ops", "paddle"),
        ("npu", True, "ops", "NPU"),
        ("cpu", False, "fast", "unknown emulator"),
    ],
)
def test_bad_combinations_are_one_input_error(name: str, emulate: bool, emulator: str, says: str) -> None:
    with pytest.raises(UnsupportedEmulator, match=says) as err:
        resolve(name, emulate=emulate, emulator=emulator)
    assert "\n" not in str(err.value)


def test_replay_command_carries_the_emulator_only_when_ops(kernel, ops) -> None:
    assert "--emulator" not in replay_command_line("s.json", "cpu")
    assert replay_command_line("s.json", "cpu", emulator="ops").endswith("--backend cpu --emulator ops")
    assert Checker(ops, builtin_engine()).replay_command("s.json").endswith("--emulator ops")
    assert "--emulator" not in Checker(kernel, builtin_engine()).replay_command("s.json")


def test_a_report_folder_records_the_emulator(tmp_path: Path) -> None:
    path = tmp_path / "divergences.json"
    run = {"backend": "cpu", "emulate": False, "faults": []}
    path.write_text(json.dumps({"run": run}), encoding="utf-8")
    assert recorded_run(path)["emulator"] == "kernel"  # reports of the default path carry no emulator
    path.write_text(json.dumps({"run": {**run, "emulator": "ops"}}), encoding="utf-8")
    assert recorded_run(path)["emulator"] == "ops"


# --------------------------------------------------------------------------- verdict equality

CLEAN_SCENARIOS = {
    "demo": lambda: demo_scenario(num_steps=3),
    "late-joiner": lambda: late_joiner("step", num_steps=4),
    "shrinking-batch": lambda: shrinking_batch("greedy", "forward", num_steps=5),
}


@pytest.mark.parametrize("name", list(CLEAN_SCENARIOS))
def test_builtin_scenarios_are_clean_under_both_runners(name: str, kernel, ops) -> None:
    scenario = CLEAN_SCENARIOS[name]()
    for backend in (kernel, ops):
        outcome = check_scenario(scenario, backend)
        assert outcome.clean, (backend.emulator, [d.headline() for d in outcome.failures])
    assert outcome.runner == "emulated-ops"


def _both(scenario: Scenario, fault: str, kernel, ops) -> tuple[FirstDivergence, FirstDivergence]:
    return (
        FirstDivergence.of(check_scenario(scenario, kernel, faults=[fault])),
        FirstDivergence.of(check_scenario(scenario, ops, faults=[fault])),
    )


@pytest.mark.parametrize("fault", fast_first(list(FAULTS), lambda name: name in FAST_FAULTS))
def test_each_fault_diverges_first_in_the_same_place_under_both_runners(fault: str, kernel, ops) -> None:
    on_kernel, on_ops = _both(FAULT_SCENARIOS[fault](), fault, kernel, ops)
    assert on_kernel.agrees_with(on_ops), (on_kernel, on_ops)


@pytest.mark.slow
def test_rebound_offsets_tie_is_ordered_by_first_read(kernel, ops) -> None:
    """rebind-output-offsets rebinds two outputs in one step: both emulators name both, each its own first."""
    fault = "rebind-output-offsets"
    on_kernel, on_ops = _both(FAULT_SCENARIOS[fault](), fault, kernel, ops)
    assert on_kernel.tie == on_ops.tie == {"cu_seqlens_out", "batch_ids_out"}
    assert (on_kernel.tensor, on_ops.tensor) == ("cu_seqlens_out", "batch_ids_out")


# --------------------------------------------------------------------------- op-level localisation


def test_source_of_a_recorded_op_is_the_engine_line() -> None:
    from graphcheck.capture.op_graphs import OpRecord, op_call
    from graphcheck.capture.sites import OpSite
    from graphcheck.check.trace import source_of

    site = OpSite(None, "target_forward", "/x/engine.py", 42, "f")
    call = op_call(OpRecord(object(), (), {}, None, site, False))
    assert call.__qualname__.startswith("target_forward/") and source_of(call) == ("/x/engine.py", 42)


def test_a_freed_input_localises_to_the_op_and_the_kernel_it_ran_in(kernel, ops) -> None:
    """captured-temporary-freed: the kernel emulator names target_forward; the op-level one the aten op
    inside it that reads the freed table, at the engine's line (backends/engine), not the xp shim's."""
    from graphcheck.check.localise import localise

    fault = "captured-temporary-freed"
    scenario = FAULT_SCENARIOS[fault]()
    by_kernel = localise(check_scenario(scenario, kernel, faults=[fault]), kernel, faults=[fault])
    by_op = localise(check_scenario(scenario, ops, faults=[fault]), ops, faults=[fault])
    assert by_kernel.kernel == "target_forward" and by_kernel.method == by_op.method == "graph inputs"
    kernel_name, op = by_op.kernel.split("/")
    assert kernel_name == by_kernel.kernel and op.startswith("aten.")
    assert by_op.source_file.startswith("backends/engine/") and by_op.source_line
