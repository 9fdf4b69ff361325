"""The emulated graph runner on paddle tensors (``EmulatedRunner(PaddleOps())``), and lockstep on xpu --emulate.

The emulator's semantics must hold on paddle as on torch: a rebound buffer is
read stale on replay, host syncs inside a capture raise, a capture leaves no
side effects, and what a capture allocated holds poison until the first replay.
What paddle cannot give (no dispatch hook: no escaped-op detection, poison is
checked on ``to_host`` only) is documented in ``graphcheck.capture.paddle_ops``.
Then the whole harness: ``check_scenario`` on ``resolve("xpu", emulate=True)`` is
clean on the demo and catches every registered engine fault with the same
headline divergence as the torch emulation.
"""

from __future__ import annotations

import gc
import threading

import pytest

paddle = pytest.importorskip("paddle")

from graphcheck.backends.engine.faults import FAULTS  # noqa: E402
from graphcheck.backends.xp import make_ops  # noqa: E402
from graphcheck.capture import kernels, paddle_ops  # noqa: E402
from graphcheck.capture.base import HostSyncInCapture, PoisonedTensorError  # noqa: E402
from graphcheck.capture.devices import resolve  # noqa: E402
from graphcheck.capture.emulated import EmulatedRunner  # noqa: E402
from graphcheck.capture.paddle_ops import PaddleOps  # noqa: E402
from graphcheck.check.checker import check_scenario  # noqa: E402
from graphcheck.scenario import GRAPH_SCOPES  # noqa: E402
from graphcheck.search.builtin import demo_scenario, late_joiner, shrinking_batch  # noqa: E402

import _graph_harness as shared  # noqa: E402

#: The scenario that shows each fault (tests/test_faults.py has the torch story per fault).
from _fault_scenarios import FAULT_SCENARIOS, with_scope  # noqa: E402
from _graph_harness import Bufs, Framework, item_kernel, make_sum, names_of  # noqa: E402
from _layers import fast_first  # noqa: E402

xp = make_ops("paddle", "cpu")


def T(values, dtype="float64"):
    return paddle.to_tensor(values, dtype=dtype, place=paddle.CPUPlace())


def host(t):
    return xp.to_host(t).tolist()


@kernels.kernel
def add_into(out, a, b):
    out.copy_(a + b, True)


@kernels.kernel
def scale_(t, factor):
    t.copy_(t * factor, True)


@kernels.kernel
def sum_fields(bufs: Bufs):
    bufs.out.copy_(bufs.x + bufs.y, True)


#: paddle for the checks shared with tests/test_graphs_emulated.py (their bodies are in tests/_graph_harness.py).
PADDLE = Framework(tensor=T, host=host, add_into=add_into, scale_=scale_, sum_fields=sum_fields)
make_bufs = PADDLE.bufs


@pytest.fixture
def runner():
    r = EmulatedRunner(PaddleOps())
    yield r
    r.close()
    assert paddle_ops._HOST_READS.depth == 0 and not paddle_ops._HOST_READS.originals


# --------------------------------------------------------------------------- storage handles


def test_storage_key_is_shared_by_views_and_whole_covers_the_allocation():
    ops = PaddleOps()
    base = paddle.arange(12, dtype="int64").reshape([3, 4])
    col, rows = base[:, 1], base[1:]
    assert ops.storage_key(col) == ops.storage_key(rows) == ops.storage_key(base) == base.data_ptr()
    assert ops.storage_key(paddle.arange(3)) != ops.storage_key(base)
    assert ops.whole(rows).data_ptr() == base.data_ptr() and ops.shape(ops.whole(rows)) == (12,)
    assert ops.storage_nbytes(col) == 12 * 8
    assert ops.dtype_name(base) == "int64" and ops.view_base(col) is None


def test_alias_shares_memory_without_holding_the_engine_object():
    ops = PaddleOps()
    t = T([1.0, 2.0])
    ref = __import__("weakref").ref(t)
    alias = ops.alias(t)
    assert alias is not t and alias.data_ptr() == t.data_ptr() and ops.shape(alias) == (2,)
    t.copy_(T([5.0, 6.0]), True)
    assert host(alias) == [5.0, 6.0]
    del t
    gc.collect()
    assert ref() is None and host(alias) == [5.0, 6.0]  # the memory lives on in the alias


def test_snapshot_and_restore_cover_the_whole_storage_of_a_view():
    ops = PaddleOps()
    base = paddle.arange(6, dtype="int64")
    snap = ops.snapshot(base[2:4])
    base.copy_(paddle.full([6], -1, dtype="int64"), True)
    ops.restore(snap)
    assert host(base) == [0, 1, 2, 3, 4, 5]


# --------------------------------------------------------------------------- 1. rebinding


def test_rebound_buffer_is_read_stale_on_replay(runner):
    shared.rebound_buffer_is_read_stale_on_replay(runner, PADDLE)


def test_rebound_dataclass_field_is_read_stale(runner):
    shared.rebound_dataclass_field_is_read_stale(runner, PADDLE)


def test_updating_in_place_is_not_stale_and_is_seen(runner):
    bufs = make_bufs()
    graph = runner.capture(lambda: add_into(bufs.out, bufs.x, bufs.y), names=names_of(bufs))
    bufs.x.copy_(T([7.0, 7.0, 7.0]), True)  # new values, same storage: the right way
    assert graph.stale_inputs({"x": bufs.x, "y": bufs.y, "out": bufs.out}) == []
    graph.replay()
    assert host(bufs.out) == [17.0, 27.0, 37.0]


def test_views_as_kernel_arguments_write_the_base_storage(runner):
    bufs = make_bufs()
    graph = runner.capture(lambda: add_into(bufs.out[1:], bufs.x[:2], bufs.y[1:]))
    assert host(bufs.out) == [0.0, 0.0, 0.0]  # the capture's write was undone
    graph.replay()
    assert host(bufs.out) == [0.0, 21.0, 32.0]


# --------------------------------------------------------------------------- 2. host syncs


@kernels.kernel
def numpy_kernel(a):
    return a.numpy()


@kernels.kernel
def bool_kernel(a, out):
    if bool(a[0] > 0):
        out.copy_(out + 1, True)


@kernels.kernel
def to_host_kernel(a):
    return xp.to_host(a)


@pytest.mark.parametrize(
    "region",
    [
        lambda b: numpy_kernel(b.x),
        lambda b: item_kernel(b.x),
        lambda b: bool_kernel(b.x, b.out),
        lambda b: to_host_kernel(b.x),
        lambda b: make_sum(b.x, b.y).tolist(),
        lambda b: int(b.x[0]),
        lambda b: float(b.x[0]),
    ],
    ids=["numpy", "item", "bool", "xp_to_host", "tolist", "int_outside_kernel", "float"],
)
def test_host_sync_in_capture_raises(runner, region):
    original = paddle.Tensor.__dict__["numpy"], paddle.Tensor.__dict__["__bool__"]
    bufs = make_bufs()
    with pytest.raises(HostSyncInCapture):
        runner.capture(lambda: region(bufs))
    assert (paddle.Tensor.__dict__["numpy"], paddle.Tensor.__dict__["__bool__"]) == original  # restored
    assert bufs.x.numpy().tolist() == [1.0, 2.0, 3.0] and bool(bufs.x[0] > 0)  # and working again
    assert kernels.current_observer() is None


def test_host_reads_on_another_thread_are_not_refused(runner):
    other = T([4.0])
    seen = []

    @kernels.kernel
    def spawn(a):
        thread = threading.Thread(target=lambda: seen.append(other.item()))
        thread.start()
        thread.join()
        return a * 2

    runner.capture(lambda: spawn(other))
    assert seen == [4.0]


def test_failed_capture_restores_state_and_allows_the_next_capture(runner):
    shared.failed_capture_restores_state_and_allows_the_next_capture(runner, PADDLE)


# --------------------------------------------------------------------------- 3. side effects


def test_state_mutated_in_capture_is_restored_and_replay_mutates_it(runner):
    shared.state_mutated_in_capture_is_restored_and_replay_mutates_it(runner, PADDLE)


def test_in_place_facade_writes_in_capture_are_restored(runner):
    table = paddle.zeros([4, 3], dtype="int64")
    flags = paddle.full([4], True, dtype="bool")

    @kernels.kernel
    def writes(xp, table, flags, rows):
        xp.index_put_(table, rows, xp.full((2, 3), 7, xp.int64))
        xp.assign_(table, (slice(0, 4), 0), -1)
        xp.masked_assign_(flags, slice(0, 4), xp.ge(xp.arange(4), 2), False)

    graph = runner.capture(lambda: writes(xp, table, flags, paddle.to_tensor([1, 3])))
    assert host(table) == [[0, 0, 0]] * 4 and host(flags) == [True] * 4
    graph.replay()
    assert host(table) == [[-1, 0, 0], [-1, 7, 7], [-1, 0, 0], [-1, 7, 7]]
    assert host(flags) == [True, True, False, False]


def test_scalars_and_containers_are_frozen_at_capture(runner):
    t = T([1.0, 1.0, 1.0])
    factors = [2.0]

    @kernels.kernel
    def scale_by_list(t, fs):
        t.copy_(t * fs[0], True)

    def region():
        scale_by_list(t, factors)
        factors[0] = 3.0
        scale_by_list(t, factors)

    graph = runner.capture(region)
    factors[0] = 100.0
    graph.replay()
    assert host(t) == [6.0, 6.0, 6.0]


def test_later_kernels_read_fresh_intermediates_on_replay(runner):
    bufs = make_bufs()

    def region():
        s = make_sum(bufs.x, bufs.y)
        add_into(bufs.out, s, bufs.x)

    graph = runner.capture(region)
    bufs.x.copy_(T([0.0, 0.0, 1.0]), True)
    graph.replay()
    assert host(bufs.out) == [10.0, 20.0, 32.0]


def test_kernel_returning_a_different_shape_on_replay_fails(runner):
    shared.kernel_returning_a_different_shape_on_replay_fails(runner, T([1.0, 1.0, 1.0]))


# --------------------------------------------------------------------------- 4. poison


def test_outputs_are_poisoned_until_first_replay(runner):
    bufs = make_bufs()
    graph = runner.capture(lambda: make_sum(bufs.x, bufs.y))
    out = graph.outputs
    assert runner.ops.is_poisoned(out)
    with pytest.raises(PoisonedTensorError, match="graph #1"):
        xp.to_host(out)
    with runner.ops.bookkeeping():
        assert paddle.isnan(out).all().item()
    graph.replay()
    assert not runner.ops.is_poisoned(out)
    assert host(out) == [11.0, 22.0, 33.0]


def test_integer_bool_and_strided_outputs_hold_sentinels(runner):
    a = paddle.to_tensor([[1, 2], [3, 4]], dtype="int64")

    @kernels.kernel
    def outputs(a):
        doubled = a * 2
        return doubled, a > 1, a.astype("int32"), doubled[:, 1]  # the last one: a strided view

    graph = runner.capture(lambda: outputs(a))
    i64, mask, i32, column = graph.outputs
    with runner.ops.bookkeeping():
        assert (i64.numpy() == -0x5A5A5A5A5A5A5A5A).all()
        assert mask.numpy().all()
        assert (i32.numpy() == -0x5A5A5A5A).all()
        assert (column.numpy() == -0x5A5A5A5A5A5A5A5A).all()
    graph.replay()
    assert host(i64) == [[2, 4], [6, 8]] and host(mask) == [[False, True], [True, True]]
    assert host(i32) == [[1, 2], [3, 4]] and host(column) == [4, 8]
    a.copy_(a + 10, True)
    graph.replay()
    assert host(column) == [24, 28]  # replay writes through the captured view


def test_a_graph_reading_another_graphs_output_gets_fresh_data_once_both_replay(runner):
    bufs = make_bufs()
    g1 = runner.capture(lambda: make_sum(bufs.x, bufs.y))
    g2 = runner.capture(lambda: make_sum(g1.outputs, bufs.x))
    g1.replay()
    g2.replay()
    assert host(g2.outputs) == [12.0, 24.0, 36.0]


# --------------------------------------------------------------------------- 5. tables, liveness, memory


def test_static_input_table(runner):
    bufs = make_bufs()
    idx = paddle.to_tensor([0, 2], dtype="int32")

    @kernels.kernel
    def gather_into(out, src, index):
        out[: int(index.shape[0])] = paddle.index_select(src, index)

    def region():
        s = make_sum(bufs.x, bufs.y)
        gather_into(bufs.out, s, idx)

    graph = runner.capture(region, names={**names_of(bufs), id(idx): "idx"})
    table = {inp.name: inp for inp in graph.static_inputs}
    assert set(table) == {"x", "y", "out", "idx"}  # s was allocated in the region: not static
    assert table["idx"].shape == (2,) and table["idx"].dtype == "int32"
    assert table["idx"].data_ptr == idx.data_ptr() and table["idx"].tensor_id == id(idx)
    assert table["x"].dtype == "float64" and table["x"].data_ptr == bufs.x.data_ptr()
    graph.replay()
    assert host(bufs.out) == [11.0, 33.0, 0.0]


def test_dead_inputs_report_a_freed_static_input(runner):
    shared.dead_inputs_report_a_freed_static_input(runner, PADDLE)


def test_memory_bytes_counts_graph_owned_storage(runner):
    shared.memory_bytes_counts_graph_owned_storage(runner, paddle.ones([256], dtype="float32"))


# --------------------------------------------------------------------------- 6. lockstep on xpu --emulate


@pytest.fixture(scope="module")
def xpu():
    return resolve("xpu", emulate=True)


def test_lockstep_demo_is_clean_on_xpu_emulate(xpu):
    outcome = check_scenario(demo_scenario(), xpu)
    assert outcome.clean, [d.headline() for d in outcome.failures]
    assert outcome.runner == "xpu-emulated" and outcome.steps_run == demo_scenario().num_steps
    assert any(r.used_graph for r in outcome.records["graph"])


def _candidates(name):
    """The fault's own scenario, else a sweep over the built-in fault scenarios in every scope."""
    if name in FAULT_SCENARIOS:
        return [FAULT_SCENARIOS[name]()]
    sweep = [demo_scenario(num_steps=6), demo_scenario(naive_mode=True, num_steps=4)]
    sweep = [with_scope(s, scope) for s in sweep for scope in GRAPH_SCOPES]
    sweep += [late_joiner(scope) for scope in GRAPH_SCOPES]
    return sweep + [shrinking_batch("target_match", scope, num_steps=7) for scope in GRAPH_SCOPES]


def _headline(outcome):
    first = outcome.first
    return first.kind, first.step, first.tensor, first.pair


@pytest.mark.parametrize("name", fast_first(sorted(FAULTS), 3))
def test_every_engine_fault_is_detected_on_xpu_emulate(name, xpu):
    torch_cpu = None
    try:
        torch_cpu = resolve("cpu")
    except Exception:  # torch missing: check paddle alone
        pass
    for scenario in _candidates(name):
        outcome = check_scenario(scenario, xpu, faults=[name])
        if outcome.clean:
            continue
        assert outcome.faults == (name,)
        assert check_scenario(scenario, xpu).clean, f"{scenario.name} is not clean without {name}"
        if torch_cpu is not None:  # the same headline divergence as the torch emulation
            assert _headline(outcome) == _headline(check_scenario(scenario, torch_cpu, faults=[name]))
        return
    pytest.fail(f"fault {name} went undetected on xpu --emulate (add its scenario to FAULT_SCENARIOS)")
