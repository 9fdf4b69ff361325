"""Which backend the benchmarks run on, as ``graphcheck bench`` passes it.

Environment (``graphcheck bench`` sets all three; run by hand, set them yourself):

- ``GRAPHCHECK_BENCH_BACKEND``: a backend name (``cpu``, ``cuda``, ``xpu``, ...). Unset: ``cuda``
  when torch sees a GPU, else ``cpu``.
- ``GRAPHCHECK_BENCH_EMULATE=1``: that backend's framework path on the CPU, emulated graph runner.
- ``GRAPHCHECK_BENCH_QUICK=1``: fewer sizes and rounds, for a smoke run (figures are rough).
- ``GRAPHCHECK_BENCH_EMULATOR``: ``kernel`` (default) or ``ops``, the CPU graph emulator (``--emulator``).
- ``GRAPHCHECK_BENCH_ENGINE``: the engine ``--engine`` names (default ``builtin``). The decode-step
  benchmark times the built-in engine's internals and skips for any other.

A backend this machine cannot run skips the benchmarks that need it, with the reason.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

pytest.importorskip("pytest_benchmark")


def backend_name() -> str:
    """The backend asked for, or the default (cuda with a GPU, else cpu)."""
    name = os.environ.get("GRAPHCHECK_BENCH_BACKEND")
    if name:
        return name
    try:
        import torch
    except ImportError:
        return "cpu"
    return "cuda" if torch.cuda.is_available() else "cpu"


@pytest.fixture(scope="session")
def bench_device() -> Any:
    """The resolved ``graphcheck.capture.devices.Device``; skips when this machine lacks it."""
    from graphcheck.capture.devices import BackendError, resolve

    try:
        return resolve(
            backend_name(),
            emulate=os.environ.get("GRAPHCHECK_BENCH_EMULATE") == "1",
            emulator=os.environ.get("GRAPHCHECK_BENCH_EMULATOR") or "kernel",
        )
    except BackendError as err:
        pytest.skip(str(err))


@pytest.fixture(scope="session")
def bench_checker(bench_device: Any) -> Any:
    """A ``graphcheck.check.checker.Checker`` of the bench backend and ``GRAPHCHECK_BENCH_ENGINE``."""
    from graphcheck.check.checker import Checker
    from graphcheck.check.engines import resolve_engine

    return Checker(bench_device, resolve_engine(os.environ.get("GRAPHCHECK_BENCH_ENGINE") or None))


@pytest.fixture(scope="session", autouse=True)
def _one_cpu_thread() -> None:
    """Tiny tensors: intra-op threads only add overhead (and noise) on the CPU."""
    try:
        import torch
    except ImportError:
        return
    torch.set_num_threads(1)
