"""Backend resolution: names, honest failures, --emulate."""

from __future__ import annotations

import pytest

from backends import devices
from backends.devices import BackendError, BackendUnavailable, UnknownBackend, available_backends, resolve


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
    from backends.graphs.emulated import EmulatedRunner

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


@pytest.mark.parametrize("name", ["npu", "xpu"])
@pytest.mark.parametrize("emulate", [False, True])
def test_npu_and_xpu_are_not_implemented_yet(name, emulate):
    with pytest.raises(BackendUnavailable, match="not implemented yet"):
        resolve(name, emulate=emulate)


def test_available_backends_covers_every_backend():
    statuses = {s.name: s for s in available_backends()}
    assert list(statuses) == list(devices.BACKENDS)
    assert statuses["npu"].usable is False and statuses["xpu"].usable is False
    assert statuses["cuda"].runner == "cuda" and statuses["cpu"].runner == "emulated"
    try:
        import torch
    except ImportError:
        assert statuses["cpu"].usable is False
        return
    assert statuses["cpu"].usable is True and statuses["cpu"].framework_version == torch.__version__
    assert statuses["cuda"].usable is torch.cuda.is_available()
    assert statuses["cuda"].emulate is not None
