"""The one boundary between graphcheck and the engine under test: every call into engine code goes through it.

The engine is untrusted code running inside the checker. Whatever it raises that would end
graphcheck itself (``SystemExit``, a ``KeyboardInterrupt`` of its own, any other
``BaseException`` that is not an ``Exception``) is turned here into :class:`EngineAborted`, an
error the lockstep run reports as an engine error (its own exit code), so that nothing an engine
raises decides graphcheck's exit code. Ordinary exceptions pass through unchanged: the lockstep
reports those as ``crash`` and ``capture`` findings, as before.

A ``KeyboardInterrupt`` is the user's when graphcheck's own signal handlers raised it
(:class:`StopRequested`, installed by the command line with :func:`signals_owned`), or when none of
graphcheck's handlers are installed (the Python API, a pytest session: a Ctrl-C there must stop).
"""

from __future__ import annotations

import contextlib
import signal
import threading
import traceback
from typing import Any, Callable, Iterator, TypeVar

from graphcheck.check.watchdog import WATCHDOG, EngineHung, Overdue
from graphcheck.errors import EngineAbortedError, InputError

T = TypeVar("T")

#: Non-empty while graphcheck's own SIGINT / SIGTERM / SIGHUP handlers are installed.
_OWNED: list[bool] = []


class StopRequested(KeyboardInterrupt):
    """A stop asked for from outside (Ctrl-C, SIGTERM, SIGHUP), raised by graphcheck's own signal handler."""


@contextlib.contextmanager
def signals_owned() -> Iterator[None]:
    """While the body runs, a KeyboardInterrupt that is not a :class:`StopRequested` is the engine's own."""
    _OWNED.append(True)
    try:
        yield
    finally:
        _OWNED.pop()


#: Signals that stop a run as Ctrl-C does: a time limit's SIGTERM (``timeout``, Kubernetes, CI
#: runners) and a closed terminal's SIGHUP.
STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))


@contextlib.contextmanager
def user_stops(also: tuple[signal.Signals, ...] = ()) -> Iterator[None]:
    """While the body runs, SIGINT (and the signals ``also`` names) raise :class:`StopRequested`, and a
    KeyboardInterrupt that is not one is the engine's own (:func:`signals_owned`). Handlers are installed
    only from the main thread (Python allows no other); elsewhere the body runs as it is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: object) -> None:
        raise StopRequested(f"stopped by {signal.Signals(signum).name}")

    previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGINT, *also)}
    try:
        with signals_owned():
            yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def is_user_stop(error: BaseException) -> bool:
    """Whether ``error`` is a stop the user asked for (it must go on as it came), not the engine's doing."""
    if isinstance(error, StopRequested):
        return True
    return isinstance(error, KeyboardInterrupt) and not _OWNED


def describe(error: BaseException, limit: int = 300) -> str:
    """``Type: message`` of ``error``, at most ``limit`` characters; never raises (the message is the engine's)."""
    try:
        text = str(error)
    except BaseException:  # an engine's __str__ is engine code too
        text = "(its message could not be read)"
    line = f"{type(error).__name__}: {text}" if text else type(error).__name__
    return line if len(line) <= limit else line[: limit - 3] + "..."


class EngineAborted(EngineAbortedError):
    """The engine raised, in ``where``, what would have ended graphcheck (``error``: its one-line description).

    ``detail`` is the traceback. The lockstep run records it as the run's engine error
    (``CheckOutcome.engine_error``); one that escapes a run ends the command with its own exit code.
    """

    def __init__(self, where: str, error: BaseException) -> None:
        self.where = where
        self.original = error
        self.error = describe(error)
        self.detail = "".join(traceback.format_exception(type(error), error, error.__traceback__))
        super().__init__(
            f"the engine raised {self.error} in {where}: engine code may not end graphcheck "
            "(contained as an engine error)"
        )


_WHERE = "_graphcheck_raised_in"


def _mark(error: Exception, where: str) -> None:
    try:
        setattr(error, _WHERE, where)
    except Exception:  # an exception type that takes no attributes: left unmarked
        pass


def raised_in(error: BaseException) -> str | None:
    """The engine call (``where``) an exception came out of, when it was engine code's own; None otherwise."""
    where = getattr(error, _WHERE, None)
    return where if isinstance(where, str) else None


def call(where: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)``, engine code, with what would end graphcheck turned into :class:`EngineAborted`."""
    armed = WATCHDOG.arm(where)  # inline, not a context manager: this runs for every engine call
    try:
        return fn(*args, **kwargs)
    except (InputError, EngineAbortedError):  # graphcheck's verdicts on the engine (a broken promise): as they are
        raise
    except Exception as error:  # the engine's own exception: marked, so the lockstep can tell it from a harness bug
        _mark(error, where)
        raise
    except Overdue:  # the watchdog's signal: past the hang limit
        raise EngineHung(where, WATCHDOG.limit_s) from None
    except BaseException as error:
        if is_user_stop(error):
            raise
        raise EngineAborted(where, error) from None
    finally:
        if armed:
            WATCHDOG.disarm()


__all__ = [
    "STOP_SIGNALS",
    "EngineAborted",
    "StopRequested",
    "call",
    "describe",
    "is_user_stop",
    "raised_in",
    "signals_owned",
    "user_stops",
]
