"""What an engine logs during a run goes to the report folder, not into the progress display.

Engines log a lot (transformers prints hundreds of warnings while it builds and steps a
continuous-batching manager; vLLM logs every engine it starts). While :func:`captured` is
active, every record a ``logging.StreamHandler`` would write to the console (stdout or
stderr, ``logging.lastResort`` included) and every ``warnings.warn`` that would be shown is
written to one file instead, ``engine.log`` in the report folder, made on the first record.
The console gets one line that counts them (:meth:`EngineLog.summary`).

This is generic: it does not know which engine runs, and a logger made while the run goes on
(an engine importing its framework late) is captured as well, since the interception sits in
``StreamHandler.emit`` rather than on the loggers that exist when the run starts.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Iterator

from graphcheck.display import one_line

FILE_NAME = "engine.log"
_FORMAT = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")


@dataclass
class EngineLog:
    """The records captured so far and where they went."""

    path: Path
    records: int = 0
    warnings: int = 0  # records at WARNING or above, and warnings.warn calls
    _file: IO[str] | None = field(default=None, repr=False)
    _last: Any = field(default=None, repr=False)  # the last record written: one record, one line

    def write(self, line: str, *, warning: bool) -> None:
        if self._file is None:
            self._file = self.path.open("a", encoding="utf-8", errors="backslashreplace")
        self._file.write(line.rstrip("\n") + "\n")
        self.records += 1
        self.warnings += warning

    def record(self, record: logging.LogRecord) -> None:
        if record is self._last:  # the same record reaching a second console handler (propagation)
            return
        self._last = record
        try:
            text = _FORMAT.format(record)
        except Exception:  # a record whose message cannot be formatted: still counted
            text = f"{record.levelname} {record.name}: (unformattable message {record.msg!r})"
        self.write(text, warning=record.levelno >= logging.WARNING)

    def warning(self, message: Any, category: type[Warning], filename: str, lineno: int) -> None:
        self.write(f"WARNING warnings {category.__name__} at {filename}:{lineno}: {message}", warning=True)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def summary(self) -> str | None:
        """``engine log: 291 lines (24 warnings) in reports/<id>/engine.log``; None when nothing was logged."""
        if not self.records:
            return None
        return one_line(
            f"engine log: {_count(self.records, 'line')} ({_count(self.warnings, 'warning')}) in {self.path}"
        )


def _count(n: int, word: str) -> str:
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}s"


def _to_console(handler: logging.StreamHandler) -> bool:  # type: ignore[type-arg]
    stream = getattr(handler, "stream", None)
    return stream is not None and any(stream is s for s in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__))


@contextlib.contextmanager
def captured(folder: Path) -> Iterator[EngineLog]:
    """While the body runs, console log records and shown warnings go to ``folder / engine.log``."""
    log = EngineLog(folder / FILE_NAME)
    emit = logging.StreamHandler.emit

    def divert(handler: logging.StreamHandler, record: logging.LogRecord) -> None:  # type: ignore[type-arg]
        if _to_console(handler):
            log.record(record)
            return
        emit(handler, record)  # a handler writing to a file of its own keeps doing so

    def show(message: Any, category: type[Warning], filename: str, lineno: int, *_: Any, **__: Any) -> None:
        log.warning(message, category, filename, lineno)

    with warnings.catch_warnings():
        warnings.showwarning = show
        logging.StreamHandler.emit = divert  # type: ignore[method-assign]
        try:
            yield log
        finally:
            logging.StreamHandler.emit = emit  # type: ignore[method-assign]
            log.close()


__all__ = ["FILE_NAME", "EngineLog", "captured"]
