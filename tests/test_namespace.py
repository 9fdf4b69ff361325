"""One import name: graphcheck installs as ``graphcheck`` alone, and works inside a project that has
its own top-level ``reference``, ``backends`` and ``suites`` packages (common names)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from _layers import slow

ROOT = Path(__file__).resolve().parent.parent

USER_TEST = """
import reference, backends, suites

from graphcheck.search.builtin import demo_scenario


def test_my_packages_are_mine():
    assert (reference.OWNER, backends.OWNER, suites.OWNER) == ("user", "user", "user")


def test_graphcheck_checks_in_my_project(graphcheck_check):
    graphcheck_check(demo_scenario(num_steps=3))
"""


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    source = tmp_path_factory.mktemp("source") / "graphcheck"  # a copy: setuptools writes build/ into it
    shutil.copytree(
        ROOT,
        source,
        ignore=shutil.ignore_patterns(
            ".venv", ".git", "reports", "build", "__pycache__", ".hypothesis", ".pytest_cache", "*.egg-info"
        ),
    )
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(source)],
        capture_output=True,
        text=True,
    )
    if build.returncode != 0:
        pytest.fail(f"building the wheel failed:\n{build.stdout}\n{build.stderr}")
    (path,) = out.glob("graphcheck-*.whl")
    return path


@slow
def test_the_wheel_has_one_top_level_name(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"graphcheck"}
    for inside in (
        "graphcheck/reference/decoder.py",
        "graphcheck/backends/engine/engine.py",
        "graphcheck/suites/__init__.py",
        "graphcheck/report/templates/index.html.j2",
    ):
        assert inside in names, inside
    top_level = next(n for n in names if n.endswith(".dist-info/top_level.txt"))
    assert zipfile.ZipFile(wheel).read(top_level).decode().split() == ["graphcheck"]


@slow
def test_a_project_with_its_own_reference_backends_and_suites(wheel: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(wheel)],
        check=True,
        capture_output=True,
    )
    project = tmp_path / "userproj"
    for name in ("reference", "backends", "suites"):
        (project / name).mkdir(parents=True)
        (project / name / "__init__.py").write_text('OWNER = "user"\n')
    (project / "tests").mkdir()
    (project / "tests" / "test_user.py").write_text(USER_TEST)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GRAPHCHECK_", "PYTEST_XDIST"))}
    env["PYTHONPATH"] = str(site)  # the installed wheel, ahead of this checkout's own install

    where = subprocess.run(
        [sys.executable, "-c", "import graphcheck.reference as r; print(r.__file__)"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert where.stdout.strip().startswith(str(site)), where.stdout
    cli = subprocess.run(
        [
            sys.executable,
            "-m",
            "graphcheck.cli",
            "run",
            "--suite",
            "padding",
            "--examples",
            "1",
            "--steps",
            "3",
            "--database",
            "none",
            "--quiet",
        ],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
    )
    assert cli.returncode == 0, cli.stdout + cli.stderr
    assert "CLEAN" in cli.stdout
    plugin = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:xdist",
            "-p",
            "graphcheck.pytest_plugin",
            "--graphcheck-backend",
            "cpu",
            "tests/test_user.py",
        ],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
    )
    assert plugin.returncode == 0 and "2 passed" in plugin.stdout, plugin.stdout + plugin.stderr
