"""``graphcheck run -j auto``: how many workers a machine gets, and which GPU each one uses.

A pure function of a :class:`Machine` (``graphcheck.parallel.machine`` reads this one):

- no device to spread over (cpu and emulated backends): one worker per CPU core;
- GPUs without CUDA MPS (and npu or xpu devices): one per core, at most
  :data:`PER_GPU_TIME_SLICED` per device, since processes on one GPU then take turns
  (time-slicing) and the gain flattens (on an H200: 1.1x ``-j 1``'s rate with 2 workers,
  2.2x with 4, 2.7x with 8);
- GPUs with CUDA MPS running: one per core, at most :data:`PER_GPU_MPS` per GPU, since MPS runs
  the kernels of several processes on the GPU at once.

Each worker is CPU-bound (Python launching many tiny kernels), so the cores are the ceiling in
every case. Workers go to the GPUs round robin (:func:`round_robin`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

#: ``-j auto`` as the command line gives it.
AUTO = "auto"
#: The most workers ``-j`` takes (``graphcheck.parallel.run.check_options``).
MAX_WORKERS = 256
#: Workers per GPU without MPS.
PER_GPU_TIME_SLICED = 8
#: Workers per GPU with MPS.
PER_GPU_MPS = 16


@dataclass(frozen=True)
class Machine:
    """What ``-j auto`` decides from."""

    cores: int  # CPU cores this process may run on
    gpus: int  # devices the workers are spread over; 0 for cpu and emulated backends
    mps_running: bool  # the CUDA MPS control daemon is up (only ever True for cuda)
    backend: str  # the backend name, for the reason line


@dataclass(frozen=True)
class WorkerPlan:
    """How many workers run, the GPU (an index into the visible devices) of each, and why."""

    count: int
    gpu_of: tuple[int, ...]  # one entry per worker; empty without GPUs
    reason: str  # one line for the run header

    def sharing(self, gpu: int) -> int:
        """How many workers use ``gpu``."""
        return Counter(self.gpu_of)[gpu]


def round_robin(workers: int, gpus: int) -> tuple[int, ...]:
    """The GPU of each of ``workers`` workers over ``gpus`` GPUs: 0, 1, ..., 0, 1, ...; () without GPUs."""
    return tuple(i % gpus for i in range(workers)) if gpus > 0 else ()


def plan_workers(machine: Machine) -> WorkerPlan:
    """The ``-j auto`` plan for ``machine``: at least one worker, at most :data:`MAX_WORKERS`."""
    cores = max(1, machine.cores)
    if machine.gpus <= 0:
        count = min(cores, MAX_WORKERS)
        return WorkerPlan(count, (), f"-j auto: {_workers(count)}, one per CPU core ({machine.backend} backend)")
    cuda = machine.backend == "cuda"
    per_gpu = PER_GPU_MPS if machine.mps_running else PER_GPU_TIME_SLICED
    count = min(cores, per_gpu * machine.gpus, MAX_WORKERS)
    kind = "GPU" if cuda else f"{machine.backend} device"
    devices = f"{machine.gpus} {kind}{'s' if machine.gpus > 1 else ''}"
    if cuda:
        devices += " with CUDA MPS" if machine.mps_running else " without CUDA MPS"
    if count == cores:
        bound = "one per CPU core"
    else:
        bound = f"at most {per_gpu} per {'GPU' if cuda else 'device'}"
        bound += ": start CUDA MPS for more" if cuda and not machine.mps_running else ""
    return WorkerPlan(count, round_robin(count, machine.gpus), f"-j auto: {_workers(count)}, {devices} ({bound})")


def _workers(count: int) -> str:
    return f"{count} worker" if count == 1 else f"{count} workers"


__all__ = ["AUTO", "MAX_WORKERS", "Machine", "WorkerPlan", "plan_workers", "round_robin"]
