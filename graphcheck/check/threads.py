"""One torch thread while a check runs on the CPU."""

from __future__ import annotations

import contextlib
from typing import Any, Iterator


@contextlib.contextmanager
def single_threaded(backend: Any) -> Iterator[None]:
    """One intra-op thread for torch on the CPU while a check runs, restored afterwards.

    The model's ops are tiny: on a small (2-core) box the thread pool's hand-offs
    cost more than the work, and a lockstep run is about 4x faster on one thread.
    Other frameworks and devices are left alone.
    """
    if getattr(backend, "framework", None) != "torch" or getattr(backend, "device", None) != "cpu":
        yield
        return
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)
