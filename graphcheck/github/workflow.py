"""GitHub Actions workflow commands: ``::error file=F,line=N,title=T::message`` lines on stdout.

The runner reads any stdout line that starts with ``::`` as a command, so every
value graphcheck puts into one is escaped the way the runner unescapes it
(actions/toolkit ``command.ts``): in the message ``%``, CR and LF; in a
property value also ``:`` and ``,``, which would otherwise end the property.
An escaped value never contains a line break, so divergence text can neither
split a command nor start a new one.
"""

from __future__ import annotations

import re
import secrets
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from graphcheck.report.fmt import clip

#: Longest message or property value before it is cut: GitHub shows only the start of a long one.
MAX_VALUE_CHARS = 2000

_TRACEBACK_FRAME = re.compile(r'File "([^"\n]+)", line (\d+)')


def escape_data(text: str) -> str:
    """A command's message: ``%`` first, so the escapes it introduces are not escaped again."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A property value (``file=``, ``title=``): the message escapes plus ``:`` and ``,``."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _clip(text: str) -> str:
    return clip(text, MAX_VALUE_CHARS)


@dataclass(frozen=True)
class Annotation:
    """One ``::error`` / ``::warning`` / ``::notice`` command."""

    level: str  # "error", "warning" or "notice"
    message: str
    title: str = ""
    file: str = ""
    line: int | None = None

    def command(self) -> str:
        props = [("file", self.file), ("line", "" if self.line is None else str(self.line)), ("title", self.title)]
        rendered = ",".join(f"{key}={escape_property(_clip(value))}" for key, value in props if value)
        return f"::{self.level}{' ' + rendered if rendered else ''}::{escape_data(_clip(self.message))}"


def repo_relative(path: Path | str, workspace: Path) -> str:
    """``path`` relative to the workspace when it lies inside it (annotations attach to repo files), else as given."""
    candidate = Path(path)
    try:
        return candidate.resolve().relative_to(workspace.resolve()).as_posix()
    except (OSError, ValueError):
        return str(path)


def source_location(traceback_text: str, workspace: Path) -> tuple[str, int] | None:
    """The innermost traceback frame in a file of the workspace: (repo-relative path, line).

    Frames in site-packages (torch, paddle) are skipped: the annotation should
    point at the engine code under test, which is what a pull request changes.
    """
    root = workspace.resolve()
    for name, line in reversed(_TRACEBACK_FRAME.findall(traceback_text)):
        path = Path(name) if Path(name).is_absolute() else root / name
        try:
            resolved = path.resolve()
            relative = resolved.relative_to(root)
        except (OSError, ValueError):
            continue
        if "site-packages" in relative.parts or not resolved.is_file():
            continue
        return relative.as_posix(), int(line)
    return None


@contextmanager
def commands_stopped(enabled: bool, write: Callable[[str], object] | None = None) -> Iterator[None]:
    """While inside, the runner executes no workflow command, whatever is printed.

    Prints ``::stop-commands::TOKEN`` on entry and ``::TOKEN::`` on exit, with a
    fresh random token, so text graphcheck does not control (an engine's own
    prints, a library's warning) cannot inject a command while the run goes on.
    graphcheck's annotations are printed after the block. Does nothing unless
    ``enabled``.
    """
    if not enabled:
        yield
        return
    out = write or sys.stdout.write
    token = f"graphcheck-{secrets.token_hex(16)}"
    sys.stdout.flush()
    out(f"::stop-commands::{token}\n")
    try:
        yield
    finally:
        sys.stdout.flush()
        out(f"::{token}::\n")
        sys.stdout.flush()
