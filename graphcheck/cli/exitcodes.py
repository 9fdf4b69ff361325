"""Documented exit codes of the graphcheck command line, and the one table saying which error ends in which.

A subcommand returns ``CLEAN`` or ``DIVERGENCE`` (or ``INTERRUPTED``) itself; an exception
that reaches ``graphcheck.cli.main`` ends the way ``EXITS`` says for its class, looked up
along the class's MRO so that a subclass takes its nearest listed base's entry.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from graphcheck.check.memory_gate import MemoryLimitError
from graphcheck.display import one_line
from graphcheck.errors import (
    BackendUnavailableError,
    DivergenceError,
    EngineAbortedError,
    EngineError,
    GraphcheckError,
    InputError,
    ResourceError,
    RunError,
)
from graphcheck.scenario import ScenarioError

CLEAN = 0  #: every check agreed
DIVERGENCE = 1  #: at least one divergence between eager, graph and reference
USAGE = 2  #: bad command line or bad input (a malformed scenario file, say)
BACKEND_UNAVAILABLE = 3  #: the backend's framework or device is missing
INCOMPLETE = 4  #: graphcheck could not finish the run itself (its workers failed); not a finding
REPORT_UNWRITTEN = 5  #: the verdict was printed, but its report could not be written (a full disk)
ENGINE_ABORTED = 6  #: the engine raised what would end graphcheck (SystemExit, its own KeyboardInterrupt, ...)
INTERRUPTED = 130  #: stopped by Ctrl-C (SIGINT), SIGTERM or SIGHUP; what was found so far is in the report

#: Every code any command can return, with what it means: ``graphcheck --help`` prints it, README's table matches it.
MEANINGS: tuple[tuple[int, str], ...] = (
    (CLEAN, "clean"),
    (DIVERGENCE, "divergence, a hang past --hang-limit included (also an engine that diverged once and not again)"),
    (
        USAGE,
        "usage error or bad input (a malformed scenario, an engine that breaks the adapter protocol), "
        "or an allocation failure",
    ),
    (BACKEND_UNAVAILABLE, "backend unavailable"),
    (INCOMPLETE, "graphcheck could not finish the run itself (its workers failed); not a finding"),
    (REPORT_UNWRITTEN, "the verdict was printed but the report could not be written (a full disk)"),
    (
        ENGINE_ABORTED,
        "engine aborted: engine code raised SystemExit, a KeyboardInterrupt of its own or another "
        "BaseException (report written, scenario kept)",
    ),
    (INTERRUPTED, "interrupted (Ctrl-C, SIGTERM, SIGHUP); the report of what was found so far is written"),
)


def help_text() -> str:
    """The exit-code table as ``graphcheck --help`` ends with it."""
    return "exit codes:\n" + "\n".join(f"  {code:>3}  {meaning}" for code, meaning in MEANINGS)


@dataclass(frozen=True)
class Exit:
    """How ``main`` ends on an error: its exit code, and the one line it prints on stderr.

    ``line`` is formatted with ``error`` (the exception) and printed after ``graphcheck: ``, as one
    line (``graphcheck.display.one_line``: what the error quotes, a name given or an engine's, may hold
    a newline or a bidi control).
    """

    code: int
    line: str = "{error}"

    def message(self, error: BaseException) -> str:
        return "graphcheck: " + one_line(self.line.format(error=error))


#: Error class -> how ``main`` ends on it; None: not a user error, so the traceback stays
#: (an engine failure outside a lockstep run is a bug to read in full). A class that is not
#: listed takes the entry of the first listed class in its MRO; one with none propagates.
EXITS: Mapping[type[BaseException], Exit | None] = {
    GraphcheckError: None,
    InputError: Exit(USAGE, "error: {error}"),
    ScenarioError: Exit(USAGE, "bad scenario: {error}"),
    MemoryLimitError: Exit(USAGE, "bad scenario: {error}"),  # the engine's memory gate refused the scenario
    ResourceError: Exit(USAGE),  # the machine's limit (EngineOutOfMemory): its message says so
    BackendUnavailableError: Exit(BACKEND_UNAVAILABLE, "backend unavailable: {error}"),
    DivergenceError: Exit(DIVERGENCE, "{error}"),
    RunError: Exit(INCOMPLETE, "could not finish the run: {error}"),
    EngineAbortedError: Exit(ENGINE_ABORTED, "engine aborted: {error}"),
    EngineError: None,
    KeyboardInterrupt: Exit(INTERRUPTED, "interrupted"),
}


def verdict(outcomes: Iterable[Any]) -> int:
    """The code of a run's outcomes (``CheckOutcome``): an engine that aborted first, then any divergence."""
    outcomes = list(outcomes)
    if any(o.engine_error is not None for o in outcomes):
        return ENGINE_ABORTED
    return DIVERGENCE if any(not o.clean for o in outcomes) else CLEAN


def exit_for(error: BaseException | type[BaseException]) -> Exit | None:
    """``EXITS``' entry for ``error`` (an exception or its class): its own, else its nearest listed base's."""
    cls = error if isinstance(error, type) else type(error)
    for base in cls.__mro__:
        if base in EXITS:
            return EXITS[base]
    return None
