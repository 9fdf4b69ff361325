"""The same seed draws the same examples, whatever else the process has imported."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

import pytest

from graphcheck.capture.devices import resolve
from graphcheck.check.checker import Checker
from graphcheck.scenario import Scenario
from graphcheck.search import determinism
from graphcheck.search.fuzz import SearchHooks, fuzz_suite
from graphcheck.suites import SUITES

CPU = resolve("cpu")


def _drawn(tmp_path: Path) -> list[Scenario]:
    seen: list[Scenario] = []
    suite = SUITES["padding"]
    fuzz_suite(
        suite.name,
        suite.strategy(),
        Checker(CPU),
        examples=4,
        seed=3,
        pending_path=tmp_path / "pending.json",
        hooks=SearchHooks(on_example=lambda scenario, outcome: seen.append(scenario)),
    )
    return seen


def _import_literals(folder: Path, monkeypatch: Any) -> None:
    """A local module full of integer literals, the kind Hypothesis scans for constants."""
    numbers = ", ".join(str(n) for n in range(3, 4000, 7))
    (folder / "lots_of_literals.py").write_text(f"VALUES = [{numbers}]\nNAMES = ['r0', 'r1', 'padding']\n")
    monkeypatch.syspath_prepend(str(folder))
    importlib.invalidate_caches()
    importlib.import_module("lots_of_literals")


def test_a_seed_draws_the_same_examples_after_more_modules_are_imported(tmp_path: Path, monkeypatch: Any) -> None:
    before = _drawn(tmp_path)
    _import_literals(tmp_path, monkeypatch)
    try:
        assert _drawn(tmp_path) == before
    finally:
        sys.modules.pop("lots_of_literals", None)


def test_seed_only_puts_hypothesis_back() -> None:
    providers = pytest.importorskip("hypothesis.internal.conjecture.providers")
    getter, cache = providers._get_local_constants, providers.CONSTANTS_CACHE
    with determinism.seed_only():
        assert providers._get_local_constants is not getter
        assert not any(len(getattr(providers._get_local_constants(), n)) for n in ("integers", "strings"))
    assert (providers._get_local_constants, providers.CONSTANTS_CACHE) == (getter, cache)
