"""What the catalog's two report files share: how the catalog ran, where its files go, replay commands.

``graphcheck.report.catalog`` writes catalog.json (and has index.html rendered);
``graphcheck.report.catalog_html`` renders index.html. Both build on this module,
which imports neither. The JSON fields on localisation (where each fault's shrunk
divergence began, and whether that is what the fault declares it breaks) are here.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from graphcheck.catalog.run import CLEAN_LABEL, CatalogSummary, FaultResult, StepsToDivergence
from graphcheck.check.records import Localisation, replay_command_line
from graphcheck.report.jsonout import jsonable

SCENARIO_DIR = "scenarios"


@dataclass(frozen=True)
class CatalogInfo:
    """How the catalog was run: what the header and the replay commands need."""

    command: str
    started_at: str = ""  # ISO 8601
    emulate: bool = False
    version: str = ""
    emulator: str = "kernel"  # --emulator (catalog.json records it only when "ops")


@dataclass(frozen=True)
class CatalogPaths:
    index_html: Path
    catalog_json: Path
    scenario_dir: Path


def scenario_file(name: str) -> str:
    """Where a fault's shrunk scenario goes, relative to the catalog folder."""
    return f"{SCENARIO_DIR}/{name or CLEAN_LABEL}.json"


def replay_command(
    path: Path, backend: str, emulate: bool, fault: str, engine: str = "builtin", emulator: str = "kernel"
) -> str:
    """The replay command of one catalog scenario ("" = the clean engine, nothing injected)."""
    faults = (fault,) if fault else ()
    return replay_command_line(path, backend, emulate=emulate, faults=faults, engine=engine, emulator=emulator)


def localisation_dict(loc: Localisation | None) -> dict[str, Any] | None:
    """Every Localisation field, JSON-safe, plus its ``target`` and one-line headline; None stays None."""
    if loc is None:
        return None
    data = {f.name: jsonable(getattr(loc, f.name)) for f in dataclasses.fields(loc)}
    data["target"] = loc.target
    data["headline"] = loc.headline()
    return data


def steps_dict(steps: StepsToDivergence) -> dict[str, int | None]:
    return {"detection": steps.detection, "shrunk": steps.shrunk}


def localisation_fields(fault: FaultResult) -> dict[str, Any]:
    """A fault's catalog.json fields on where its shrunk divergence began (format 2)."""
    return {
        "localisation": localisation_dict(fault.localisation),
        "localisation_matches": fault.localisation_matches,  # null: unknown (not localised, nothing declared)
        "declared": list(fault.breaks),
        "steps_to_first_divergence": steps_dict(fault.steps_to_divergence),
    }


def localisation_summary(s: CatalogSummary) -> dict[str, Any]:
    """The catalog.json summary fields on localisation and steps to the first divergence (format 2)."""
    return {
        "localised_matching": s.localised_matching,
        "localisation_misses": list(s.localisation_misses),
        "median_steps_to_first_divergence": {"detection": s.median_steps_detection, "shrunk": s.median_steps_shrunk},
    }


__all__ = [
    "SCENARIO_DIR",
    "CatalogInfo",
    "CatalogPaths",
    "localisation_dict",
    "localisation_fields",
    "localisation_summary",
    "replay_command",
    "scenario_file",
    "steps_dict",
]
