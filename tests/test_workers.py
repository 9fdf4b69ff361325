"""``graphcheck run -j auto``: the worker plan of a machine, what is read of this one, the GPU memory bound.

The plan is a pure function of a Machine, so GPUs and CUDA MPS are described here, not needed;
the runs on the cpu backend are tiny (one suite, one example, 4 demo steps).
"""

from __future__ import annotations

import os
import socket
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from graphcheck.cli import exitcodes, main
from graphcheck.cli.parser import jobs_value
from graphcheck.parallel import machine
from graphcheck.parallel.gpu_share import SHARE_ENV, bound_worker_memory, memory_fraction, sharing_from
from graphcheck.parallel.run import memory_note
from graphcheck.parallel.workers import AUTO, Machine, plan_workers, round_robin

from _layers import slow

CPU = SimpleNamespace(name="cpu", emulated=True)
CUDA = SimpleNamespace(name="cuda", emulated=False)
TINY = ["--suite", "padding", "--examples", "1", "--steps", "4", "--database", "none"]


@pytest.mark.parametrize(
    "cores, gpus, mps, count, gpu_of, words",
    [
        (16, 0, False, 16, (), "16 workers, one per CPU core (cpu backend)"),
        (16, 1, False, 8, (0,) * 8, "8 workers, 1 GPU without CUDA MPS (at most 8 per GPU: start CUDA MPS for more)"),
        (16, 1, True, 16, (0,) * 16, "16 workers, 1 GPU with CUDA MPS (one per CPU core)"),
        (64, 1, True, 16, (0,) * 16, "16 workers, 1 GPU with CUDA MPS (at most 16 per GPU)"),
        (32, 2, False, 16, (0, 1) * 8, "16 workers, 2 GPUs without CUDA MPS (at most 8 per GPU"),
        (4, 2, False, 4, (0, 1, 0, 1), "4 workers, 2 GPUs without CUDA MPS (one per CPU core)"),
        (3, 2, True, 3, (0, 1, 0), "3 workers, 2 GPUs with CUDA MPS (one per CPU core)"),
        (1, 1, False, 1, (0,), "1 worker, 1 GPU without CUDA MPS (one per CPU core)"),
        (1, 0, False, 1, (), "1 worker, one per CPU core"),
        (0, 0, False, 1, (), "1 worker"),  # a machine that reports no core still runs
        (1000, 0, False, 256, (), "256 workers"),  # -j's own ceiling
    ],
)
def test_the_plan_of_a_machine(
    cores: int, gpus: int, mps: bool, count: int, gpu_of: tuple[int, ...], words: str
) -> None:
    plan = plan_workers(Machine(cores, gpus, mps, "cuda" if gpus else "cpu"))
    assert (plan.count, plan.gpu_of) == (count, gpu_of)
    assert plan.reason.startswith("-j auto: ") and words in plan.reason and "\n" not in plan.reason


def test_other_devices_are_capped_like_gpus_without_mps() -> None:
    plan = plan_workers(Machine(16, 1, False, "npu"))
    assert plan.count == 8 and plan.reason == "-j auto: 8 workers, 1 npu device (at most 8 per device)"
    assert "MPS" not in plan_workers(Machine(8, 0, False, "cuda --emulate")).reason


def test_workers_go_to_the_gpus_round_robin() -> None:
    assert round_robin(5, 2) == (0, 1, 0, 1, 0) and round_robin(3, 0) == ()
    plan = plan_workers(Machine(5, 2, True, "cuda"))
    assert (plan.sharing(0), plan.sharing(1), plan.sharing(2)) == (3, 2, 0)


def _pipe_dir(tmp_path: Path, kind: str) -> dict[str, str]:
    folder = tmp_path / "mps"
    folder.mkdir()
    if kind == "pipe":
        os.mkfifo(folder / "control")
    elif kind == "file":
        (folder / "control").write_text("")
    return {"CUDA_MPS_PIPE_DIRECTORY": str(folder)}


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
@pytest.mark.parametrize("kind, running", [("pipe", True), ("file", False), ("none", False)])
def test_mps_runs_when_its_control_pipe_exists(kind: str, running: bool, tmp_path: Path) -> None:
    assert machine.mps_running(_pipe_dir(tmp_path, kind)) is running


@pytest.mark.skipif(not hasattr(socket, "AF_UNIX"), reason="needs UNIX sockets")
@pytest.mark.parametrize("kind", ["SOCK_SEQPACKET", "SOCK_STREAM"])  # current MPS daemons: SEQPACKET
def test_an_mps_socket_counts_while_its_daemon_listens(kind: str) -> None:
    with tempfile.TemporaryDirectory(prefix="mps") as folder:  # short: a socket path has ~100 bytes
        path = Path(folder) / "control"
        daemon = socket.socket(socket.AF_UNIX, getattr(socket, kind))
        daemon.bind(str(path))
        daemon.listen()
        assert machine.mps_running({"CUDA_MPS_PIPE_DIRECTORY": folder})
        daemon.close()  # the socket file stays, as after `echo quit | nvidia-cuda-mps-control`
        assert path.exists() and not machine.mps_running({"CUDA_MPS_PIPE_DIRECTORY": folder})


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_mps_is_looked_for_in_the_default_folder_without_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(machine, "DEFAULT_MPS_PIPE_DIRECTORY", str(tmp_path))
    assert not machine.mps_running({})
    os.mkfifo(tmp_path / "control")
    assert machine.mps_running({}) and machine.mps_running({"CUDA_MPS_PIPE_DIRECTORY": ""})


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_the_machine_as_a_backend_uses_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(machine, "cpu_cores", lambda: 16)
    mps = _pipe_dir(tmp_path, "pipe")
    assert machine.read_machine(CPU, mps) == Machine(16, 0, False, "cpu")
    emulated = SimpleNamespace(name="cuda", emulated=True)
    assert machine.read_machine(emulated, mps) == Machine(16, 0, False, "cuda --emulate")
    two = {**mps, "CUDA_VISIBLE_DEVICES": "4,5"}  # listed: torch is not asked
    assert machine.read_machine(CUDA, two) == Machine(16, 2, True, "cuda")
    npu = SimpleNamespace(name="npu", emulated=False)  # no count without the variable: one device
    assert machine.read_machine(npu, mps) == Machine(16, 1, False, "npu")
    assert machine.read_machine(npu, {"ASCEND_RT_VISIBLE_DEVICES": "0,1,2"}).gpus == 3


def test_the_cores_are_those_this_process_may_use() -> None:
    expected = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert machine.cpu_cores() == expected >= 1


def test_without_xdist_auto_is_one_worker_in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(machine, "cpu_cores", lambda: 8)
    monkeypatch.setattr(machine, "has_xdist", lambda: False)
    plan = machine.auto_plan(CPU, {})
    assert plan.count == 1 and "pytest-xdist is not installed" in plan.reason and "8" in plan.reason


def test_a_shared_gpu_bounds_each_workers_memory() -> None:
    assert memory_fraction(1) is None and memory_fraction(2) == pytest.approx(0.45)
    assert memory_fraction(16) == pytest.approx(0.9 / 16)
    assert [sharing_from(e) for e in ({}, {SHARE_ENV: "4"}, {SHARE_ENV: "x"}, {SHARE_ENV: "0"})] == [1, 4, 1, 1]
    # Off a real cuda backend nothing is bounded (and torch is not asked).
    assert bound_worker_memory("cpu", False, {SHARE_ENV: "4"}) is None
    assert bound_worker_memory("cuda", True, {SHARE_ENV: "4"}) is None
    assert bound_worker_memory("cuda", False, {}) is None
    assert "each bounded to 22.5% of its memory" in memory_note(4, CUDA, [], {"CUDA_VISIBLE_DEVICES": "0"})
    assert memory_note(4, CPU, [], {}) == "" and memory_note(4, CUDA, ["--tx", "ssh=h"], {}) == ""


def test_auto_is_parsed_beside_numbers() -> None:
    assert [jobs_value(v) for v in ("auto", " AUTO ", "3", "0")] == [AUTO, AUTO, 3, 0]
    with pytest.raises(Exception, match="expected a number of workers or auto"):
        jobs_value("many")


@pytest.mark.parametrize(
    "argv, words",
    [
        (["-j", "many"], "-j/--jobs: expected a number of workers or auto, got 'many'"),
        (["-j", "-3"], "-j/--jobs"),
        (["-j", "257"], "must be in [1, 256] or auto"),
        (["-j", "auto", '--xdist-args=--tx "popen'], "--xdist-args"),
    ],
)
def test_bad_jobs_are_usage_errors(
    argv: list[str], words: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", *TINY, "--report-dir", str(tmp_path), *argv]) == exitcodes.USAGE
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err
    assert not any(tmp_path.iterdir()), "refused before a report folder is made"


def test_auto_with_one_core_refuses_xdist_args(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(machine, "cpu_cores", lambda: 1)
    argv = ["run", *TINY, "--report-dir", str(tmp_path), "-j", "auto", "--xdist-args=--dist=load"]
    assert main(argv) == exitcodes.USAGE
    err = capsys.readouterr().err
    assert "--xdist-args needs more than one worker, but -j auto: 1 worker" in err
    assert not any(tmp_path.iterdir())


def test_auto_on_one_core_runs_in_process_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(machine, "cpu_cores", lambda: 1)
    assert main(["run", *TINY, "--report-dir", str(tmp_path), "-j", "auto"]) == exitcodes.CLEAN
    out = capsys.readouterr().out
    assert "-j auto: 1 worker, one per CPU core (cpu backend)" in out and "pytest-xdist" not in out


@slow
def test_auto_on_two_cores_runs_two_xdist_workers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("xdist")
    monkeypatch.setattr(machine, "cpu_cores", lambda: 2)
    assert main(["run", *TINY, "--report-dir", str(tmp_path), "-j", "auto"]) == exitcodes.CLEAN
    out = capsys.readouterr().out
    assert "-j auto: 2 workers, one per CPU core (cpu backend)" in out and "2 workers (pytest-xdist)" in out
