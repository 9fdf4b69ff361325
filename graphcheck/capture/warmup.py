"""What the real-device runners share: warm-up with snapshots, and the capture observer.

A device capture (torch ``CUDAGraph``, torch_npu ``NPUGraph``, paddle ``CUDAGraph``
on an XPU place) is preceded by warm-up runs of the region, for real, so lazy
initialisation and allocator growth happen outside the capture. The emulator's
contract is that a capture leaves no side effects, so:

* :func:`warm_up` runs the region ``iters`` times with a :class:`Snapshotter`
  as kernel observer; it snapshots every pre-existing storage a kernel touches
  before its first touch (pre-existing: not allocated by this warm-up run), and
  the runner puts the snapshots back with :func:`restore` after the capture. On
  real hardware it runs without the framework's op hooks (:func:`op_hooks_in_warm_up`:
  no Python dispatch mode on the ops of a warm-up run); the capture keeps them;
* :class:`ArgRecorder` observes the capture itself: it adds each kernel's
  tensor arguments to the static-input table and notes kernel results as the
  region's own allocations (paddle has no op hook that would; for torch the
  dispatch mode already did, so noting them again changes nothing).

Both refuse :func:`~graphcheck.capture.kernels.host_sync` and issue kernels through
:func:`~graphcheck.capture.kernels.launch`.
"""

from __future__ import annotations

from typing import Any, Callable

from . import kernels
from .base import HostSyncInCapture, StaticInputTable, iter_tensors
from .capture_state import CaptureState


def region_label(number: int, fn: Callable[[], Any]) -> str:
    """``graph #N (qualname)``: how errors and reports name one capture."""
    return f"graph #{number} ({getattr(fn, '__qualname__', 'region')})"


def _note_results(ops: Any, state: CaptureState, arg_keys: set[int], result: Any) -> None:
    for t in iter_tensors(result, ops.is_tensor):
        state.region.note_created(ops, t, fresh_storage=ops.storage_key(t) not in arg_keys)


class Snapshotter:
    """KernelObserver for one warm-up run: snapshot each pre-existing storage before its first touch."""

    def __init__(self, ops: Any, snapshots: dict[int, Any], state: CaptureState) -> None:
        self.ops, self.snapshots, self.state = ops, snapshots, state

    def run_kernel(self, fn: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
        ops, made = self.ops, self.state.region.storages
        arg_keys = set()
        for t in iter_tensors((args, kwargs), ops.is_tensor):
            key = ops.storage_key(t)
            arg_keys.add(key)
            if key not in made and key not in self.snapshots:
                self.snapshots[key] = ops.snapshot(t)
        result = kernels.launch(fn, args, kwargs)
        _note_results(ops, self.state, arg_keys, result)
        return result

    def on_host_sync(self, what: str) -> None:
        raise HostSyncInCapture(f"host sync '{what}' inside a graph-captured region ({self.state.label})")


def op_hooks_in_warm_up(device: str) -> bool:
    """Whether the warm-up runs on ``device`` (a framework device string) push the framework's
    op hooks (for torch a Python dispatch mode, called on every op): only on the CPU, where a
    device runner drives an emulated device module (``--emulate``), which stays as it was.

    On real hardware (``cuda:0``, ``npu:0``, ``xpu:0``) a warm-up run is an ordinary run
    that needs neither of the hooks' jobs: a host sync is legal there (the capture that follows
    refuses it, its hooks on, before it reaches the device), and the storages the region makes
    that a kernel is given come from kernels, whose results the :class:`Snapshotter` notes.
    """
    return device.partition(":")[0] == "cpu"


def warm_up(
    fn: Callable[[], Any], ops: Any, iters: int, label: str, snapshots: dict[int, Any], *, op_hooks: bool = True
) -> None:
    """Run ``fn`` ``iters`` times for real, filling ``snapshots`` (storage key -> snapshot).

    ``op_hooks``: with the framework's capture hooks on (``ops.capture_hooks``), as the
    emulated devices run it; a runner on real hardware passes :func:`op_hooks_in_warm_up`.
    """
    for i in range(iters):
        state = CaptureState(f"{label}, warmup {i + 1}", check_escapes=False)
        with kernels.observing(Snapshotter(ops, snapshots, state)):
            if op_hooks:
                with ops.capture_hooks(state):
                    fn()
            else:
                fn()


def restore(ops: Any, snapshots: dict[int, Any]) -> None:
    """Put back every snapshotted storage."""
    for snap in snapshots.values():
        ops.restore(snap)


class ArgRecorder:
    """KernelObserver for a device capture: record kernel arguments, note kernel results as the region's."""

    def __init__(self, ops: Any, state: CaptureState, table: StaticInputTable) -> None:
        self.ops, self.state, self.table = ops, state, table

    def run_kernel(self, fn: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
        ops = self.ops
        arg_keys = set()
        for t in iter_tensors((args, kwargs), ops.is_tensor):
            arg_keys.add(ops.storage_key(t))
            self.table.add(t)
        result = kernels.launch(fn, args, kwargs)
        _note_results(ops, self.state, arg_keys, result)
        return result

    def on_host_sync(self, what: str) -> None:
        raise HostSyncInCapture(f"host sync '{what}' inside graph capture ({self.state.label})")
