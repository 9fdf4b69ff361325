"""What the catalog's two report files share: how the catalog ran, where its files go, replay commands.

``graphcheck.report.catalog`` writes catalog.json (and has index.html rendered);
``graphcheck.report.catalog_html`` renders index.html. Both build on this module,
which imports neither.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from graphcheck.catalog.run import CLEAN_LABEL
from graphcheck.check.records import replay_command_line

SCENARIO_DIR = "scenarios"


@dataclass(frozen=True)
class CatalogInfo:
    """How the catalog was run: what the header and the replay commands need."""

    command: str
    started_at: str = ""  # ISO 8601
    emulate: bool = False
    version: str = ""


@dataclass(frozen=True)
class CatalogPaths:
    index_html: Path
    catalog_json: Path
    scenario_dir: Path


def scenario_file(name: str) -> str:
    """Where a fault's shrunk scenario goes, relative to the catalog folder."""
    return f"{SCENARIO_DIR}/{name or CLEAN_LABEL}.json"


def replay_command(path: Path, backend: str, emulate: bool, fault: str) -> str:
    """The replay command of one catalog scenario ("" = the clean engine, nothing injected)."""
    return replay_command_line(path, backend, emulate=emulate, faults=(fault,) if fault else ())


__all__ = ["SCENARIO_DIR", "CatalogInfo", "CatalogPaths", "replay_command", "scenario_file"]
