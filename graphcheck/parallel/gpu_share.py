"""A ``-j N`` worker's share of a GPU that other workers use too: its CUDA memory bounded to it.

The parent names, in each worker's environment, how many workers share that worker's GPU
(:data:`SHARE_ENV`, set by ``graphcheck.parallel.run.worker_args``); the worker, as it starts
(``graphcheck.parallel.xdist_plugin``), caps torch's caching allocator at
:func:`memory_fraction` of the GPU with ``torch.cuda.set_per_process_memory_fraction``. A worker
whose engine asks for more gets torch's ``OutOfMemoryError`` on that allocation, as it would on
a full GPU; the other workers' memory is left alone.
"""

from __future__ import annotations

from typing import Mapping

#: How many workers share this worker's GPU (unset: 1, the GPU is its own).
SHARE_ENV = "GRAPHCHECK_GPU_WORKERS"
#: The part of a shared GPU left outside every worker's bound: CUDA contexts, which the
#: allocator does not count, and fragmentation.
MARGIN = 0.1


def memory_fraction(sharing: int) -> float | None:
    """The fraction of its GPU each of ``sharing`` workers may allocate; None when it is alone."""
    return (1.0 - MARGIN) / sharing if sharing > 1 else None


def sharing_from(environ: Mapping[str, str]) -> int:
    """:data:`SHARE_ENV` as a count (1 when unset or not a positive number)."""
    try:
        return max(1, int(environ.get(SHARE_ENV, "1")))
    except ValueError:
        return 1


def bound_worker_memory(backend: str, emulate: bool, environ: Mapping[str, str]) -> float | None:
    """In a worker: cap this process's CUDA memory at its share; the fraction set, or None (no bound).

    Only a real ``cuda`` backend on a GPU several workers share is bounded; one that sees no
    GPU is left for the job to report as unavailable."""
    fraction = memory_fraction(sharing_from(environ))
    if fraction is None or backend != "cuda" or emulate:
        return None
    import torch

    if not torch.cuda.is_available():
        return None
    torch.cuda.set_per_process_memory_fraction(fraction, torch.cuda.current_device())
    return fraction


__all__ = ["MARGIN", "SHARE_ENV", "bound_worker_memory", "memory_fraction", "sharing_from"]
