"""How far eager and graph engines of a float model differ: the evidence behind the tolerance.

    python -m benchmarks.float_deltas --backend cuda --model bfloat16 --examples 40

Runs fuzzed scenarios (the ``all`` suite's strategy) in lockstep and records, for
every step and every request both engines ran with the same tokens so far, the
largest score difference eager vs graph relative to the row's magnitude (the
quantity ``graphcheck.check.numeric.Tolerance`` bounds), and the same for the
float buffers of the state snapshot. Prints the distribution, the calibrated bands the runs used
and the fixed ceiling above them.
"""

from __future__ import annotations

import argparse
import json

import numpy as np
from hypothesis import HealthCheck, given, settings

from graphcheck.capture.devices import resolve
from graphcheck.check.lockstep import Lockstep
from graphcheck.check.numeric import relative_difference, tolerance_for
from graphcheck.check.setup import CheckSetup
from graphcheck.search.suite_registry import load_suites


def _relative(a: np.ndarray, b: np.ndarray) -> float:
    """The quantity a band bounds (``numeric.relative_difference``); 0 for rows that cannot be paired."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return relative_difference(a, b) if a.shape == b.shape and a.size else 0.0


def _state_deltas(lockstep: Lockstep) -> list[float]:
    eager, graph = lockstep.eager.state_snapshot().by_name(), lockstep.graph.state_snapshot().by_name()
    found = []
    for name, mine in eager.items():
        other = graph.get(name)
        if other is None or not np.issubdtype(mine.values.dtype, np.floating):
            continue
        if np.array_equal(mine.rows, other.rows):
            found.append(_relative(mine.values, other.values))
    return found


def measure(backend_name: str, model: str, examples: int, seed: int) -> dict[str, object]:
    backend = resolve(backend_name)
    setup = CheckSetup.parse(model)
    scores: list[float] = []
    state: list[float] = []
    failures: list[str] = []
    bands: set[float] = set()  # the calibrated bands the runs used (graphcheck.check.noise)

    @settings(max_examples=examples, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(load_suites()["all"].strategy().map(setup.apply))
    def run(scenario) -> None:
        lockstep = Lockstep(scenario, backend)
        if lockstep.comparison.calibration is not None:
            bands.add(lockstep.comparison.calibration.band)
        if lockstep.graph is None:
            return
        for t in range(scenario.num_steps):
            ok = lockstep.step(t)
            reports = lockstep.comparison.reports
            for rid, e in reports.get("eager", {}).items():
                g = reports.get("graph", {}).get(rid)
                if g is not None and rid not in lockstep.comparison.parting.parted:
                    scores.append(_relative(e.scores, g.scores))
            state.extend(_state_deltas(lockstep))
            if not ok:
                failures.append(lockstep.outcome.first.headline())
                return

    run._hypothesis_internal_use_seed = seed  # type: ignore[attr-defined]
    run()
    tol = tolerance_for(setup.model or "exact")
    q = [50, 99, 100]
    return {
        "backend": backend.description,
        "model": model,
        "examples": examples,
        "score_rows": len(scores),
        "score_rel_delta_percentiles": dict(zip(map(str, q), np.percentile(scores, q).tolist())) if scores else {},
        "state_rel_delta_percentiles": dict(zip(map(str, q), np.percentile(state, q).tolist())) if state else {},
        "ceiling_rtol": tol.rtol if tol else None,
        "calibrated_bands": sorted(bands),
        "failures": failures,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="cpu")
    parser.add_argument("--model", default="bfloat16")
    parser.add_argument("--examples", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(json.dumps(measure(args.backend, args.model, args.examples, args.seed), indent=2))


if __name__ == "__main__":
    main()
