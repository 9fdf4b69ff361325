"""Backend resolution: names, honest failures, --emulate."""

from __future__ import annotations

import pytest

from graphcheck.capture import devices
from graphcheck.capture.devices import BackendError, BackendUnavailable, UnknownBackend, available_backends, resolve


def test_unknown_backend_lists_the_valid_names():
    with pytest.raises(UnknownBackend) as info:
        resolve("tpu")
    message = str(info.value)
    assert "'tpu'" in message
    for name in ("cpu", "cuda", "npu", "xpu"):
        assert name in message
    assert isinstance(info.value, ValueError) and isinstance(info.value, BackendError)


def test_cpu_resolves_to_torch_with_the_emulated_runner():
    pytest.importorskip("torch")
    from graphcheck.capture.emulated import EmulatedRunner

    device = resolve("cpu")
    assert (device.name, device.framework, device.device, device.emulated) == ("cpu", "torch", "cpu", True)
    runner = device.runner_factory()
    assert isinstance(runner, EmulatedRunner) and runner.name == "emulated"
    assert "emulated" in device.description
    assert resolve(" CPU ").device == "cpu"


def test_cuda_without_a_gpu_suggests_emulate(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(BackendUnavailable) as info:
        resolve("cuda")
    assert "--emulate" in str(info.value) and "GPU" in str(info.value)
    assert not isinstance(info.value, UnknownBackend)


def test_cuda_emulated_runs_torch_on_cpu(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    device = resolve("cuda", emulate=True)
    assert (device.name, device.framework, device.device, device.emulated) == ("cuda", "torch", "cpu", True)
    assert device.runner_factory().name == "emulated"
    assert "cuda --emulate" in device.description


def test_missing_torch_is_reported_not_raised_as_import_error(monkeypatch):
    real_find_spec = devices.importlib.util.find_spec
    monkeypatch.setattr(
        devices.importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real_find_spec(name, *a)
    )
    for name, emulate in (("cpu", False), ("cuda", False), ("cuda", True)):
        with pytest.raises(BackendUnavailable, match="needs PyTorch, which is not installed"):
            resolve(name, emulate=emulate)


def test_npu_without_torch_npu_suggests_emulate():
    if devices.importlib.util.find_spec("torch_npu") is not None:
        pytest.skip("torch_npu is installed here")
    with pytest.raises(BackendUnavailable) as info:
        resolve("npu")
    message = str(info.value)
    assert "torch_npu" in message and "--emulate" in message and "not implemented" not in message


def test_npu_emulated_runs_torch_on_cpu_through_the_npu_runner():
    pytest.importorskip("torch")
    from graphcheck.capture.npu import NpuGraphRunner

    device = resolve("npu", emulate=True)  # tests/test_npu.py covers the runner and the seam
    assert (device.name, device.framework, device.device, device.emulated) == ("npu", "torch", "cpu", True)
    runner = device.runner_factory()
    assert isinstance(runner, NpuGraphRunner) and runner.name == "npu-emulated"


def _no_xpu(monkeypatch):
    paddle = pytest.importorskip("paddle")
    monkeypatch.setattr(paddle.device, "is_compiled_with_xpu", lambda: False)
    return paddle


def test_xpu_without_a_device_suggests_emulate(monkeypatch):
    _no_xpu(monkeypatch)
    with pytest.raises(BackendUnavailable) as info:
        resolve("xpu")
    message = str(info.value)
    assert "--emulate" in message and "XPU" in message and "not implemented" not in message
    assert not isinstance(info.value, UnknownBackend)


def test_xpu_emulated_runs_paddle_on_cpu_through_the_xpu_runner(monkeypatch):
    paddle = _no_xpu(monkeypatch)
    from graphcheck.capture.paddle_ops import PaddleOps
    from graphcheck.capture.xpu import XpuGraphRunner

    device = resolve("xpu", emulate=True)  # tests/test_xpu_emulated.py covers the runner and the module
    assert (device.name, device.framework, device.device, device.emulated) == ("xpu", "paddle", "cpu", True)
    runner = device.runner_factory()
    assert isinstance(runner, XpuGraphRunner) and isinstance(runner.ops, PaddleOps) and runner.name == "xpu-emulated"
    assert "xpu --emulate" in device.description and paddle.__version__ in device.description


def test_xpu_with_a_device_uses_the_paddle_graph_runner(monkeypatch):
    paddle = pytest.importorskip("paddle")
    monkeypatch.setattr(paddle.device, "is_compiled_with_xpu", lambda: True)
    monkeypatch.setattr(paddle.device.xpu, "device_count", lambda: 2)
    device = resolve("xpu")  # the runner is not built: that needs the device for real
    assert (device.framework, device.device, device.emulated) == ("paddle", "xpu:0", False)
    assert "CUDAGraph" in device.description and "XPU" in device.description


def test_missing_paddle_names_the_pip_install(monkeypatch):
    real_find_spec = devices.importlib.util.find_spec
    monkeypatch.setattr(
        devices.importlib.util, "find_spec", lambda name, *a: None if name == "paddle" else real_find_spec(name, *a)
    )
    for emulate in (False, True):
        with pytest.raises(BackendUnavailable, match=r"pip install paddlepaddle==3\.3\.1"):
            resolve("xpu", emulate=emulate)


def test_available_backends_tells_the_truth_about_xpu(monkeypatch):
    xpu = {s.name: s for s in available_backends()}["xpu"]
    assert (xpu.framework, xpu.runner) == ("paddle", "xpu") and xpu.emulate and "emulated" in xpu.emulate
    try:
        import paddle
    except ImportError:
        assert (xpu.framework_version, xpu.usable) == (None, False) and "pip install" in xpu.note
        return
    assert xpu.framework_version == paddle.__version__
    present = paddle.device.is_compiled_with_xpu() and paddle.device.xpu.device_count() > 0
    assert xpu.device_present is present and xpu.usable is present
    monkeypatch.setattr(paddle.device, "is_compiled_with_xpu", lambda: False)
    xpu = {s.name: s for s in available_backends()}["xpu"]
    assert xpu.device_present is False and xpu.usable is False and "--emulate works" in xpu.note


def test_available_backends_covers_every_backend():
    statuses = {s.name: s for s in available_backends()}
    assert list(statuses) == list(devices.BACKENDS)
    assert statuses["npu"].runner == "npu" and statuses["npu"].emulate is not None
    if devices.importlib.util.find_spec("torch_npu") is None:
        assert statuses["npu"].usable is False and statuses["npu"].framework_version is None
    assert statuses["xpu"].runner == "xpu" and statuses["xpu"].emulate is not None
    assert statuses["cuda"].runner == "cuda" and statuses["cpu"].runner == "emulated"
    try:
        import torch
    except ImportError:
        assert statuses["cpu"].usable is False
        return
    assert statuses["cpu"].usable is True and statuses["cpu"].framework_version == torch.__version__
    assert statuses["cuda"].usable is torch.cuda.is_available()
    assert statuses["cuda"].emulate is not None
