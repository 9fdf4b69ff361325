"""Test-only stand-ins for ``torch.npu``, so the npu runner's wiring runs without an Ascend device.

The npu backend finds its device module through one seam,
``graphcheck.capture.npu.load_npu_binding``. :func:`install` makes that seam
return one of these bindings, so ``resolve("npu")`` and ``NpuGraphRunner()``
use it:

* :func:`emulator_binding`: the emulated NPU module (CPU), the one
  ``--backend npu --emulate`` uses, under the runner name ``npu-emulated``;
* :func:`cuda_binding`: ``torch.cuda`` under torch.npu's names, for a GPU
  machine: ``NPUGraph`` is ``CUDAGraph``, ``graph`` is ``torch.cuda.graph``, and
  streams, ``synchronize``, ``memory_allocated`` and ``device_count`` are
  torch.cuda's. CUDA graphs have no task update (torch exposes no way to patch
  a captured kernel's parameters), so ``ExternalEvent`` and the task-group
  calls raise ``NotImplementedError``: a region with host parameters fails to
  capture on this shim, before any CUDA work; the update hook is tested on the
  emulator.

Not part of the package: it only exists for tests.
"""

from __future__ import annotations

from typing import Any

from graphcheck.capture import npu
from graphcheck.capture.npu import NpuBinding
from graphcheck.capture.npu_emulated import emulated_npu_binding

_NO_TASK_UPDATE = "CUDA graphs have no task update; host-parameter kernels run only on torch_npu or the emulator"


def emulator_binding() -> NpuBinding:
    return emulated_npu_binding()


class CudaAsNpu:
    """``torch.cuda`` under the ``torch.npu`` names the npu runner uses."""

    def __init__(self) -> None:
        import torch

        cuda = torch.cuda
        self.NPUGraph = cuda.CUDAGraph
        self.graph = cuda.graph
        self.graph_pool_handle = cuda.graph_pool_handle
        self.Stream = cuda.Stream
        self.current_stream = cuda.current_stream
        self.stream = cuda.stream
        self.synchronize = cuda.synchronize
        self.memory_allocated = cuda.memory_allocated
        self.device_count = cuda.device_count
        self.current_device = cuda.current_device
        self.is_current_stream_capturing = cuda.is_current_stream_capturing

    def ExternalEvent(self) -> None:  # noqa: N802 (torch_npu's name)
        raise NotImplementedError(_NO_TASK_UPDATE)

    def graph_task_group_begin(self, stream: Any) -> None:
        raise NotImplementedError(_NO_TASK_UPDATE)

    def graph_task_group_end(self, stream: Any) -> None:
        raise NotImplementedError(_NO_TASK_UPDATE)

    def graph_task_update_begin(self, stream: Any, handle: Any) -> None:
        raise NotImplementedError(_NO_TASK_UPDATE)

    def graph_task_update_end(self, stream: Any) -> None:
        raise NotImplementedError(_NO_TASK_UPDATE)


def cuda_binding() -> NpuBinding:
    import torch

    index = torch.cuda.current_device()
    return NpuBinding(CudaAsNpu(), f"cuda:{index}", "npu-on-cuda", "torch.cuda as torch.npu (test shim)")


def install(monkeypatch: Any, make_binding: Any) -> None:
    """Make the npu seam return ``make_binding()`` (a fresh binding per load) for this test."""
    monkeypatch.setattr(npu, "load_npu_binding", make_binding)
