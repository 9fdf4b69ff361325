"""What a report needs besides the outcomes: the run's identity, and where the files went."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Sequence

from graphcheck.check.records import CheckOutcome, replay_command_line
from graphcheck.search.result import SuiteResult


@dataclass(frozen=True)
class RunInfo:
    """One ``graphcheck run``: who ran what, where, and how long it took."""

    run_id: str
    backend: str  # "cpu", "cuda", "npu", "xpu"
    runner: str  # the graph runner: "emulated", "cuda", ...
    emulate: bool = False
    seed: int | None = None
    profile: str = ""
    started_at: str = ""  # ISO 8601
    elapsed_s: float = 0.0
    version: str = ""
    faults: tuple[str, ...] = ()
    oracle: str = "auto"  # --oracle as given (each outcome says which one it resolved to)
    engine: str = "builtin"  # --engine SPEC (graphcheck.check.engines)
    emulator: str = "kernel"  # --emulator: the CPU graph emulator (divergences.json records it only when "ops")


#: ``SuiteResult.shrink_state``: what became of the divergence a suite's search found.
SHRINK_STATES: dict[str, str] = {
    "-": "nothing found, nothing to shrink",
    "shrunk": "shrunk to a minimal scenario",
    "unshrunk: device lost": "the engine's failure poisoned the device, so the scenario is reported as found",
    "unshrunk: engine aborted": "the engine raised what would end graphcheck (SystemExit, ...), so it is not run again",
    "unshrunk: engine hung": "a call into the engine ran past --hang-limit; every shrink attempt would cost that again",
    "interrupted": "Ctrl-C came while shrinking: the scenario is the smallest seen so far",
}


@dataclass(frozen=True)
class SuitePairing:
    """Each fuzzed suite's result with the index of its reported outcome (or None), and the outcomes no suite claimed."""

    pairs: list[tuple[SuiteResult, int | None]]
    rest: list[int]

    def scenario_name(self, index: int | None, outcomes: Sequence[CheckOutcome]) -> str | None:
        """The scenario name of a suite's reported outcome (``index`` from ``pairs``), None without one."""
        return None if index is None else outcomes[index].scenario.name


def pair_suites(suites: Sequence[SuiteResult], outcomes: Sequence[CheckOutcome]) -> SuitePairing:
    """Match every fuzzed suite's reported outcome to its place in ``outcomes`` (the same object); the demo
    scenarios' result (``builtin``) is no suite of the report: its outcomes are the report's own."""
    claimed: set[int] = set()
    pairs: list[tuple[SuiteResult, int | None]] = []
    for run in suites:
        if run.builtin:
            continue
        found = run.outcome if run.reported else None
        index = next((i for i, o in enumerate(outcomes) if i not in claimed and o is found), None)
        if index is not None:
            claimed.add(index)
        pairs.append((run, index))
    return SuitePairing(pairs, [i for i in range(len(outcomes)) if i not in claimed])


@dataclass(frozen=True)
class ReportPaths:
    """The files ``write_report`` wrote."""

    index_html: Path
    divergences_json: Path
    scenario_json: Path
    junit_xml: Path


def graphcheck_version() -> str:
    """graphcheck's version (the package's own, so a bare checkout reports it too)."""
    from graphcheck import __version__

    return __version__


def new_run_id(now: datetime | None = None) -> str:
    """A sortable, filesystem-safe run id such as ``20260509-073525``."""
    now = now or datetime.now(timezone.utc)
    return now.strftime("%Y%m%d-%H%M%S")


def default_replay_command(run_info: RunInfo) -> Callable[[Path], str]:
    """:func:`replay_command_line` for the backend, ``--emulate``, engine, faults and oracle of ``run_info``."""

    def command(scenario_path: Path) -> str:
        return replay_command_line(
            scenario_path,
            run_info.backend,
            emulate=run_info.emulate,
            faults=run_info.faults,
            engine=run_info.engine,
            emulator=run_info.emulator,
            oracle=run_info.oracle,
        )

    return command


def replay_outcome(outcomes: Sequence[CheckOutcome]) -> CheckOutcome:
    """The outcome whose scenario is written to scenario.json: the first failing one, else the first."""
    if not outcomes:
        raise ValueError("write_report needs at least one CheckOutcome")
    return next((o for o in outcomes if not o.clean), outcomes[0])
