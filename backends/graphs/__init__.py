"""Device graph runners: capture a region of kernel calls, replay it, audit its static inputs.

``base`` holds the interface, ``kernels`` the ``@kernel`` decorator (and
``HostParam``), ``emulated`` the CPU emulation, ``warmup`` what the device
runners share, ``cuda`` torch CUDA graphs, ``npu`` torch_npu NPUGraph (with
``npu_emulated``, its device module on the CPU) and ``xpu`` Paddle graphs on
Kunlun (with ``xpu_emulated``, Paddle's graph API emulated on the CPU); import a device runner only for its backend. Importing this package
imports no framework.
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
