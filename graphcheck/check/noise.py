"""An engine's float noise, measured, and the tolerance band calibrated from it.

Eager and graph engines of a float model may legitimately differ in low bits:
a replay runs at the padded bucket, and kernels can change with the batch
shape. How much is a property of the engine, its dtype and its device, not a
constant: the built-in engine agrees bit for bit on the CPU and within 2.3e-7
of the magnitude in float32 on an H200. A band far above that is blind to the
small graph-only errors a float engine has, so the band is measured:

* **the probe** (:func:`probe_floor`) runs the *eager* engine only, never the
  graph path under test, on a fixed probe scenario three ways: one request
  alone, the same request beside companions that fill the batch (kernels at
  another batch shape, what padding does to a replay), and alone again (run to
  run nondeterminism). The floor is the largest difference of that request's
  scores between the runs, relative to their magnitude (at least 1), over the
  tokens where the runs still agree;
* **the band** is :data:`MULTIPLE` times the floor, never below a few units in
  the last place of the dtype (:data:`ULPS`), never above the dtype's fixed ceiling
  (``numeric.TOLERANCES``, what an engine that cannot be probed gets);
* **drift** (``numeric.DriftWatch``): a difference below the band that is there
  on every one of :data:`DRIFT_STEPS` replays in a row, above a quarter of the
  band, is systematic, not noise, and fails too.

Calibrations are cached per process for (engine, backend, dtype).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from graphcheck.adapter import engine_extras
from graphcheck.check.numeric import TOLERANCES, Tolerance, relative_difference
from graphcheck.driver import apply_events
from graphcheck.scenario import EngineConfig, RequestSpec, Scenario

#: The band is this many times the measured floor ...
MULTIPLE = 16.0
#: ... and never below this many units in the last place of the dtype (relative to the magnitude):
#: float32 rounding differences stay within a few dozen ulps; a bfloat16 ulp is already 0.8 %.
ULPS = {"float32": 16, "bfloat16": 2}
#: Machine epsilon (one ulp at magnitude 1) per float dtype.
EPSILON = {"float32": 2.0**-23, "bfloat16": 2.0**-7}
#: Replays in a row whose difference stays above the drift level make a drift.
DRIFT_STEPS = 3
#: The drift level, as a fraction of the band.
DRIFT_FRACTION = 0.25


@dataclass(frozen=True)
class Calibration:
    """The float tolerance of one (engine, backend, dtype), and how it was found.

    ``floor``: the largest relative difference the probe measured (None when the
    engine could not be probed: the band is then the ceiling); ``band``: the
    ``rtol`` every float comparison of a run uses; ``compared``: score rows the
    probe compared; ``note``: why it was not probed, when it was not.
    """

    dtype: str
    floor: float | None
    band: float
    compared: int = 0
    note: str = ""

    @property
    def ceiling(self) -> float:
        """The dtype's fixed band: the most the band may be."""
        return TOLERANCES[self.dtype].rtol

    @property
    def probed(self) -> bool:
        return self.floor is not None

    @property
    def drift_level(self) -> float:
        return DRIFT_FRACTION * self.band

    def tolerance(self) -> Tolerance:
        return Tolerance(self.dtype, self.band)

    def to_dict(self) -> dict[str, Any]:
        return {
            "dtype": self.dtype,
            "floor": self.floor,
            "band": self.band,
            "ceiling": self.ceiling,
            "drift_level": self.drift_level,
            "compared": self.compared,
            "note": self.note,
        }


@dataclass(frozen=True)
class NumericTrace:
    """A float run's numbers for reports: the calibration, and every compared step's largest
    relative score difference eager vs graph (``(step, difference, replayed)``)."""

    calibration: Calibration
    steps: tuple[tuple[int, float, bool], ...] = ()

    @property
    def largest(self) -> float:
        return max((d for _, d, _ in self.steps), default=0.0)

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.calibration.to_dict(),
            "largest": self.largest,
            "steps": [[t, d, r] for t, d, r in self.steps],
        }


@dataclass
class NumericTally:
    """What a search's float examples measured (``fuzz.json``): every distinct calibration, the
    largest difference eager vs graph any example showed, and how many examples were float."""

    calibrations: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    largest: float = 0.0
    examples: int = 0

    def add(self, trace: NumericTrace | None) -> None:
        if trace is None:
            return
        cal = trace.calibration.to_dict()
        if cal not in self.calibrations:
            self.calibrations.append(cal)
        self.largest = max(self.largest, trace.largest)
        self.examples += 1

    def merge(self, other: NumericTally) -> NumericTally:
        merged = NumericTally(list(self.calibrations), max(self.largest, other.largest), self.examples + other.examples)
        merged.calibrations += [c for c in other.calibrations if c not in merged.calibrations]
        return merged

    def to_dict(self) -> dict[str, Any] | None:
        if not self.examples:
            return None
        return {"calibrations": self.calibrations, "largest": self.largest, "examples": self.examples}

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> NumericTally:
        if not data:
            return cls()
        return cls(list(data.get("calibrations", [])), float(data.get("largest", 0.0)), int(data.get("examples", 0)))


def band_for(dtype: str, floor: float) -> float:
    """The band of a measured ``floor`` (see the module docstring)."""
    return min(TOLERANCES[dtype].rtol, max(MULTIPLE * floor, ULPS[dtype] * EPSILON[dtype]))


def uncalibrated(dtype: str, note: str) -> Calibration:
    """The calibration of an engine that could not be probed: the ceiling, and why."""
    return Calibration(dtype, None, TOLERANCES[dtype].rtol, note=note)


_CACHE: dict[tuple[Any, ...], Calibration] = {}


def probe_config(config: EngineConfig) -> EngineConfig:
    """The probe's configuration for a scenario's: fixed but for what selects the kernels and rules
    (dtype, NAIVE or MTP, contract), so every scenario of a run, and its replay, gets the same band."""
    return EngineConfig(model=config.model, naive_mode=config.naive_mode, contract=config.contract, max_num_seqs=4)


def calibration_for(factory: Callable[..., Any], backend: Any, config: EngineConfig, fit: Callable) -> Calibration:
    """The cached calibration of ``factory`` on ``backend`` for ``config``'s float model (probed once);
    ``fit``: the engine's ``capabilities.fit`` (scenario -> scenario it runs)."""
    base = probe_config(config)
    try:
        hash(factory)
        who: Any = factory
    except TypeError:  # an unhashable factory object: by its type
        who = type(factory)
    key = (who, backend.name, base)
    if key not in _CACHE:
        _CACHE[key] = calibrate(factory, backend, base, fit)
    return _CACHE[key]


def calibrate(factory: Callable[..., Any], backend: Any, config: EngineConfig, fit: Callable) -> Calibration:
    """Probe the eager engine of ``factory`` (see :func:`probe_floor`) and derive the band."""
    dtype = config.model
    try:
        floor, compared = probe_floor(factory, backend, config, fit)
    except Exception as exc:  # an engine that cannot run the probe is checked with the ceiling
        return uncalibrated(dtype, f"probe failed: {type(exc).__name__}: {str(exc)[:200]}")
    if compared == 0:
        return uncalibrated(dtype, "the probe compared no scores")
    return Calibration(dtype, floor, band_for(dtype, floor), compared)


def probe_scenarios(config: EngineConfig) -> tuple[Scenario, Scenario]:
    """The probe: one request alone, and beside companions that fill the batch."""
    eos = (config.vocab_size - 1,)
    probe = RequestSpec("probe", 0, (3, 1, 4, 1, 5, 9, 2, 6), 6, eos)
    alone = Scenario(config, (probe,), num_steps=12, name="noise-probe")
    companions = tuple(
        RequestSpec(f"c{i}", 0, tuple((7 * i + j) % config.vocab_size for j in range(3 + 2 * i)), 8, eos)
        for i in range(1, max(2, config.max_num_seqs))
    )
    crowded = dataclasses.replace(alone, requests=(probe, *companions))
    return alone, crowded


def probe_floor(factory: Callable[..., Any], backend: Any, config: EngineConfig, fit: Callable) -> tuple[float, int]:
    """(largest relative score difference of the probe request between the runs, rows compared)."""
    from graphcheck.reference import make_weights

    alone, crowded = (fit(s) for s in probe_scenarios(config))
    weights = make_weights(alone.config)
    runs = [_probe_run(factory, backend, s, weights) for s in (alone, crowded, alone)]
    floor, compared = 0.0, 0
    for other in runs[1:]:
        for a, b in zip(runs[0], other):
            if a[0] != b[0]:  # the runs chose other tokens (a near tie): nothing later is comparable
                break
            if a[1].shape != b[1].shape:
                break
            floor = max(floor, relative_difference(a[1], b[1]))
            compared += 1
    return floor, compared


def _probe_run(factory: Callable[..., Any], backend: Any, scenario: Scenario, weights: Any) -> list[tuple]:
    """The probe request's (tokens, scores) per produced token, from the eager engine."""
    engine = factory(scenario.config, weights, device=backend, use_graphs=False, faults=())
    produced: list[tuple] = []

    def take(result: Any) -> None:
        step, report = result.by_id().get("probe"), engine.model_report().get("probe")
        if step is not None and report is not None and step.accept_tokens:
            produced.append((tuple(step.accept_tokens), np.asarray(report.scores, dtype=np.float64)))

    for t in range(scenario.num_steps):
        apply_events(engine, scenario, t)
        take(engine.step(t, scenario.accept_overrides_at(t)))
    for t in range(scenario.num_steps, scenario.num_steps + engine_extras(engine).pipeline_depth):
        take(engine.drain(t))  # a pipelined engine's batches still in flight (as Lockstep._run)
    return produced


__all__ = [
    "DRIFT_STEPS",
    "EPSILON",
    "MULTIPLE",
    "ULPS",
    "Calibration",
    "NumericTally",
    "NumericTrace",
    "band_for",
    "calibrate",
    "calibration_for",
    "probe_config",
    "probe_floor",
    "probe_scenarios",
    "uncalibrated",
]
