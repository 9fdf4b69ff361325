"""The GPU's busy fraction while a benchmark runs: ``utilization.gpu``, sampled in a background thread.

``utilization.gpu`` is the percent of the driver's last sample period in which a kernel ran on
the GPU. It is read through NVML (``pynvml``, from the nvidia-ml-py package, imported lazily)
when that loads, else from ``nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits``;
without either, the reading says unavailable. The GPUs watched are those
``CUDA_VISIBLE_DEVICES`` names by index or UUID, else all of them.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

#: One sample: the utilization.gpu (percent) of each GPU watched.
Reader = Callable[[], Sequence[float]]
#: Seconds between two samples.
INTERVAL_S = 0.5


@dataclass(frozen=True)
class BusyReading:
    """The mean busy fraction (0..1) over the samples and GPUs; None with ``source`` saying why."""

    fraction: float | None
    source: str  # "nvml", "nvidia-smi", or "unavailable: <why>"
    samples: int = 0


class BusySampler:
    """Calls ``read`` every ``interval_s`` seconds in a thread, from ``with`` to its end.

    ``read`` None: nothing is sampled, and the reading is unavailable with ``source`` as the
    reason. A sample that fails (the tool stopped answering, a GPU reads N/A) is skipped."""

    def __init__(self, read: Reader | None, source: str, interval_s: float = INTERVAL_S):
        self.read, self.source, self.interval_s = read, source, interval_s
        self._values: list[float] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> BusySampler:
        if self.read is not None:
            self._thread = threading.Thread(target=self._loop, args=(self.read,), name="gpu-busy", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _loop(self, read: Reader) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                values = [float(v) for v in read()]
            except Exception:
                continue
            if values:
                self._values.append(sum(values) / len(values) / 100.0)

    def reading(self) -> BusyReading:
        """What was sampled so far."""
        if self.read is None:
            return BusyReading(None, self.source)
        if not self._values:
            return BusyReading(None, f"unavailable: {self.source} gave no sample")
        return BusyReading(sum(self._values) / len(self._values), self.source, len(self._values))


def watched_gpus(visible: str | None) -> list[str] | None:
    """The GPUs ``CUDA_VISIBLE_DEVICES`` names (indices or ``GPU-`` UUIDs); None: all of them."""
    names = [n.strip() for n in (visible or "").split(",") if n.strip()]
    if not names or not all(n.isdigit() or n.startswith("GPU-") for n in names):
        return None
    return names


def nvml_reader(gpus: Sequence[str] | None) -> Reader | None:
    """A reader through NVML; None when pynvml is missing or NVML does not start."""
    try:
        import pynvml

        pynvml.nvmlInit()
        handles = [_nvml_handle(pynvml, name) for name in gpus] if gpus else _all_handles(pynvml)
    except Exception:
        return None
    return lambda: [pynvml.nvmlDeviceGetUtilizationRates(h).gpu for h in handles]


def _nvml_handle(pynvml: Any, name: str) -> Any:
    return pynvml.nvmlDeviceGetHandleByIndex(int(name)) if name.isdigit() else pynvml.nvmlDeviceGetHandleByUUID(name)


def _all_handles(pynvml: Any) -> list[Any]:
    return [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]


def smi_reader(gpus: Sequence[str] | None) -> Reader | None:
    """A reader through ``nvidia-smi``; None when it is missing or its first answer is unusable."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    command = [exe, "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits"]
    command += ["-i", ",".join(gpus)] if gpus else []

    def read() -> list[float]:
        done = subprocess.run(command, capture_output=True, text=True, timeout=10, check=True)
        return [float(line) for line in done.stdout.split()]

    try:
        read()
    except Exception:
        return None
    return read


def gpu_sampler(backend: str, emulated: bool, environ: Mapping[str, str]) -> BusySampler:
    """A sampler of the GPUs a ``backend`` run uses: only a real cuda backend has any."""
    if backend != "cuda" or emulated:
        label = f"{backend} --emulate" if emulated and backend != "cpu" else backend
        return BusySampler(None, f"unavailable: {label} runs on no GPU")
    gpus = watched_gpus(environ.get("CUDA_VISIBLE_DEVICES"))
    for source, make in (("nvml", nvml_reader), ("nvidia-smi", smi_reader)):
        read = make(gpus)
        if read is not None:
            return BusySampler(read, source)
    return BusySampler(None, "unavailable: neither NVML (pynvml) nor nvidia-smi answered")


__all__ = [
    "BusyReading",
    "BusySampler",
    "INTERVAL_S",
    "Reader",
    "gpu_sampler",
    "nvml_reader",
    "smi_reader",
    "watched_gpus",
]
