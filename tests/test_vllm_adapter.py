"""The parts of ``--engine vllm`` that run without vLLM: speculative decoding under the engine-scheduled
oracle, the capture-size padding rule and the wasted-graph check, the vllm contract's fitting, and the one
line a missing vLLM gives. (``tests/test_vllm_engine.py`` runs vLLM itself, in ``./dev.sh vllm test``.)"""

from __future__ import annotations

import dataclasses
import importlib.util
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import graphcheck
from graphcheck.adapter import report_extras
from graphcheck.buckets import BucketPolicy, Pad, PathPolicy, size_mask, sizes_of
from graphcheck.check.bucket_check import check_unused_graph
from graphcheck.contract import contract_named
from graphcheck.model_report import ModelStep
from graphcheck.reference.scheduled import EngineScheduledOracle
from graphcheck.scenario import EngineConfig, ReasoningChange, RequestSpec, Scenario, fit_to_contract
from graphcheck.schedule import Schedule, ScheduledRun
from graphcheck.step_result import RequestStep, StepResult

CONFIG = EngineConfig(
    max_num_seqs=4, num_speculative_tokens=2, verify_strategy="greedy", model="float32", contract="vllm"
)
VOCAB = CONFIG.vocab_size


def _rows(*best: int) -> np.ndarray:
    rows = np.zeros((len(best), VOCAB))
    for i, token in enumerate(best):
        rows[i, token] = 5.0
    return rows


def _step(oracle, t, run: ScheduledRun, best: tuple[int, ...], emitted: tuple[int, ...], proposals=()):
    seen = StepResult(t, (RequestStep(run.request_id, emitted, proposals, 0, 0, 0, False),))
    reports = {run.request_id: ModelStep(run.request_id, _rows(*best))}
    return oracle.step(t, {}, reports, seen, Schedule((run,)))


def _oracle() -> EngineScheduledOracle:
    oracle = EngineScheduledOracle(CONFIG, contract_named("vllm"))
    oracle.submit(RequestSpec("a", 0, (1, 2, 3), 10, ()))
    return oracle


def test_verified_drafts_are_accepted_while_they_are_the_targets_choice_then_one_more():
    oracle = _oracle()
    first = _step(oracle, 0, ScheduledRun("a", 3, 0, True), (7,), (7,), proposals=(8, 9))
    assert first.breaks == () and first.result.by_id()["a"].draft_tokens == (8, 9)
    # The request has 4 tokens, 3 in its cache: it feeds its last one and the two drafts from position 3.
    verify = _step(oracle, 1, ScheduledRun("a", 3, 3, True, (8, 9)), (8, 5, 6), (8, 5))
    outcome = verify.result.by_id()["a"]
    assert verify.breaks == () and outcome.accept_tokens == (8, 5)  # 8 accepted, 9 rejected: the target's 5
    assert outcome.seq_len == 5  # the accepted draft stays in the cache, the rejected one does not
    # The next chunk starts where the accepted tokens end.
    assert _step(oracle, 2, ScheduledRun("a", 1, 5, True), (4,), (4,)).breaks == ()


def test_drafts_beyond_k_or_on_a_chunk_that_does_not_produce_are_breaks():
    oracle = _oracle()
    _step(oracle, 0, ScheduledRun("a", 3, 0, True), (7,), (7,))
    too_many = _step(oracle, 1, ScheduledRun("a", 4, 3, True, (1, 2, 3)), (1, 2, 3, 4), (1, 2, 3, 4))
    assert [b.tensor for b in too_many.breaks] == ["schedule.drafts"]
    chunk = _oracle()
    early = _step(chunk, 0, ScheduledRun("a", 3, 0, False, (1,)), (7,), ())
    assert "schedule.drafts" in [b.tensor for b in early.breaks]


def test_a_step_that_emits_past_the_first_rejection_differs_from_the_oracle():
    oracle = _oracle()
    _step(oracle, 0, ScheduledRun("a", 3, 0, True), (7,), (7,))
    verify = _step(oracle, 1, ScheduledRun("a", 3, 3, True, (8, 9)), (2, 9, 6), (8, 9, 6))
    assert verify.result.by_id()["a"].accept_tokens == (2,)  # the first draft is rejected


def test_capture_sizes_pad_to_the_smallest_that_holds_the_tokens_and_not_above_the_largest():
    mask = size_mask((4, 8, 16))
    assert sizes_of(mask) == [4, 8, 16]
    pad = Pad("sizes", step="capture_tokens")
    assert [pad.apply(n, {"capture_tokens": mask}) for n in (1, 4, 5, 16, 17)] == [4, 4, 8, 16, 17]
    assert pad.choices({"capture_tokens": mask}) == 3


def _info(tokens: int) -> SimpleNamespace:
    return SimpleNamespace(path="piecewise", real_sizes={"tokens": tokens})


@pytest.mark.parametrize("keyed, tokens, found", [(True, 5, True), (True, 17, False), (False, 5, False)])
def test_an_eager_step_whose_padded_key_was_captured_wasted_a_graph(keyed, tokens, found):
    policy = BucketPolicy((PathPolicy("piecewise", (("tokens", Pad("sizes", step="capture_tokens")),)),), keyed=keyed)
    values = {"capture_tokens": size_mask((4, 8, 16))}
    divergences = check_unused_graph(policy, 3, report_extras(_info(tokens)), {4: "g", 8: "g", 16: "g"}, values)
    assert bool(divergences) == found
    if found:
        assert divergences[0].tensor == "graph dispatch" and divergences[0].expected == 8


def test_the_vllm_contract_fits_scenarios_without_reasoning_scripts():
    spec = RequestSpec("a", 0, (1,), 4, (), reasoning=(ReasoningChange(1, 1),))
    fitted = fit_to_contract(Scenario(CONFIG, (spec,), (), 3))
    assert fitted.requests[0].reasoning == ()
    default = Scenario(EngineConfig(), (spec,), (), 3)
    assert fit_to_contract(default) is default


def test_engine_vllm_without_vllm_is_one_line_and_exit_3():
    try:
        import vllm  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("vLLM is installed here")
    done = subprocess.run(
        [sys.executable, "-m", "graphcheck.cli", "run", "--engine", "vllm", "--examples", "1", "--database", "none"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 3, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "./dev.sh vllm" in lines[0] and "Traceback" not in done.stderr


# -- the KV rows the vLLM adapter declares (graphcheck.engines.vllm.state) ------------------------------


def _vllm_module(name: str):
    """graphcheck.engines.vllm.NAME, loaded from its file: the package itself refuses to import without vLLM."""
    path = Path(graphcheck.__file__).parent / "engines" / "vllm" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"_vllm_{name}_under_test", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _state_module():
    return _vllm_module("state")


def _packing_writer(key, value, key_cache, value_cache, slots) -> None:
    """A cache writer that packs keys transposed ([head_size, block_size]) and values as rows, as a vector
    ISA might: the layout must be learnt from the writer, never assumed."""
    block = key_cache.shape[2]
    for token, slot in enumerate(slots.tolist()):
        b, t = divmod(slot, block)
        key_cache[b, 0].view(-1, block)[:, t] = key[token, 0]
        value_cache[b, 0, t] = value[token, 0]


def test_kv_rows_follow_each_request_through_its_own_blocks() -> None:
    kv_rows = _state_module().kv_rows

    rows = kv_rows([(1, [3, 0], 5), (0, [2], 2), (2, [], 0)], block_size=4)
    assert rows.positions.tolist() == [0, 1, 2, 3, 4, 0, 1]
    assert rows.owners.tolist() == [1, 1, 1, 1, 1, 0, 0]
    assert rows.physical.tolist() == [12, 13, 14, 15, 0, 8, 9]
    with pytest.raises(ValueError, match="cannot hold"):
        kv_rows([(0, [1], 5)], block_size=4)


def test_the_block_layout_is_learnt_from_the_writer_and_reads_every_token_back() -> None:
    torch = pytest.importorskip("torch")
    state_module = _state_module()
    cache_state, kv_rows, learn_layout = state_module.cache_state, state_module.kv_rows, state_module.learn_layout

    block, head = 4, 3
    layout = learn_layout(_packing_writer, torch, block, head)
    assert layout.keys[1].tolist() == [1, 5, 9]  # transposed: a token's key elements are a block apart
    cache = torch.zeros(5, 1, block, 2 * head)
    key_cache, value_cache = cache.view(5, 1, 2 * block, head).chunk(2, dim=2)
    keys = torch.arange(6 * head, dtype=torch.float32).reshape(6, 1, head) + 1
    _packing_writer(keys, -keys, key_cache, value_cache, torch.tensor([12, 13, 14, 15, 0, 8]))
    rows = kv_rows([(0, [3, 0], 5), (1, [2], 1)], block)
    state = cache_state("kv_caches.0", cache, rows, layout, torch)
    assert state.values.shape == (6, 1, 2, head) and state.rows.tolist() == [0, 1, 2, 3, 4, 0]
    assert np.array_equal(state.values[:, 0, 0], keys[:, 0].numpy())  # every token's key, in request order
    assert np.array_equal(state.values[:, 0, 1], -keys[:, 0].numpy())
    empty = cache_state("kv_caches.0", cache, kv_rows([], block), layout, torch)
    assert empty.values.shape == (0, 1, 2, head)


def test_a_writer_that_drops_elements_is_refused() -> None:
    torch = pytest.importorskip("torch")
    learn_layout = _state_module().learn_layout

    def lossy(key, value, key_cache, value_cache, slots) -> None:
        _packing_writer(key, value, key_cache, value_cache, slots)
        key_cache[0, 0, 0, 0] = 0.0

    with pytest.raises(RuntimeError, match="unwritten"):
        learn_layout(lossy, torch, 4, 3)


# -- capture sizes and the KV cache vLLM is given -------------------------------------------------------


def test_capture_sizes_cover_verify_batches_and_with_prefill_graphs_the_token_budget() -> None:
    caps = _vllm_module("capabilities")
    config = EngineConfig(capture_sizes=(1, 2, 4), num_speculative_tokens=2)

    def sizes(**options: int) -> tuple[int, ...]:
        return caps.capture_tokens(dataclasses.replace(config, engine_options=tuple(sorted(options.items()))))

    assert sizes(prefill_graphs=0) == (3, 6, 12)  # R(1+k)
    assert sizes() == (3, 6, 12, 16, 32, 64, 128, 256)  # and powers of two up to the budget
    assert sizes(max_num_batched_tokens=16) == (3, 6, 12, 16)
    assert sizes(max_num_batched_tokens=16, prefill_graphs=0) == (3, 6, 12)


def test_the_cache_holds_every_request_or_the_drawn_tokens_with_a_verifys_lookahead_and_one_full_request() -> None:
    caps = _vllm_module("capabilities")
    config = EngineConfig(max_num_seqs=4, max_model_len=128, num_speculative_tokens=2)
    assert caps.cache_blocks(config) == 4 * 5 + 1  # (128 + 3) tokens in blocks of 32, and the null block
    tight = dataclasses.replace(config, engine_options=(("cache_tokens", 40),))
    assert caps.cache_blocks(tight) == 5 + 1  # one request at max_model_len: vLLM starts with no less
    short = dataclasses.replace(tight, max_model_len=32)
    assert caps.cache_blocks(short) == 2 + 1  # 40 + 3 tokens


class _Pool:
    num_gpu_blocks = 5

    def __init__(self) -> None:
        self.free = 4

    def get_num_free_blocks(self) -> int:
        return self.free


class _Manager:
    def __init__(self) -> None:
        self.block_pool = _Pool()

    def allocate_slots(self, request, tokens):
        if tokens > self.block_pool.free:
            return None
        self.block_pool.free -= tokens
        return ("blocks",)


def test_failed_allocations_waiting_and_preempted_requests_are_reported_once_per_step() -> None:
    watch = _vllm_module("cache").CacheWatch(_Manager())
    request = SimpleNamespace
    assert watch.manager.allocate_slots(request(request_id="a-1"), 3) is not None
    assert watch.manager.allocate_slots(request(request_id="b-1"), 3) is None  # b waits
    assert watch.manager.allocate_slots(request(request_id="c-1"), 5) is None  # c failed, then ran preempting d
    report = watch.report(["a-1", "c-1"], ["d-1"], lambda internal: internal.split("-")[0])
    assert (report.blocks, report.free_blocks, report.failed_allocations) == (4, 1, 2)
    assert report.waiting == ("b",) and report.offloaded == ("d",)
    assert watch.report([], [], str).failed_allocations == 0  # counted per step
