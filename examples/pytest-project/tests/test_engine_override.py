"""Checking another engine: override ``graphcheck_engine_factory`` (module or session scope).

Here the "team engine" is the built-in engine counting how often the harness
builds it; a real project returns its own adapter (graphcheck docs/adapters.md).
"""

from __future__ import annotations

import pytest

from graphcheck.backends.engine import Engine
from graphcheck.search.builtin import demo_scenario


class CountingEngine(Engine):
    built = 0

    def __init__(self, *args, **kwargs):
        type(self).built += 1
        super().__init__(*args, **kwargs)


@pytest.fixture(scope="module")
def graphcheck_engine_factory():
    return CountingEngine


def test_the_lockstep_builds_the_overriding_engine(graphcheck_check):
    before = CountingEngine.built
    graphcheck_check(demo_scenario(num_steps=6))
    assert CountingEngine.built == before + 2  # one eager engine, one graph engine
