"""What a lockstep run observes: per-step records and the run's outcome.

A StepRecord is what one decoder (reference, eager engine or graph engine)
reports after one step: its StepResult plus the engine-side context the diff
needs (bucket, padded counts, the graph's static-input bindings, memory). A
CheckOutcome is one scenario's whole lockstep run: the records of every
source and the divergences found. Reports and the console render these;
``replay_command_line`` is how a reader re-runs an outcome's scenario.
Each record goes to JSON and back exactly (``to_dict`` / ``from_dict``), so an
outcome crosses processes as text (``graphcheck.check.jsonvalues``).
"""

from __future__ import annotations

import functools
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from graphcheck.check.diff import Divergence, failing
from graphcheck.check.jsonvalues import ValueCodec
from graphcheck.errors import ResourceError
from graphcheck.scenario import Scenario
from graphcheck.step_result import StepResult

SOURCES = ("reference", "eager", "graph")


@dataclass(frozen=True)
class Binding:
    """A graph static input at replay time: where the graph reads vs where the engine's buffer is."""

    graph: str  # e.g. "target[4]": graph kind [capture size]
    name: str  # the engine's buffer name
    captured_ptr: int
    current_ptr: int | None  # None: the engine no longer has a buffer of that name
    alive: bool  # the captured storage still exists
    shape: tuple[int, ...] = ()
    dtype: str = ""

    @property
    def stale(self) -> bool:
        return self.current_ptr != self.captured_ptr or not self.alive

    def to_dict(self) -> dict[str, Any]:
        return codec().fields(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Binding:
        return codec().rebuild(cls, data)


@dataclass(frozen=True)
class StepRecord:
    """One source's view of one step."""

    source: str  # one of SOURCES
    step: int
    result: StepResult
    slots: tuple[tuple[str, int], ...] = ()  # (request id, slot) of requests that ran
    bucket: int | None = None  # the capture size replayed, None when the step ran eagerly
    used_graph: bool = False
    real_bsz: int = 0  # slot high-water mark R
    num_running: int = 0
    real_tokens: int = 0
    padded_tokens: int = 0
    bindings: tuple[Binding, ...] = ()
    memory_bytes: int = 0  # measured on the steps the graph engine replayed a graph (0 elsewhere)
    schedule: Any = None  # the engine's own Schedule of the step (graphcheck.schedule), where it reports one

    def slot_of(self) -> dict[str, int]:
        return dict(self.slots)

    def to_dict(self) -> dict[str, Any]:
        return codec().fields(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StepRecord:
        return codec().rebuild(cls, data)


@dataclass(frozen=True)
class Localisation:
    """Where in the step a divergence began: the first kernel that made eager and graph part.

    ``method`` says how it was found: "kernel trace" (eager and graph engines
    traced kernel by kernel and aligned), "reference" (eager and graph agree;
    the last kernel to write the buffer that differs from the reference),
    "graph inputs" (the kernel of a captured graph that reads a rebound or freed
    static input), "traceback" (where a capture or step raised), "policy" (the
    graph choice or the buffer sizes, no kernel involved). ``position``: the
    kernel's place in the step ("kernel 9 of 21 of step 4"); ``where``: the
    graph it ran in, or that the engine called it directly. ``argument``: the
    kernel argument (or buffer) that carries the difference; ``buffer``: the
    engine's name for it, when it has one. ``expected`` / ``actual``: the
    eager (or reference) and graph values of ``rows``.
    """

    step: int
    method: str
    reason: str
    kernel: str | None = None
    argument: str | None = None
    buffer: str | None = None
    position: str = ""
    where: str = ""
    rows: tuple[int, ...] = ()
    expected: Any = None
    actual: Any = None
    slot: int | None = None
    request_id: str | None = None
    source_file: str | None = None
    source_line: int | None = None
    caller: str | None = None  # the engine function that called the kernel directly (qualname)
    caller_file: str | None = None
    caller_line: int | None = None

    def names(self) -> set[str]:
        """Every name this localisation points at: kernel, caller, buffer, argument (for matching a
        fault's declared target); a qualname also gives its last part, an argument path its root, an
        op-level call (``kernel/aten.op``) its kernel."""
        found = set()
        for name in (self.kernel, self.caller, self.buffer, self.argument):
            if name:
                found |= {name, name.rsplit(".", 1)[-1], name.split(".", 1)[0].split("[", 1)[0]}
                if "/" in name:  # an op-level call, "kernel-or-module/aten.op.overload": its kernel too
                    found.add(name.split("/", 1)[0])
        return found

    @property
    def target(self) -> str:
        """``kernel / buffer`` as the catalogue shows it."""
        return " / ".join(x for x in (self.kernel, self.buffer or self.argument) if x) or "(nothing)"

    def headline(self) -> str:
        """One line: where it first diverged."""
        at = f"{self.kernel}" if self.kernel else "no kernel"
        arg = f", argument {self.argument}" if self.argument else ""
        if self.buffer and self.buffer != self.argument:
            arg += f" (buffer {self.buffer})"
        pos = f" [{self.position}{', ' + self.where if self.where else ''}]" if self.position or self.where else ""
        src = f" ({self.source_file}:{self.source_line})" if self.source_file and self.source_line else ""
        via = f", called from {self.caller}" if self.caller else ""
        return f"first diverged in {at}{src}{arg}{via} at step {self.step}{pos}: {self.reason}"

    def to_dict(self) -> dict[str, Any]:
        return codec().fields(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Localisation:
        return codec().rebuild(cls, data)


@dataclass
class CheckOutcome:
    """The lockstep run of one scenario."""

    scenario: Scenario
    backend: str
    runner: str  # the graph runner that produced the graph records ("emulated", "cuda", ...)
    records: dict[str, list[StepRecord]] = field(default_factory=lambda: {s: [] for s in SOURCES})
    divergences: list[Divergence] = field(default_factory=list)
    steps_run: int = 0
    elapsed_s: float = 0.0
    faults: tuple[str, ...] = ()
    #: Set when an engine exception left the device unusable for this process (see Lockstep._fail).
    device_error: str | None = None
    #: Set when the engine raised what would end graphcheck (SystemExit, ...): ``graphcheck.check.boundary``.
    engine_error: str | None = None
    #: Set when a call into the engine ran past the hang limit (``graphcheck.check.watchdog``): a ``hang``.
    hung: str | None = None
    #: Where the first failing divergence began (``graphcheck.check.localise``); None until localised.
    localisation: Localisation | None = None
    #: Where a capture or step raised: (function, file, line) of the engine's innermost frame.
    raised_at: tuple[str, str, int] | None = None
    #: The oracle the engines were compared with: "exact" or "model-agnostic" (graphcheck.check.oracles).
    oracle: str = "exact"
    #: The engine checked: ``builtin`` or the ``--engine`` SPEC (graphcheck.check.engines).
    engine: str = "builtin"
    #: A float model's calibration and step-by-step differences (graphcheck.check.noise.NumericTrace).
    numeric: Any = None
    #: The scenarios the engine pair had run before this one since it was built (a pooled pair; reset
    #: after each): what a divergence may depend on (``graphcheck.search.history``).
    history: tuple[Scenario, ...] = ()

    @property
    def failures(self) -> list[Divergence]:
        return failing(self.divergences)

    @property
    def ambiguous(self) -> list[Divergence]:
        return [d for d in self.divergences if d.ambiguous]

    @property
    def first(self) -> Divergence | None:
        fails = self.failures
        return fails[0] if fails else None

    @property
    def clean(self) -> bool:
        return not self.failures

    def to_dict(self) -> dict[str, Any]:
        """Every field as JSON types (the records and divergences whole): :meth:`from_dict` gives an equal outcome."""
        return codec().fields(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CheckOutcome:
        return codec().rebuild(cls, data)


@functools.cache
def codec() -> ValueCodec:
    """The codec of an outcome and everything it holds (the records' ``to_dict`` / ``from_dict``)."""
    from graphcheck.check.noise import Calibration, NumericTrace
    from graphcheck.schedule import CacheReport, Schedule, ScheduledRun
    from graphcheck.step_result import RequestStep

    return ValueCodec(
        CheckOutcome,
        StepRecord,
        Binding,
        Localisation,
        Divergence,
        StepResult,
        RequestStep,
        Schedule,
        ScheduledRun,
        CacheReport,
        Calibration,
        NumericTrace,
    )


class EngineOutOfMemory(ResourceError):
    """Building or capturing an engine (or setting up the reference) ran out of memory (a ResourceError).

    The machine's limit, not a finding: ``Lockstep(...)`` (and so ``check_scenario``)
    raises this instead of recording a ``capture`` divergence. ``str(exc)`` is one
    line; ``where`` names the phase ("reference setup", "eager engine construction",
    "graph engine construction and capture"); ``estimate_bytes`` is the memory gate's
    estimate for the scenario (``graphcheck.check.memory_gate.admit``: the factory's
    ``memory_estimate`` with the reference's part, ``.total``; None when the factory has
    no such member); ``detail`` the traceback.
    """

    def __init__(self, message: str, *, estimate_bytes: int | None = None, where: str = "", detail: str = ""):
        super().__init__(message)
        self.message = message
        self.estimate_bytes = estimate_bytes
        self.where = where
        self.detail = detail


def replay_command_line(
    scenario_path: Path | str,
    backend: str,
    *,
    emulate: bool = False,
    faults: Sequence[str] = (),
    engine: str = "builtin",
    oracle: str = "auto",
    emulator: str = "kernel",
    hang_limit: float | None = None,
) -> str:
    """``graphcheck replay <scenario.json> --backend B [--emulate] [--emulator ops] [--engine E] [--inject F ...]
    [--oracle O]``, shell-quoted: every setting that changes the verdict (the scenario file carries its model
    and contract)."""
    parts = ["graphcheck", "replay", str(scenario_path), "--backend", backend]
    if emulate:
        parts.append("--emulate")
    if emulator != "kernel":
        parts += ["--emulator", emulator]
    if engine != "builtin":
        parts += ["--engine", engine]
    for fault in faults:
        parts += ["--inject", fault]
    if oracle != "auto":
        parts += ["--oracle", oracle]
    if hang_limit is not None:
        parts += ["--hang-limit", f"{hang_limit:g}"]
    return shlex.join(parts)
