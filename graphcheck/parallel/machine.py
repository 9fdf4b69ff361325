"""What ``-j auto`` reads of this machine: its CPU cores, the devices a backend's workers use, CUDA MPS.

:func:`read_machine` gives the :class:`graphcheck.parallel.workers.Machine` that
:func:`graphcheck.parallel.workers.plan_workers` decides from; :func:`auto_plan` does both. GPUs are
counted only for a real ``cuda`` backend (``CUDA_VISIBLE_DEVICES`` when set, else
``torch.cuda.device_count()``); an ``npu`` or ``xpu`` device count is read from its
``*_VISIBLE_DEVICES`` variable only (torch_npu is never imported here). CUDA MPS is running
when its control pipe (or socket) is there and answers; nothing here starts it.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import stat
from typing import Any, Mapping

from graphcheck.parallel.workers import Machine, WorkerPlan, plan_workers

#: The env var that picks the device a worker sees, per backend
DEVICE_ENV = {"cuda": "CUDA_VISIBLE_DEVICES", "npu": "ASCEND_RT_VISIBLE_DEVICES", "xpu": "XPU_VISIBLE_DEVICES"}
#: Where the MPS control daemon puts its pipes unless ``CUDA_MPS_PIPE_DIRECTORY`` says otherwise.
DEFAULT_MPS_PIPE_DIRECTORY = "/tmp/nvidia-mps"


def cpu_cores() -> int:
    """The CPU cores this process may run on (its affinity where the OS has one, else all of them)."""
    affinity = getattr(os, "sched_getaffinity", None)
    if affinity is not None:
        try:
            return max(1, len(affinity(0)))
        except OSError:
            pass
    return os.cpu_count() or 1


def mps_running(environ: Mapping[str, str]) -> bool:
    """Whether the CUDA MPS control daemon is up: its ``control`` endpoint is in the pipe directory.

    That is a named pipe, or on newer drivers a UNIX socket, which a daemon that quit leaves
    behind: a socket counts only while a connection to it is not refused."""
    path = os.path.join(environ.get("CUDA_MPS_PIPE_DIRECTORY") or DEFAULT_MPS_PIPE_DIRECTORY, "control")
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    if stat.S_ISSOCK(mode):
        return _listening(path)
    return stat.S_ISFIFO(mode)


def _listening(path: str) -> bool:
    """Whether a process listens on the UNIX socket ``path`` (connected, then closed at once)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(1.0)
        try:
            probe.connect(path)
        except (ConnectionRefusedError, FileNotFoundError):
            return False
        except OSError:  # MPS listens on a SOCK_SEQPACKET socket: a stream connect gets EPROTOTYPE
            return True
    return True


def visible_devices(backend: Any, environ: Mapping[str, str]) -> list[str]:
    """The device ids this machine's workers can be spread over; [] for CPU and emulated backends."""
    var = DEVICE_ENV.get(getattr(backend, "name", ""))
    if var is None or getattr(backend, "emulated", False):
        return []
    listed = [d.strip() for d in environ.get(var, "").split(",") if d.strip()]
    if listed or backend.name != "cuda":
        return listed
    import torch

    return [str(i) for i in range(torch.cuda.device_count())]


def read_machine(backend: Any, environ: Mapping[str, str]) -> Machine:
    """This machine as ``backend`` (a resolved ``Device``) would use it.

    A real npu or xpu backend whose ``*_VISIBLE_DEVICES`` is unset counts as one device: its
    workers are not spread, so they share the device the backend resolved to."""
    name = getattr(backend, "name", "cpu")
    emulated = bool(getattr(backend, "emulated", False))
    gpus = len(visible_devices(backend, environ)) or (0 if emulated or name not in DEVICE_ENV else 1)
    label = f"{name} --emulate" if emulated and name != "cpu" else name
    return Machine(cpu_cores(), gpus, name == "cuda" and gpus > 0 and mps_running(environ), label)


def has_xdist() -> bool:
    """Whether pytest-xdist, which runs more than one worker, is installed."""
    return importlib.util.find_spec("xdist") is not None


def auto_plan(backend: Any, environ: Mapping[str, str]) -> WorkerPlan:
    """The ``-j auto`` plan for ``backend`` here; one worker, in process, when pytest-xdist is missing."""
    plan = plan_workers(read_machine(backend, environ))
    if plan.count > 1 and not has_xdist():
        return WorkerPlan(
            1,
            plan.gpu_of[:1],
            f"-j auto: 1 worker, in process (it would be {plan.count}, but pytest-xdist is not installed: "
            "pip install 'graphcheck[parallel]')",
        )
    return plan


__all__ = ["DEVICE_ENV", "auto_plan", "cpu_cores", "has_xdist", "mps_running", "read_machine", "visible_devices"]
