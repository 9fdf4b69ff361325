"""Report files of ``graphcheck catalog``: ``<report-dir>/catalog/``.

``write_catalog(result, out_dir, info)`` writes into ``out_dir``:

- ``catalog.json``           settings, totals, and per fault: the first detection, the shrunk
                             scenario's size and headline, where its divergence began (localisation)
                             and whether that is what the fault declares it breaks, every baseline
                             case; then the clean engine
- ``index.html``             the same as one self-contained page (inline CSS, no external resources)
- ``pending-<fault>.json``   only while a search runs, or after a crash: the scenario it was running
- ``scenarios/<fault>.json`` each fault's shrunk scenario (``scenarios/clean.json`` if the clean
                             engine diverged), replayable with ``graphcheck replay FILE --inject FAULT``
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from graphcheck.catalog.baseline import BaselineResult
from graphcheck.catalog.run import CatalogResult, FaultResult
from graphcheck.files import write_atomic
from graphcheck.report.catalog_model import (
    SCENARIO_DIR,
    CatalogInfo,
    CatalogPaths,
    localisation_dict,
    localisation_fields,
    localisation_summary,
    scenario_file,
    steps_dict,
)
from graphcheck.report.jsonout import divergence_dict, jsonable
from graphcheck.search.timed_search import SearchResult

#: 2: per fault "localisation", "localisation_matches", "declared", "steps_to_first_divergence";
#: in the summary "localised_matching", "localisation_misses", "median_steps_to_first_divergence".
FORMAT_VERSION = 2


def search_dict(search: SearchResult) -> dict[str, Any]:
    det, shrunk = search.detection, search.shrunk
    first = None
    if det is not None:
        first = {
            "suite": det.suite,
            "seconds": det.seconds,
            "examples": det.examples,
            "kind": det.kind,
            "divergence": divergence_dict(det.outcome.first),
        }
    small = None
    if shrunk is not None:
        requests, steps = shrunk.size
        small = {
            "requests": requests,
            "steps": steps,
            "kind": shrunk.outcome.first.kind,
            "divergence": divergence_dict(shrunk.outcome.first),
            "examples": shrunk.examples,
            "seconds": shrunk.seconds,
            "complete": shrunk.complete,
        }
    return {
        "suites": list(search.suites),
        "examples": search.examples,
        "seconds": search.seconds,
        "detected": search.detected,
        "first": first,
        "shrunk": small,
    }


def baseline_dict(baseline: BaselineResult) -> dict[str, Any]:
    return {
        "detected": baseline.detected,
        "failed_cases": len(baseline.failed),
        "cases": jsonable(baseline.cases),
        "elapsed_s": baseline.elapsed_s,
    }


def fault_dict(result: FaultResult) -> dict[str, Any]:
    data = {
        "fault": result.fault,
        "bug_class": result.bug_class,
        "signal": result.signal,
        "detected": result.detected,
        "search": search_dict(result.search),
        "baseline": baseline_dict(result.baseline),
        **localisation_fields(result),
    }
    if result.search.shrunk is not None:
        data["scenario_file"] = scenario_file(result.fault)
    return data


def catalog_document(result: CatalogResult, info: CatalogInfo) -> dict[str, Any]:
    s = result.summary
    clean = result.clean
    return jsonable(
        {
            "format": FORMAT_VERSION,
            "command": info.command,
            "started_at": info.started_at,
            "version": info.version,
            "backend": result.backend,
            "description": result.description,
            "emulate": info.emulate,
            **({"emulator": info.emulator} if info.emulator != "kernel" else {}),
            "settings": result.settings,
            "elapsed_s": result.elapsed_s,
            "passed": result.passed,
            "summary": {
                "faults": s.faults,
                "detected": s.detected,
                "rate": s.rate,
                "baseline_detected": s.baseline_detected,
                "baseline_rate": s.baseline_rate,
                "median_seconds_to_detect": s.median_seconds,
                "median_examples_to_detect": s.median_examples,
                "median_shrunk_requests": s.median_shrunk_requests,
                "median_shrunk_steps": s.median_shrunk_steps,
                **localisation_summary(s),
            },
            "faults": [fault_dict(f) for f in result.faults],
            "clean": {
                "clean": clean.clean,
                "search": search_dict(clean.search),
                "baseline": baseline_dict(clean.baseline),
                "localisation": localisation_dict(clean.localisation),
                "steps_to_first_divergence": steps_dict(clean.steps_to_divergence),
            },
        }
    )


def _write_scenarios(result: CatalogResult, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.json"):  # scenarios of an earlier catalog run must not pass for this one's
        old.unlink()
    searches = [(f.fault, f.search) for f in result.faults] + [("", result.clean.search)]
    for name, search in searches:
        if search.shrunk is not None:
            write_atomic(folder.parent / scenario_file(name), search.shrunk.scenario.to_json())


def write_catalog(result: CatalogResult, out_dir: Path, info: CatalogInfo) -> CatalogPaths:
    """Write catalog.json, index.html and the shrunk scenarios into ``out_dir`` (created if missing)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = CatalogPaths(out_dir / "index.html", out_dir / "catalog.json", out_dir / SCENARIO_DIR)
    _write_scenarios(result, paths.scenario_dir)
    text = json.dumps(catalog_document(result, info), indent=2, allow_nan=False)
    write_atomic(paths.catalog_json, text + "\n")
    from graphcheck.report.catalog_html import render_catalog  # jinja2 only where HTML is wanted

    write_atomic(paths.index_html, render_catalog(result, info, out_dir))
    return paths


__all__ = ["baseline_dict", "catalog_document", "fault_dict", "search_dict", "write_catalog"]
