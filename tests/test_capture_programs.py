"""The differential test of the op-level emulator: each capture program of ``capture_programs`` gives
the same observables on the CPU inside ``graphcheck.emulate.cuda_graphs()`` as under real CUDA graphs.

The CPU half runs everywhere and pins the observables CUDA semantics prescribe (measured on an
H200 with torch 2.11: the GPU half below asserts the CPU result equals the real one there).
"""

from __future__ import annotations

import capture_programs as cp
import pytest

#: What each program observes under CUDA graphs (the GPU half checks the real device agrees).
EXPECTED = {
    "rebound_input": {
        "after_rebind": [2.0, 4.0, 6.0, 8.0],
        "after_copy": [10.0, 12.0, 14.0, 16.0],
        "inputs": [("x", True)],
    },
    "freed_input": {
        "before": [("keep", True), ("tmp", True)],
        "after": [("keep", True), ("tmp", False)],
        "out_shape": [4],
    },
    "frozen_host_scalar": {"y": [4.0, 4.0, 4.0], "shape": [3]},
    "stale_padding": {"step1": [11.0, 21.0, 31.0, 41.0], "step2": [71.0, 81.0, 31.0, 41.0]},
    "capture_side_effect": {"after_capture": [0.0, 0.0], "after_two_replays": [2.0, 2.0]},
    "outputs_keep_storage": {"first": [2.0, 3.0], "second": [6.0, 7.0], "same_address": True},
    "host_sync": {"item": "HostSyncInCapture", "nonzero": "HostSyncInCapture"},
    "rng": {"capture_leaves_stream": True, "replays_differ": True, "in_unit_interval": True},
    "shared_pool": {"out2_before": 5.0, "out2_after": 2.0, "out1": 3.0},
    "private_pools": {"out2": 5.0, "out1": 3.0},
}


def test_every_program_has_an_expectation():
    assert set(EXPECTED) == set(cp.PROGRAMS)


@pytest.mark.parametrize("name", sorted(cp.PROGRAMS))
def test_cpu_emulation_gives_cuda_semantics(name):
    assert cp.run_on_cpu(name) == EXPECTED[name]


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(cp.PROGRAMS))
def test_real_cuda_graphs_agree_with_the_emulator(name):
    real = cp.PROGRAMS[name](cp.Env("cuda"))
    assert real == cp.run_on_cpu(name)
