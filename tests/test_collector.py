"""A search runs with fewer collector passes and leaves the caller's settings as they were."""

from __future__ import annotations

import gc

from hypothesis import settings
from hypothesis import strategies as st

from graphcheck.search.collector import SEARCH_THRESHOLDS, fewer_collections
from graphcheck.search.fuzz import find_diverging


def test_a_search_runs_with_the_search_thresholds_and_restores_the_callers() -> None:
    seen: list[tuple[int, int, int]] = []
    before = gc.get_threshold()

    def diverges(example: int) -> None:
        seen.append(gc.get_threshold())
        return None

    find_diverging(st.integers(0, 9), diverges, settings(max_examples=3, database=None), seed=0, database_key=None)
    assert seen and set(seen) == {SEARCH_THRESHOLDS}
    assert gc.get_threshold() == before


def test_cyclic_garbage_of_a_search_is_collected_when_it_ends() -> None:
    class Node:
        pass

    gc.collect()
    with fewer_collections():
        for _ in range(1000):
            a, b = Node(), Node()
            a.other, b.other = b, a  # a cycle: reference counting alone never frees it
        del a, b
    assert not [o for o in gc.get_objects() if type(o) is Node]


def test_a_disabled_collector_stays_disabled() -> None:
    gc.disable()
    try:
        with fewer_collections():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_search_freezes_what_existed_before_it_and_unfreezes_it() -> None:
    assert gc.get_freeze_count() == 0
    with fewer_collections():
        assert gc.get_freeze_count() > 0  # the older heap is skipped by the search's collections
    assert gc.get_freeze_count() == 0


def test_a_freeze_made_by_someone_else_is_left_alone() -> None:
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with fewer_collections():
            pass
        assert gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()
