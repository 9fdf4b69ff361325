"""``TorchArrayOps.to_host_many`` on a device: the tensors' bytes in one copy, unpacked per tensor.

The device branch is run here on CPU tensors (the ops told their device is ``cuda``): the packing
and unpacking is the same code a GPU runs, only the one ``.cpu()`` is a no-op.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from graphcheck.backends.xp.torch_xp import TorchArrayOps  # noqa: E402


class _FakeDevice:
    type = "cuda"


def _device_ops() -> TorchArrayOps:
    ops = TorchArrayOps("cpu")
    ops._device = _FakeDevice()  # the device branch, on CPU tensors
    return ops


def _tensors() -> list:
    return [
        torch.arange(6, dtype=torch.int64).reshape(2, 3),
        torch.tensor([True, False, True]),
        torch.arange(12, dtype=torch.int32).reshape(3, 4).t(),  # strided: not contiguous
        torch.linspace(-1, 1, 5, dtype=torch.float32),
        torch.tensor([1.5, -2.25], dtype=torch.bfloat16),  # no NumPy dtype: comes back float32
        torch.zeros((0, 4), dtype=torch.int64),
    ]


@pytest.mark.parametrize("copy", [True, False])
def test_a_device_batch_gives_each_tensor_back_as_it_is(copy: bool) -> None:
    xs = _tensors()
    got = _device_ops().to_host_many(xs, copy=copy)
    assert len(got) == len(xs)
    for x, host in zip(xs, got):
        want = (x.float() if x.dtype == torch.bfloat16 else x).numpy()
        assert host.shape == want.shape and host.dtype == want.dtype
        np.testing.assert_array_equal(host, want)


def test_the_copies_of_a_batch_are_each_their_own() -> None:
    got = _device_ops().to_host_many(_tensors(), copy=True)
    got[0][0, 0] = 99  # a copy: the other arrays do not share its memory
    assert all(not np.shares_memory(got[0], other) for other in got[1:])
    assert got[0].flags.owndata


def test_a_batch_without_copies_aliases_no_tensor_memory() -> None:
    xs = _tensors()
    got = _device_ops().to_host_many(xs, copy=False)
    xs[0].fill_(-7)  # the tensor changes after the read: the host value does not
    assert got[0].tolist() == [[0, 1, 2], [3, 4, 5]]
