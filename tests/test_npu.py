"""The npu backend without an Ascend device: the NPUGraph runner on the emulated NPU module.

``graphcheck.capture.npu.NpuGraphRunner`` runs unchanged over the emulated NPU
module (``tests/npu_shim.py`` installs it behind the seam, ``--backend npu
--emulate`` uses it directly), so these tests drive the runner's own wiring:
side-stream capture, the shared pool, task groups around host-parameter
kernels, the update hook before every replay, and replay. Then the engine
through it (against the reference and eager, bit for bit), and what
``resolve`` and ``doctor`` say about npu on a machine without torch_npu.
torch_npu is never imported.
"""

from __future__ import annotations

import functools
import sys

import pytest

torch = pytest.importorskip("torch")

from graphcheck.capture import (  # noqa: E402
    devices,  # noqa: E402
    kernels,
    npu,
)
from graphcheck.capture.base import CaptureError, HostSyncInCapture  # noqa: E402
from graphcheck.capture.devices import BackendUnavailable, available_backends, resolve  # noqa: E402
from graphcheck.capture.emulated import EmulatedRunner  # noqa: E402
from graphcheck.capture.kernels import HostParam  # noqa: E402
from graphcheck.capture.npu import NpuGraphRunner  # noqa: E402
from graphcheck.capture.npu_emulated import EmulatedNpu  # noqa: E402
from graphcheck.check.threads import single_threaded  # noqa: E402
from graphcheck.cli import (  # noqa: E402
    exitcodes,
    main,
)

import npu_shim  # noqa: E402
from _engine_scenarios import (  # noqa: E402
    SCOPES,
    assert_graph_policy,
    buckets_scenario,
    demo,
    engine_for,
    lockstep,
    run_against_reference,
    with_scope,
)
from _graph_harness import add_into, host_copy_kernel, item_kernel, make_sum  # noqa: E402


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    with single_threaded(resolve("cpu")):
        yield


@pytest.fixture
def runner() -> NpuGraphRunner:
    return NpuGraphRunner(npu_shim.emulator_binding())


# --------------------------------------------------------------------------- kernels of the tests


@kernels.kernel
def prefix_sums(out, x, seq_lens):
    """out[i] = sum of x[i, :seq_lens[i]]; ``seq_lens`` is host-side, like FIA's actual_seq_lengths."""
    for i, n in enumerate(seq_lens):
        torch.sum(x[i, :n], dim=0, out=out[i])


@kernels.kernel
def allocating_sums(x, seq_lens):
    return torch.stack([x[i, :n].sum() for i, n in enumerate(seq_lens)])


@kernels.kernel
def tolist_kernel(a):
    return torch.tensor(a.tolist())


def expected_sums(x: torch.Tensor, lens) -> list[float]:
    return [float(x[i, :n].sum()) for i, n in enumerate(lens)]


class HostLens:
    """The engine's host-side sequence lengths: a region registers ``param`` and the runner reads it."""

    def __init__(self, *lens: int) -> None:
        self.lens = list(lens)
        self.reads: list[tuple[int, ...]] = []

    def read(self) -> tuple[int, ...]:
        self.reads.append(tuple(self.lens))
        return tuple(self.lens)

    @property
    def param(self) -> HostParam:
        return HostParam("seq_lens", self.read)


def host_region():
    x = torch.arange(12, dtype=torch.float64).reshape(2, 6)
    out = torch.zeros(2, dtype=torch.float64)
    lens = HostLens(2, 3)
    return x, out, lens, (lambda: prefix_sums(out, x, lens.param))


def kinds(module: EmulatedNpu, start: int = 0) -> list[str]:
    return [what for what, _ in module.log[start:]]


# --------------------------------------------------------------------------- 1. the runner's wiring


def test_captures_run_on_a_side_stream_share_one_pool_and_replay(runner):
    module = runner.dev
    x, y = torch.tensor([1.0, 2.0]), torch.tensor([10.0, 20.0])
    g1 = runner.capture(lambda: make_sum(x, y))
    g2 = runner.capture(lambda: make_sum(g1.outputs, x))  # reads g1's output
    begins = [detail for what, detail in module.log if what == "capture_begin"]
    assert len(begins) == 2 and all("default" not in d for d in begins)
    assert {d.rsplit("pool ", 1)[1] for d in begins} == {"1"}, "every capture shares the runner's pool"
    assert g1.device_graph.pool() == g2.device_graph.pool()
    for k in range(3):
        x.fill_(float(k))
        g1.replay()
        g2.replay()
        assert g1.outputs.tolist() == [k + 10.0, k + 20.0]
        assert g2.outputs.tolist() == [2 * k + 10.0, 2 * k + 20.0]
    assert g1.tasks == () and "task_update" not in kinds(module), "no host parameters, no task update"
    assert runner.memory_bytes() > 0


def test_rebound_buffer_is_read_stale_and_reported(runner):
    x, y, out = torch.tensor([1.0, 2.0, 3.0]), torch.tensor([10.0, 20.0, 30.0]), torch.zeros(3)
    bufs = {"x": x, "y": y, "out": out}
    graph = runner.capture(
        lambda: add_into(bufs["out"], bufs["x"], bufs["y"]), names={id(x): "x", id(y): "y", id(out): "out"}
    )
    assert out.tolist() == [0.0, 0.0, 0.0], "warm-up and capture leave no side effects"
    assert {inp.name for inp in graph.static_inputs} == {"x", "y", "out"}
    bufs["x"] = torch.tensor([100.0, 200.0, 300.0])
    graph.replay()
    assert out.tolist() == [11.0, 22.0, 33.0]
    assert [inp.name for inp, _ in graph.stale_inputs(bufs)] == ["x"]
    del x
    assert [inp.name for inp in graph.dead_inputs()] == ["x"]


@pytest.mark.parametrize(
    "kernel_fn", [item_kernel, host_copy_kernel, tolist_kernel], ids=["item", "host_sync", "tolist"]
)
def test_host_sync_in_capture_raises_and_the_runner_stays_usable(runner, kernel_fn):
    x = torch.tensor([1.0, 2.0])
    with pytest.raises(HostSyncInCapture):
        runner.capture(lambda: kernel_fn(x))
    assert runner.dev._capturing is None
    graph = runner.capture(lambda: make_sum(x, x))
    graph.replay()
    assert graph.outputs.tolist() == [2.0, 4.0]


# --------------------------------------------------------------------------- 2. host parameters and the update hook


def test_a_host_param_kernel_reads_the_current_value_when_run_eagerly():
    x, out, lens, region = host_region()
    region()
    assert out.tolist() == expected_sums(x, (2, 3))
    lens.lens = [6, 1]
    region()
    assert out.tolist() == expected_sums(x, (6, 1))


def test_the_update_hook_reissues_the_current_host_values_before_every_replay(runner):
    module = runner.dev
    x, out, lens, region = host_region()
    graph = runner.capture(region, names={id(x): "x", id(out): "out"})
    assert out.tolist() == [0.0, 0.0], "capture leaves no side effects"
    (task,) = graph.tasks
    assert task.name.endswith("prefix_sums") and task.issued == {"seq_lens": (2, 3)}
    assert kinds(module).count("task_group") == 1
    assert {inp.name for inp in graph.static_inputs} == {"x", "out"}
    for step, new in enumerate([(2, 3), (4, 1), (6, 6), (0, 2)], start=1):
        lens.lens = list(new)
        mark = len(module.log)
        graph.replay()
        assert out.tolist() == expected_sums(x, new), f"replay {step} used stale host values"
        assert task.issued == {"seq_lens": new} and lens.reads[-1] == new
        assert graph.updates == step
        # replay order: the update stream waits for the current stream, the task is patched,
        # its event recorded, then the graph replays
        assert kinds(module, mark) == ["wait_stream", "task_update", "event_record", "replay"]


def test_a_view_made_in_the_region_is_reissued_on_the_same_address(runner):
    x = torch.arange(18, dtype=torch.float64).reshape(3, 6).clone()  # not a view: the engine names bases
    out = torch.zeros(3, dtype=torch.float64)
    lens = HostLens(2, 3)
    graph = runner.capture(lambda: prefix_sums(out[1:], x[1:], lens.param), names={id(x): "x", id(out): "out"})
    assert {inp.name for inp in graph.static_inputs} == {"x", "out"}
    for new in [(2, 3), (6, 1)]:
        lens.lens = list(new)
        graph.replay()
        assert out.tolist() == [0.0, *expected_sums(x[1:], new)]


def test_without_the_update_the_replay_runs_with_capture_time_host_values(runner):
    x, out, lens, region = host_region()
    graph = runner.capture(region)
    (task,) = graph.tasks
    lens.lens = [5, 1]
    with pytest.raises(CaptureError, match="would block"):  # the captured event wait has no record
        graph.device_graph.replay()
    task.event.record()  # release the wait, but patch nothing
    graph.device_graph.replay()
    assert out.tolist() == expected_sums(x, (2, 3)), "the captured task keeps its capture-time lengths"
    graph.replay()  # through the update hook
    assert out.tolist() == expected_sums(x, (5, 1))


def test_a_cuda_style_capture_bakes_host_values_in():
    """What the hook is for: the emulated runner (CUDA-graph semantics) replays capture-time values."""
    x, out, lens, region = host_region()
    graph = EmulatedRunner().capture(region)
    lens.lens = [5, 1]
    graph.replay()
    assert out.tolist() == expected_sums(x, (2, 3))


def test_a_host_param_kernel_that_allocates_is_refused(runner):
    x, lens = torch.arange(12, dtype=torch.float64).reshape(2, 6), HostLens(2, 3)
    with pytest.raises(CaptureError, match="allocated memory inside its task group"):
        runner.capture(lambda: allocating_sums(x, lens.param))
    assert runner.dev._capturing is None and runner.dev._group_start is None
    x2, out, lens2, region = host_region()
    runner.capture(region).replay()
    assert out.tolist() == expected_sums(x2, (2, 3))


def test_a_task_whose_tensor_was_freed_cannot_be_updated(runner):
    x, out, lens, region = host_region()
    graph = runner.capture(region)
    del x, region
    with pytest.raises(CaptureError, match="freed"):
        graph.replay()


def test_the_emulated_module_refuses_what_torch_npu_refuses():
    module = EmulatedNpu()
    graph = module.NPUGraph()
    with pytest.raises(CaptureError, match="default stream"):
        graph.capture_begin()
    with pytest.raises(CaptureError, match="outside a capture"):
        module.graph_task_group_begin(module.current_stream())
    with pytest.raises(CaptureError, match="not captured"):
        graph.replay()
    x, out, lens, region = host_region()
    runner = NpuGraphRunner(npu.NpuBinding(module, "cpu", "npu-emulated", "test"))
    captured = runner.capture(region)
    (task,) = captured.tasks
    stream = module.Stream()
    module.graph_task_update_begin(stream, task.handle)  # an update that re-issues nothing
    with pytest.raises(CaptureError, match="issued 0 kernel calls"):
        module.graph_task_update_end(stream)
    module.graph_task_update_begin(stream, task.handle)
    kernels.launch(add_into, (out, x, x), {})  # another kernel than the group's
    with pytest.raises(CaptureError, match="re-issued .*add_into"):
        module.graph_task_update_end(stream)


# --------------------------------------------------------------------------- 3. the engine through the npu runner


@functools.cache
def npu_emulate():
    return resolve("npu", emulate=True)


@pytest.mark.parametrize("mode", ["greedy", "topp", "naive"])
def test_engine_on_npu_emulate_matches_the_reference(mode):
    scenario, engine = engine_for(f"demo-{mode}", device=npu_emulate())
    assert engine.runner.name == "npu-emulated" and isinstance(engine.runner, NpuGraphRunner)
    run = run_against_reference(engine, scenario, f"demo-{mode}", "on npu --emulate")
    assert assert_graph_policy(run, scenario.config) > 0


@pytest.mark.parametrize("scope", SCOPES)
def test_engine_graphs_on_npu_emulate_match_eager_bit_for_bit(scope):
    scenario = with_scope(buckets_scenario(), scope)
    assert lockstep(scenario, device=npu_emulate()) > 0


# --------------------------------------------------------------------------- 4. resolve and doctor


@pytest.fixture
def no_npu_import(monkeypatch):
    """Fail the test if anything loads torch_npu through the seam."""

    def refuse():
        raise AssertionError("torch_npu must not be loaded here")

    monkeypatch.setattr(npu, "load_npu_binding", refuse)


def test_npu_emulate_is_torch_on_cpu_with_the_npu_runner(no_npu_import):
    device = resolve("npu", emulate=True)
    assert (device.name, device.framework, device.device, device.emulated) == ("npu", "torch", "cpu", True)
    assert "npu --emulate" in device.description and "emulated NPU" in device.description
    runner = device.runner_factory()
    assert isinstance(runner, NpuGraphRunner) and isinstance(runner.dev, EmulatedNpu)
    assert runner.name == "npu-emulated"
    assert device.runner_factory().dev is not runner.dev, "each runner gets its own emulated module"


def test_npu_without_torch_npu_suggests_emulate():
    if "torch_npu" in sys.modules or devices._version("torch-npu", "torch_npu"):
        pytest.skip("torch_npu is installed here")
    with pytest.raises(BackendUnavailable) as info:
        resolve("npu")
    message = str(info.value)
    assert "torch_npu" in message and "not installed" in message and "--emulate" in message


def test_a_failing_torch_npu_import_is_reported(monkeypatch):
    def broken():
        raise npu.NpuUnavailable("importing torch_npu failed (ImportError: libhccl.so: cannot open shared object file)")

    monkeypatch.setattr(npu, "load_npu_binding", broken)
    with pytest.raises(BackendUnavailable, match=r"libhccl\.so.*--emulate"):
        resolve("npu")


def test_npu_with_torch_npu_but_no_device_suggests_emulate(monkeypatch):
    class NoDevice(EmulatedNpu):
        def device_count(self) -> int:
            return 0

    npu_shim.install(monkeypatch, lambda: npu.NpuBinding(NoDevice(), "npu:0", "npu", "torch_npu 9.9"))
    with pytest.raises(BackendUnavailable, match="sees none.*--emulate"):
        resolve("npu")


def test_npu_resolves_through_the_seam_to_the_npu_runner(monkeypatch):
    npu_shim.install(monkeypatch, npu_shim.emulator_binding)
    device = resolve("npu")
    assert (device.name, device.framework, device.device, device.emulated) == ("npu", "torch", "cpu", False)
    runner = device.runner_factory()
    assert isinstance(runner, NpuGraphRunner) and runner.name == "npu-emulated"
    assert isinstance(NpuGraphRunner().dev, EmulatedNpu), "a runner made without a binding loads it through the seam"


def test_doctor_row_tells_the_truth_here(no_npu_import):
    row = {s.name: s for s in available_backends()}["npu"]
    assert (row.framework, row.runner, row.usable) == ("torch_npu", "npu", False)
    assert row.emulate and "emulated" in row.emulate
    assert row.device_present is bool(devices._davinci_nodes())
    if devices._version("torch-npu", "torch_npu") is None:
        assert row.framework_version is None and "not installed" in row.note and "--emulate works" in row.note
    assert "torch_npu" not in sys.modules


def test_doctor_does_not_import_torch_npu_without_the_ascend_toolkit(monkeypatch, no_npu_import):
    monkeypatch.setattr(devices, "_version", lambda *d: "2.5.1" if "torch-npu" in d else None)
    monkeypatch.setattr(devices, "_ascend_toolkit", lambda: None)
    row = devices._npu_status()
    assert row.framework_version == "2.5.1" and row.usable is False
    assert "no Ascend CANN toolkit" in row.note and "not imported" in row.note


def test_doctor_row_with_a_device(monkeypatch):
    monkeypatch.setattr(devices, "_version", lambda *d: "2.5.1")
    monkeypatch.setattr(devices, "_ascend_toolkit", lambda: "/usr/local/Ascend/ascend-toolkit/latest")
    npu_shim.install(monkeypatch, lambda: npu.NpuBinding(EmulatedNpu(), "npu:0", "npu", "torch_npu 2.5.1"))
    row = devices._npu_status()
    assert (row.device_present, row.usable) == (True, True) and "1 Ascend NPU" in row.note


def test_doctor_command_lists_npu(capsys, no_npu_import):
    assert main(["doctor"]) == exitcodes.CLEAN
    out = capsys.readouterr().out
    assert "npu" in out and "torch_npu" in out


# --------------------------------------------------------------------------- 5. the command line


def test_run_backend_npu_without_a_device_exits_3(tmp_path, capsys):
    if devices._version("torch-npu", "torch_npu"):
        pytest.skip("torch_npu is installed here")
    assert main(["run", "--backend", "npu", "--report-dir", str(tmp_path)]) == exitcodes.BACKEND_UNAVAILABLE
    err = capsys.readouterr().err
    assert "--emulate" in err and "torch_npu" in err and "Traceback" not in err


def test_run_backend_npu_emulate_is_clean(tmp_path, capsys):
    code = main(
        [
            "run",
            "--backend",
            "npu",
            "--emulate",
            "--suite",
            "seeds",
            "--examples",
            "1",
            "--steps",
            "4",
            "--seed",
            "1",
            "--quiet",
            "--report-dir",
            str(tmp_path),
        ]
    )
    out = capsys.readouterr().out
    assert code == exitcodes.CLEAN, out
    assert "npu --emulate" in out and "CLEAN" in out
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert "npu-emulated" in (run_dir / "index.html").read_text()


def test_static_inputs_of_the_engine_are_all_named():
    """Every tensor an npu-emulated engine graph reads is an engine buffer (as on the cpu backend)."""
    from graphcheck.backends.engine import Engine
    from graphcheck.reference import make_weights

    scenario = demo("target_match")
    engine = Engine(scenario.config, make_weights(scenario.config), device=npu_emulate())
    names = {inp.name for graphs in engine.graphs.values() for g in graphs.all() for inp in g.static_inputs}
    assert None not in names and "cu_seqlens_out" in names
