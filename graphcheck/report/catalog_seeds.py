"""Report files of ``graphcheck catalog --seeds``: ``<report-dir>/catalog/``.

``write_seeds_catalog(result, out_dir, info)`` writes into ``out_dir``:

- ``catalog.json``  format 3, ``"mode": "seeds"``: the top-level fields of format 2 (command,
                    started_at, version, backend, description, emulate, settings, elapsed_s, passed,
                    summary, faults, clean); per fault ``detected`` (caught at every seed), ``caught``
                    (seeds caught), ``seeds``, ``missed_seeds``, the medians and ``runs``: per seed the
                    suite (or demo scenario) that caught it, examples and seconds to the first
                    divergence, its kind and headline. Nothing is shrunk, so there are no
                    scenario files; the budget-mode fields (search, baseline, localisation) are absent.
- ``index.html``    the same as one self-contained page, a column per seed
- ``pending-<fault>-seed<N>.json``  only while a run goes, or after a crash: the scenario it was running
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from graphcheck.catalog.seeds import FaultSeeds, SeedRun, SeedsResult
from graphcheck.files import write_atomic
from graphcheck.report.catalog_model import CatalogInfo, CatalogPaths
from graphcheck.report.jsonout import jsonable

#: 3: ``mode`` "seeds" and the per-seed fields above (a budget catalog stays format 2, without ``mode``).
SEEDS_FORMAT_VERSION = 3
MODE = "seeds"


def run_dict(run: SeedRun) -> dict[str, Any]:
    return {
        "seed": run.seed,
        "caught": run.caught,
        "suite": run.caught_by,
        "examples": run.examples,
        "suite_example": run.suite_example,
        "seconds": round(run.seconds, 3),
        "kind": run.kind,
        "headline": run.headline,
    }


def fault_seeds_dict(fault: FaultSeeds) -> dict[str, Any]:
    return {
        "fault": fault.fault,
        "bug_class": fault.bug_class,
        "signal": fault.signal,
        "detected": fault.detected,
        "caught": fault.caught,
        "seeds": len(fault.runs),
        "missed_seeds": list(fault.missed_seeds),
        "median_examples_to_detect": fault.median_examples,
        "median_seconds_to_detect": fault.median_seconds,
        "runs": [run_dict(r) for r in fault.runs],
    }


def seeds_document(result: SeedsResult, info: CatalogInfo) -> dict[str, Any]:
    s, clean = result.summary, result.clean
    return jsonable(
        {
            "format": SEEDS_FORMAT_VERSION,
            "mode": MODE,
            "command": info.command,
            "started_at": info.started_at,
            "version": info.version,
            "backend": result.backend,
            "description": result.description,
            "emulate": info.emulate,
            **({"emulator": info.emulator} if info.emulator != "kernel" else {}),
            "settings": {**jsonable(result.settings), "seed_list": list(result.settings.seed_list)},
            "elapsed_s": result.elapsed_s,
            "passed": result.passed,
            "summary": {
                "faults": s.faults,
                "detected": s.caught_everywhere,
                "rate": s.caught_everywhere / s.faults if s.faults else 0.0,
                "pairs": s.pairs,
                "pairs_caught": s.pairs_caught,
                "pair_rate": s.pair_rate,
                "clean_runs": s.clean_runs,
                "clean_runs_clean": s.clean_runs_clean,
                "median_examples_to_detect": s.median_examples,
                "median_seconds_to_detect": s.median_seconds,
            },
            "faults": [fault_seeds_dict(f) for f in result.faults],
            "clean": {
                "clean": clean.clean,
                "false_positive_seeds": list(clean.false_positive_seeds),
                "runs": [run_dict(r) for r in clean.runs],
            },
        }
    )


def write_seeds_catalog(result: SeedsResult, out_dir: Path, info: CatalogInfo) -> CatalogPaths:
    """Write catalog.json and index.html into ``out_dir`` (created if missing)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = CatalogPaths(out_dir / "index.html", out_dir / "catalog.json", out_dir / "scenarios")
    text = json.dumps(seeds_document(result, info), indent=2, allow_nan=False)
    write_atomic(paths.catalog_json, text + "\n")
    from graphcheck.report.catalog_seeds_html import render_seeds_catalog  # jinja2 only where HTML is wanted

    write_atomic(paths.index_html, render_seeds_catalog(result, info))
    return paths


__all__ = ["SEEDS_FORMAT_VERSION", "fault_seeds_dict", "run_dict", "seeds_document", "write_seeds_catalog"]
