"""The engine is untrusted code inside the checker: whatever it does, graphcheck decides the verdict.

Scripted hostile engines (tests/_hostile_engines.py) exit, raise what is not an Exception, break the
adapter protocol or hang; each ends in a finding or a clear error with its documented exit code,
never in a lost or a false verdict.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from _hostile_engines import EXIT_AT_IMPORT, HOSTILE, make_hostile

from graphcheck.cli import exitcodes, main
from graphcheck.scenario import Scenario

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def hostile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The hostile packages importable here and in child processes."""
    site = make_hostile(tmp_path / "site")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), str(ROOT), os.environ.get("PYTHONPATH", "")]))
    for name in [m for m in sys.modules if m.startswith((HOSTILE, EXIT_AT_IMPORT))]:
        monkeypatch.delitem(sys.modules, name)
    return site


def run_args(tmp_path: Path, engine: str, *extra: str) -> list[str]:
    return [
        "run",
        "--engine",
        engine,
        "--suite",
        "addresses",
        "--examples",
        "2",
        "--database",
        "none",
        "--quiet",
        "--steps",
        "3",
        "--report-dir",
        str(tmp_path / "reports"),
        *extra,
    ]


def only_report(tmp_path: Path) -> Path:
    (report,) = sorted(p for p in (tmp_path / "reports").iterdir() if p.is_dir())
    return report


# -- item 2: nothing an engine raises decides graphcheck's exit code ------------------------------


def test_the_boundary_contains_what_would_end_graphcheck() -> None:
    from graphcheck.check.boundary import EngineAborted, StopRequested, call, signals_owned

    def exits() -> None:
        sys.exit(0)

    with pytest.raises(EngineAborted, match="SystemExit: 0 in step"):
        call("step", exits)
    with pytest.raises(ValueError):  # an ordinary exception is the lockstep's to judge
        call("step", lambda: int("x"))

    def interrupted() -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):  # no graphcheck handler: a Ctrl-C of the API user's
        call("step", interrupted)
    with signals_owned():
        with pytest.raises(EngineAborted, match="KeyboardInterrupt"):
            call("step", interrupted)

        def stopped() -> None:
            raise StopRequested("stopped by SIGINT")

        with pytest.raises(StopRequested):  # graphcheck's own handler: the user's stop goes on
            call("step", stopped)


@pytest.mark.parametrize(
    ("engine", "says"),
    [
        ("ExitZero", "SystemExit: 0"),
        ("ExitMessage", "SystemExit: the engine gives up"),
        ("OwnKeyboardInterrupt", "KeyboardInterrupt"),
        ("OwnBaseException", "Escape: not an Exception"),
        ("exit_in_factory", "SystemExit: 3"),
    ],
)
def test_an_engine_that_exits_is_an_engine_error_with_a_report(
    hostile: Path, tmp_path: Path, engine: str, says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(run_args(tmp_path, f"{HOSTILE}:{engine}")) == exitcodes.ENGINE_ABORTED
    out = capsys.readouterr().out
    assert "ENGINE ABORTED" in out and says in out, out
    report = only_report(tmp_path)
    assert (report / "index.html").is_file() and (report / "junit.xml").is_file()
    Scenario.from_json((report / "scenario.json").read_text())
    assert (report / "pending-scenario.json").is_file(), "the scenario it was on is kept"
    fuzz = json.loads((report / "fuzz.json").read_text())
    assert fuzz["suites"][0]["first"] is not None


def test_replay_of_an_engine_that_exits_is_an_engine_error(
    hostile: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(run_args(tmp_path, f"{HOSTILE}:ExitZero")) == exitcodes.ENGINE_ABORTED
    report = only_report(tmp_path)
    capsys.readouterr()
    assert main(["replay", str(report), "--report-dir", str(tmp_path / "replays")]) == exitcodes.ENGINE_ABORTED
    assert "engine aborted" in capsys.readouterr().out


def test_an_exit_from_engine_code_outside_the_lockstep_does_not_decide_the_exit_code(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Engine code graphcheck runs outside a lockstep run (the catalogue's peer-style baseline, say)."""
    from graphcheck.cli import faults

    monkeypatch.setattr(faults, "faults_command", lambda args: sys.exit(0))
    assert main(["faults"]) == exitcodes.ENGINE_ABORTED
    assert "SystemExit: 0" in capsys.readouterr().err


def test_an_engine_that_exits_at_import_is_an_engine_error(
    hostile: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(run_args(tmp_path, f"{EXIT_AT_IMPORT}:Engine")) == exitcodes.ENGINE_ABORTED
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "SystemExit: 0" in err and EXIT_AT_IMPORT in err, err


# -- the exit-code table ------------------------------------------------------------------------


def test_help_and_readme_list_every_exit_code(capsys: pytest.CaptureFixture[str]) -> None:
    codes = {v for k, v in vars(exitcodes).items() if k.isupper() and isinstance(v, int)}
    assert codes == {code for code, _ in exitcodes.MEANINGS}
    with pytest.raises(SystemExit):
        main(["--help"])
    help_text = capsys.readouterr().out
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for code in codes:
        assert f"\n  {code:>3}  " in help_text, code
        assert f"\n| `{code}` | " in readme, code


@pytest.mark.slow  # two pytest-xdist workers start (about 10 s)
@pytest.mark.parametrize("engine", ["ExitZero", "OwnKeyboardInterrupt"])
def test_an_engine_that_exits_is_the_same_engine_error_under_j2(
    hostile: Path, tmp_path: Path, engine: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(run_args(tmp_path, f"{HOSTILE}:{engine}", "-j", "2")) == exitcodes.ENGINE_ABORTED
    assert "ENGINE ABORTED" in capsys.readouterr().out
    assert (only_report(tmp_path) / "scenario.json").is_file()


@pytest.mark.parametrize(("engine", "says"), [("MemoryRaises", "cannot count"), ("SizesRaise", "no sizes")])
def test_an_engine_member_that_raises_is_a_finding_not_a_traceback(
    hostile: Path, tmp_path: Path, engine: str, says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(run_args(tmp_path, f"{HOSTILE}:{engine}")) == exitcodes.DIVERGENCE
    captured = capsys.readouterr()
    assert "DIVERGENCE" in captured.out and says in captured.out and "Traceback" not in captured.err


# -- item 4: a broken promise of the adapter protocol is one line, exit 2, never a divergence -----------

BROKEN_PROMISES = [
    ("StepReturnsNone", "step() returned NoneType None, expected a StepResult"),
    ("StepReturnsDict", "step() returned dict"),
    ("MemoryAsText", "memory_bytes() returned str 'lots', expected a non-negative int"),
    ("UndeclaredBucket", "last_step_info.bucket is int 999"),
    ("returns_none", "the engine factory returned None"),
    ("EstimateAsText", "memory_estimate() returned str 'big'"),
]


@pytest.mark.parametrize(("engine", "says"), BROKEN_PROMISES)
def test_a_broken_promise_is_one_line_and_exit_2(
    hostile: Path, tmp_path: Path, engine: str, says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(run_args(tmp_path, f"{HOSTILE}:{engine}")) == exitcodes.USAGE
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert len(err.splitlines()) == 1 and says in err and "broke the engine adapter protocol" in err, err
    assert "Traceback" not in err and "DIVERGENCE" not in captured.out


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("json:dumps", "json:dumps is not an engine factory"),
        (f"{HOSTILE}:raising_capabilities", "reading its capabilities raised RuntimeError: no capabilities today"),
        (f"{HOSTILE}:Dynamic", "raised RuntimeError: the module cannot say"),
    ],
)
def test_a_spec_that_is_no_engine_factory_is_one_line_and_exit_2(
    hostile: Path, tmp_path: Path, spec: str, says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for argv in (run_args(tmp_path, spec), ["faults", "--engine", spec]):
        assert main(argv) == exitcodes.USAGE
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and says in err and "Traceback" not in err, err


@pytest.mark.slow  # two pytest-xdist workers start (about 10 s)
def test_a_broken_promise_is_exit_2_under_j2_too(
    hostile: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(run_args(tmp_path, f"{HOSTILE}:StepReturnsDict", "-j", "2")) == exitcodes.USAGE
    captured = capsys.readouterr()
    assert "step() returned dict" in captured.err and "DIVERGENCE" not in captured.out


# -- item 5: an option the chosen engine cannot honour is exit 2 naming it ---------------------------


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["--engine", ""], "--engine: expected"),
        (["--engine", "   "], "--engine: expected"),
        (["--engine", "hf-cb", "--model", "exact"], "--model exact: engine hf-cb cannot run it"),
        (["--engine", "hf-cb", "--contract", "fastdeploy"], "--contract fastdeploy: engine hf-cb cannot run it"),
        (["--contract", "hf-cb"], "--contract hf-cb: engine builtin cannot run it"),
        (["--engine", "hf-cb", "--backend", "xpu", "--emulate"], "--backend xpu: engine hf-cb runs on torch"),
    ],
)
def test_an_option_the_engine_cannot_honour_is_exit_2_naming_it(
    tmp_path: Path, extra: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    if "hf-cb" in extra and "--engine" in extra:
        pytest.importorskip("transformers")
    if "xpu" in extra:
        pytest.importorskip("paddle")
    argv = ["run", "--database", "none", "--quiet", "--examples", "1", "--report-dir", str(tmp_path / "r"), *extra]
    assert main(argv) == exitcodes.USAGE
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and says in err, err
    assert not (tmp_path / "r").exists() or not any((tmp_path / "r").iterdir()), "refused before a report folder"


# -- item 3: credentials never reach an artifact, a log line or a job file ------------------------------


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("redis://:p@ss@host:6379/0", "ss@host"),
        ("--database redis://alice:se:cr@t@h:1/0 -j 2", "t@h"),
        ("redis://h:6379/0?password=hunter2&db=1", "hunter2"),
        ("rediss://h/0?db=1&Password=hunter2#frag", "hunter2"),
        ("redis://h/0?token=hunter2", "hunter2"),
        ("redis://:pa/ss@h/0", "pa/ss"),
    ],
)
def test_every_url_form_is_redacted(text: str, secret: str) -> None:
    from graphcheck.display import redacted

    assert secret not in redacted(text) and "***" in redacted(text)


def test_the_job_spec_file_holds_no_credentials(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("xdist")
    from hypothesis.database import InMemoryExampleDatabase

    from graphcheck.parallel import run as parallel_run
    from graphcheck.parallel.jobs import DATABASE_ENV, JobList
    from graphcheck.search import database

    url = "redis://:s3cr@t@127.0.0.1:6379/0?password=hunter2"
    monkeypatch.setattr(database, "_open_redis", lambda location: InMemoryExampleDatabase())
    seen: dict[str, str] = {}

    def no_workers(command: list[str], env: dict[str, str], results: Path, *args: object, **kwargs: object) -> object:
        (results / "pytest.log").write_text(f"a worker could not reach {url}\n", encoding="utf-8")
        seen["spec"] = (results / "spec.json").read_text(encoding="utf-8")
        seen["env"] = env[DATABASE_ENV]
        seen["command"] = " ".join(command)
        return 0, {}

    monkeypatch.setattr(parallel_run, "_watch_pytest", no_workers)
    assert main(run_args(tmp_path, "builtin", "-j", "2", "--database", url)) == exitcodes.INCOMPLETE
    out = capsys.readouterr()
    for text in (seen["spec"], seen["command"], out.out, out.err):
        assert "s3cr" not in text and "hunter2" not in text, text
    assert seen["env"] == url, "the workers get the database through the environment"
    assert JobList.from_json(seen["spec"]).with_database({DATABASE_ENV: url}).plan.database.location == url
    for path in (tmp_path / "reports").rglob("*"):
        if path.is_file():
            text = path.read_text(encoding="utf-8", errors="replace")
            assert "s3cr" not in text and "hunter2" not in text, path


# -- item 8: the pytest plugin's bad settings are usage errors (pytest's exit 4) ---------------------------

PLUGIN_TEST = """
from graphcheck.search.builtin import demo_scenario


def test_checked(graphcheck_check):
    graphcheck_check(demo_scenario(num_steps=3))
"""

NONE_FACTORY_TEST = """
import pytest
from graphcheck.search.builtin import demo_scenario


def none_factory(config, weights, *, device, use_graphs, faults):
    return None


@pytest.fixture(scope="module")
def graphcheck_engine_factory():
    return none_factory


def test_checked(graphcheck_check):
    graphcheck_check(demo_scenario(num_steps=3))
"""


def _pytest_in(root: Path, *args: str, env: dict[str, str]) -> tuple[int, str]:
    import subprocess

    clean = {k: v for k, v in os.environ.items() if not k.startswith(("GRAPHCHECK_", "HYPOTHESIS_", "PYTEST_"))}
    clean["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    clean["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "graphcheck.pytest_plugin", "-q", *args]
    run = subprocess.run(command, cwd=root, env={**clean, **env}, capture_output=True, text=True, timeout=300)
    return run.returncode, run.stdout + run.stderr


@pytest.mark.parametrize(
    ("args", "env", "source", "says"),
    [
        ((), {"GRAPHCHECK_BACKEND": "bogus"}, PLUGIN_TEST, "unknown backend 'bogus'"),
        ((), {"GRAPHCHECK_ENGINE": "bogus"}, PLUGIN_TEST, "$GRAPHCHECK_ENGINE bogus: no engine of that name"),
        (("--graphcheck-backend", "xpu", "--graphcheck-emulator", "ops"), {}, PLUGIN_TEST, "--emulator ops"),
        ((), {}, NONE_FACTORY_TEST, "the engine factory returned None"),
    ],
    ids=["backend-env", "engine-env", "ops-on-xpu", "factory-returns-none"],
)
def test_the_plugin_s_bad_settings_are_usage_errors(
    tmp_path: Path, args: tuple[str, ...], env: dict[str, str], source: str, says: str
) -> None:
    root = tmp_path / "project"
    root.mkdir()
    (root / "test_mine.py").write_text(source, encoding="utf-8")
    code, output = _pytest_in(root, *args, env=env)
    assert code == pytest.ExitCode.USAGE_ERROR and says in output, output


# -- item 6: untrusted files and names ----------------------------------------------------------------


def _baseline_argv(path: Path, tmp_path: Path) -> list[str]:
    return ["bench", "--quick", "--baseline", str(path), "--out", str(tmp_path / "bench")]


@pytest.mark.parametrize("kind", ["dev-zero", "fifo", "deep", "huge-int", "huge-float-int"])
def test_a_hostile_baseline_is_one_line_and_exit_2(
    tmp_path: Path, kind: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("pytest_benchmark")
    from graphcheck.bench import baseline as baseline_module

    path = tmp_path / "baseline.json"
    if kind == "dev-zero":
        path = Path("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "deep":
        path.write_text("[" * 100_000 + "]" * 100_000)
    else:
        big = "9" * 5000 if kind == "huge-int" else "1" + "0" * 400
        row = {"mode": "pooled", "per_suite": {"a": {"examples": big, "seconds": 1}}}
        path.write_text(json.dumps({"fuzz": {"rows": [row]}}).replace(f'"{big}"', big))
    with pytest.raises(Exception) as raised:
        baseline_module.read_baseline(path)
    from graphcheck.errors import InputError

    assert isinstance(raised.value, InputError), repr(raised.value)
    assert len(str(raised.value).splitlines()) == 1


def test_engine_declared_names_cannot_start_a_line() -> None:
    from graphcheck.capabilities import EngineOption, Fault

    for bad in ("x\n::error::forged", "a\u202eb", "two words", ""):
        with pytest.raises(ValueError, match="one printable word"):
            Fault(bad, 1)
        with pytest.raises(ValueError, match="one printable word"):
            EngineOption(bad, (0, 1))
    for bad in ("x\n::error::forged", "a\u202eb"):
        with pytest.raises(ValueError, match="one printable line"):
            Fault("fine", 1, summary=bad)
        with pytest.raises(ValueError, match="one printable line"):
            EngineOption("fine", (0, 1), summary=bad)


def test_bidi_controls_never_reach_the_summary_or_junit_raw(
    hostile: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    step_summary = tmp_path / "step-summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step_summary))
    junit = tmp_path / "junit.xml"
    argv = run_args(tmp_path, f"{HOSTILE}:ExitBidi", "--github", "--junit", str(junit))
    assert main(argv) == exitcodes.ENGINE_ABORTED
    out = capsys.readouterr().out
    report = only_report(tmp_path)
    for text in (step_summary.read_text(), (report / "summary.md").read_text(), junit.read_text(), out):
        assert "\u202e" not in text and "evil" in text
    assert not any(line.startswith("::error::forged") for line in out.splitlines())


def test_replay_of_a_report_never_imports_a_module_shipped_in_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from graphcheck.search.builtin import demo_scenario

    report = tmp_path / "downloaded"
    report.mkdir()
    (report / "scenario.json").write_text(demo_scenario(num_steps=2).to_json())
    (report / "divergences.json").write_text(json.dumps({"run": {"backend": "cpu", "emulate": False, "faults": []}}))
    marker = tmp_path / "ran"
    (report / "evil_engine.py").write_text(f"open({str(marker)!r}, 'w').close()\nEngine = None\n")
    recorded = json.loads((report / "divergences.json").read_text())
    recorded["run"]["engine"] = "evil_engine:Engine"
    (report / "divergences.json").write_text(json.dumps(recorded))
    monkeypatch.chdir(report)
    monkeypatch.setattr(sys, "path", ["", str(report), *sys.path])
    monkeypatch.delitem(sys.modules, "evil_engine", raising=False)
    capsys.readouterr()
    assert main(["replay", ".", "--report-dir", str(tmp_path / "replays")]) == exitcodes.USAGE
    assert "cannot import evil_engine" in capsys.readouterr().err
    assert not marker.exists(), "the module shipped in the report ran"


# -- item 7: every report file is written whole or not at all --------------------------------------------


@pytest.mark.parametrize(
    ("command", "fails_at"), [("run", "fuzz.json"), ("run", "index.html"), ("replay", "index.html")]
)
def test_a_full_disk_leaves_whole_files_and_the_verdict_names_them(
    command: str, fails_at: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The disk fills up while ``fails_at`` is written: it is never left half-written, and the line says
    which files were written whole."""
    import errno

    from graphcheck.search.builtin import demo_scenario

    real_write_text, real_fsync = Path.write_text, os.fsync
    full = OSError(errno.ENOSPC, "No space left on device")

    def half_then_full(self: Path, data: str, *args: object, **kwargs: object) -> int:
        if self.name == fails_at:
            real_write_text(self, data[: len(data) // 2])
            raise full
        return real_write_text(self, data, *args, **kwargs)  # type: ignore[arg-type]

    def fsync(fd: int) -> None:
        if os.readlink(f"/proc/self/fd/{fd}").split("/")[-1].startswith(f".{fails_at}."):
            raise full
        real_fsync(fd)

    monkeypatch.setattr(Path, "write_text", half_then_full)
    monkeypatch.setattr(os, "fsync", fsync)
    reports = tmp_path / "reports"
    if command == "run":
        argv = ["run", "--suite", "seeds", "--examples", "1", "--database", "none", "--steps", "2"]
    else:
        scenario = tmp_path / "s.json"
        real_write_text(scenario, demo_scenario(num_steps=2).to_json())
        argv = ["replay", str(scenario)]
    assert main([*argv, "--quiet", "--report-dir", str(reports)]) == exitcodes.REPORT_UNWRITTEN
    out = capsys.readouterr().out
    (report,) = [p for p in reports.iterdir() if p.is_dir()]
    assert not (report / fails_at).exists(), f"{fails_at} was left half-written"
    assert not list(report.glob(".*.tmp"))
    line = next(line for line in out.splitlines() if "NOT WRITTEN" in line)
    for path in report.iterdir():
        if path.is_file() and not path.name.startswith("pending"):
            assert path.name in line, (path.name, line)
            if path.suffix == ".json":
                json.loads(path.read_text(encoding="utf-8"))


# -- item 1: every engine call is bounded; a hang is a finding, kept and replayable ------------------------


def test_a_hanging_step_is_a_hang_finding_with_its_scenario_kept(
    hostile: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import time

    started = time.monotonic()
    code = main(run_args(tmp_path, f"{HOSTILE}:Hangs", "--hang-limit", "5"))
    took = time.monotonic() - started
    out = capsys.readouterr().out
    assert code == exitcodes.DIVERGENCE and "hang divergence in step()" in out, out
    assert took < 5 + 55, "caught within its limit plus some seconds (builds included)"
    report = only_report(tmp_path)
    assert json.loads((report / "divergences.json").read_text())["outcomes"][0]["first"]["kind"] == "hang"
    assert "--hang-limit 5" in out, "the replay command repeats the limit"
    capsys.readouterr()
    replay = ["replay", str(report), "--report-dir", str(tmp_path / "replays"), "--hang-limit", "5"]
    assert main(replay) == exitcodes.DIVERGENCE
    assert "hang divergence" in capsys.readouterr().out


def test_a_hanging_reset_is_a_hang_finding(hostile: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(run_args(tmp_path, f"{HOSTILE}:HangsInReset", "--hang-limit", "5")) == exitcodes.DIVERGENCE
    assert "hang divergence in reset()" in capsys.readouterr().out


def test_a_hang_limit_that_is_not_seconds_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(run_args(tmp_path, "builtin", "--hang-limit", "soon")) == exitcodes.USAGE
    assert "--hang-limit" in capsys.readouterr().err


def test_a_stopped_run_keeps_the_scenario_it_was_on(
    hostile: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A Ctrl-C (or SIGTERM) while the engine hangs: the run stops, and the scenario stays on disk."""
    import signal
    import threading

    done = threading.Event()

    def stop_once_it_hangs() -> None:  # the first scenario is on disk before the engine sees it
        while not done.is_set() and not list((tmp_path / "reports").glob("*/pending-scenario.json")):
            done.wait(0.05)
        if not done.wait(1.0):  # its step 1 hangs for good: the stop comes while it hangs
            os.kill(os.getpid(), signal.SIGTERM)

    stopper = threading.Thread(target=stop_once_it_hangs)
    stopper.start()
    try:
        code = main(run_args(tmp_path, f"{HOSTILE}:Hangs", "--hang-limit", "none"))
    finally:
        done.set()
        stopper.join()
    out = capsys.readouterr().out
    assert code == exitcodes.INTERRUPTED
    report = only_report(tmp_path)
    assert (report / "pending-scenario.json").is_file()
    Scenario.from_json((report / "pending-scenario.json").read_text())
    assert "kept in" in out and "pending-scenario.json" in out, out


def _graphcheck(*args: str, cwd: Path) -> tuple[int, str]:
    import subprocess

    run = subprocess.run(
        [sys.executable, "-m", "graphcheck.cli", *args], cwd=cwd, capture_output=True, text=True, timeout=240
    )
    return run.returncode, run.stdout + run.stderr


@pytest.mark.slow  # a graphcheck subprocess (torch's import) and a hang it cannot interrupt: about 10 s
def test_a_hang_outside_python_ends_the_process_with_the_finding(hostile: Path, tmp_path: Path) -> None:
    import time

    started = time.monotonic()
    code, output = _graphcheck(*run_args(tmp_path, f"{HOSTILE}:HangsOutsidePython", "--hang-limit", "5"), cwd=tmp_path)
    assert code == exitcodes.DIVERGENCE and "HANG" in output and "could not be interrupted" in output, output
    assert time.monotonic() - started < 60
    report = only_report(tmp_path)
    assert (report / "pending-scenario.json").is_file() and (report / "scenario.json").is_file()
    replay = next(line for line in output.splitlines() if line.startswith("replay: "))[len("replay: ") :]
    assert "--hang-limit 5" in replay
    code, output = _graphcheck(*replay.split()[1:], cwd=tmp_path)
    assert code == exitcodes.DIVERGENCE and "HANG" in output, output


@pytest.mark.slow  # two pytest-xdist workers start (about 15 s)
@pytest.mark.parametrize("engine", ["Hangs", "HangsOutsidePython"])
def test_a_hang_is_caught_under_j2(
    hostile: Path, tmp_path: Path, engine: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(run_args(tmp_path, f"{HOSTILE}:{engine}", "-j", "2", "--hang-limit", "5"))
    out = capsys.readouterr().out
    assert code == exitcodes.DIVERGENCE and "hang divergence" in out, out
    assert (only_report(tmp_path) / "scenario.json").is_file()


def test_the_plugin_refuses_an_option_the_engine_cannot_honour(tmp_path: Path) -> None:
    root = tmp_path / "project"
    root.mkdir()
    (root / "test_mine.py").write_text(PLUGIN_TEST, encoding="utf-8")
    code, output = _pytest_in(root, "--graphcheck-contract", "hf-cb", env={})
    assert code == pytest.ExitCode.USAGE_ERROR and "--contract hf-cb: engine builtin cannot run it" in output, output


HANGING_FACTORY_TEST = """
import pytest
from gc_hostile import Hangs
from graphcheck.search.builtin import demo_scenario


@pytest.fixture(scope="module")
def graphcheck_engine_factory():
    return Hangs


def test_checked(graphcheck_check):
    graphcheck_check(demo_scenario(num_steps=3))
"""


def test_the_plugin_bounds_engine_calls_with_its_hang_limit(hostile: Path, tmp_path: Path) -> None:
    root = tmp_path / "project"
    root.mkdir()
    (root / "test_mine.py").write_text(HANGING_FACTORY_TEST, encoding="utf-8")
    site = os.pathsep.join([str(hostile), os.environ.get("PYTHONPATH", "")])
    code, output = _pytest_in(root, "--graphcheck-hang-limit", "5", env={"PYTHONPATH": f"{ROOT}{os.pathsep}{site}"})
    assert code == pytest.ExitCode.TESTS_FAILED and "hang divergence in step()" in output, output
