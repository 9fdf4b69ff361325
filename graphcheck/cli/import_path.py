"""A downloaded report must never run code from itself: its folder leaves ``sys.path`` before a replay.

``graphcheck replay REPORT_DIR`` imports the engine its ``divergences.json`` names. When the
report folder is on ``sys.path`` (run from inside it, where ``python -m`` and an empty
``PYTHONPATH`` entry put the current directory first), a module shipped in the folder under that
name would be imported and run. :func:`drop_folder` removes every entry that is the folder or lies
inside it, for the rest of the process.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def _within(entry: str, folder: Path) -> bool:
    try:
        where = Path(entry or os.getcwd()).resolve()  # "" (and ".") is the current directory
    except (OSError, ValueError, RuntimeError):
        return False
    return where == folder or folder in where.parents


def drop_folder(folder: Path) -> tuple[str, ...]:
    """Remove ``folder`` (and every folder inside it) from ``sys.path``; the entries removed."""
    folder = folder.resolve()
    dropped = tuple(entry for entry in sys.path if _within(entry, folder))
    sys.path[:] = [entry for entry in sys.path if not _within(entry, folder)]
    return dropped


__all__ = ["drop_folder"]
