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
#: The repository's top-level folders that install under graphcheck (pyproject.toml's package-dir).
MAPPED = ("reference", "backends", "suites")


def _root(module: str) -> str:
    return module.split(".")[0]


def _part(module: str) -> str:
    """Which part of the layout ``module`` belongs to: reference, backends, suites, the harness, or outside."""
    parts = module.split(".")
    if parts[0] != "graphcheck":
        return parts[0]
    return parts[1] if len(parts) > 1 and parts[1] in MAPPED else "harness"


def test_nothing_imports_the_folders_by_their_bare_names() -> None:
    """reference/, backends/ and suites/ are graphcheck.reference & co.: a bare name would be another module."""
    folders = ("graphcheck", *MAPPED, "tests", "benchmarks", "examples")
    bad = [(f, m) for folder in folders for f, m, _ in _package_imports(folder) if _root(m) in MAPPED]
    assert not bad, f"import graphcheck.reference / graphcheck.backends / graphcheck.suites instead: {bad}"


def test_the_harness_never_imports_suites_or_tests() -> None:
    bad = [(f, m) for f, m, _ in _package_imports("graphcheck") if _part(m) == "suites" or _root(m) == "tests"]
    assert not bad, f"graphcheck/ must find suites by name (graphcheck.suite_registry), not import them: {bad}"


def test_the_harness_imports_no_framework_at_module_level() -> None:
    bad = [(f, m) for f, m, top in _package_imports("graphcheck") if top and _root(m) in FRAMEWORKS]
    assert not bad, f"graphcheck/ imports torch and paddle only inside functions: {bad}"


@pytest.mark.parametrize("package", ["backends", "reference"])
def test_engine_and_oracle_share_only_the_leaf_modules(package: str) -> None:
    bad = [(f, m) for f, m, _ in _package_imports(package) if _part(m) == "harness" and m not in SHARED_LEAVES]
    assert not bad, f"{package}/ may use {SHARED_LEAVES} and nothing else of graphcheck/: {bad}"


@pytest.mark.parametrize("leaf", SHARED_LEAVES)
def test_shared_leaves_import_only_the_standard_library(leaf: str) -> None:
    path = ROOT / (leaf.replace(".", "/") + ".py")
    bad = [m for m, _ in _imports(path) if m not in SHARED_LEAVES and _root(m) not in _STDLIB]
    assert not bad, f"{leaf} is shared with backends/ and reference/, so it imports only the standard library: {bad}"


def test_the_oracle_is_independent_of_the_engine() -> None:
    bad = [(f, m) for f, m, _ in _package_imports("reference")
           if _part(m) in ("backends", "suites") or _root(m) in FRAMEWORKS]
    assert not bad, f"reference/ is plain NumPy, independent of the engine: {bad}"


def test_backends_never_import_suites() -> None:
    bad = [(f, m) for f, m, _ in _package_imports("backends") if _part(m) in ("suites", "reference") or _root(m) == "tests"]
    assert not bad, bad


def test_the_wheel_lists_every_package_under_one_name() -> None:
    """pyproject.toml names every package (they are mapped, not discovered): none may be missing."""
    tomllib = pytest.importorskip("tomllib")
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    assert config["package-dir"] == {"graphcheck": "graphcheck", **{f"graphcheck.{m}": m for m in MAPPED}}
    on_disk = set()
    for folder in ("graphcheck", *MAPPED):
        for init in (ROOT / folder).rglob("__init__.py"):
            relative = init.parent.relative_to(ROOT).parts
            on_disk.add(".".join(relative if folder == "graphcheck" else ("graphcheck", *relative)))
    on_disk.add("graphcheck.report.templates")  # data only: the Jinja templates
    assert set(config["packages"]) == on_disk


def test_the_checker_sees_lazy_imports(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text("import os\n\ndef f():\n    from graphcheck.suites import SUITES\n    import torch\n")
    assert _imports(source) == [("os", True), ("graphcheck.suites", False), ("torch", False)]


#: The command line: the only modules that turn errors and outcomes into exit codes.
CLI_MODULES = ("graphcheck/cli.py", "graphcheck/commands.py")


def test_only_the_command_line_knows_exit_codes() -> None:
    folders = ("graphcheck", *MAPPED)
    bad = [(f, m) for folder in folders for f, m, _ in _package_imports(folder)
           if m in ("graphcheck.exitcodes", "graphcheck.cli") and f not in CLI_MODULES]
    assert not bad, f"domain modules raise graphcheck.errors; only {CLI_MODULES} map them to exit codes: {bad}"
    for folder in folders:
        for path in (ROOT / folder).rglob("*.py"):
            text = path.read_text(encoding="utf-8")
            if str(path.relative_to(ROOT)) not in CLI_MODULES:
                assert "sys.exit(" not in text, f"{path.relative_to(ROOT)} exits the process itself"


def test_installed_packages_hold_no_tests() -> None:
    """pytest would import a test module inside reference/, backends/ or suites/ by its folder name,
    a second copy beside graphcheck.<name>: the tests live in tests/ only."""
    found = [str(p.relative_to(ROOT)) for folder in ("graphcheck", *MAPPED) for p in (ROOT / folder).rglob("*.py")
             if p.name == "conftest.py" or p.name.startswith("test_")]
    assert not found, found
