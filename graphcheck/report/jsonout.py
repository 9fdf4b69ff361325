"""divergences.json (every divergence of every outcome) and scenario.json (the replayable scenario).

divergences.json's ``format``: 1, the first; 2 adds ``outcomes[].localisation``, where the outcome's
first failing divergence began (every ``Localisation`` field plus ``headline`` and ``target``; null when
the outcome is clean or was not localised). Everything else is as in format 1. ``outcomes[].numeric``
(a float model: the calibration, ``largest`` and every compared step's ``[step, difference, replayed]``;
null for the exact model) was added within format 2: readers ignore keys they do not know.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any, Sequence

from graphcheck.check.diff import Divergence
from graphcheck.check.records import CheckOutcome, Localisation
from graphcheck.files import write_atomic
from graphcheck.report.model import RunInfo, pair_suites
from graphcheck.scenario import Scenario
from graphcheck.search.result import SuiteResult

FORMAT_VERSION = 2


def jsonable(value: Any) -> Any:
    """``value`` made of JSON types only: tuples -> lists, numpy scalars -> Python, NaN -> "nan"."""
    if value is None:
        return None
    for plain in (bool, int, str):  # subclasses such as IntEnum as the plain type
        if isinstance(value, plain):
            return plain(value)
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else repr(float(value))
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((jsonable(v) for v in value), key=repr)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, bytes):
        return value.hex()
    if hasattr(value, "tolist"):  # numpy arrays and numpy scalars
        return jsonable(value.tolist())
    return repr(value)


def divergence_dict(div: Divergence) -> dict[str, Any]:
    """Every Divergence field, JSON-safe, plus its one-line headline."""
    data = {f.name: jsonable(getattr(div, f.name)) for f in dataclasses.fields(div)}
    data["headline"] = div.headline()
    return data


def localisation_dict(loc: Localisation) -> dict[str, Any]:
    """Every Localisation field, JSON-safe, plus its one-line ``headline`` and its ``target`` (kernel / buffer)."""
    data = {f.name: jsonable(getattr(loc, f.name)) for f in dataclasses.fields(loc)}
    data["headline"] = loc.headline()
    data["target"] = loc.target
    return data


def outcome_dict(outcome: CheckOutcome) -> dict[str, Any]:
    first = outcome.first
    loc = outcome.localisation if first is not None else None
    return {
        "scenario": outcome.scenario.name,
        "backend": outcome.backend,
        "runner": outcome.runner,
        "oracle": outcome.oracle,
        "model": outcome.scenario.config.model,
        "contract": outcome.scenario.config.contract,
        "clean": outcome.clean,
        "steps_run": outcome.steps_run,
        "elapsed_s": jsonable(outcome.elapsed_s),
        "faults": list(outcome.faults),
        "first": divergence_dict(first) if first else None,
        "failures": [divergence_dict(d) for d in outcome.failures],
        "ambiguous": [divergence_dict(d) for d in outcome.ambiguous],
        "localisation": localisation_dict(loc) if loc is not None else None,
        "numeric": jsonable(outcome.numeric.to_dict()) if outcome.numeric is not None else None,
    }


def suite_dict(run: SuiteResult, outcome_index: int | None, scenario_name: str | None = None) -> dict[str, Any]:
    """One fuzzed suite's figures, plus ``outcome``: the index in ``outcomes`` of what it found, and
    ``scenario_name``: that outcome's scenario."""
    return jsonable(
        {
            "suite": run.name,
            "examples": run.examples,
            "steps": run.steps,
            "elapsed_s": run.elapsed_s,
            "clean": run.clean,
            "shrink": run.shrink_state,
            "first": run.headline,
            "first_failure_at": run.first_failure_at,
            "scenario_name": scenario_name,
            "situations_reached": run.situations_reached,
            "situations_replayed": run.situations_replayed,
            "graph_steps": run.coverage.graph_steps,
            "replayed_steps": run.coverage.replayed_steps,
            "outcome": outcome_index,
        }
    )


def run_dict(run_info: RunInfo) -> dict[str, Any]:
    """Every RunInfo field, JSON-safe; ``emulator`` only when it is not the default kernel emulator
    (reports of the default path stay as they were)."""
    data = jsonable(run_info)
    if run_info.emulator == "kernel":
        del data["emulator"]
    return data


def divergences_document(
    outcomes: Sequence[CheckOutcome], run_info: RunInfo, suites: Sequence[SuiteResult] = ()
) -> dict[str, Any]:
    clean = all(o.clean for o in outcomes) and all(s.clean for s in suites)
    pairing = pair_suites(suites, outcomes)
    return {
        "format": FORMAT_VERSION,
        "run": run_dict(run_info),
        "verdict": "clean" if clean else "divergence",
        "outcomes": [outcome_dict(o) for o in outcomes],
        "suites": [suite_dict(run, i, pairing.scenario_name(i, outcomes)) for run, i in pairing.pairs],
    }


def write_divergences(
    outcomes: Sequence[CheckOutcome], path: Path, run_info: RunInfo, suites: Sequence[SuiteResult] = ()
) -> Path:
    text = json.dumps(divergences_document(outcomes, run_info, suites), indent=2, allow_nan=False)
    return write_atomic(path, text + "\n")


def write_scenario(scenario: Scenario, path: Path) -> Path:
    """Exactly ``Scenario.to_json()``, so ``Scenario.from_json`` loads it back."""
    return write_atomic(path, scenario.to_json())
