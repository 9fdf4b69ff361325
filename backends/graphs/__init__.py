"""Device graph runners: capture a region of kernel calls, replay it, audit its static inputs.

``base`` holds the interface, ``kernels`` the ``@kernel`` decorator, ``emulated``
the CPU emulation and ``cuda`` torch CUDA graphs (import it only for the cuda
backend). Importing this package imports no framework.
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
from .kernels import host_sync, kernel

__all__ = [
    "CaptureError",
    "EmulatedRunner",
    "EscapedOpError",
    "Graph",
    "GraphRunner",
    "HostSyncInCapture",
    "PoisonedTensorError",
    "StaticInput",
    "host_sync",
    "kernel",
]
