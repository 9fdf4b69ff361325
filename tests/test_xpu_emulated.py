"""The xpu backend without a Kunlun device: the xpu runner on the emulated Paddle XPU graph API.

``graphcheck.capture.xpu.XpuGraphRunner`` runs unchanged over
``graphcheck.capture.xpu_emulated.EmulatedXpu`` (``--backend xpu --emulate``
uses it), so these tests drive the runner's own code path on paddle CPU tensors:
its wiring (the order of its graph API calls), the emulator's graph semantics
through it, each place where the emulated API refuses what Paddle on an XPU
would refuse, then the engine through ``resolve("xpu", emulate=True)`` (against
the reference and against eager, bit for bit) and graph-only faults caught
through it. What the emulation does not prove (Kunlun kernels, the XPU memory
pool, ``thread_local`` mode) is in the xpu_emulated module docstring.
"""

from __future__ import annotations

import functools

import pytest

paddle = pytest.importorskip("paddle")

from test_graphs_paddle import PADDLE, T, add_into, host  # noqa: E402  (its paddle tensors and kernels)

from graphcheck.capture import (  # noqa: E402
    devices,  # noqa: E402
    kernels,
    paddle_ops,
)
from graphcheck.capture.base import CaptureError, HostSyncInCapture  # noqa: E402
from graphcheck.capture.devices import available_backends, resolve  # noqa: E402
from graphcheck.capture.xpu import XpuGraph, XpuGraphRunner, load_xpu_binding  # noqa: E402
from graphcheck.capture.xpu_emulated import EmulatedXpu  # noqa: E402
from graphcheck.check.checker import check_scenario  # noqa: E402

import _graph_harness as shared  # noqa: E402
from _engine_scenarios import (  # noqa: E402
    SCOPES,
    assert_graph_policy,
    buckets_scenario,
    engine_for,
    lockstep,
    run_against_reference,
    with_scope,
)
from _fault_scenarios import FAULT_SCENARIOS  # noqa: E402
from _graph_harness import host_copy_kernel, item_kernel, make_sum, names_of  # noqa: E402
from _layers import fast_first  # noqa: E402


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """Tiny tensors: intra-op threads only add overhead on a busy 2-core box."""
    set_threads = getattr(paddle.base.core, "set_num_threads", None)
    if set_threads is not None:
        set_threads(1)
    yield


@pytest.fixture
def module() -> EmulatedXpu:
    return EmulatedXpu()


@pytest.fixture
def runner(module):
    r = XpuGraphRunner(module.binding())
    yield r
    module.runner.close()
    assert module._capturing is None and kernels.current_observer() is None
    assert paddle_ops._HOST_READS.depth == 0, "the host-read patch outlived the capture"


def kinds(module: EmulatedXpu, start: int = 0) -> list[str]:
    return [what for what, _ in module.log[start:]]


# --------------------------------------------------------------------------- 1. the runner's wiring


def test_capture_synchronises_captures_in_thread_local_mode_and_replays(runner, module):
    bufs = PADDLE.bufs()
    graph = runner.capture(lambda: add_into(bufs.out, bufs.x, bufs.y), names=names_of(bufs))
    assert isinstance(graph, XpuGraph) and runner.name == "xpu-emulated"
    assert kinds(module) == ["graph", "synchronize", "capture_begin", "capture_end", "synchronize"]
    assert "mode thread_local" in module.log[0][1] and "Place(cpu)" in module.log[0][1]
    assert host(bufs.out) == [0.0, 0.0, 0.0], "warm-up and capture leave no side effects"
    assert {inp.name for inp in graph.static_inputs} == {"x", "y", "out"}
    mark = len(module.log)
    graph.replay()
    graph.replay()
    assert kinds(module, mark) == ["replay", "replay"]
    assert host(bufs.out) == [11.0, 22.0, 33.0]


def test_graphs_read_each_others_outputs_and_hold_memory(runner):
    x, y = T([1.0, 2.0]), T([10.0, 20.0])
    g1 = runner.capture(lambda: make_sum(x, y))
    g2 = runner.capture(lambda: make_sum(g1.outputs, x))
    assert runner.memory_bytes() > 0, "memory_allocated counts the storage the graphs hold"
    for k in range(3):
        x.copy_(T([float(k), float(k)]), True)
        g1.replay()
        g2.replay()
        assert host(g2.outputs) == [2 * k + 10.0, 2 * k + 20.0]


def test_memory_allocated_is_the_storage_the_graphs_hold(runner):
    shared.memory_bytes_counts_graph_owned_storage(runner, paddle.ones([256], dtype="float32"))


def test_a_kernel_trace_sees_each_kernel_of_a_replay(runner):
    bufs = PADDLE.bufs()

    def region():
        s = make_sum(bufs.x, bufs.y)
        add_into(bufs.out, s, bufs.x)

    graph = runner.capture(region)
    assert [fn.__qualname__ for fn, _, _ in graph.kernel_calls()] == ["make_sum", "add_into"]
    assert graph.persistent_tensors(), "the intermediate the region allocated persists between replays"
    seen = []

    class Tracer:
        def trace_call(self, fn, args, kwargs, *, graph):
            seen.append((fn.__qualname__, graph))
            return kernels.run_nested(fn, args, kwargs)

    with kernels.tracing(Tracer()):
        graph.replay()
    label = graph.device_graph.label  # the trace names the device graph, as it does on npu --emulate
    assert seen == [("make_sum", label), ("add_into", label)]
    assert host(bufs.out) == [12.0, 24.0, 36.0]


def test_rebound_buffer_is_read_stale_and_a_freed_one_is_dead(runner):
    shared.rebound_buffer_is_read_stale_on_replay(runner, PADDLE)
    shared.dead_inputs_report_a_freed_static_input(runner, PADDLE)


def test_state_mutated_in_capture_is_restored_and_replay_mutates_it(runner):
    shared.state_mutated_in_capture_is_restored_and_replay_mutates_it(runner, PADDLE)


@pytest.mark.parametrize(
    "kernel_fn", [item_kernel, host_copy_kernel, lambda a: make_sum(a, a).numpy()], ids=["item", "host_sync", "numpy"]
)
def test_host_sync_in_the_region_raises_and_the_runner_stays_usable(runner, module, kernel_fn):
    x = T([1.0, 2.0])
    with pytest.raises(HostSyncInCapture):
        runner.capture(lambda: kernel_fn(x))
    assert "capture_begin" not in kinds(module), "the warm-up refuses it already"
    graph = runner.capture(lambda: make_sum(x, x))
    graph.replay()
    assert host(graph.outputs) == [2.0, 4.0]


def test_a_region_failing_inside_the_capture_ends_and_resets_it(runner, module):
    x, calls = T([1.0, 2.0]), []

    @kernels.kernel
    def fails_when_captured(a):
        calls.append(1)
        if len(calls) > runner.warmup_iters:
            raise ValueError("kernel failed")
        return a * 2

    with pytest.raises(ValueError, match="kernel failed"):
        runner.capture(lambda: fails_when_captured(x))
    assert kinds(module) == ["graph", "synchronize", "capture_begin", "capture_end", "reset", "synchronize"]
    assert module._capturing is None and host(x) == [1.0, 2.0]
    graph = runner.capture(lambda: make_sum(x, x))
    graph.replay()
    assert host(graph.outputs) == [2.0, 4.0]


def test_failed_capture_restores_state_and_allows_the_next_capture(runner):
    shared.failed_capture_restores_state_and_allows_the_next_capture(runner, PADDLE)


def test_a_reset_graph_cannot_be_replayed(runner):
    x = T([1.0])
    graph = runner.capture(lambda: make_sum(x, x))
    graph.replay()
    graph.reset()
    with pytest.raises(CaptureError, match="was reset"):
        graph.replay()


# --------------------------------------------------------------------------- 2. what the emulated API refuses


def _capturing(module: EmulatedXpu):
    graph = module.CUDAGraph(place=module.place, mode="thread_local")
    graph.capture_begin()
    return graph


def test_capture_begin_twice_is_refused(module):
    graph = _capturing(module)
    with pytest.raises(CaptureError, match="twice"):
        graph.capture_begin()
    graph.capture_end()
    with pytest.raises(CaptureError, match="already captured"):
        graph.capture_begin()


def test_captures_do_not_nest(module):
    outer = _capturing(module)
    with pytest.raises(CaptureError, match="do not nest"):
        module.CUDAGraph().capture_begin()
    outer.reset()  # leaves capture mode
    assert module._capturing is None and kernels.current_observer() is None


def test_capture_end_without_capture_begin_is_refused(module):
    with pytest.raises(CaptureError, match="without capture_begin"):
        module.CUDAGraph().capture_end()
    other = _capturing(module)
    with pytest.raises(CaptureError, match="without capture_begin"):
        module.CUDAGraph().capture_end()  # another graph is capturing, not this one
    other.capture_end()


def test_replay_of_an_uncaptured_graph_is_refused(module):
    with pytest.raises(CaptureError, match="was not captured"):
        module.CUDAGraph().replay()


def test_replay_during_a_capture_is_refused(module):
    x = T([1.0])
    done = _capturing(module)
    make_sum(x, x)
    done.capture_end()
    capturing = _capturing(module)
    with pytest.raises(CaptureError, match="while CUDAGraph #2 is being captured"):
        done.replay()
    capturing.reset()
    done.replay()


def test_synchronize_during_a_capture_is_refused(module):
    graph = _capturing(module)
    with pytest.raises(CaptureError, match="synchronize"):
        module.synchronize(module.place)
    graph.capture_end()
    module.synchronize(module.place)


def test_an_unknown_mode_or_another_place_is_refused(module):
    with pytest.raises(CaptureError, match="mode 'local'"):
        module.CUDAGraph(mode="local")
    with pytest.raises(CaptureError, match="emulated device"):
        module.CUDAGraph(place="Place(xpu:0)")


# --------------------------------------------------------------------------- 3. resolve, doctor and the real binding


def test_xpu_emulate_is_the_xpu_runner_on_a_fresh_emulated_module():
    device = resolve("xpu", emulate=True)
    assert (device.framework, device.device, device.emulated) == ("paddle", "cpu", True)
    assert "emulated XPU graph API" in device.description
    runner = device.runner_factory()
    assert isinstance(runner, XpuGraphRunner) and runner.name == "xpu-emulated" and runner.warmup_iters == 1
    module = runner.binding.graph_cls.__self__
    assert isinstance(module, EmulatedXpu)
    assert device.runner_factory().binding.graph_cls.__self__ is not module, "each runner gets its own module"


def test_doctor_says_what_xpu_emulate_runs(monkeypatch):
    monkeypatch.setattr(paddle.device, "is_compiled_with_xpu", lambda: False)
    row = {s.name: s for s in available_backends()}["xpu"]
    assert row.emulate == devices.XPU_EMULATE and "xpu runner" in row.emulate
    assert "--emulate works" in row.note and "not Kunlun kernels" in row.note


def test_the_real_binding_needs_an_xpu(monkeypatch):
    monkeypatch.setattr(paddle.device, "is_compiled_with_xpu", lambda: False)
    with pytest.raises(RuntimeError, match="needs a Kunlun XPU"):
        load_xpu_binding("xpu:0")
    with pytest.raises(RuntimeError, match="needs a Kunlun XPU"):
        XpuGraphRunner("xpu:0")


# --------------------------------------------------------------------------- 4. the engine through the xpu runner


@functools.cache
def xpu_emulate():
    return resolve("xpu", emulate=True)


def test_engine_on_xpu_emulate_matches_the_reference():
    scenario, engine = engine_for("demo-topp", device=xpu_emulate())
    assert isinstance(engine.runner, XpuGraphRunner) and engine.runner.name == "xpu-emulated"
    run = run_against_reference(engine, scenario, "demo-topp", "on xpu --emulate")
    assert assert_graph_policy(run, scenario.config) > 0


@pytest.mark.parametrize("scope", fast_first(SCOPES, lambda scope: scope == "step"))
def test_engine_graphs_on_xpu_emulate_match_eager_bit_for_bit(scope):
    assert lockstep(with_scope(buckets_scenario(), scope), device=xpu_emulate()) > 0


@functools.cache
def _torch_cpu():
    try:
        return resolve("cpu")
    except Exception:  # torch missing: check paddle alone
        return None


@pytest.mark.parametrize("fault", ["rebind-output-offsets", "unsliced-graph-output", "host-sync-in-capture"])
def test_a_graph_only_fault_is_caught_through_the_xpu_runner(fault):
    scenario = FAULT_SCENARIOS[fault]()
    outcome = check_scenario(scenario, xpu_emulate(), faults=[fault], localise=True)
    assert not outcome.clean, f"{fault} went undetected on xpu --emulate"
    first, where = outcome.first, outcome.localisation
    assert where is not None and where.kernel, "localised to a kernel"
    torch_cpu = _torch_cpu()
    if torch_cpu is not None:  # the same headline and kernel as the torch emulation
        on_cpu = check_scenario(scenario, torch_cpu, faults=[fault], localise=True)
        assert (first.kind, first.step, first.tensor) == (on_cpu.first.kind, on_cpu.first.step, on_cpu.first.tensor)
        assert where.target == on_cpu.localisation.target
    if first.kind != "capture":  # a capture that fails builds no graph engine, so there is no runner to name
        assert outcome.runner == "xpu-emulated"
