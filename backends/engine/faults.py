"""Injectable faults: named bugs that reproduce real graph-capture bug classes.

Empty for now. A later change adds entries here, each a switch on one of the
engine's real code paths (never a separate fake engine); the engine accepts a
set of names from this registry at construction.
"""

from __future__ import annotations

from typing import Iterable

#: name -> one-line description of the bug it reproduces.
FAULTS: dict[str, str] = {}


class UnknownFault(ValueError):
    pass


def check_faults(names: Iterable[str]) -> frozenset[str]:
    """Validate fault names against the registry."""
    chosen = frozenset(names)
    unknown = sorted(chosen - FAULTS.keys())
    if unknown:
        known = ", ".join(sorted(FAULTS)) or "none yet"
        raise UnknownFault(f"unknown fault(s) {', '.join(unknown)}; known: {known}")
    return chosen
