"""The import arrows of the README's layout, checked on the source.

graphcheck/ (the harness) sits on top and talks to engines through its
protocols; backends/ (engine and graph runners) and reference/ (the oracle)
share with it only its leaf modules: scenario.py (the vocabulary),
step_result.py (what a step reports), driver.py (how a scenario's script
is applied to a decoder, which the reference uses) and errors.py (the error families), all plain
standard library; reference/ never sees backends/;
suites/ build on the harness, which finds them by name, never by import.

Inside graphcheck/, each subpackage imports only the parts ``ARROWS`` lists
(check/ and search/ know no command line, report or parallel runner; only cli/
knows exit codes), and no module imports itself back through others: the
import graph has no cycle. A lazy import inside a function counts too: an
arrow is an arrow.
"""

from __future__ import annotations

import ast
import functools
import sys
from pathlib import Path
from types import MappingProxyType
from typing import AbstractSet, Mapping

import pytest

ROOT = Path(__file__).resolve().parent.parent
FRAMEWORKS = ("torch", "paddle", "torch_npu")
SHARED_LEAVES = (
    "graphcheck.scenario",
    "graphcheck.step_result",
    "graphcheck.memory_estimate",
    "graphcheck.driver",
    "graphcheck.state",
    "graphcheck.contract",
    "graphcheck.model_report",
    "graphcheck.capabilities",
    "graphcheck.errors",
    "graphcheck.schedule",
    "graphcheck.buckets",
    "graphcheck.display",
    "graphcheck.files",
)


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


@functools.cache  # a dozen tests read the same folders, which do not change during a run
def _package_imports(package: str) -> tuple[tuple[str, str, bool], ...]:
    return tuple(
        (str(path.relative_to(ROOT)), module, top)
        for path in sorted((ROOT / package).rglob("*.py"))
        for module, top in _imports(path)
    )


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
    assert not bad, f"graphcheck/ must find suites by name (graphcheck.search.suite_registry), not import them: {bad}"


def test_the_harness_imports_no_framework_at_module_level() -> None:
    bad = [(f, m) for f, m, top in _package_imports("graphcheck") if top and _root(m) in FRAMEWORKS]
    assert not bad, f"graphcheck/ imports torch and paddle only inside functions: {bad}"


#: What of the harness the built-in engine may use besides the leaves: the capture library it captures
#: with (graph runners, ``@kernel``, backend resolution), which never imports the engine back.
ENGINE_LIBRARY = "graphcheck.capture"


@pytest.mark.parametrize("package", ["backends", "reference"])
def test_engine_and_oracle_share_only_the_leaf_modules(package: str) -> None:
    library = (ENGINE_LIBRARY,) if package == "backends" else ()
    bad = [
        (f, m)
        for f, m, _ in _package_imports(package)
        if _part(m) == "harness"
        and m not in SHARED_LEAVES
        and not any(m == lib or m.startswith(lib + ".") for lib in library)
    ]
    assert not bad, f"{package}/ may use {SHARED_LEAVES + library} and nothing else of graphcheck/: {bad}"


def test_the_capture_library_never_imports_an_engine() -> None:
    """The arrow between the built-in engine and the harness's capture machinery points one way:
    backends/ imports graphcheck.capture, never the reverse (nor anything above the leaves)."""
    bad = [(f, m) for f, m, _ in _package_imports("graphcheck/capture") if _part(m) in ("backends", "suites")]
    assert not bad, bad


def test_check_imports_nothing_of_the_built_in_engine() -> None:
    """graphcheck/check/ reaches the built-in engine like any engine: through the adapter protocol and
    ``--engine``'s resolution of its spec (``graphcheck.check.engines``), never by importing backends/."""
    bad = [(f, m) for f, m, _ in _package_imports("graphcheck/check") if _part(m) == "backends"]
    assert not bad, f"graphcheck/check imports graphcheck.backends: {bad}"


@pytest.mark.parametrize("leaf", SHARED_LEAVES)
def test_shared_leaves_import_only_the_standard_library(leaf: str) -> None:
    path = ROOT / (leaf.replace(".", "/") + ".py")
    bad = [m for m, _ in _imports(path) if m not in SHARED_LEAVES and _root(m) not in _STDLIB]
    assert not bad, f"{leaf} is shared with backends/ and reference/, so it imports only the standard library: {bad}"


def test_the_oracle_is_independent_of_the_engine() -> None:
    bad = [
        (f, m)
        for f, m, _ in _package_imports("reference")
        if _part(m) in ("backends", "suites") or _root(m) in FRAMEWORKS
    ]
    assert not bad, f"reference/ is plain NumPy, independent of the engine: {bad}"


def test_backends_never_import_suites() -> None:
    bad = [
        (f, m) for f, m, _ in _package_imports("backends") if _part(m) in ("suites", "reference") or _root(m) == "tests"
    ]
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


#: The command line: the only package that turns errors and outcomes into exit codes.
CLI_PACKAGE = "graphcheck/cli/"


def _in_cli(file: str) -> bool:
    return Path(file).as_posix().startswith(CLI_PACKAGE)


def test_only_the_command_line_knows_exit_codes() -> None:
    folders = ("graphcheck", *MAPPED)
    bad = [
        (f, m)
        for folder in folders
        for f, m, _ in _package_imports(folder)
        if (m == "graphcheck.cli" or m.startswith("graphcheck.cli.")) and not _in_cli(f)
    ]
    assert not bad, f"domain modules raise graphcheck.errors; only {CLI_PACKAGE} maps them to exit codes: {bad}"
    for folder in folders:
        for path in (ROOT / folder).rglob("*.py"):
            text = path.read_text(encoding="utf-8")
            if not _in_cli(str(path.relative_to(ROOT))):
                assert "sys.exit(" not in text, f"{path.relative_to(ROOT)} exits the process itself"


def test_installed_packages_hold_no_tests() -> None:
    """pytest would import a test module inside reference/, backends/ or suites/ by its folder name,
    a second copy beside graphcheck.<name>: the tests live in tests/ only."""
    found = [
        str(p.relative_to(ROOT))
        for folder in ("graphcheck", *MAPPED)
        for p in (ROOT / folder).rglob("*.py")
        if p.name == "conftest.py" or p.name.startswith("test_")
    ]
    assert not found, found


# -- the import graph: modules, edges, cycles ---------------------------------------------------


def _module_names() -> dict[str, Path]:
    """Every module of the installed layout (graphcheck.*, the mapped folders included) and its file."""
    found = {}
    for folder in ("graphcheck", *MAPPED):
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts if folder == "graphcheck" else ["graphcheck", *parts])] = path
    return found


MODULES = _module_names()


def _known(name: str, modules: Mapping[str, Path]) -> str | None:
    """``name``, or the closest package above it that is one of ``modules`` (``a.b.func`` -> ``a.b``)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _type_checking_only(tree: ast.AST) -> set[int]:
    """ids of the nodes inside ``if TYPE_CHECKING:`` blocks: imports for the type checker, never run."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            inside.update(id(child) for stmt in node.body for child in ast.walk(stmt))
    return inside


def _edges(module: str, path: Path, modules: Mapping[str, Path], *, typing: bool = True) -> set[str]:
    """The ``modules`` that ``module`` imports anywhere in its body, functions included.

    ``import a.b.c`` is an edge to ``a.b.c``; ``from a.b import c`` to ``a.b.c`` when that is
    a module, else to ``a.b`` (so ``from graphcheck import x`` is one to ``graphcheck.x``);
    relative imports resolve against the module's package. Importing ``a.b.c`` also runs
    ``a/__init__.py`` and ``a/b/__init__.py``; those implicit edges are not counted.
    ``typing``: count the imports under ``if TYPE_CHECKING:`` too (a dependency, though never
    executed: the arrows count them, the cycle check does not).
    """
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    skip = set() if typing else _type_checking_only(tree)
    found = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            targets = [_known(alias.name, modules) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, *([base] if base else [])])
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else _known(base, modules)
                for alias in node.names
            ]
        else:
            continue
        found.update(t for t in targets if t is not None and t != module)
    return found


def _graph(modules: Mapping[str, Path], *, typing: bool = True) -> dict[str, set[str]]:
    return {module: _edges(module, path, modules, typing=typing) for module, path in modules.items()}


@functools.cache
def _layout_graph(*, typing: bool = True) -> Mapping[str, AbstractSet[str]]:
    """``_graph`` of the repository's MODULES, built once a process: the tests of the arrows all read it."""
    return MappingProxyType({module: frozenset(targets) for module, targets in _graph(MODULES, typing=typing).items()})


def _cycles(graph: Mapping[str, AbstractSet[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan's), each sorted: the cycles."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph.get(node, ())):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycles() -> None:
    """Whatever runs at import or call time; ``if TYPE_CHECKING:`` imports never run, so they cannot cycle."""
    cycles = _cycles(_layout_graph(typing=False))
    assert not cycles, (
        "import cycles (move what both sides need into one of them, or into a third module): "
        + "; ".join(" <-> ".join(c) for c in cycles)
    )


def test_the_cycle_checker_sees_every_kind_of_import(tmp_path: Path) -> None:
    files = {
        "graphcheck/a.py": "from graphcheck import b\n",
        "graphcheck/b.py": "def f():\n    from graphcheck.pkg import c\n",
        "graphcheck/pkg/__init__.py": "from graphcheck.pkg.c import thing\n",
        "graphcheck/pkg/c.py": "from . import d\n",
        "graphcheck/pkg/d.py": "import graphcheck.a\n",
        "graphcheck/e.py": "from graphcheck.scenario import Scenario\nfrom .pkg.c import thing\n",
        "graphcheck/f.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from graphcheck import a\n",
    }
    modules = {}
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        modules[name.removesuffix(".py").removesuffix("/__init__").replace("/", ".")] = path
    graph = _graph(modules)
    assert graph["graphcheck.a"] == {"graphcheck.b"}  # from graphcheck import <submodule>
    assert graph["graphcheck.b"] == {"graphcheck.pkg.c"}  # lazy, from a package import <submodule>
    assert graph["graphcheck.pkg"] == {"graphcheck.pkg.c"}  # from a module import <name>
    assert graph["graphcheck.pkg.c"] == {"graphcheck.pkg.d"}  # relative
    assert graph["graphcheck.e"] == {"graphcheck.pkg.c"}  # not one of these modules; relative, one up
    assert graph["graphcheck.f"] == {"graphcheck.a"} and _graph(modules, typing=False)["graphcheck.f"] == set()
    assert _cycles(graph) == [["graphcheck.a", "graphcheck.b", "graphcheck.pkg.c", "graphcheck.pkg.d"]]


# -- the arrows between the parts of graphcheck/ -------------------------------------------------

#: The top-level modules that import only the standard library and each other.
LEAVES = SHARED_LEAVES

#: What each part of graphcheck/ may import besides itself: the layout's arrows, lowest first.
#: A part is a subpackage, a top-level module, ``leaves`` (LEAVES), ``root``
#: (graphcheck/__init__.py) or a mapped folder (reference, backends, suites).
ARROWS: dict[str, set[str]] = {
    "root": set(),
    "leaves": set(),
    "strategies": {"leaves"},
    "capture": {"leaves"},
    "adapter": {"leaves", "capture"},
    "check": {"leaves", "adapter", "capture", "reference"},
    "search": {"leaves", "check"},
    "parallel": {"leaves", "check", "search", "capture"},
    "catalog": {"leaves", "check", "search", "capture", "reference"},
    "bench": {"leaves", "check"},
    "report": {"leaves", "check", "search", "catalog", "root"},
    "github": {"leaves", "check", "search", "report"},
    "pytest_plugin": {"leaves", "adapter", "check", "capture"},
    "emulate": {"capture"},
    "engines": {"leaves", "backends", "capture", "emulate"},
    "cli": {"leaves", "check", "search", "parallel", "catalog", "bench", "report", "github", "capture"},
}


def _part_of(module: str) -> str:
    if module in LEAVES:
        return "leaves"
    parts = module.split(".")
    return "root" if len(parts) == 1 else parts[1]


@pytest.mark.parametrize("part", sorted(ARROWS))
def test_the_arrows_of_the_layout(part: str) -> None:
    allowed = ARROWS[part] | {part}
    bad = sorted(
        (module, target)
        for module, targets in _layout_graph().items()
        if _part_of(module) == part
        for target in targets
        if _part_of(target) not in allowed
    )
    assert not bad, f"{part} may import only {sorted(allowed)} of graphcheck: {bad}"


def test_every_part_of_graphcheck_has_its_arrows() -> None:
    parts = {_part_of(m) for m in MODULES} - set(MAPPED)
    assert parts == set(ARROWS), "give a new part its arrows here, and its line in the README's layout"


def test_the_arrows_point_one_way() -> None:
    assert _cycles(ARROWS) == [], "the parts of graphcheck/ are layers: no two may import each other"


def test_check_and_search_know_nothing_above_them() -> None:
    above = {"cli", "catalog", "bench", "parallel", "report", "github"}
    assert not (ARROWS["check"] | ARROWS["search"]) & above
    assert "cli" not in ARROWS["report"] | ARROWS["github"]


def test_nothing_outside_the_command_line_imports_it() -> None:
    assert [part for part, allowed in ARROWS.items() if "cli" in allowed] == []
    bad = sorted(
        (m, t)
        for m, targets in _layout_graph().items()
        for t in targets
        if _part_of(t) == "cli" and _part_of(m) != "cli"
    )
    assert not bad, bad


@pytest.mark.parametrize("leaf", LEAVES)
def test_the_leaves_import_only_the_standard_library_and_each_other(leaf: str) -> None:
    bad = [m for m, _ in _imports(MODULES[leaf]) if m not in LEAVES and _root(m) not in _STDLIB]
    assert not bad, f"{leaf} is a leaf: it imports only the standard library and {LEAVES}: {bad}"
