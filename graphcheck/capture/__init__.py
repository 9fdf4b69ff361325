"""The harness's capture machinery: device graph runners, emulators and observers, backend resolution.

Graph runners capture a region of kernel calls, replay it and audit its static inputs.
Nothing here imports an engine (engines import it: the built-in engine's kernels are
``@kernel`` functions and it captures with these runners), and ``graphcheck.check``
reaches it only as the harness's library.

``devices`` resolves a backend name to its framework, device and runner; ``base`` holds
the interface, ``kernels`` the ``@kernel`` decorator (and ``HostParam``), ``emulated`` the
CPU emulation, ``warmup`` what the device runners share, ``cuda`` torch CUDA graphs, ``npu`` torch_npu NPUGraph (with
``npu_emulated``, its device module on the CPU) and ``xpu`` Paddle graphs on
Kunlun (with ``xpu_emulated``, Paddle's graph API emulated on the CPU); import a device
runner only for its backend. The op-level emulator: ``op_graphs`` (every aten op of a region,
over ``torch_ops``' dispatch modes; ``paddle_ops`` is Paddle's side of the kernel emulator),
``cuda_emulation`` (``torch.cuda``'s graph API over it), ``op_trace`` (eager calls traced op by
op); ``capture_observer`` (the static-input table of a real capture), ``torch_cuda_api`` (a
runner capturing through ``torch.cuda`` by name), ``capture_state``, ``host_reads`` and
``sites`` (what they share). Importing this package imports no framework.
"""

from .base import (
    CaptureError,
    EscapedOpError,
    Graph,
    GraphRunner,
    HostSyncInCapture,
    PoisonedTensorError,
    StaticInput,
)
from .emulated import EmulatedRunner
from .kernels import HostParam, host_sync, kernel

__all__ = [
    "CaptureError",
    "EmulatedRunner",
    "EscapedOpError",
    "Graph",
    "GraphRunner",
    "HostParam",
    "HostSyncInCapture",
    "PoisonedTensorError",
    "StaticInput",
    "host_sync",
    "kernel",
]
