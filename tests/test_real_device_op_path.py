"""No Python dispatch mode on the ops of a real-device run outside its graph captures.

A device runner (cuda, npu, xpu) warms a region up before capturing it. On the CPU,
where it drives an emulated device module, the warm-up runs keep the framework's op
hooks (a torch dispatch mode) as before; on real hardware they run without them
(``warmup.op_hooks_in_warm_up``), and the capture keeps them (it refuses host syncs
before they reach the device). Eager steps and replays never had one. The CPU tests
cover the decision and ``warm_up``, and the npu runner on a binding that names a
device; the GPU tests run the cuda runner and one lockstep scenario on real CUDA.
"""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")

from graphcheck.capture import kernels, npu, torch_ops  # noqa: E402
from graphcheck.capture.base import HostSyncInCapture  # noqa: E402
from graphcheck.capture.npu_emulated import EmulatedNpu, emulated_npu_binding  # noqa: E402
from graphcheck.capture.torch_ops import TorchOps  # noqa: E402
from graphcheck.capture.warmup import op_hooks_in_warm_up, warm_up  # noqa: E402

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

seen: list[int] = []  # the torch dispatch stack's depth at each call of stack_depth_kernel


@kernels.kernel
def stack_depth_kernel(a):
    seen.append(torch._C._len_torch_dispatch_stack())
    return a + 1


@kernels.kernel
def item_kernel(a):
    return a.sum().item()


@pytest.fixture(autouse=True)
def _fresh() -> None:
    seen.clear()


@pytest.fixture
def mode_entries(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The label of the innermost capture under way each time a torch dispatch mode is entered ('' when none)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    entries: list[str] = []
    enter = TorchDispatchMode.__enter__

    def recording(self: Any) -> Any:
        captures = torch_ops._tls.captures
        entries.append(captures[-1].label if captures else "")
        return enter(self)

    monkeypatch.setattr(TorchDispatchMode, "__enter__", recording)
    return entries


@pytest.mark.parametrize(
    ("device", "hooks"), [("cpu", True), ("cuda:0", False), ("cuda", False), ("npu:1", False), ("xpu:0", False)]
)
def test_warm_up_hooks_only_on_an_emulated_device(device: str, hooks: bool) -> None:
    assert op_hooks_in_warm_up(device) is hooks


def test_warm_up_without_op_hooks_runs_no_dispatch_mode_and_allows_host_reads() -> None:
    x = torch.zeros(3)
    warm_up(lambda: (stack_depth_kernel(x), item_kernel(x)), TorchOps(), 2, "graph #1", {}, op_hooks=False)
    assert seen == [0, 0]


def test_warm_up_with_op_hooks_is_the_emulated_path_as_before() -> None:
    x = torch.zeros(3)
    warm_up(lambda: stack_depth_kernel(x), TorchOps(), 2, "graph #1", {})
    assert seen == [1, 1]  # the capture mode, on every op
    with pytest.raises(HostSyncInCapture, match="warmup 1"):
        warm_up(lambda: item_kernel(x), TorchOps(), 1, "graph #1", {})


def test_the_npu_runner_warms_up_without_hooks_on_a_device_and_with_them_emulated(mode_entries: list[str]) -> None:
    assert npu.NpuGraphRunner(emulated_npu_binding()).warm_up_hooks is True
    runner = npu.NpuGraphRunner(npu.NpuBinding(EmulatedNpu(), "npu:0", "npu", "torch_npu (stand-in)"))
    assert runner.warm_up_hooks is False
    x = torch.zeros(3)
    graph = runner.capture(lambda: stack_depth_kernel(x))
    assert seen[:2] == [0, 0]  # two warm-up runs: no dispatch mode
    # the capture's mode, and the stand-in device's own (its capture, the poison of its outputs): none in a warm-up
    assert not [label for label in mode_entries if "warmup" in label], mode_entries
    assert any(label.startswith("graph #1") for label in mode_entries)
    mode_entries.clear()
    graph.replay()
    runner.synchronize()
    assert graph.outputs.tolist() == [1.0, 1.0, 1.0]


@pytest.mark.gpu
@needs_cuda
def test_cuda_runner_no_dispatch_mode_outside_the_capture(mode_entries: list[str]) -> None:
    from graphcheck.capture.cuda import CudaGraphRunner

    runner = CudaGraphRunner(warmup_iters=2)
    x = torch.zeros(3, device="cuda")
    graph = runner.capture(lambda: stack_depth_kernel(x))
    assert seen == [0, 0, 1]  # two warm-up runs without a mode, the capture with the runner's
    assert mode_entries and all(label and "warmup" not in label for label in mode_entries)
    mode_entries.clear()
    graph.replay()
    stack_depth_kernel(x)  # eager
    runner.synchronize()
    assert mode_entries == [] and seen[-1] == 0
    with pytest.raises(HostSyncInCapture):  # the capture still refuses host syncs before CUDA sees them
        runner.capture(lambda: item_kernel(x))


@pytest.mark.gpu
@needs_cuda
def test_a_cuda_lockstep_run_enters_dispatch_modes_only_in_captures(mode_entries: list[str]) -> None:
    from graphcheck.capture.devices import resolve
    from graphcheck.check.checker import Checker
    from graphcheck.check.engines import resolve_engine
    from graphcheck.search.builtin import demo_scenario

    outcome = Checker(resolve("cuda"), resolve_engine(None)).run(demo_scenario(num_steps=6), localise=False)
    assert outcome.clean, outcome
    assert mode_entries, "the captures push the capture mode"
    assert all(label and "warmup" not in label for label in mode_entries), sorted(set(mode_entries))
