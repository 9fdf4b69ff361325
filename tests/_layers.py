"""The fast layer of the test suite: ``./dev.sh test -m "not slow"``.

Tests that fuzz and shrink whole runs, start subprocesses or repeat a check over
every fault, scope or backend are marked ``slow``. Where such a test is
parametrized, ``fast_first`` keeps a few of its cases in the fast layer, so
that layer still runs every module once; the whole suite runs them all.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import pytest

slow = pytest.mark.slow


def fast_first(
    values: Sequence[Any], fast: int | Callable[[Any], bool] = 1, ids: Sequence[str] | None = None
) -> list[Any]:
    """``values`` for ``parametrize``: the first ``fast`` of them (or those ``fast`` accepts) unmarked, the rest slow.

    A tuple value is spread over several argnames, as ``parametrize`` does.
    """
    picked = []
    for index, value in enumerate(values):
        is_fast = fast(value) if callable(fast) else index < fast
        args = value if isinstance(value, tuple) else (value,)
        name = ids[index] if ids is not None else None
        picked.append(pytest.param(*args, id=name, marks=() if is_fast else slow))
    return picked
