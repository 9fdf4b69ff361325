"""The suites users run (``graphcheck run --suite NAME``, ``pytest tests/test_suites.py -k NAME``).

A Suite (``graphcheck.search.suite_registry.Suite``) is a focused scenario strategy
(``suites/scenarios.py``) plus the bug classes it targets (numbers of
docs/bug-classes.md). Its property is always the same: the lockstep run of a
drawn scenario has no failing divergence (``graphcheck.suites.properties.check``). ``SUITES`` is the registry, in run order; ``all``
is the general strategy that mixes every dimension. ``graphcheck run`` finds
this registry by name (``graphcheck.search.suite_registry.load_suites``).
"""

from __future__ import annotations

if __name__ != "graphcheck.suites":  # the checkout's suites/ folder, imported by its bare name
    raise ImportError(f"{__name__} is graphcheck.suites under another name: import graphcheck.suites instead")

from graphcheck.search.suite_registry import Suite
from graphcheck.suites import combinations as combo
from graphcheck.suites import scenarios as sc

SUITES: dict[str, Suite] = {
    s.name: s
    for s in (
        Suite(
            "addresses",
            "static inputs keep their storage across replays of every bucket",
            sc.address_scenarios,
            (1, 2, 12, 17),
        ),
        Suite(
            "padding",
            "batches shrink and grow across buckets: stale padded rows, holes, output slicing",
            sc.padding_scenarios,
            (3, 4, 5, 11),
        ),
        Suite(
            "accept",
            "forced accept patterns, verify strategies and policies, reasoning and eos rules",
            sc.accept_scenarios,
            (5, 13, 16),
            requires=("drafts",),
        ),
        Suite(
            "seeds",
            "per-request seeds advance by the right amount on every path and wrap the modulus",
            sc.seed_scenarios,
            (8, 9, 10),
        ),
        Suite(
            "capacity",
            "max_num_seqs below the largest bucket, queues, missing buckets, no graphs",
            sc.capacity_scenarios,
            (6, 7, 12),
        ),
        Suite(
            "memory", "long replay stretches: memory stays flat after the first replay", sc.memory_scenarios, (2, 14)
        ),
        Suite(
            "lifecycle",
            "arrivals, aborts, exits and reasoning changes at any step, with queueing",
            sc.lifecycle_scenarios,
            (3, 4, 10, 15, 16),  # 10: after an exit, rows and slots (or batches) no longer line up
        ),
        Suite(
            "combinations",
            "rare combinations built on purpose: eos and max_dec_len inside accepted drafts, every "
            "reasoning transition, buckets that shrink, batches past every bucket",
            combo.combination_scenarios,
            (3, 5, 6, 12, 13, 15, 16),
            requires=("drafts",),
        ),
        Suite(
            "pressure",
            "a KV cache sized from what the requests need: allocations fail, requests wait, are offloaded and "
            "prefilled again",
            sc.pressure_scenarios,
            (4, 10, 12),
            requires=("cache-report",),
        ),
        Suite("all", "the general strategy: every dimension mixed", sc.general_scenarios, tuple(range(1, 18))),
    )
}

__all__ = ["SUITES", "Suite"]
