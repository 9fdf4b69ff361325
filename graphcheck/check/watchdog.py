"""Every call into an engine is bounded in time: past ``--hang-limit`` seconds it is a ``hang`` finding.

``boundary.call`` arms the watchdog around each call into engine code (build, capture, step, reset,
every member). One daemon thread watches the armed deadline; arming and disarming only write two
attributes, so an engine that behaves pays nothing measurable. Past the deadline:

1. *soft*: the thread signals the main thread (``SIGUSR2``); the handler raises :class:`Overdue`
   (a BaseException, so engine code that catches ``Exception`` cannot swallow it) inside the engine
   call, and the boundary turns it into :class:`EngineHung`, which the lockstep run reports as a
   ``hang`` divergence on the scenario it was running. This stops Python code and blocking waits.
2. *hard*: a hang inside a C++ op never returns to Python, so no handler runs. ``HARD_GRACE_S``
   seconds after the soft attempt the thread calls the ``on_hard`` callback the command line
   registered (it writes the scenario and the verdict) and ends the process with ``os._exit``.

The watchdog is off unless a command enables it (:func:`watching`); then only calls made on the
main thread are bounded (signal handlers run there alone).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from dataclasses import dataclass
from typing import Callable, Iterator

from graphcheck.errors import EngineError

#: Seconds one call into an engine may take before it is a hang (``--hang-limit``, $GRAPHCHECK_HANG_LIMIT).
DEFAULT_HANG_LIMIT_S = 300.0
HANG_LIMIT_ENV = "GRAPHCHECK_HANG_LIMIT"
#: Seconds after the soft attempt before the process is ended (the engine is stuck outside Python).
HARD_GRACE_S = 3.0
_POLL_S = 0.1
_SIGNAL = getattr(signal, "SIGUSR2", None)


class EngineHung(EngineError):
    """A call into the engine ran past the hang limit: the lockstep run's ``hang`` finding."""

    def __init__(self, where: str, limit_s: float) -> None:
        super().__init__(f"the engine's {where} was still running after {limit_s:g} s (--hang-limit)")
        self.where, self.limit_s = where, limit_s


class Overdue(BaseException):
    """Raised in the main thread by the watchdog's signal: the armed call is past its deadline."""


@dataclass(frozen=True)
class HardHang:
    """What the ``on_hard`` callback is told: which call hung, and the limit it ran past."""

    where: str
    limit_s: float


def parse_limit(text: str | float | None) -> float:
    """A hang limit in seconds (``none`` or ``0``: unbounded, as ``inf``); ValueError when malformed."""
    if text is None:
        return DEFAULT_HANG_LIMIT_S
    if isinstance(text, str) and text.strip().lower() in ("none", "off"):
        return float("inf")
    value = float(text)
    if value != value or value < 0:
        raise ValueError(f"a hang limit is seconds >= 0 or 'none', got {text!r}")
    return float("inf") if value == 0 else value


class _Watchdog:
    """The process's one watchdog (see the module docstring)."""

    def __init__(self) -> None:
        self.limit_s = float("inf")
        self.on_hard: Callable[[HardHang], int] | None = None
        #: (generation, monotonic deadline) of the armed call, one attribute so the watcher reads both at
        #: once; None while disarmed
        self.deadline: tuple[int, float] | None = None
        self.where = ""
        self.generation = 0
        self.depth = 0
        self.fired: int | None = None  # the generation the soft signal was sent for
        self.thread: threading.Thread | None = None
        self.main = threading.main_thread().ident

    # -- the main thread -----------------------------------------------------------------------
    def armed(self) -> bool:
        return self.thread is not None and self.limit_s != float("inf")

    def arm(self, where: str) -> bool:
        """Count a call named ``where`` in (the outermost one sets the deadline); False when calls are not
        bounded here (the watchdog off, or not the main thread)."""
        if not self.armed() or threading.get_ident() != self.main:
            return False
        self.depth += 1
        if self.depth > 1:
            return True
        self.generation += 1
        self.where = where
        self.deadline = (self.generation, time.monotonic() + self.limit_s)
        return True

    def disarm(self) -> None:
        self.depth -= 1
        if self.depth == 0:
            self.deadline = None

    def overdue(self, signum: int, frame: object) -> None:
        armed = self.deadline
        if armed is not None and self.fired == armed[0]:
            raise Overdue(self.where)

    # -- the watching thread -------------------------------------------------------------------
    def watch(self) -> None:
        while self.thread is threading.current_thread():  # a later watching() starts a thread of its own
            time.sleep(_POLL_S)
            armed = self.deadline
            if armed is None or time.monotonic() < armed[1]:
                continue
            generation, deadline = armed
            if self.fired != generation:
                self.fired = generation
                if _SIGNAL is not None and self.main is not None:
                    signal.pthread_kill(self.main, _SIGNAL)
                continue
            if time.monotonic() >= deadline + HARD_GRACE_S and self.deadline == armed:
                self.hard(HardHang(self.where, self.limit_s))

    def hard(self, hang: HardHang) -> None:
        code = 1
        try:
            if self.on_hard is not None:
                code = self.on_hard(hang)
        finally:
            os._exit(code)


WATCHDOG = _Watchdog()


@contextlib.contextmanager
def watching(limit_s: float, on_hard: Callable[[HardHang], int] | None = None) -> Iterator[None]:
    """Bound every engine call of the body by ``limit_s`` seconds (from the main thread only; elsewhere,
    or with an infinite limit, nothing is bounded)."""
    if threading.current_thread() is not threading.main_thread() or _SIGNAL is None or limit_s == float("inf"):
        yield
        return
    previous = signal.signal(_SIGNAL, WATCHDOG.overdue)
    WATCHDOG.limit_s, WATCHDOG.on_hard, WATCHDOG.main = limit_s, on_hard, threading.get_ident()
    WATCHDOG.thread = threading.Thread(target=WATCHDOG.watch, name="graphcheck-watchdog", daemon=True)
    WATCHDOG.thread.start()
    try:
        yield
    finally:
        WATCHDOG.thread, WATCHDOG.deadline, WATCHDOG.depth = None, None, 0
        WATCHDOG.limit_s, WATCHDOG.on_hard = float("inf"), None
        signal.signal(_SIGNAL, previous)


def chosen_hang_limit() -> float | None:
    """The hang limit being watched when it is not the default (what a replay command must repeat), else None."""
    limit = WATCHDOG.limit_s
    return limit if WATCHDOG.thread is not None and limit not in (DEFAULT_HANG_LIMIT_S, float("inf")) else None


@contextlib.contextmanager
def on_hard_hang(callback: Callable[[HardHang], int]) -> Iterator[None]:
    """While the body runs, a hang outside Python calls ``callback`` (it writes what it can and returns the
    exit code) instead of the command's default."""
    previous = WATCHDOG.on_hard
    if previous is None:  # not watching: nothing to replace
        yield
        return
    WATCHDOG.on_hard = callback
    try:
        yield
    finally:
        WATCHDOG.on_hard = previous


__all__ = [
    "DEFAULT_HANG_LIMIT_S",
    "HANG_LIMIT_ENV",
    "EngineHung",
    "HardHang",
    "WATCHDOG",
    "Overdue",
    "chosen_hang_limit",
    "on_hard_hang",
    "parse_limit",
    "watching",
]
