"""The former home of backend resolution, kept so that ``graphcheck.backends.devices`` still imports.

Backend names -> (framework, device, graph runner) is the harness's, not the built-in
engine's: it lives in :mod:`graphcheck.capture.devices`, with the graph runners. This
module re-exports its public names (``resolve``, ``Device``, ...); new code imports
``graphcheck.capture.devices`` (or ``graphcheck.resolve``).
"""

from graphcheck.capture.devices import (
    BACKENDS,
    EMULATORS,
    NPU_EMULATE,
    PADDLE_PIP,
    XPU_EMULATE,
    BackendError,
    BackendStatus,
    BackendUnavailable,
    Device,
    UnknownBackend,
    UnsupportedEmulator,
    available_backends,
    check_emulator,
    choice_from_env,
    resolve,
)

__all__ = [
    "BACKENDS",
    "EMULATORS",
    "NPU_EMULATE",
    "PADDLE_PIP",
    "XPU_EMULATE",
    "BackendError",
    "BackendStatus",
    "BackendUnavailable",
    "Device",
    "UnknownBackend",
    "UnsupportedEmulator",
    "available_backends",
    "check_emulator",
    "choice_from_env",
    "resolve",
]
