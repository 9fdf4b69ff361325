"""The emulated graph runner behaves like a real device-graph capture."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from torch.utils._python_dispatch import _get_current_dispatch_mode  # noqa: E402

from graphcheck.capture import kernels  # noqa: E402
from graphcheck.capture.base import EscapedOpError, HostSyncInCapture, PoisonedTensorError  # noqa: E402
from graphcheck.capture.emulated import EmulatedRunner  # noqa: E402

import _graph_harness as shared  # noqa: E402
from _graph_harness import Bufs, Framework, add_into, item_kernel, make_sum, names_of, scale_  # noqa: E402


@kernels.kernel
def sum_fields(bufs: Bufs):
    bufs.out.copy_(bufs.x + bufs.y)


#: torch for the checks shared with tests/test_graphs_paddle.py (their bodies are in tests/_graph_harness.py).
TORCH = Framework(
    tensor=torch.tensor, host=lambda t: t.tolist(), add_into=add_into, scale_=scale_, sum_fields=sum_fields
)
make_bufs = TORCH.bufs


@pytest.fixture
def runner():
    r = EmulatedRunner()
    yield r
    r.close()
    assert _get_current_dispatch_mode() is None, "the poison guard outlived the runner's graphs"


# 1. rebinding ------------------------------------------------------------------------------


def test_rebound_buffer_is_read_stale_on_replay(runner):
    shared.rebound_buffer_is_read_stale_on_replay(runner, TORCH)


def test_rebound_dataclass_field_is_read_stale(runner):
    shared.rebound_dataclass_field_is_read_stale(runner, TORCH)


def test_rebinding_to_the_same_object_is_not_stale(runner):
    bufs = make_bufs()
    graph = runner.capture(lambda: add_into(bufs.out, bufs.x, bufs.y), names=names_of(bufs))
    bufs.x.copy_(torch.tensor([7.0, 7.0, 7.0]))  # new values, same storage: the right way
    assert graph.stale_inputs({"x": bufs.x, "y": bufs.y, "out": bufs.out}) == []


def test_view_made_in_region_is_recorded_against_its_named_base(runner):
    bufs = make_bufs()
    graph = runner.capture(lambda: add_into(bufs.out[:2], bufs.x[:2], bufs.y[1:]), names=names_of(bufs))
    assert {inp.name for inp in graph.static_inputs} == {"x", "y", "out"}
    assert graph.stale_inputs({"x": bufs.x, "y": bufs.y, "out": bufs.out}) == []
    graph.replay()
    assert bufs.out.tolist() == [21.0, 32.0, 0.0]


# 2. host syncs -----------------------------------------------------------------------------


@kernels.kernel
def bool_kernel(a, out):
    if bool(a[0] > 0):
        out.fill_(1.0)


@kernels.kernel
def host_copy_kernel(a):
    kernels.host_sync("to_host")
    return a


@kernels.kernel
def tolist_kernel(a):
    return a.tolist()


@kernels.kernel
def mask_kernel(a):
    return a[a > 1]


@pytest.mark.parametrize(
    "region",
    [
        lambda b: item_kernel(b.x),
        lambda b: bool_kernel(b.x, b.out),
        lambda b: host_copy_kernel(b.x),
        lambda b: tolist_kernel(b.x),
        lambda b: mask_kernel(b.x),
        lambda b: int(b.x[0]),
    ],
    ids=["item", "bool", "host_sync", "tolist", "bool_mask_index", "int_outside_kernel"],
)
def test_host_sync_in_capture_raises(runner, region):
    bufs = make_bufs()
    with pytest.raises(HostSyncInCapture):
        runner.capture(lambda: region(bufs))
    assert bufs.x.tolist() == [1.0, 2.0, 3.0]  # tolist works again once the capture is over
    assert kernels.current_observer() is None


def test_failed_capture_restores_state_and_allows_the_next_capture(runner):
    shared.failed_capture_restores_state_and_allows_the_next_capture(runner, TORCH)


# 3. side effects ---------------------------------------------------------------------------


def test_state_mutated_in_capture_is_restored_and_replay_mutates_it(runner):
    shared.state_mutated_in_capture_is_restored_and_replay_mutates_it(runner, TORCH)


def test_scalars_and_containers_are_frozen_at_capture(runner):
    t = torch.ones(3)
    factors = [2.0]

    @kernels.kernel
    def scale_by_list(t, fs):
        t.mul_(fs[0])

    def region():
        scale_by_list(t, factors)
        factors[0] = 3.0  # the region reuses its host-side list: each call keeps what it saw
        scale_by_list(t, factors)

    graph = runner.capture(region)
    factors[0] = 100.0
    graph.replay()
    assert t.tolist() == [6.0, 6.0, 6.0]


# 4. poison ---------------------------------------------------------------------------------


def test_outputs_are_poisoned_until_first_replay(runner):
    bufs = make_bufs()
    graph = runner.capture(lambda: make_sum(bufs.x, bufs.y))
    out = graph.outputs
    with pytest.raises(PoisonedTensorError):
        out.clone()
    with pytest.raises(PoisonedTensorError):
        out + 1
    with runner.ops.bookkeeping():
        assert torch.isnan(out).all()
    head = out[:2]  # taking a view is fine; reading through it is not
    with pytest.raises(PoisonedTensorError):
        head.sum()
    graph.replay()
    assert out.tolist() == [11.0, 22.0, 33.0]
    assert head.tolist() == [11.0, 22.0]
    assert _get_current_dispatch_mode() is None


def test_poison_scoped_to_its_owner_counts_only_in_the_owners_calls(runner):
    """An engine's runner: reads of unreplayed outputs raise inside ``guarding()`` (the engine's
    own calls) and pass elsewhere, where no per-op check runs; the first replay lifts it as before."""
    runner.scope_poison_to_owner()
    bufs = make_bufs()
    graph = runner.capture(lambda: make_sum(bufs.x, bufs.y))
    out = graph.outputs
    assert _get_current_dispatch_mode() is None  # nothing checks the harness's ops
    assert torch.isnan(out + 1).all()  # outside the owner's calls: the poison values, no error
    with runner.guarding():
        with pytest.raises(PoisonedTensorError):
            out.clone()
        with runner.guarding():  # nested calls of the owner
            with pytest.raises(PoisonedTensorError):
                out + 1
        graph.replay()
        assert (out + 0).tolist() == [11.0, 22.0, 33.0]
    assert _get_current_dispatch_mode() is None


def test_a_thread_wide_poison_still_counts_inside_an_owners_scope(runner):
    other = EmulatedRunner()  # not owner-scoped: checked everywhere, as before
    try:
        bufs = make_bufs()
        graph = other.capture(lambda: make_sum(bufs.x, bufs.y))
        runner.scope_poison_to_owner()
        with runner.guarding(), pytest.raises(PoisonedTensorError):
            graph.outputs.clone()
        with pytest.raises(PoisonedTensorError):
            graph.outputs.clone()
    finally:
        other.close()


def test_a_replay_whose_kernels_receive_no_poison_runs_unguarded(runner):
    """g2 replays while g1 is still poisoned: its kernels receive no poisoned storage, so no
    per-op guard runs during it (the guard is back afterwards, and still catches g1's output)."""
    bufs, other = make_bufs(), make_bufs()
    g1 = runner.capture(lambda: make_sum(bufs.x, bufs.y))
    modes = []

    @kernels.kernel
    def spy(a, b):
        modes.append(_get_current_dispatch_mode())
        return a * b

    g2 = runner.capture(lambda: spy(other.x, other.y))
    modes.clear()
    assert _get_current_dispatch_mode() is not None  # g1's poison is guarded
    g2.replay()
    assert modes == [None]
    assert g2.outputs.tolist() == [10.0, 40.0, 90.0]
    with pytest.raises(PoisonedTensorError, match="graph #1"):
        g1.outputs.clone()


def test_a_capture_saves_only_the_storages_it_writes(runner):
    """Storages are saved at their first write: one written buffer restored, read-only ones not copied."""
    bufs = make_bufs()
    ops = runner.ops
    copies = []
    snapshot = ops.snapshot
    ops.snapshot = lambda t: copies.append(t) or snapshot(t)
    try:
        runner.capture(lambda: (add_into(bufs.out, bufs.x, bufs.y), scale_(bufs.out, 2.0)))
    finally:
        del ops.snapshot
    assert [ops.storage_key(t) for t in copies] == [ops.storage_key(bufs.out)]
    assert bufs.out.tolist() == [0.0, 0.0, 0.0]  # restored


def test_integer_and_bool_outputs_hold_sentinels(runner):
    a = torch.tensor([1, 2, 3], dtype=torch.int64)

    @kernels.kernel
    def ints_and_mask(a):
        return a * 2, a > 1, a.to(torch.int32)

    graph = runner.capture(lambda: ints_and_mask(a))
    i64, mask, i32 = graph.outputs
    with runner.ops.bookkeeping():
        assert (i64 == -0x5A5A5A5A5A5A5A5A).all()
        assert mask.all()
        assert (i32 == -0x5A5A5A5A).all()
    graph.replay()
    assert i64.tolist() == [2, 4, 6] and mask.tolist() == [False, True, True] and i32.tolist() == [1, 2, 3]


def test_later_kernels_read_fresh_intermediates_on_replay(runner):
    bufs = make_bufs()

    def region():
        s = make_sum(bufs.x, bufs.y)
        add_into(bufs.out, s, bufs.x)

    graph = runner.capture(region)
    bufs.x.copy_(torch.tensor([0.0, 0.0, 1.0]))
    graph.replay()
    assert bufs.out.tolist() == [10.0, 20.0, 32.0]


# 5. escaped work ---------------------------------------------------------------------------


def test_tensor_op_outside_any_kernel_is_rejected(runner):
    bufs = make_bufs()
    with pytest.raises(EscapedOpError, match=r"aten\.add\.Tensor ran in the captured region outside any kernel"):
        runner.capture(lambda: bufs.x + bufs.y)


def test_kernel_reading_a_non_argument_is_rejected(runner):
    bufs = make_bufs()

    class Engine:
        table = torch.tensor([5.0, 5.0, 5.0])

        @kernels.kernel
        def bad(self_, out, a):  # reads self_.table, which is no tensor argument
            out.copy_(a + self_.table)

    engine = Engine()
    with pytest.raises(EscapedOpError, match="kernel .*bad read a tensor that is not one of its arguments"):
        runner.capture(lambda: engine.bad(bufs.out, bufs.x))

    @kernels.kernel
    def closure_reader(out):
        out.copy_(bufs.y)  # a closure over bufs, not an argument

    with pytest.raises(EscapedOpError, match="closure_reader"):
        runner.capture(lambda: closure_reader(bufs.out))
    assert bufs.out.tolist() == [0.0, 0.0, 0.0]


def test_views_and_allocations_outside_kernels_are_allowed(runner):
    bufs = make_bufs()

    def region():
        tmp = torch.empty(2)
        add_into(tmp, bufs.x[:2], bufs.y[:2])
        add_into(bufs.out[1:], tmp, bufs.x[1:])
        return tmp

    graph = runner.capture(region)
    graph.replay()
    assert graph.outputs.tolist() == [11.0, 22.0]
    assert bufs.out.tolist() == [0.0, 13.0, 25.0]


def test_kernel_returning_a_different_shape_on_replay_fails(runner):
    shared.kernel_returning_a_different_shape_on_replay_fails(runner, torch.ones(3))


# 6. replay, tables, liveness, memory -------------------------------------------------------


def test_replay_sees_new_input_values(runner):
    bufs = make_bufs()
    graph = runner.capture(lambda: make_sum(bufs.x, bufs.y))
    for k in range(3):
        bufs.x.copy_(torch.full((3,), float(k)))
        graph.replay()
        assert graph.outputs.tolist() == [k + 10.0, k + 20.0, k + 30.0]


def test_graphs_replay_independently(runner):
    bufs = make_bufs()
    g_sum = runner.capture(lambda: make_sum(bufs.x, bufs.y))
    g_scale = runner.capture(lambda: scale_(bufs.y, 2.0))
    g_sum.replay()
    assert g_sum.outputs.tolist() == [11.0, 22.0, 33.0]
    g_scale.replay()
    assert bufs.y.tolist() == [20.0, 40.0, 60.0]
    assert g_sum.outputs.tolist() == [11.0, 22.0, 33.0]  # untouched by the other graph
    g_sum.replay()
    assert g_sum.outputs.tolist() == [21.0, 42.0, 63.0]


def test_static_input_table(runner):
    bufs = make_bufs()
    idx = torch.tensor([0, 2], dtype=torch.int32)

    @kernels.kernel
    def gather_into(out, src, index):
        out[: index.numel()].copy_(src.index_select(0, index))

    def region():
        s = make_sum(bufs.x, bufs.y)
        gather_into(bufs.out, s, idx)

    graph = runner.capture(region, names={**names_of(bufs), id(idx): "idx"})
    table = {inp.name: inp for inp in graph.static_inputs}
    assert set(table) == {"x", "y", "out", "idx"}  # s was allocated in the region: not static
    assert table["idx"].shape == (2,) and table["idx"].dtype == "int32"
    assert table["idx"].data_ptr == idx.data_ptr() and table["idx"].tensor_id == id(idx)
    assert table["x"].dtype == "float32" and table["x"].data_ptr == bufs.x.data_ptr()


def test_unnamed_static_inputs_have_no_name(runner):
    a, b = torch.ones(2), torch.ones(2)
    graph = runner.capture(lambda: make_sum(a, b), names={id(a): "a"})
    assert [inp.name for inp in graph.static_inputs] == ["a", None]


def test_dead_inputs_report_a_freed_static_input(runner):
    shared.dead_inputs_report_a_freed_static_input(runner, TORCH)


def test_memory_bytes_counts_graph_owned_storage(runner):
    shared.memory_bytes_counts_graph_owned_storage(runner, torch.ones(256))


def test_a_graph_reading_another_graphs_output_needs_that_graph_replayed_first(runner):
    bufs = make_bufs()
    g1 = runner.capture(lambda: make_sum(bufs.x, bufs.y))
    g2 = runner.capture(lambda: make_sum(g1.outputs, bufs.x))  # capture may read g1's poisoned output
    with pytest.raises(PoisonedTensorError, match="graph #1"):
        g2.replay()
    g1.replay()
    g2.replay()
    assert g2.outputs.tolist() == [12.0, 24.0, 36.0]
