"""``--engine hf-cb``: transformers' continuous batching checked on the CPU (emulated CUDA graphs).

A few representative scenarios run in the fast layer (chunked prefill, arrivals and an abort,
cache pressure, a sliding-window model, each fault); the fuzzed runs are ``slow``.
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path

import pytest

pytest.importorskip("transformers")

from graphcheck.capture.devices import resolve  # noqa: E402
from graphcheck.check.checker import Checker  # noqa: E402
from graphcheck.check.engines import resolve_engine  # noqa: E402
from graphcheck.check.setup import CheckSetup  # noqa: E402
from graphcheck.check.situations import situations_reached  # noqa: E402
from graphcheck.engines.hf_cb import versions  # noqa: E402
from graphcheck.engines.hf_cb.capabilities import CAPABILITIES, cb_options  # noqa: E402
from graphcheck.scenario import EngineConfig, RequestSpec, Scenario  # noqa: E402

SPEC = "graphcheck.engines.hf_cb:Engine"


@functools.cache
def _checker() -> Checker:
    return Checker(resolve("cpu"), resolve_engine(SPEC), CheckSetup())


def _scenario(num_steps: int = 12, **options: int) -> Scenario:
    """Three requests: a long prompt (chunked under a small budget), a late short one, one aborted."""
    config = EngineConfig(max_num_seqs=4, engine_options=tuple(sorted(options.items())))
    requests = (
        RequestSpec("long", 0, tuple(range(1, 25)), 6, (63,)),
        RequestSpec("late", 2, (5, 6, 7), 8, (62,)),
        RequestSpec("gone", 1, (9,) * 12, 10, (61,), abort_step=min(5, num_steps)),
    )
    return Scenario(config, requests, num_steps=num_steps)


def _run(scenario: Scenario, faults: tuple[str, ...] = ()):
    return _checker().run(scenario, faults=faults)


def test_the_engine_is_registered_with_what_it_supports():
    pyproject = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
    assert f'hf-cb = "{SPEC}"' in pyproject
    assert 'hf = ["transformers==' in pyproject
    caps = resolve_engine(SPEC).capabilities
    assert caps is CAPABILITIES
    assert (caps.schedule, caps.layout, caps.graph_api, caps.drafts) == ("engine", "packed", "torch.cuda", False)
    assert caps.fault_names == ("cb-carry-over-shift", "cb-key-drops-kv", "cb-rebind-bulk", "cb-stale-tail")
    assert caps.contracts == ("hf-cb",)


def test_one_shim_per_supported_version():
    assert versions.shim_for("5.23.0").key_lengths_attr == "max_length_k"
    assert versions.shim_for("5.17.0").key_lengths_attr == "max_seqlen_k"
    assert versions.shim_for("5.17.0").cpu_hooks() == {}
    assert not versions.shim_for("5.17.0").async_on_cpu
    newer = versions.shim_for("5.23.1")
    assert newer.async_on_cpu
    assert set(newer.cpu_hooks()) >= {
        f"transformers.generation.continuous_batching.model_runner:{name}"
        for name in (
            "create_accelerator_graph",
            "accelerator_graph_capture_context",
            "get_memory_pools",
            "memory_pool_context",
            "stream_context",
        )
    }
    with pytest.raises(versions.UnsupportedVersion, match="supports 5.17, 5.23"):
        versions.shim_for("4.57.0")


def test_the_cache_is_sized_from_what_the_drawn_requests_need():
    roomy = cb_options(EngineConfig(max_num_seqs=4, max_model_len=64, engine_options=(("page_size", 8),)))
    tight = cb_options(EngineConfig(max_num_seqs=4, max_model_len=64, engine_options=(("cache_tokens", 24),)))
    assert roomy["num_blocks"] == (64 // 8 + 2) * 5
    assert tight["num_blocks"] == 24 // 8 + 1
    option = next(o for o in CAPABILITIES.options if o.name == "cache_tokens")
    scenario = _pressure_scenario()  # four requests of 24 tokens each
    assert [option.sized(c, scenario) for c in option.choices] == [0, 48, 24, 24]  # at least the largest request
    short = Scenario(dataclasses.replace(scenario.config, naive_mode=True), scenario.requests[:1], num_steps=4)
    assert option.sized(100, short) == 20, "what a request can generate before the scenario ends counts"
    floored = CAPABILITIES.fit(_with_cache(scenario, 10))
    assert dict(floored.config.engine_options)["cache_tokens"] == 24


def _with_cache(scenario: Scenario, tokens: int) -> Scenario:
    options = dict(scenario.config.engine_options, cache_tokens=tokens)
    config = dataclasses.replace(scenario.config, engine_options=tuple(sorted(options.items())))
    return dataclasses.replace(scenario, config=config)


def _pressure_scenario(num_steps: int = 30) -> Scenario:
    """Four long requests at once, in a cache of one request's worth (prompt 16 + 8 generated tokens)."""
    config = EngineConfig(max_num_seqs=4, max_model_len=64, engine_options=(("cache_tokens", 24), ("page_size", 8)))
    requests = tuple(RequestSpec(f"r{i}", 0, tuple(range(1 + i, 17 + i)), 8, (63,)) for i in range(4))
    return Scenario(config, requests, num_steps=num_steps)


def test_cache_pressure_runs_clean_where_requests_wait_are_offloaded_and_prefilled_again():
    """Unmodified transformers under pressure: a request requeued for want of blocks has its tokens folded
    into its prompt, and still counts every token it generated (step_idx)."""
    scenario = _pressure_scenario()
    outcome = _run(scenario)
    assert outcome.clean, outcome.first
    reached = situations_reached(scenario, outcome).anywhere
    pressure = {"cache allocation failed", "request waits for cache"}
    if versions.installed().version != "5.17":  # 5.17 runs these one by one, evicting none
        pressure |= {"request offloaded", "prefilled again"}
    assert pressure <= reached


def test_chunked_prefill_arrivals_and_an_abort_run_clean_with_lazily_captured_graphs():
    checker = _checker()
    scenario = checker.prepare(_scenario(max_batch_tokens=16))
    assert scenario.config.model == "float32" and scenario.config.contract == "hf-cb"
    assert scenario.config.naive_mode
    with checker.graph_api():
        lockstep = checker.build(scenario)
        outcome = lockstep.run()
        infos = [r for r in outcome.records["graph"]]
        graphs = dict(lockstep.graph.graphs)
    assert [d for d in outcome.divergences if not d.ambiguous] == []
    assert outcome.oracle == "engine-scheduled"
    assert len(graphs) >= 2, "a graph per key, captured as keys come up"
    assert any(r.used_graph for r in infos), "some steps replayed a graph captured at an earlier step"
    named = {inp.name for g in graphs.values() for inp in g.target.static_inputs}
    assert {"io._bulk_input_tensor", "io.write_index_storage", "probe", "model.lm_head.weight"} <= named


def test_a_budget_below_the_prompt_splits_the_prefill_into_chunks():
    checker = _checker()
    with checker.graph_api():
        lockstep = checker.build(checker.prepare(_scenario(num_steps=4, max_batch_tokens=8)))
        chunks = []
        for t in range(4):
            assert lockstep.step(t)
            runs = lockstep.graph.last_step_info.schedule.by_id()
            if "long" in runs:
                chunks.append((runs["long"].first_position, runs["long"].query_tokens, runs["long"].produces))
        lockstep.release()
    assert chunks[:3] == [(0, 8, False), (8, 8, False), (16, 8, True)]


@pytest.mark.parametrize("options", [{"cache_tokens": 30, "max_batch_tokens": 16}, {"sliding_window": 8}])
def test_cache_pressure_and_a_sliding_window_run_clean(options):
    outcome = _run(_scenario(num_steps=16, **options))
    assert outcome.clean, outcome.first


@pytest.mark.parametrize(
    ("fault", "kind", "tensor"),
    [
        ("cb-key-drops-kv", "shape", "host value kv"),
        ("cb-stale-tail", "state", "cache.cache_allocators.full_attention._kv_token_views.0[0]"),
        ("cb-rebind-bulk", "address", "io._bulk_input_tensor"),
    ],
)
def test_each_fault_is_caught_by_its_own_evidence(fault, kind, tensor):
    outcome = _run(_scenario(max_batch_tokens=16), (fault,))
    found = {(d.kind, d.tensor) for d in outcome.divergences if not d.ambiguous}
    assert (kind, tensor) in found, sorted(found)
    assert CAPABILITIES.fault(fault).bug_class in (1, 4, 12)


def _tokens(outcome) -> dict[str, tuple[int, ...]]:
    tokens: dict[str, tuple[int, ...]] = {}
    for record in outcome.records["graph"]:
        for r in record.result.requests:
            tokens[r.request_id] = tokens.get(r.request_id, ()) + r.accept_tokens
    return tokens


def test_async_batching_reports_each_batch_a_call_late_and_drains_the_last():
    synchronous = _run(_scenario(num_steps=8, max_batch_tokens=16))
    pipelined = _run(_scenario(num_steps=8, max_batch_tokens=16, async_batching=1))
    assert synchronous.clean and pipelined.clean, (synchronous.first, pipelined.first)
    assert _tokens(pipelined) == _tokens(synchronous), "the same greedy tokens, one call later"
    records = pipelined.records["graph"]
    assert records[0].result.requests == (), "the first batch is still in flight after the first call"
    assert [r.step for r in records][-1] == 8, "the batch in flight after the last step is drained and checked"
    assert {b[0] for r in records if r.bucket is not None for b in [r.bucket]} == {0, 1}, "two IO pairs"
    assert "late" in {r.request_id for r in records[-1].result.requests}


@pytest.mark.parametrize(
    ("fault", "kind", "pair"),
    [
        ("cb-carry-over-shift", "value", "full recompute vs graph"),
        ("cb-rebind-bulk", "address", "graph capture vs replay"),
        ("cb-stale-tail", "state", "eager vs graph"),
        ("cb-key-drops-kv", "state", "eager vs graph"),
    ],
)
def test_each_fault_is_caught_with_async_batching(fault, kind, pair):
    outcome = _run(_scenario(max_batch_tokens=16, async_batching=1), (fault,))
    found = {(d.kind, d.pair) for d in outcome.divergences if not d.ambiguous}
    assert (kind, pair) in found, sorted(found)


def test_a_fault_that_lives_in_async_mode_keeps_the_search_there():
    from hypothesis import HealthCheck, given, settings

    from graphcheck.strategies import scenarios

    assert CAPABILITIES.pinned_options(("cb-carry-over-shift", "cb-stale-tail")) == {"async_batching": 1}
    checker = _checker().with_faults(("cb-carry-over-shift",))

    @settings(max_examples=25, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(checker.strategy(scenarios()))
    def drawn(scenario):
        assert dict(scenario.config.engine_options)["async_batching"] == 1

    drawn()


def test_the_carry_over_fault_is_inert_without_async_batching():
    assert _run(_scenario(max_batch_tokens=16), ("cb-carry-over-shift",)).clean


def test_an_unknown_fault_is_refused_at_construction():
    outcome = _run(_scenario(num_steps=4), ("cb-no-such-fault",))
    assert outcome.first is not None and outcome.first.kind == "capture"
    assert "cb-no-such-fault" in str(outcome.first.actual)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_fuzzed_scenarios_run_clean(seed):
    from hypothesis import HealthCheck, given, settings
    from hypothesis import seed as hypothesis_seed

    from graphcheck.strategies import scenarios

    @hypothesis_seed(seed)
    @settings(max_examples=15, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(_checker().strategy(scenarios()))
    def check(scenario):
        outcome = _checker().run(scenario)
        assert outcome.clean, outcome.first

    check()


_OLDER = """
import sys
sys.path.insert(0, "tests")
import transformers
from test_hf_cb import _run, _scenario, _two_then_one
assert transformers.__version__.startswith("5.17"), transformers.__version__
assert _run(_scenario(max_batch_tokens=16)).clean
for fault, kind in (("cb-key-drops-kv", "shape"), ("cb-stale-tail", "state"), ("cb-rebind-bulk", "address")):
    first = _run(_scenario(max_batch_tokens=16), (fault,)).first
    assert first is not None and first.kind in (kind, "value", "token"), (fault, first)
print("5.17 ok")
"""


@pytest.mark.slow
def test_the_older_supported_transformers_runs_through_its_own_shim(tmp_path):
    """transformers 5.17 (the GPU machine's version), installed beside the pinned one for this test."""
    import os
    import subprocess
    import sys

    site = tmp_path / "site"
    install = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--target",
            str(site),
            "transformers==5.17.0",
            "huggingface-hub>=1.5,<2",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if install.returncode != 0:
        pytest.skip(f"could not install transformers 5.17 from the package index: {install.stderr[-300:]}")
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(root)])}
    run = subprocess.run([sys.executable, "-c", _OLDER], cwd=root, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0 and "5.17 ok" in run.stdout, run.stdout[-2000:] + run.stderr[-4000:]


def _two_then_one() -> Scenario:
    """Two one-token prompts, one aborted after a step: the survivor's decode replays a graph whose
    padding rows held the aborted request's indices (the catalogue's shrunk cb-stale-tail scenario)."""
    config = EngineConfig(max_num_seqs=2)
    requests = (RequestSpec("r0", 0, (0,), 30, (0,)), RequestSpec("r1", 0, (0,), 30, (0,), abort_step=1))
    return Scenario(config, requests, num_steps=15)


@pytest.mark.parametrize(
    ("fault", "module", "op"),
    [
        ("cb-rebind-bulk", "model.model.embed_tokens", "aten.embedding"),
        ("cb-stale-tail", "self_attn", "aten.index_copy_"),
    ],
)
def test_the_address_and_padding_faults_are_localised_to_a_module_and_its_op(fault, module, op):
    outcome = _checker().run(_two_then_one(), faults=(fault,), localise=True)
    kernel = outcome.localisation.kernel or ""
    where, _, called = kernel.partition("/")
    assert module in where and called.startswith(op), outcome.localisation
