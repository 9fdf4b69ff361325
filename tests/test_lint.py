"""Lint, format and type checks, configured in pyproject.toml ([tool.ruff], [tool.mypy])."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def tool(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed (pip install -e '.[test]')")
    return subprocess.run([sys.executable, "-m", module, *args], cwd=ROOT, capture_output=True, text=True)


def test_ruff_finds_nothing() -> None:
    run = tool("ruff", "check", "--output-format", "concise", ".")
    assert run.returncode == 0, run.stdout + run.stderr


def test_the_code_is_formatted() -> None:
    run = tool("ruff", "format", "--check", ".")
    assert run.returncode == 0, "run `ruff format .`:\n" + run.stdout + run.stderr


def test_the_public_modules_type_check() -> None:
    run = tool("mypy", "--no-incremental")
    assert run.returncode == 0, run.stdout + run.stderr
