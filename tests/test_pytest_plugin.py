"""The pytest plugin: inert without its options, usable from a separate project, honest about backends.

The example project (examples/pytest-project) is copied to a temporary folder
and run by pytest in a subprocess, with the repository on PYTHONPATH and the
plugin given by ``-p graphcheck.pytest_plugin``, which works whether or not
graphcheck is installed (the entry point carries the module's name, so ``-p``
on top of it is a no-op). Where the entry point is installed (``pip install
-e .``, as ./dev.sh does), a run without ``-p`` proves it.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import Phase, settings

from graphcheck import pytest_plugin
from graphcheck.check.checker import Checker, ScenarioDiverged
from graphcheck.check.engines import EngineChoice, engine_from_factory
from graphcheck.scenario import Scenario
from graphcheck.search.builtin import demo_scenario

from _layers import slow

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "pytest-project"
PLUGIN = "graphcheck.pytest_plugin"
FAULT = "rebind-output-offsets"


def entry_point_installed() -> bool:
    return any(ep.value == PLUGIN for ep in importlib.metadata.entry_points(group="pytest11"))


def run_pytest(cwd: Path, *args: str, autoload: bool = True, timeout: int = 420) -> subprocess.CompletedProcess[str]:
    """pytest in a subprocess, in ``cwd``, with this checkout importable and no graphcheck/Hypothesis env leaking in."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("GRAPHCHECK_BACKEND", "GRAPHCHECK_EMULATE", "HYPOTHESIS_PROFILE", "PYTEST_ADDOPTS")
    }
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    if not autoload:
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args]
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def outcomes(stdout: str) -> dict[str, str]:
    """test name -> PASSED / FAILED / ERROR / SKIPPED, from ``-v`` output."""
    return dict(re.findall(r"::(\w+) (PASSED|FAILED|ERROR|SKIPPED)", stdout))


@pytest.fixture
def project(tmp_path: Path) -> Path:
    dest = tmp_path / "project"
    shutil.copytree(EXAMPLE, dest, ignore=shutil.ignore_patterns(".hypothesis", ".pytest_cache", "__pycache__"))
    return dest


def write_project(root: Path, tests: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    (root / "test_it.py").write_text(tests, encoding="utf-8")
    return root


# ---------------------------------------------------------------------------
# The example project, run as a separate project
# ---------------------------------------------------------------------------


@slow
def test_example_project_passes_and_its_injected_fault_demo_fails(project: Path) -> None:
    run = run_pytest(
        project,
        "-p",
        PLUGIN,
        "--graphcheck-backend",
        "cpu",
        "--graphcheck-profile",
        "ci",
        "-v",
        *(f"tests/{f.name}" for f in sorted((project / "tests").glob("test_*.py"))),
        "tests/demo_injected_fault.py",
    )  # named: a `tests` argument would drop the demo
    out = run.stdout + run.stderr
    got = outcomes(run.stdout)
    assert got.pop("test_output_offsets_stay_bound_to_the_captured_storage") == "FAILED", out
    assert got and set(got.values()) == {"PASSED"}, out
    assert {
        "test_graph_replay_agrees_with_eager_and_reference",
        "test_the_lockstep_builds_the_overriding_engine",
        "test_an_injected_rebinding_is_caught",
    } <= set(got)
    assert run.returncode == 1, out
    assert "graphcheck: backend cpu, hypothesis profile graphcheck-ci" in run.stdout
    # The shrunk failure: the divergence, the replay command, Hypothesis's falsifying example.
    assert "ScenarioDiverged: graphcheck: step " in run.stdout
    assert "address divergence in cu_seqlens_out" in run.stdout
    assert f"graphcheck replay scenario.json --backend cpu --inject {FAULT}" in run.stdout
    # Hypothesis 6.x renamed "Falsifying example" to "Failing test case" in later releases.
    assert "Falsifying example" in run.stdout or "Failing test case" in run.stdout


@pytest.mark.skipif(not entry_point_installed(), reason="graphcheck is not pip-installed with its pytest11 entry point")
def test_the_entry_point_loads_the_plugin(tmp_path: Path) -> None:
    root = write_project(
        tmp_path / "ep",
        (
            "def test_loaded(pytestconfig):\n"
            f"    assert pytestconfig.pluginmanager.has_plugin({PLUGIN!r})\n"
            "    assert pytestconfig.getoption('graphcheck_profile') == 'ci'\n"
        ),
    )
    for extra in ((), ("-p", PLUGIN)):  # -p on top of the entry point must not register it twice
        run = run_pytest(root, *extra, "--graphcheck-profile", "ci")
        assert run.returncode == 0 and "1 passed" in run.stdout, run.stdout + run.stderr


def test_the_cuda_graphs_fixture_runs_plain_torch_cuda_code_on_the_cpu(tmp_path: Path) -> None:
    root = write_project(
        tmp_path / "emulated",
        (
            "import torch\n\n"
            "def test_graph(graphcheck_cuda_graphs):\n"
            "    x = torch.ones(2)\n"
            "    g = torch.cuda.CUDAGraph()\n"
            "    with torch.cuda.graph(g):\n"
            "        y = x * 3\n"
            "    x.fill_(2.0)\n"
            "    g.replay()\n"
            "    assert y.tolist() == [6.0, 6.0]\n"
            "    assert isinstance(g, graphcheck_cuda_graphs.CUDAGraph)\n\n"
            "def test_restored_after():\n"
            "    assert torch.cuda.CUDAGraph.__name__ == 'CUDAGraph'\n"
        ),
    )
    run = run_pytest(root, "-p", PLUGIN)
    assert run.returncode == 0 and "2 passed" in run.stdout, run.stdout + run.stderr


# ---------------------------------------------------------------------------
# Inert without options; usage errors; unavailable backends
# ---------------------------------------------------------------------------


def test_the_plugin_is_inert_without_its_options(tmp_path: Path) -> None:
    root = write_project(
        tmp_path / "plain",
        (
            "import sys\n\n"
            "def test_no_framework_was_imported():\n"
            "    assert not {'torch', 'paddle', 'hypothesis'} & set(sys.modules)\n"
        ),
    )
    run = run_pytest(root, "-p", PLUGIN, autoload=False)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "graphcheck:" not in run.stdout  # no report header unless an option is given
    helped = run_pytest(root, "-p", PLUGIN, "--help", autoload=False)
    assert all(o in helped.stdout for o in ("--graphcheck-backend", "--graphcheck-emulate", "--graphcheck-profile"))


@pytest.mark.parametrize(
    "args, message",
    [
        (("--graphcheck-profile", "nosuch"), "--graphcheck-profile nosuch: no Hypothesis profile of that name"),
        (("--graphcheck-backend", "tpu"), "invalid choice: 'tpu'"),
        (("--graphcheck-contract", "bogus"), "bogus"),
        (("--graphcheck-model", "float32", "--graphcheck-oracle", "exact"), "model-agnostic"),
    ],
)
def test_bad_options_are_usage_errors(tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    root = write_project(tmp_path / "plain", "def test_nothing(graphcheck_setup):\n    pass\n")
    run = run_pytest(root, "-p", PLUGIN, *args, autoload=False)
    assert run.returncode == pytest.ExitCode.USAGE_ERROR and message in run.stderr, run.stdout + run.stderr


def test_a_malformed_memory_limit_is_a_usage_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRAPHCHECK_MAX_ENGINE_MEMORY", "bogus")
    root = write_project(tmp_path / "limit", "def test_nothing():\n    pass\n")
    run = run_pytest(root, "-p", PLUGIN, autoload=False)
    assert run.returncode == pytest.ExitCode.USAGE_ERROR, run.stdout + run.stderr
    assert "GRAPHCHECK_MAX_ENGINE_MEMORY" in run.stderr and "reproduce_failure" not in run.stdout + run.stderr


def test_an_unavailable_backend_is_an_error_not_a_skip(tmp_path: Path) -> None:
    root = write_project(
        tmp_path / "xpu",
        (
            "def test_one(graphcheck_backend):\n    pass\n\n"
            "def test_two(graphcheck_lockstep):\n    pass\n\n"
            "def test_unrelated():\n    pass\n"
        ),
    )
    run = run_pytest(root, "-p", PLUGIN, "--graphcheck-backend", "xpu", "-v", autoload=False)
    got = outcomes(run.stdout)
    assert got == {"test_one": "ERROR", "test_two": "ERROR", "test_unrelated": "PASSED"}, run.stdout + run.stderr
    assert run.stdout.count("graphcheck backend unavailable: backend 'xpu'") >= 2


# ---------------------------------------------------------------------------
# Options, profiles and failure messages, in process
# ---------------------------------------------------------------------------


def fake_config(**options: object) -> SimpleNamespace:
    values = {"graphcheck_backend": None, "graphcheck_emulate": None, "graphcheck_profile": None, **options}
    return SimpleNamespace(getoption=values.__getitem__)


def test_backend_choice_prefers_options_then_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GRAPHCHECK_BACKEND", raising=False)
    monkeypatch.delenv("GRAPHCHECK_EMULATE", raising=False)
    assert pytest_plugin.backend_choice(fake_config()) == ("cpu", False)
    monkeypatch.setenv("GRAPHCHECK_BACKEND", "cuda")
    monkeypatch.setenv("GRAPHCHECK_EMULATE", "1")
    assert pytest_plugin.backend_choice(fake_config()) == ("cuda", True)
    assert pytest_plugin.backend_choice(fake_config(graphcheck_backend="xpu")) == ("xpu", True)
    assert pytest_plugin.backend_choice(fake_config(graphcheck_emulate=True)) == ("cuda", True)


def test_profiles_match_the_test_suite_and_leave_its_own_alone() -> None:
    theirs = {name: settings.get_profile(name) for name in pytest_plugin.TEST_PROFILE_EXAMPLES}  # tests/conftest.py's
    pytest_plugin.register_profiles()
    for name, profile in theirs.items():
        ours = settings.get_profile(pytest_plugin.profile_name(name))
        assert settings.get_profile(name) is profile, "graphcheck's profiles must not replace the project's"
        for field in ("max_examples", "deadline", "suppress_health_check", "print_blob", "derandomize", "database"):
            assert getattr(ours, field) == getattr(profile, field), (name, field)
        assert Phase.explain not in ours.phases and Phase.shrink in ours.phases
    assert pytest_plugin.profile_name("mine") == "mine"


def test_a_failing_check_names_the_divergence_and_a_working_replay(tmp_path: Path) -> None:
    from graphcheck.capture.devices import resolve
    from graphcheck.cli import main

    cpu = resolve("cpu")
    scenario = demo_scenario()
    with pytest.raises(ScenarioDiverged) as caught:
        Checker(cpu).check(scenario, faults=[FAULT])
    lines = str(caught.value).splitlines()
    assert lines[0] == "graphcheck: " + caught.value.outcome.first.headline()
    assert "address divergence in cu_seqlens_out" in lines[0]
    assert Scenario.from_json(lines[-1]) == scenario
    hint = next(line for line in lines if line.startswith("replay:"))
    command = shlex.split(hint.split("`")[1])
    assert command[:2] == ["graphcheck", "replay"]
    (tmp_path / "scenario.json").write_text(lines[-1], encoding="utf-8")
    argv = [*command[1:], "--report-dir", str(tmp_path / "reports")]
    argv[1] = str(tmp_path / "scenario.json")
    assert main(argv) == 1  # the replay diverges again


def test_replay_hints_follow_the_backend_the_engine_and_the_oracle() -> None:
    from graphcheck.backends.engine import Engine
    from graphcheck.capture.devices import resolve
    from graphcheck.check.setup import CheckSetup

    emulated_cuda = SimpleNamespace(name="cuda", emulated=True)
    assert Checker(emulated_cuda, faults=("a", "b")).replay_command() == (
        "graphcheck replay scenario.json --backend cuda --emulate --inject a --inject b"
    )
    cpu_like = SimpleNamespace(name="cpu", emulated=True)
    assert Checker(cpu_like).replay_command() == "graphcheck replay scenario.json --backend cpu"
    assert (
        Checker(cpu_like, setup=CheckSetup(oracle="model-agnostic"))
        .replay_command()
        .endswith("--oracle model-agnostic")
    )

    class Mine(Engine):
        pass

    mine = engine_from_factory(Mine)
    checker = Checker(resolve("cpu"), mine)
    outcome = checker(demo_scenario(num_steps=3), faults=[FAULT])
    report = checker.failure_report(outcome)
    assert shlex.join(["--engine", mine.spec]) in report and f"engine {mine.spec}" in report
    assert "--engine" not in Checker(resolve("cpu")).failure_report(outcome)
    assert engine_from_factory(Engine).builtin
    assert repr(checker).startswith("Checker(cpu, ")
    assert isinstance(mine, EngineChoice) and mine.spec.endswith("Mine")


_PROFILE_DUMP = """
import json, os
from hypothesis import settings
from graphcheck import pytest_plugin
for name in pytest_plugin.TEST_PROFILE_EXAMPLES:
    settings.register_profile(name, **pytest_plugin.profile_settings(name))
settings.load_profile(os.environ["HYPOTHESIS_PROFILE"])
pytest_plugin.register_profiles()
fields = ("max_examples", "deadline", "print_blob", "derandomize", "database")
print(json.dumps({name: {f: repr(getattr(settings.get_profile(p), f)) for f in fields}
                  for name in pytest_plugin.TEST_PROFILE_EXAMPLES
                  for p in (name, pytest_plugin.profile_name(name))}, sort_keys=True))
"""


@pytest.mark.parametrize("loaded", ["ci", "dev"])
def test_profiles_are_the_same_with_ci_set_or_unset(loaded: str) -> None:
    """Hypothesis changes its defaults on CI machines; graphcheck's profiles must not follow."""
    import json

    dumps = []
    for ci in (None, "true"):
        env = {k: v for k, v in os.environ.items() if k not in ("CI", "GITHUB_ACTIONS", "TF_BUILD")}
        env["HYPOTHESIS_PROFILE"] = loaded
        if ci:
            env["CI"] = ci
        out = subprocess.run([sys.executable, "-c", _PROFILE_DUMP], env=env, capture_output=True, text=True, check=True)
        dumps.append(json.loads(out.stdout))
    assert dumps[0] == dumps[1]
