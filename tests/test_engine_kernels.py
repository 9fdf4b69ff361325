"""Engine kernels against hand-made tables: packing, sink-only padding, blocks, the emit rule."""

from __future__ import annotations

import numpy as np
import pytest

from graphcheck.backends.engine import Engine
from graphcheck.backends.engine.blocks import SINK_BLOCK, BlockAllocator, num_blocks_for
from graphcheck.backends.engine.buffers import PAD_TOKEN, allocate_buffers
from graphcheck.backends.engine.forward import draft_forward, target_forward
from graphcheck.backends.engine.preprocess import pack_draft_inputs, pack_target_inputs
from graphcheck.backends.engine.scheduler import Scheduler
from graphcheck.backends.engine.verify import eos_scan
from graphcheck.backends.engine.weights import EngineWeights
from graphcheck.backends.xp import make_ops
from graphcheck.reference import make_weights
from graphcheck.scenario import EngineConfig, RequestSpec

from _engine_scenarios import EXTRA, apply_events, with_scope

torch = pytest.importorskip("torch")
P = PAD_TOKEN
CFG = EngineConfig(
    max_num_seqs=4,
    num_speculative_tokens=2,
    num_model_steps=1,
    capture_sizes=(4,),
    vocab_size=64,
    hidden_size=16,
    block_size=4,
    max_model_len=16,
)


@pytest.fixture
def xp():
    return make_ops("torch", "cpu")


def _set(xp, tensor, values):
    xp.copy_(tensor, xp.from_numpy(np.asarray(values, dtype=xp.to_host(tensor).dtype)))


def hand_state(xp):
    """Slot 0 prefills [10, 11, 12]; slot 1 is a hole; slot 2 decodes 3 tokens at 5; slot 3 one at 7."""
    buf = allocate_buffers(xp, CFG)
    B = CFG.max_padded_reqs
    _set(xp, buf.seq_lens_this_time, [3, 0, 3, 1, 0][:B])
    _set(xp, buf.seq_lens_encoder, [3, 0, 0, 0, 0][:B])
    _set(xp, buf.seq_lens_decoder, [0, 0, 5, 7, 0][:B])
    _set(xp, buf.stop_flags, [False, True, False, False, True][:B])
    tokens = np.full((B, CFG.max_model_len), -1)
    tokens[0, :3] = [10, 11, 12]
    tokens[2, :8] = [40, 41, 42, 43, 44, 45, 20, 7]  # committed history of the decode slots
    tokens[3, :9] = [50, 51, 52, 53, 54, 55, 56, 30, 9]
    _set(xp, buf.token_ids_all, tokens)
    drafts = np.full((B, 3), -1)
    drafts[2] = [20, 21, 22]
    drafts[3, 0] = 30
    _set(xp, buf.draft_tokens, drafts)
    tables = np.zeros((B, 4))
    tables[0, 0] = 1
    tables[2, :2] = [2, 3]
    tables[3, :2] = [4, 5]
    _set(xp, buf.block_tables, tables)
    return buf


def test_pack_target_inputs_hand_table(xp):
    buf = hand_state(xp)
    pack_target_inputs(xp, buf, 4, 12, CFG.block_size)
    h = lambda name, n: list(xp.to_host(getattr(buf, name))[:n])  # noqa: E731
    assert h("cu_seqlens_q", 5) == [0, 3, 3, 6, 7]
    assert h("batch_ids", 12) == [0, 0, 0, 2, 2, 2, 3] + [-1] * 5
    assert h("positions", 12) == [0, 1, 2, 5, 6, 7, 7] + [0] * 5
    assert h("ids", 12) == [10, 11, 12, 20, 21, 22, 30] + [P] * 5
    # block_table[b, pos // 4] * 4 + pos % 4; padding -> the sink row 0.
    assert h("slot_mapping", 12) == [4, 5, 6, 13, 14, 15, 23] + [0] * 5
    assert h("cu_seqlens_out", 5) == [0, 1, 1, 4, 5]
    assert h("batch_ids_out", 12) == [0, 2, 2, 2, 3] + [-1] * 7
    assert h("out_token_index", 12) == [2, 3, 4, 5, 6] + [0] * 7


def test_pack_exact_size_equals_padded_prefix(xp):
    """Eager packing (real sizes) is the padded packing's prefix; stale rows are overwritten."""
    padded, exact = hand_state(xp), hand_state(xp)
    xp.copy_(padded.ids, xp.full(tuple(padded.ids.shape), 7, xp.int64))  # leftovers of an earlier step
    pack_target_inputs(xp, padded, 4, 12, CFG.block_size)
    pack_target_inputs(xp, exact, 4, 7, CFG.block_size)
    for name in ("ids", "positions", "batch_ids", "slot_mapping", "out_token_index", "batch_ids_out"):
        assert list(xp.to_host(getattr(padded, name))[:5]) == list(xp.to_host(getattr(exact, name))[:5])
    assert list(xp.to_host(padded.ids)[7:12]) == [P] * 5


def _changed_rows(before, after):
    return set(np.nonzero((before != after).any(axis=1))[0].tolist())


def test_padded_rows_write_only_the_sink_block(xp):
    buf = hand_state(xp)
    weights = EngineWeights.from_arrays(xp, make_weights(CFG))
    for cache in (buf.k_cache, buf.v_cache, buf.draft_k_cache, buf.draft_v_cache):
        xp.copy_(cache, xp.full(tuple(cache.shape), 99, xp.int64))  # values the model never writes
    before = xp.to_host(buf.k_cache)
    pack_target_inputs(xp, buf, 4, 12, CFG.block_size)  # 7 real tokens, 5 padding rows
    hidden, _ = target_forward(xp, weights, buf, 12, 12, CFG.block_size)
    sink = set(range(SINK_BLOCK * CFG.block_size, (SINK_BLOCK + 1) * CFG.block_size))
    real = {4, 5, 6, 13, 14, 15, 23}
    for name in ("k_cache", "v_cache"):
        changed = _changed_rows(before, xp.to_host(getattr(buf, name)))
        assert real <= changed and changed <= real | sink, name

    # Draft substep: slot 2 writes draft positions 5..6, slot 3 position 7, in a 12-row capacity.
    _set(xp, buf.draft_seq_lens_this_time, [0, 0, 2, 1, 0])
    _set(xp, buf.draft_seq_lens_decoder, [0, 0, 5, 7, 0])
    pack_draft_inputs(xp, buf, hidden, 4, 12, CFG.block_size, True)
    assert list(xp.to_host(buf.d_batch_ids)[:12]) == [2, 2, 3] + [-1] * 9
    # Draft position q takes the committed token t_{q+1} and the target hidden of position q.
    assert list(xp.to_host(buf.d_ids)[:4]) == [20, 7, 9, P]
    assert list(xp.to_host(buf.d_positions)[:4]) == [5, 6, 7, 0]
    hid = xp.to_host(hidden)
    np.testing.assert_array_equal(xp.to_host(buf.d_prev_hidden)[:3], hid[[3, 4, 6]])
    last_hidden, proposals, _, _ = draft_forward(xp, weights, buf, 4, 12, CFG.block_size)
    assert list(xp.to_host(proposals)[[0, 1]]) == [-1, -1]
    assert (xp.to_host(last_hidden)[[0, 1]] == 0).all()
    for name in ("draft_k_cache", "draft_v_cache"):
        changed = _changed_rows(before, xp.to_host(getattr(buf, name)))
        assert {13, 14, 23} <= changed and changed <= {13, 14, 23} | sink, name


def test_engine_padding_never_touches_free_blocks():
    """Through whole graph-replayed steps: blocks free for the entire step keep their bytes."""
    scenario = with_scope(EXTRA["buckets"](), "step")
    engine = Engine(scenario.config, make_weights(scenario.config))
    bs = scenario.config.block_size
    caches = ("k_cache", "v_cache", "draft_k_cache", "draft_v_cache")
    for cache in caches:
        xp = engine.xp
        tensor = getattr(engine.buffers, cache)
        xp.copy_(tensor, xp.full(tuple(tensor.shape), 99, xp.int64))
    allocator = engine.scheduler.allocator
    allocated: list[int] = []
    real_allocate = allocator.allocate
    allocator.allocate = lambda: allocated.append(real_allocate()) or allocated[-1]
    replays = 0
    for t in range(scenario.num_steps):
        apply_events(engine, scenario, t)
        free_before = set(allocator._free)
        allocated.clear()
        snap = {c: engine.xp.to_host(getattr(engine.buffers, c)) for c in caches}
        engine.step(t, scenario.accept_overrides_at(t))
        replays += engine.last_step_info.used_graph
        untouched = (free_before & set(allocator._free)) - set(allocated)
        assert untouched
        rows = [r for b in sorted(untouched) for r in range(b * bs, (b + 1) * bs)]
        for c in caches:
            after = engine.xp.to_host(getattr(engine.buffers, c))
            np.testing.assert_array_equal(after[rows], snap[c][rows], err_msg=f"step {t} {c}")
    assert replays > 5


def test_block_allocator():
    assert num_blocks_for(3, 20, 8) == 3 * 3 + 1
    alloc = BlockAllocator(5)
    got = [alloc.allocate() for _ in range(4)]
    assert got == [1, 2, 3, 4] and SINK_BLOCK not in got
    with pytest.raises(RuntimeError):
        alloc.allocate()
    alloc.free([3, 1])
    assert alloc.allocate() == 1 and alloc.allocate() == 3
    with pytest.raises(ValueError):
        alloc.free([SINK_BLOCK])


def test_scheduler_slots_and_blocks():
    sched = Scheduler(CFG)  # 4 slots, block_size 4, 16 positions -> 4 blocks per sequence
    for i in range(5):
        sched.submit(RequestSpec(f"r{i}", 0, (1, 2, 3, 4, 5), max_dec_len=4, eos_token_ids=(0,)))
    admitted = sched.admit()
    assert [r.slot for r in admitted] == [0, 1, 2, 3] and len(sched.waiting) == 1
    r0 = admitted[0]
    assert sched.grow_blocks(r0, 1) == [(0, 1), (1, 2)]  # positions < 0 + 5 + 1
    r0.seq_len, r0.next_tokens = 5, 3
    assert sched.grow_blocks(r0, 1) == [(2, 3)]  # positions < 9
    r0.seq_len = 14
    assert [c for c, _ in sched.grow_blocks(r0, 1)] == [3]  # capped at max_model_len
    assert sched.high_water() == 4
    sched.release(admitted[1])
    sched.release(r0)
    assert sched.high_water() == 4
    again = sched.admit()
    assert [r.request_id for r in again] == ["r4"] and again[0].slot == 0  # lowest free slot
    assert sched.grow_blocks(again[0], 0)[0] == (0, 1)  # freed blocks come back lowest first


def test_eos_scan_hand_table(xp):
    t = lambda rows: xp.from_numpy(np.array(rows, dtype=np.int64))  # noqa: E731
    tokens = t([[5, 9, 1, 7], [4, 4, 4, 4], [3, 3, 3, 3], [6, 7, -1, -1]])
    count = t([4, 4, 2, 2])
    step_idx = t([0, 7, 0, 0])
    max_dec = t([10, 9, 10, 10])
    eos = t([[1, -1], [2, -1], [8, 3], [1, 2]])
    out, num, stopped = eos_scan(xp, tokens, count, step_idx, max_dec, eos)
    assert xp.to_host(out).tolist() == [[5, 9, 1, -1], [4, 2, -1, -1], [3, -1, -1, -1], [6, 7, -1, -1]]
    assert xp.to_host(num).tolist() == [3, 2, 1, 2]
    assert xp.to_host(stopped).tolist() == [True, True, True, False]
