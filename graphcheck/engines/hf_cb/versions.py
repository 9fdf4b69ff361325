"""The few places where transformers' continuous batching differs between the versions graphcheck supports.

One thin shim per version, chosen from ``transformers.__version__``. Everything
else the adapter touches (``add_request``, ``cancel_request``, the batch
processor's ``prepare_next_batch`` / ``update_batch``, the IO object's static
tensors and graph buffer) is the same in both.

* **5.23** (pinned for CI): the IO object names its per-layer-type key lengths
  ``max_length_k``; the largest cache read is ``cache.max_tokens_read``; graphs
  are made through ``continuous_batching.utils``' accelerator helpers, which on a
  machine without CUDA say "no graph backend", so on the CPU they are redirected
  to ``torch.cuda`` (which graphcheck's emulator then stands in for).
* **5.17** (preinstalled on the GPU machine): pages are ``block_size``; ``max_seqlen_k``;
  ``cache.num_pages``; the model runner calls ``torch.cuda.CUDAGraph`` /
  ``torch.cuda.graph`` / ``MemPool`` itself, which the emulator patches already.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Callable

from graphcheck.errors import BackendUnavailableError

SUPPORTED = ("5.17", "5.23")
_CB = "transformers.generation.continuous_batching"
_RUNNER = f"{_CB}.model_runner"


@dataclass(frozen=True)
class Shim:
    """What differs between two versions of transformers' continuous batching."""

    version: str
    key_lengths_attr: str  # the IO attribute: layer type -> the key length the attention kernels read
    max_read_attr: str  # the cache attribute: the most cache tokens one batch may read
    cpu_hooks: Callable[[], dict[str, Any]]  # "module:attribute" -> replacement, for the emulator on a CPU
    page_size_arg: str = "page_size"  # ContinuousBatchingConfig's name for the tokens of a cache page

    #: Whether the cache's per-layer token views and per-request indices are read (5.23's layout):
    #: state snapshots (and kernel-level localisation) need them.
    cache_rows: bool = False

    #: Whether async batching runs on the CPU, its streams and events emulated (``cpu_hooks``): 5.23's
    #: async IO checks a device type and takes generic events, which the hooks stand in for; 5.17's
    #: asks torch.cuda itself, so there async batching runs on CUDA only.
    async_on_cpu: bool = False

    def key_lengths(self, io: Any) -> dict[str, int]:
        return dict(getattr(io, self.key_lengths_attr))

    def max_tokens_read(self, cache: Any) -> int:
        return int(getattr(cache, self.max_read_attr))


def _accelerator_hooks() -> dict[str, Any]:
    """5.23's graph helpers, pointed at ``torch.cuda`` (looked up at call time: the emulator's stand-ins)."""
    import torch

    def create_graph() -> Any:
        return torch.cuda.CUDAGraph()

    def capture_context(graph: Any, stream: Any = None, pool: Any = None) -> Any:
        return torch.cuda.graph(graph, stream=stream, pool=pool)

    def memory_pools() -> tuple[Any, Any]:
        pool = torch.cuda.MemPool()
        return pool, pool.id

    def pool_context(pool: Any) -> Any:
        return torch.cuda.use_mem_pool(pool)

    return {
        f"{_RUNNER}:create_accelerator_graph": create_graph,
        f"{_RUNNER}:accelerator_graph_capture_context": capture_context,
        f"{_RUNNER}:get_memory_pools": memory_pools,
        f"{_RUNNER}:memory_pool_context": pool_context,
        **_async_hooks(),
    }


def _async_hooks() -> dict[str, Any]:
    """5.23's async IO on the CPU: the CPU admitted as its device, its streams, stream scopes and events
    the emulator's (bookkeeping only: CPU work is synchronous, so this runs the double-buffered logic
    and the carry-over, not the races between streams)."""
    from graphcheck.capture.cuda_emulation import module as emulated

    def create_stream(device: Any = None) -> Any:
        return emulated.Stream(device)

    def scope(stream: Any) -> Any:
        return contextlib.nullcontext() if stream is None else emulated.stream(stream)

    def event(*args: Any, **kwargs: Any) -> Any:
        return emulated.Event()

    io = f"{_CB}.input_outputs"
    hooks: dict[str, Any] = {
        f"{io}:ContinuousBatchingAsyncIOs._supported_device_types": ("cuda", "xpu", "cpu"),
        f"{io}:create_device_stream": create_stream,
        "torch:Event": event,
    }
    for module in ("input_outputs", "model_runner", "continuous_api", "offloading_manager"):
        hooks[f"{_CB}.{module}:stream_context"] = scope
    return hooks


SHIMS = {
    "5.17": Shim("5.17", "max_seqlen_k", "num_pages", dict, page_size_arg="block_size"),
    "5.23": Shim("5.23", "max_length_k", "max_tokens_read", _accelerator_hooks, cache_rows=True, async_on_cpu=True),
}


class UnsupportedVersion(BackendUnavailableError):
    """The installed transformers is not one this adapter has a shim for."""


def shim_for(version: str) -> Shim:
    """The shim of transformers ``version`` ("5.23.0" -> the 5.23 shim)."""
    minor = ".".join(version.split(".")[:2])
    if minor not in SHIMS:
        raise UnsupportedVersion(
            f"transformers {version}: --engine hf-cb supports {', '.join(SUPPORTED)} "
            "(pip install 'graphcheck[hf]' installs 5.23.0)"
        )
    return SHIMS[minor]


def installed() -> Shim:
    """The shim of the installed transformers (UnsupportedVersion when none is installed)."""
    try:
        import transformers
    except ImportError:
        raise UnsupportedVersion(
            "--engine hf-cb needs transformers: pip install 'graphcheck[hf]' (transformers 5.23.0)"
        ) from None
    return shim_for(transformers.__version__)


__all__ = ["SHIMS", "SUPPORTED", "Shim", "UnsupportedVersion", "installed", "shim_for"]
