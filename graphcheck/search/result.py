"""What a run found, suite by suite: :class:`SuiteResult`, one type from the search to every report.

A SuiteResult is one suite's search at one seed (its figures, the situations it reached, the
shrunk diverging outcome if it found one), or the built-in demo scenarios (suite :data:`BUILTIN`,
every scenario's outcome). A run is a list of them, in the order they ran: ``-j 1`` makes them
in process, each ``-j N`` job makes one in a worker and sends it back as JSON
(:meth:`SuiteResult.to_dict`), and the console, fuzz.json, the HTML and JSON reports, JUnit and
the GitHub summary all read the same list.

A result may end in an error that is not a finding (:class:`Stop`: an engine that broke the
adapter protocol, a memory limit, ...): the run stops there with that error, the same under
``-j 1`` and ``-j N``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from graphcheck.check.engines import EngineSpecError
from graphcheck.check.memory_gate import MemoryLimitError
from graphcheck.check.noise import NumericTally
from graphcheck.check.records import CheckOutcome
from graphcheck.check.situations import SITUATION_NAMES, CoverageTally
from graphcheck.display import redacted
from graphcheck.errors import (
    BackendUnavailableError,
    DivergenceError,
    EngineAbortedError,
    GraphcheckError,
    InputError,
    ResourceError,
    RunError,
)
from graphcheck.scenario import ScenarioError

#: The suite name of the built-in demo scenarios' result.
BUILTIN = "builtin"
#: ``Stop.kind`` of a worker that died mid-job (or raised what graphcheck does not raise): no error to rebuild.
CRASH = "crash"
#: The errors a stopped result is rebuilt as, most specific first: a raised error becomes the first it is an instance of.
STOP_ERRORS: tuple[type[GraphcheckError], ...] = (
    EngineSpecError,
    MemoryLimitError,
    ScenarioError,
    InputError,
    BackendUnavailableError,
    ResourceError,
    EngineAbortedError,
    DivergenceError,
    RunError,
)


@dataclass(frozen=True)
class Stop:
    """Why a suite's run ended without a result: an error that is not a finding, by its class's name (``kind``)."""

    kind: str  # a name of STOP_ERRORS, or CRASH
    message: str

    @classmethod
    def of(cls, error: BaseException) -> Stop:
        kind = next((c.__name__ for c in STOP_ERRORS if isinstance(error, c)), CRASH)
        return cls(kind, str(error))

    def error(self) -> GraphcheckError | None:
        """The error to raise again in the parent (its class and message), None for a crash."""
        cls = next((c for c in STOP_ERRORS if c.__name__ == self.kind), None)
        if cls is None:
            return None
        error = cls.__new__(cls)
        Exception.__init__(error, self.message)
        return error


@dataclass(frozen=True)
class SuiteResult:
    """One suite's search at one seed, or (``suite == BUILTIN``) the demo scenarios; see the module docstring."""

    suite: str
    seed: int = 0
    examples: int = 0  # lockstep runs, shrinking included
    steps: int = 0  # engine steps over all of them
    elapsed_s: float = 0.0
    #: a search: the shrunk diverging outcome, when it found one; the demo scenarios: every one's outcome
    outcomes: tuple[CheckOutcome, ...] = ()
    first_failure_at: int | None = None  # the Hypothesis example (as --examples counts) of the first divergence
    interrupted: bool = False  # Ctrl-C ended the search; the outcome is the smallest diverging scenario seen
    ambiguous_examples: int = 0  # examples with an ambiguous divergence (a near tie), failing or not
    coverage: CoverageTally = field(default_factory=CoverageTally)  # situations the examples hit
    numeric: NumericTally = field(default_factory=NumericTally)  # a float model's noise and band
    stop: Stop | None = None  # the run ended here on an error that is not a finding
    label: str = ""  # the name shown, when not the suite's: a -j N job's "padding seed 1"
    reported: bool = True  # its outcomes are the run's findings (not a -j N seed another seed's smaller scenario beat)

    @property
    def builtin(self) -> bool:
        return self.suite == BUILTIN

    @property
    def name(self) -> str:
        return self.label or self.suite

    @property
    def outcome(self) -> CheckOutcome | None:
        """The finding: a search's shrunk diverging outcome; the first failing demo scenario."""
        if self.builtin:
            return next((o for o in self.outcomes if not o.clean), None)
        return self.outcomes[0] if self.outcomes else None

    @property
    def clean(self) -> bool:
        return self.outcome is None or self.outcome.clean

    @property
    def headline(self) -> str | None:
        """The first failing divergence's one line, or None."""
        found = self.outcome
        return found.first.headline() if found is not None and found.first is not None else None

    @property
    def shrink_state(self) -> str:
        """``-`` (nothing found), ``shrunk``, ``unshrunk: device lost`` (...) or ``interrupted``."""
        return "-" if self.outcome is None else shrink_state(self.outcome, interrupted=self.interrupted)

    @property
    def situations_reached(self) -> int:
        return sum(1 for n in SITUATION_NAMES if self.coverage.hits.get(n))

    @property
    def situations_replayed(self) -> int:
        return sum(1 for n in SITUATION_NAMES if self.coverage.replayed.get(n))

    def to_dict(self) -> dict[str, Any]:
        """As JSON types, the outcomes whole (``CheckOutcome.to_dict``): :meth:`from_dict` gives an equal result."""
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        data["outcomes"] = [o.to_dict() for o in self.outcomes]
        data["coverage"] = self.coverage.to_dict()
        data["numeric"] = self.numeric.to_dict()
        data["stop"] = None if self.stop is None else {"kind": self.stop.kind, "message": redacted(self.stop.message)}
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SuiteResult:
        data = dict(data)
        data["outcomes"] = tuple(CheckOutcome.from_dict(o) for o in data["outcomes"])
        data["coverage"] = CoverageTally.from_dict(data["coverage"])
        data["numeric"] = NumericTally.from_dict(data["numeric"])
        data["stop"] = None if data["stop"] is None else Stop(**data["stop"])
        return cls(**data)


def shrink_state(outcome: CheckOutcome, *, interrupted: bool = False) -> str:
    """How far a found scenario was shrunk: ``unshrunk: device lost``, ``unshrunk: engine aborted``,
    ``interrupted`` (Ctrl-C) or ``shrunk``."""
    if outcome.device_error is not None:
        return "unshrunk: device lost"
    if outcome.engine_error is not None:
        return "unshrunk: engine aborted"
    if outcome.hung is not None:
        return "unshrunk: engine hung"
    return "interrupted" if interrupted else "shrunk"


def fuzzed(results: Iterable[SuiteResult]) -> list[SuiteResult]:
    """The suites' searches of a run (its demo scenarios left out)."""
    return [r for r in results if not r.builtin]


def reported_outcomes(results: Iterable[SuiteResult]) -> list[CheckOutcome]:
    """The run's findings and checked scenarios, in run order: each reported search's outcome, every demo scenario's."""
    return [o for r in results if r.reported for o in r.outcomes]


def stop_of(results: Sequence[SuiteResult]) -> SuiteResult | None:
    """The first result that ended on an error, or None."""
    return next((r for r in results if r.stop is not None), None)


__all__ = [
    "BUILTIN",
    "CRASH",
    "STOP_ERRORS",
    "Stop",
    "SuiteResult",
    "fuzzed",
    "reported_outcomes",
    "shrink_state",
    "stop_of",
]
