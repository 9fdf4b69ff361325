"""graphcheck's errors: what went wrong, in domain terms. Only the command line maps them to exit codes.

Every exception graphcheck raises on purpose derives from :class:`GraphcheckError`,
through one of these families (``graphcheck.cli.exitcodes`` gives each its exit code)::

    GraphcheckError
        InputError               a bad option value or input: ScenarioError, OracleError,
                                 UnknownBackend, UnknownFault, SuiteNotReproducible
        BackendUnavailableError  a backend this machine cannot run: BackendUnavailable, NpuUnavailable
        ResourceError            the machine ran out of something: EngineOutOfMemory (a -j worker's
                                 comes back to the parent as it was raised: search.result.Stop)
        EngineError              an engine or graph runner cannot do what it was asked:
                                 CaptureError (HostSyncInCapture, EscapedOpError),
                                 PoisonedTensorError, EngineNotRestorable
        EngineAbortedError       the engine under test tried to leave the checker (SystemExit,
                                 a KeyboardInterrupt of its own, another BaseException): EngineAborted
        DivergenceError          a check failed: ScenarioDiverged (also an AssertionError),
                                 EngineNondeterministic (it failed once, not when run again)
        RunError                 graphcheck could not finish the run itself: ParallelRunError

The concrete classes live beside the code that raises them; several keep a builtin
base as well (ScenarioError is a ValueError, CaptureError a RuntimeError, ...), so
code that caught those goes on catching them. The standard library only: the
engine (``graphcheck.backends``) and the reference import this module too.
"""


class GraphcheckError(Exception):
    """Base of the errors graphcheck raises on purpose; each message is one line meant for a user."""


class InputError(GraphcheckError):
    """A bad option value or input (a suite name, a database location, a report folder, a scenario)."""


class BackendUnavailableError(GraphcheckError):
    """The backend's framework or device is missing."""


class ResourceError(GraphcheckError):
    """The machine ran out of something a check needs (memory): its limit, never a finding about the engine."""


class EngineError(GraphcheckError):
    """An engine or its graph runner cannot do what it was asked (a capture rule broken, a checkpoint lost).

    Inside a lockstep run such an error is itself the finding (a ``capture`` or ``crash``
    divergence); one that escapes a run is a bug to read with its traceback, not a user error.
    """


class EngineAbortedError(GraphcheckError):
    """The engine under test raised what would end graphcheck itself (``SystemExit``, a ``KeyboardInterrupt``
    of its own, another ``BaseException``): contained at the engine boundary (``graphcheck.check.boundary``)
    and reported as an engine error, never allowed to decide graphcheck's exit code."""


class DivergenceError(GraphcheckError):
    """A check found a failing divergence: the finding itself, raised for test frameworks (``ScenarioDiverged``)."""


class RunError(GraphcheckError):
    """graphcheck itself could not finish the run (parallel workers that failed before running a scenario):
    never a finding about the engine, so never the exit code of a divergence."""


__all__ = [
    "BackendUnavailableError",
    "DivergenceError",
    "EngineAbortedError",
    "EngineError",
    "GraphcheckError",
    "InputError",
    "ResourceError",
    "RunError",
]
