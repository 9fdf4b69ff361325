"""The import arrows of DESIGN.md's layout, checked on the source.

graphcheck/ (the harness) sits on top and talks to engines through its
protocols; backends/ (engine and graph runners) and reference/ (the oracle)
share with it only its leaf modules: scenario.py (the vocabulary) and
driver.py (how a scenario's script is applied to a decoder, which the
reference uses), both plain standard library; reference/ never sees backends/;
suites/ build on the harness, which finds them by name, never by import.
A lazy import inside a function counts too: an arrow is an arrow.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FRAMEWORKS = ("torch", "paddle", "torch_npu")
SHARED_LEAVES = ("graphcheck.scenario", "graphcheck.memory_estimate", "graphcheck.driver")


def _imports(path: Path) -> list[tuple[str, bool]]:
    """(module, at module level) for every absolute import in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    top = {id(node) for node in tree.body}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, id(node) in top) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.module, id(node) in top))
    return found


def _package_imports(package: str) -> list[tuple[str, str, bool]]:
    return [
        (str(path.relative_to(ROOT)), module, top)
        for path in sorted((ROOT / package).rglob("*.py"))
        for module, top in _imports(path)
    ]


_STDLIB = set(sys.stdlib_module_names) | {"__future__"}


def _root(module: str) -> str:
    return module.split(".")[0]


def test_the_harness_never_imports_suites_or_tests() -> None:
    bad = [(f, m) for f, m, _ in _package_imports("graphcheck") if _root(m) in ("suites", "tests")]
    assert not bad, f"graphcheck/ must find suites by name (graphcheck.suite_registry), not import them: {bad}"


def test_the_harness_imports_no_framework_at_module_level() -> None:
    bad = [(f, m) for f, m, top in _package_imports("graphcheck") if top and _root(m) in FRAMEWORKS]
    assert not bad, f"graphcheck/ imports torch and paddle only inside functions: {bad}"


@pytest.mark.parametrize("package", ["backends", "reference"])
def test_engine_and_oracle_share_only_the_leaf_modules(package: str) -> None:
    bad = [(f, m) for f, m, _ in _package_imports(package) if _root(m) == "graphcheck" and m not in SHARED_LEAVES]
    assert not bad, f"{package}/ may use {SHARED_LEAVES} and nothing else of graphcheck/: {bad}"


@pytest.mark.parametrize("leaf", SHARED_LEAVES)
def test_shared_leaves_import_only_the_standard_library(leaf: str) -> None:
    path = ROOT / (leaf.replace(".", "/") + ".py")
    bad = [m for m, _ in _imports(path) if m not in SHARED_LEAVES and _root(m) not in _STDLIB]
    assert not bad, f"{leaf} is shared with backends/ and reference/, so it imports only the standard library: {bad}"


def test_the_oracle_is_independent_of_the_engine() -> None:
    bad = [(f, m) for f, m, _ in _package_imports("reference") if _root(m) in ("backends", "suites", *FRAMEWORKS)]
    assert not bad, f"reference/ is plain NumPy, independent of the engine: {bad}"


def test_backends_never_import_suites() -> None:
    bad = [(f, m) for f, m, _ in _package_imports("backends") if _root(m) in ("suites", "reference", "tests")]
    assert not bad, bad


def test_the_checker_sees_lazy_imports(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text("import os\n\ndef f():\n    from suites import SUITES\n    import torch\n")
    assert _imports(source) == [("os", True), ("suites", False), ("torch", False)]
