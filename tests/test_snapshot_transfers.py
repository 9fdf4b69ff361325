"""Device-to-host transfers of the built-in engine per step, counted on the CPU as a GPU makes them.

A transfer is one ``xp.to_host`` or one ``xp.to_host_many`` batch (its tensors concatenated
into one copy on a device; one per tensor for fewer than two), counted at the outermost call.
Measured on the demo scenarios, lockstep with state snapshots: a step reads its results in
one transfer, an eager step that drafts also reads its draft token counts (to size the
draft's packed rows), and a state snapshot reads every buffer it compares in one transfer.
The snapshot cannot share the results' transfer: the slots a step frees are released on the
device after their results are read, and the snapshot must see that release.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

pytest.importorskip("torch")

from graphcheck.backends.engine import Engine  # noqa: E402
from graphcheck.backends.xp.torch_xp import TorchArrayOps  # noqa: E402
from graphcheck.capture.devices import resolve  # noqa: E402
from graphcheck.check.checker import Checker  # noqa: E402
from graphcheck.check.engines import resolve_engine  # noqa: E402
from graphcheck.search.builtin import demo_scenario  # noqa: E402


class Transfers:
    """Counts transfers per engine call (``step``, ``state_snapshot``), outermost calls only."""

    def __init__(self) -> None:
        self.depth = 0
        self.now = 0
        self.per_call: dict[str, list[int]] = {"step": [], "eager step": [], "state_snapshot": []}

    def counter(self, original: Any, size: Any) -> Any:
        def counted(xp: Any, *args: Any, **kwargs: Any) -> Any:
            if self.depth == 0:
                self.now += size(args)
            self.depth += 1
            try:
                return original(xp, *args, **kwargs)
            finally:
                self.depth -= 1

        return counted

    def around(self, name: str, original: Any) -> Any:
        def call(engine: Any, *args: Any, **kwargs: Any) -> Any:
            before = self.now
            result = original(engine, *args, **kwargs)
            info = engine.last_step_info
            key = "eager step" if name == "step" and info is not None and not info.used_graph else name
            self.per_call[key].append(self.now - before)
            return result

        return call


@pytest.fixture
def transfers(monkeypatch: pytest.MonkeyPatch) -> Transfers:
    found = Transfers()
    monkeypatch.setattr(TorchArrayOps, "to_host", found.counter(TorchArrayOps.to_host, lambda a: 1))
    many = found.counter(TorchArrayOps.to_host_many, lambda a: 1 if len(a[0]) >= 2 else len(a[0]))
    monkeypatch.setattr(TorchArrayOps, "to_host_many", many)
    for name in ("step", "state_snapshot"):
        monkeypatch.setattr(Engine, name, found.around(name, getattr(Engine, name)))
    return found


def test_a_snapshot_is_one_transfer_and_a_step_at_most_two(transfers: Transfers) -> None:
    checker = Checker(resolve("cpu"), resolve_engine(None))
    for verify in ("greedy", "target_match", "topp"):
        outcome = checker.run(demo_scenario(verify), localise=False)
        assert outcome.clean
    calls = transfers.per_call
    assert calls["state_snapshot"] and set(calls["state_snapshot"]) == {1}
    assert calls["step"] and set(calls["step"]) == {1}  # replayed steps: the results only
    assert calls["eager step"] and set(calls["eager step"]) <= {
        0,
        1,
        2,
    }  # and the draft's token counts (0: nothing ran)
    counted = Counter(n for values in calls.values() for n in values)
    steps = len(calls["step"]) + len(calls["eager step"])
    per_step = sum(n * k for n, k in counted.items()) / steps
    assert per_step <= 3.0, per_step
