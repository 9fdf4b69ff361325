"""Fuzz one suite: Hypothesis draws scenarios, the lockstep run judges them.

``fuzz_suite`` asks Hypothesis for a scenario whose lockstep run diverges and,
when one is found, lets it shrink that scenario to a minimal one. Before each
scenario runs it is written to ``pending_path``, so an engine that takes the
whole process down still leaves the failing scenario on disk. The same seed
gives the same run: the draw order comes from a seeded ``random.Random``.
"""

from __future__ import annotations

import os
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from hypothesis import HealthCheck, Phase, find, settings
from hypothesis.errors import NoSuchExample, Unsatisfiable

from graphcheck.lockstep import check_scenario
from graphcheck.records import CheckOutcome
from graphcheck.scenario import Scenario

ExampleHook = Callable[[Scenario, CheckOutcome], None]


@dataclass(frozen=True)
class FuzzResult:
    """What fuzzing one suite found: the shrunk failing outcome, or None when clean."""

    suite: str
    examples: int  # lockstep runs, shrinking included
    steps: int  # engine steps run, over all examples
    outcome: CheckOutcome | None
    elapsed_s: float


def write_pending(path: Path, scenario: Scenario) -> None:
    """Write the scenario about to run, durably, before anything can crash."""
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(scenario.to_json())
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def fuzz_suite(
    name: str,
    strategy: Any,
    backend: Any,
    *,
    examples: int,
    seed: int,
    faults: Sequence[str] = (),
    pending_path: Path,
    on_example: ExampleHook | None = None,
) -> FuzzResult:
    """Search ``strategy`` for a diverging scenario; shrink it if found."""
    started = time.perf_counter()
    counts = {"examples": 0, "steps": 0}

    def diverges(scenario: Scenario) -> bool:
        write_pending(pending_path, scenario)
        outcome = check_scenario(scenario, backend, faults=faults)
        counts["examples"] += 1
        counts["steps"] += outcome.steps_run
        if on_example is not None:
            on_example(scenario, outcome)
        return not outcome.clean

    config = settings(
        max_examples=examples,
        deadline=None,
        database=None,
        derandomize=False,
        suppress_health_check=list(HealthCheck),
        phases=(Phase.generate, Phase.shrink),
    )
    try:
        shrunk = find(strategy, diverges, settings=config, random=random.Random(seed))
    except (NoSuchExample, Unsatisfiable):
        return FuzzResult(name, counts["examples"], counts["steps"], None, time.perf_counter() - started)
    write_pending(pending_path, shrunk)
    outcome = check_scenario(shrunk, backend, faults=faults)
    return FuzzResult(name, counts["examples"], counts["steps"], outcome, time.perf_counter() - started)
