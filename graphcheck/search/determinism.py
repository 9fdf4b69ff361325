"""Make a Hypothesis search a function of its seed (and its example database) alone.

Hypothesis 6.1xx mixes into its draws literals it scans from the source of every
"local" module loaded in ``sys.modules`` (numbers and strings in the code of the
project under test). Which modules a process has imported then decides what a
seed draws: ``graphcheck run --seed 1`` and ``graphcheck catalog --seeds`` (same
seed, other modules loaded) drew different examples, and so did a source
checkout and a site-packages install. :func:`seed_only` offers Hypothesis no
local constants for the duration of a search; its built-in ones stay.

This reaches into ``hypothesis.internal``: where the names it expects are
missing (another Hypothesis version), it does nothing.
"""

from __future__ import annotations

import copy
from contextlib import contextmanager
from typing import Any, Iterator

_SETS = ("integers", "floats", "bytes", "strings")


def _providers() -> Any | None:
    try:
        from hypothesis.internal.conjecture import providers
    except ImportError:  # pragma: no cover - another Hypothesis layout
        return None
    wanted = ("_get_local_constants", "_local_constants", "CONSTANTS_CACHE")
    return providers if all(hasattr(providers, name) for name in wanted) else None


def _empty_like(constants: Any) -> Any | None:
    empty = copy.deepcopy(constants)
    for name in _SETS:
        found = getattr(empty, name, None)
        if found is None or not hasattr(found, "clear"):
            return None
        found.clear()
    return empty


@contextmanager
def seed_only() -> Iterator[None]:
    """While inside, Hypothesis draws no constants scanned from local modules (see the module docstring)."""
    providers = _providers()
    empty = _empty_like(providers._local_constants) if providers is not None else None
    if providers is None or empty is None:
        yield
        return
    getter, cache = providers._get_local_constants, providers.CONSTANTS_CACHE
    try:
        fresh = type(cache)(getattr(cache, "max_size", 1024))
    except Exception:  # pragma: no cover - another cache type
        yield
        return
    providers._get_local_constants, providers.CONSTANTS_CACHE = (lambda: empty), fresh
    try:
        yield
    finally:
        providers._get_local_constants, providers.CONSTANTS_CACHE = getter, cache


__all__ = ["seed_only"]
