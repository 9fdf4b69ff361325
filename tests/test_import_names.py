"""No module under two names: run from a checkout on PYTHONPATH, every module of graphcheck has one name.

The checkout's top-level reference/, backends/ and suites/ are graphcheck.reference,
graphcheck.backends and graphcheck.suites (a finder in graphcheck/__init__.py maps exactly
those three); nothing else of the checkout is part of graphcheck, and the three folders refuse
their bare names. Each check runs in a fresh interpreter with PYTHONPATH at the checkout.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from _modules import MAPPED

ROOT = Path(__file__).resolve().parent.parent


def _python(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GRAPHCHECK_", "PYTEST_"))}
    env["PYTHONPATH"] = str(ROOT)
    env["OMP_NUM_THREADS"] = "1"
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("name", ["graphcheck", "tests", "benchmarks", "examples", "docs"])
def test_the_checkouts_other_folders_are_not_graphcheck_modules(name: str, tmp_path: Path) -> None:
    run = _python(f"import graphcheck.{name}", tmp_path)
    assert run.returncode != 0 and f"No module named 'graphcheck.{name}'" in run.stderr, run.stderr


@pytest.mark.parametrize("name", MAPPED)
def test_a_mapped_folder_refuses_its_bare_name(name: str) -> None:
    """From the checkout's root (on sys.path), ``import backends`` would be a second graphcheck.backends."""
    for statement in (f"import {name}", f"from {name} import __doc__"):
        run = _python(statement, ROOT)
        last = run.stderr.strip().splitlines()[-1]
        assert run.returncode != 0, run.stderr
        assert last == (
            f"ImportError: {name} is graphcheck.{name} under another name: import graphcheck.{name} instead"
        ), run.stderr


def test_a_submodule_of_a_bare_name_is_refused_too() -> None:
    run = _python("import backends.engine", ROOT)
    assert run.returncode != 0 and "import graphcheck.backends instead" in run.stderr, run.stderr


def test_one_scenario_class_by_every_path(tmp_path: Path) -> None:
    code = """
import importlib
import graphcheck
from graphcheck.scenario import Scenario
from graphcheck.reference import decoder
from graphcheck.suites import properties
from graphcheck.check import lockstep
paths = [graphcheck.Scenario, importlib.import_module("graphcheck.scenario").Scenario, decoder.Scenario,
         properties.Scenario, lockstep.Scenario]
assert all(p is Scenario for p in paths), paths
for other in ("graphcheck.graphcheck.scenario", "scenario"):
    try:
        importlib.import_module(other)
    except ImportError:
        pass
    else:
        raise AssertionError(other + " imported: a second Scenario")
print("ok")
"""
    run = _python(code, tmp_path)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stdout + run.stderr


def test_every_module_has_one_entry_in_sys_modules(tmp_path: Path) -> None:
    code = f"""
import importlib, json, sys
sys.path.insert(0, {str(ROOT / "tests")!r})
from _modules import import_all
modules, skipped = import_all()
for name in modules:  # and by the other names a checkout could give it: each must fail
    parts = name.split(".")
    other = ".".join(parts[1:]) if len(parts) > 1 and parts[1] in {tuple(MAPPED)!r} else "graphcheck." + name
    try:
        importlib.import_module(other)
    except ImportError:
        pass
by_file = {{}}
for name, module in list(sys.modules.items()):
    file = getattr(module, "__file__", None)
    if file:
        by_file.setdefault(file, []).append(name)
print(json.dumps({{"imported": sorted(modules), "skipped": skipped, "files": by_file}}))
"""
    run = _python(code, tmp_path)
    assert run.returncode == 0, run.stderr
    found = json.loads(run.stdout.strip().splitlines()[-1])
    assert len(found["imported"]) > 100, found["imported"]
    sources = [ROOT / folder for folder in ("graphcheck", *MAPPED)]  # not a virtualenv inside the checkout
    ours = {
        file: names
        for file, names in found["files"].items()
        if any(Path(file).is_relative_to(folder) for folder in sources)
    }
    twice = {file: names for file, names in ours.items() if len(names) > 1}
    assert not twice, f"modules under two names: {twice}"
    folders = [ROOT / "graphcheck", *(ROOT / m for m in MAPPED)]
    names = {names[0]: Path(file) for file, names in ours.items()}
    for name, file in names.items():
        inside = any(file.is_relative_to(folder) for folder in folders)
        if name == "graphcheck" or name.startswith("graphcheck."):
            assert inside, f"{name} is {file}, outside graphcheck/ and the mapped folders"
        else:
            assert not inside, f"{file} is imported as {name}, not under graphcheck"
    for name in found["imported"]:
        top = name.split(".")[1] if "." in name else ""
        folder = ROOT / top if top in MAPPED else ROOT / "graphcheck"
        assert names[name].is_relative_to(folder), (name, names[name])
