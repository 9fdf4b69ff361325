"""``--engine``: graphcheck checks an engine named from outside, the way it checks its own.

A throwaway package outside the repository (tests/_thirdparty_engines.py writes it into a
temporary folder) defines a clean wrapper of the built-in engine, registered under the
``graphcheck.engines`` entry point group, and one that rebinds a captured buffer after every
step, named as ``module:attribute``. Each command is run as a user runs it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from graphcheck.capabilities import EngineCapabilities, Fault
from graphcheck.check.checker import Checker
from graphcheck.check.engines import EngineSpecError, registered_engines, resolve_engine
from graphcheck.cli import exitcodes, main
from graphcheck.scenario import validate
from graphcheck.search.builtin import demo_scenario

from _layers import slow
from _thirdparty_engines import DECLARED_FAULTS, ENTRY_POINT, PACKAGE, make_package

ROOT = Path(__file__).resolve().parent.parent
REBINDING = f"{PACKAGE}:Rebinding"


@pytest.fixture
def thirdparty(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The package importable here and in child processes (PYTHONPATH), its entry point visible."""
    site = make_package(tmp_path / "site")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), str(ROOT), os.environ.get("PYTHONPATH", "")]))
    for name in [m for m in sys.modules if m == PACKAGE or m.startswith(PACKAGE + ".")]:
        monkeypatch.delitem(sys.modules, name)
    return site


def _run(tmp_path: Path, *extra: str, suite: str = "addresses", examples: str = "2") -> list[str]:
    return [
        "run",
        "--suite",
        suite,
        "--examples",
        examples,
        "--database",
        "none",
        "--quiet",
        "--steps",
        "4",
        "--report-dir",
        str(tmp_path / "reports"),
        *extra,
    ]


def _report(tmp_path: Path) -> Path:
    (report,) = sorted(p for p in (tmp_path / "reports").iterdir() if p.is_dir())
    return report


# -- resolving SPEC ------------------------------------------------------------------------------


def test_builtin_is_the_default_and_declares_every_fault() -> None:
    from graphcheck.backends.engine import Engine
    from graphcheck.backends.engine.faults import FAULTS

    choice = resolve_engine()
    assert choice.builtin and choice.factory is Engine and resolve_engine("builtin") == choice
    assert choice.capabilities.fault_names == tuple(sorted(FAULTS))
    assert choice.capabilities.supports_everything
    assert set(choice.optional_members()) == {"state_snapshot", "reset", "model_report", "memory_estimate"}


def test_an_entry_point_and_a_module_attribute_resolve(thirdparty: Path) -> None:
    assert registered_engines()[ENTRY_POINT] == f"{PACKAGE}:CleanWrapper"
    clean = resolve_engine(ENTRY_POINT)
    assert clean.factory.__name__ == "CleanWrapper" and clean.source.startswith("entry point")
    assert clean.capabilities.fault_names == tuple(sorted(DECLARED_FAULTS))
    assert resolve_engine(REBINDING).factory.__name__ == "Rebinding"


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("no_such_module_xyz:Engine", "cannot import no_such_module_xyz"),
        (f"{PACKAGE}:Missing", f"{PACKAGE} has no attribute Missing"),
        (f"{PACKAGE}:NotAnEngine", "no method submit, abort, buffer_tensors, memory_bytes"),
        (f"{PACKAGE}:DECLARED", "has no attribute"),
        ("not-registered", "no engine of that name"),
        ("a:b:c", "cannot import a"),
    ],
)
def test_a_spec_that_cannot_be_used_is_one_line_and_exit_2(
    thirdparty: Path, tmp_path: Path, spec: str, says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(EngineSpecError, match=says.split(",")[0]):
        resolve_engine(spec)
    for argv in (_run(tmp_path, "--engine", spec), ["faults", "--engine", spec]):
        assert main(argv) == exitcodes.USAGE
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and says in err and "Traceback" not in err, err


def test_an_engine_that_builds_without_a_protocol_member_is_exit_2(
    thirdparty: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_run(tmp_path, "--engine", f"{PACKAGE}:without_graphs", examples="1")) == exitcodes.USAGE
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no member graphs" in err and "Traceback" not in err, err


def test_faults_lists_what_the_engine_declares(thirdparty: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["faults", "--engine", ENTRY_POINT]) == exitcodes.CLEAN
    out = capsys.readouterr().out
    assert f"2 faults: {', '.join(sorted(DECLARED_FAULTS))}" in out and "phantom-request-bucket" not in out
    assert main(["faults", "--engine", REBINDING]) == exitcodes.CLEAN
    assert "declares no injectable faults" in capsys.readouterr().out


def test_inject_accepts_only_the_engine_s_faults(
    thirdparty: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_run(tmp_path, "--engine", ENTRY_POINT, "--inject", "host-sync-in-capture")) == exitcodes.USAGE
    err = capsys.readouterr().err
    assert f"unknown fault(s) of engine {ENTRY_POINT} host-sync-in-capture" in err
    assert all(name in err for name in DECLARED_FAULTS)


# -- capabilities ------------------------------------------------------------------------------


def test_capabilities_fit_a_scenario_to_the_engine() -> None:
    no_drafts = EngineCapabilities(drafts=False, graph_scopes=("forward",), verify_strategies=("greedy",))
    scenario = demo_scenario("topp")
    assert scenario.accepts and not scenario.config.naive_mode
    fitted = no_drafts.fit(scenario)
    assert fitted.config.naive_mode and fitted.accepts == ()
    assert (fitted.config.graph_scope, fitted.config.verify_strategy) == ("forward", "greedy")
    assert validate(fitted) == fitted and no_drafts.fit(fitted) is fitted
    assert EngineCapabilities().fit(scenario) is scenario
    assert no_drafts.missing(("drafts", "naive")) == ("drafts",)
    with pytest.raises(ValueError):
        EngineCapabilities(drafts=False, naive=False)
    with pytest.raises(ValueError):
        EngineCapabilities(graph_scopes=("everything",))
    with pytest.raises(ValueError):
        EngineCapabilities(faults=(Fault("x", 1), Fault("x", 2)))


def test_an_engine_without_drafts_runs_what_applies_and_skips_the_rest(
    thirdparty: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = _run(tmp_path, "--engine", f"{PACKAGE}:NoDrafts", "--suite", "accept", suite="padding")
    assert main(argv) == exitcodes.CLEAN
    out = capsys.readouterr().out
    assert "skipped suite accept: engine gc_thirdparty:NoDrafts does not declare drafts" in out
    fuzz = json.loads((_report(tmp_path) / "fuzz.json").read_text())
    assert [s["suite"] for s in fuzz["suites"]] == ["padding"]
    assert fuzz["run"]["skipped"][0]["suite"] == "accept" and fuzz["run"]["engine"] == f"{PACKAGE}:NoDrafts"
    assert fuzz["situations"] and all(
        row["examples"] == 0 for row in fuzz["situations"] if row["situation"] == "k=1"
    ), "every scenario ran in NAIVE mode"


def test_a_run_whose_every_suite_needs_what_the_engine_lacks_is_exit_2(thirdparty: Path, tmp_path: Path) -> None:
    assert main(_run(tmp_path, "--engine", f"{PACKAGE}:NoDrafts", suite="accept")) == exitcodes.USAGE


# -- the whole pipeline on a third-party engine ----------------------------------------------------


def test_run_is_clean_for_the_wrapper_and_diverges_for_the_rebinding_engine_and_replays(
    thirdparty: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_run(tmp_path / "clean", "--engine", ENTRY_POINT)) == exitcodes.CLEAN
    capsys.readouterr()
    assert main(_run(tmp_path / "bad", "--engine", REBINDING)) == exitcodes.DIVERGENCE
    out = capsys.readouterr().out
    assert "address divergence in infer_seed" in out and f"--engine {REBINDING}" in out
    report = _report(tmp_path / "bad")
    run = json.loads((report / "divergences.json").read_text())["run"]
    assert run["engine"] == REBINDING
    assert json.loads((report / "fuzz.json").read_text())["run"]["engine"] == REBINDING
    assert REBINDING in (report / "index.html").read_text() and REBINDING in (report / "junit.xml").read_text()
    # replay of the report folder: the recorded engine, without --engine on the command line
    replay = ["replay", str(report), "--report-dir", str(tmp_path / "replays")]
    assert main(replay) == exitcodes.DIVERGENCE
    out = capsys.readouterr().out
    assert f"engine {REBINDING}" in out and "address divergence in infer_seed" in out
    # and --engine on the command line overrides the recorded one
    assert main([*replay, "--engine", ENTRY_POINT]) == exitcodes.CLEAN


def test_the_python_api_checks_a_named_engine(thirdparty: Path) -> None:
    from graphcheck.capture.devices import resolve

    checker = Checker(resolve("cpu"), resolve_engine(REBINDING))
    outcome = checker.run(demo_scenario(num_steps=4))
    assert outcome.engine == REBINDING and outcome.first is not None and outcome.first.kind == "address"
    assert f"--engine {REBINDING}" in checker.failure_report(outcome)


@slow
@pytest.mark.parametrize(("spec", "code"), [(ENTRY_POINT, exitcodes.CLEAN), (REBINDING, exitcodes.DIVERGENCE)])
def test_parallel_workers_check_the_named_engine(thirdparty: Path, tmp_path: Path, spec: str, code: int) -> None:
    assert main(_run(tmp_path, "--engine", spec, "-j", "2")) == code
    run = json.loads((_report(tmp_path) / "divergences.json").read_text())["run"]
    assert run["engine"] == spec


@slow
def test_catalog_runs_the_faults_the_engine_declares(thirdparty: Path, tmp_path: Path) -> None:
    argv = [
        "catalog",
        "--engine",
        ENTRY_POINT,
        "--budget",
        "20",
        "--clean-budget",
        "4",
        "--shrink-budget",
        "2",
        "--quiet",
    ]
    assert main([*argv, "--report-dir", str(tmp_path)]) == exitcodes.CLEAN
    doc = json.loads((tmp_path / "catalog" / "catalog.json").read_text())
    assert sorted(f["fault"] for f in doc["faults"]) == sorted(DECLARED_FAULTS)
    assert all(f["detected"] for f in doc["faults"])
    assert main(["catalog", "--engine", REBINDING, "--report-dir", str(tmp_path)]) == exitcodes.USAGE


PLUGIN_TEST = """
from graphcheck.search.builtin import demo_scenario


def test_the_engine_is_clean(graphcheck_check):
    graphcheck_check(demo_scenario(num_steps=4))
"""


@slow  # a pytest subprocess (about 12 s); the plugin's fast tests are in tests/test_pytest_plugin.py
def test_the_pytest_plugin_checks_the_engine_given_by_option(thirdparty: Path, tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "test_mine.py").write_text(PLUGIN_TEST, encoding="utf-8")

    def pytest_run(*extra: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", *extra]
        command += ["-p", "graphcheck.pytest_plugin"] if "graphcheck" not in _entry_point_plugins() else []
        return subprocess.run(command, cwd=project, capture_output=True, text=True, env=os.environ.copy())

    clean = pytest_run("--graphcheck-engine", ENTRY_POINT)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    bad = pytest_run("--graphcheck-engine", REBINDING)
    assert bad.returncode == 1 and "address divergence in infer_seed" in bad.stdout, bad.stdout
    assert f"--engine {REBINDING}" in bad.stdout
    usage = pytest_run("--graphcheck-engine", f"{PACKAGE}:NotAnEngine")
    assert usage.returncode == 4 and "--graphcheck-engine" in usage.stderr, usage.stderr


def _entry_point_plugins() -> str:
    from importlib import metadata

    return " ".join(p.name for p in metadata.entry_points(group="pytest11"))
