"""What users import: graphcheck's ``__all__``, and every import the README and docs show."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

import graphcheck

ROOT = Path(__file__).resolve().parent.parent
DOCS = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    ROOT / "suites" / "README.md",
    ROOT / "reference" / "README.md",
    ROOT / "examples" / "pytest-project" / "README.md",
]
_FENCE = re.compile(r"```python\n(.*?)```", re.S)


@pytest.mark.parametrize("name", graphcheck.__all__)
def test_every_public_name_exists(name: str) -> None:
    assert getattr(graphcheck, name) is not None
    assert name in dir(graphcheck)


def test_importing_graphcheck_imports_no_framework() -> None:
    code = "import sys, graphcheck; print(any(m in sys.modules for m in ('torch', 'paddle', 'numpy')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError):
        graphcheck.no_such_thing  # noqa: B018


def _documented_imports() -> list[tuple[str, str, str | None]]:
    """(document, module, name or None) for every graphcheck import in a ```python block of the docs."""
    found = []
    for doc in DOCS:
        if not doc.is_file():
            continue
        for block in _FENCE.findall(doc.read_text(encoding="utf-8")):
            try:
                tree = ast.parse(block)
            except SyntaxError:
                continue
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "graphcheck":
                    found += [(doc.name, node.module, alias.name) for alias in node.names]
                elif isinstance(node, ast.Import):
                    found += [(doc.name, a.name, None) for a in node.names if a.name.split(".")[0] == "graphcheck"]
    return found


def test_the_docs_show_imports() -> None:
    assert len(_documented_imports()) >= 5


@pytest.mark.parametrize("doc, module, name", _documented_imports())
def test_every_documented_import_resolves(doc: str, module: str, name: str | None) -> None:
    imported = importlib.import_module(module)
    if name is not None:
        assert hasattr(imported, name) or importlib.util.find_spec(f"{module}.{name}") is not None, (doc, module, name)
