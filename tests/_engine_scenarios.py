"""Fixed scenarios and run helpers shared by the engine tests (not collected by pytest)."""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from graphcheck.backends.engine.buffers import CACHE_FIELDS, STATE_FIELDS
from graphcheck.driver import apply_events  # noqa: F401  (re-exported for tests)
from graphcheck.search.builtin import demo_scenario

if TYPE_CHECKING:
    from graphcheck.backends.engine import Engine
    from graphcheck.reference.weights import Weights

from graphcheck.scenario import AcceptOverride, EngineConfig, ReasoningChange, RequestSpec, Scenario, validate
from graphcheck.step_result import StepResult

SCOPES = ("forward", "forward_sampling", "step")
DEMO_MODES = ("greedy", "target_match", "topp", "naive")


def demo(mode: str) -> Scenario:
    if mode == "naive":
        return demo_scenario("target_match", naive_mode=True)
    return demo_scenario(mode)


def buckets_scenario() -> Scenario:
    """Eight slots, buckets 1/2/4/8: R climbs 1 -> 2 -> 4+ -> 8, holes appear and refill."""
    cfg = EngineConfig(
        max_num_seqs=8,
        num_speculative_tokens=2,
        num_model_steps=2,
        capture_sizes=(1, 2, 4, 8),
        vocab_size=64,
        hidden_size=16,
        block_size=4,
        max_model_len=64,
        verify_strategy="target_match",
        model_seed=11,
    )

    def req(rid: str, arrival: int, prompt: tuple[int, ...], max_dec_len: int, eos=(63,), **kw: Any) -> RequestSpec:
        return RequestSpec(rid, arrival, prompt, max_dec_len=max_dec_len, eos_token_ids=eos, **kw)

    requests = (
        req("a0", 0, (1, 2, 3), 30, temperature=0.8, top_p=0.9, seed=1),
        req("a1", 2, (4, 5, 6, 7, 8), 6, temperature=1.5, top_k=5, top_p=0.9, seed=2),
        req("a2", 4, (9, 10), 20, temperature=1.2, top_p=0.85, seed=3),
        req("a3", 4, (11, 12, 13, 14), 20, top_p=0.7, seed=4, abort_step=12),
        req("a4", 6, (15,), 8, temperature=2.0, top_k=10, top_p=0.95, seed=5),
        req("a5", 6, (16, 17, 18), 10, top_p=0.9, seed=6, reasoning=(ReasoningChange(8, 1), ReasoningChange(10, 3))),
        req("a6", 6, (19, 20, 21, 22, 23, 24), 3, top_p=0.8, seed=7),
        req("a7", 6, (25, 26), 5, seed=2**62, temperature=1.1, top_p=0.75),
        req("a8", 7, (27, 28, 29), 20, temperature=1.4, top_p=0.9, seed=9, eos=(0, 1, 2, 3)),
        req("a9", 13, (30, 31), 20, top_p=0.9, seed=10),
    )
    accepts = (
        AcceptOverride(5, "a0", 2),
        AcceptOverride(7, "a2", 0),
        AcceptOverride(9, "a5", 2),
        AcceptOverride(13, "a4", 1),
    )
    return validate(Scenario(cfg, requests, accepts, num_steps=22, name="buckets"))


def small_seqs_scenario() -> Scenario:
    """max_num_seqs (2) below the largest bucket (8); accept_all; GREEDY; a queue."""
    cfg = EngineConfig(
        max_num_seqs=2,
        num_speculative_tokens=3,
        num_model_steps=3,
        capture_sizes=(8, 4, 2, 1),
        vocab_size=64,
        hidden_size=16,
        block_size=8,
        max_model_len=96,
        verify_strategy="greedy",
        accept_policy="accept_all",
        model_seed=5,
    )
    requests = (
        RequestSpec("b0", 0, (7, 7, 7), max_dec_len=25, eos_token_ids=(62,), seed=3),
        RequestSpec("b1", 0, (1, 9, 2, 8), max_dec_len=9, eos_token_ids=(61,), seed=4),
        RequestSpec("b2", 1, (40, 41, 42, 43, 44), max_dec_len=25, eos_token_ids=(60, 59), seed=5),
        RequestSpec("b3", 6, (12,), max_dec_len=3, eos_token_ids=(58,), seed=6),
    )
    return validate(Scenario(cfg, requests, (), num_steps=12, name="small-seqs"))


def eager_above_scenario() -> Scenario:
    """Buckets 1/2 only, four slots: decode steps with R > 2 run eagerly; TOPP, k = S = 1."""
    cfg = EngineConfig(
        max_num_seqs=4,
        num_speculative_tokens=1,
        num_model_steps=1,
        capture_sizes=(1, 2),
        vocab_size=64,
        hidden_size=16,
        block_size=2,
        max_model_len=48,
        verify_strategy="topp",
        max_candidate_len=4,
        model_seed=3,
    )
    requests = (
        RequestSpec("c0", 0, (5, 6), max_dec_len=16, eos_token_ids=(1,), top_p=0.6, seed=1),
        RequestSpec("c1", 1, (8, 9, 10), max_dec_len=5, eos_token_ids=(2,), temperature=0.5, seed=2),
        RequestSpec("c2", 4, (11,), max_dec_len=12, eos_token_ids=(3,), top_p=0.9, seed=3),
        RequestSpec("c3", 4, (12, 13), max_dec_len=12, eos_token_ids=(4,), temperature=3.0, seed=4, abort_step=10),
        RequestSpec("c4", 9, (14, 15, 16), max_dec_len=8, eos_token_ids=(5,), seed=5),
    )
    accepts = (AcceptOverride(6, "c0", 1), AcceptOverride(7, "c2", 0))
    return validate(Scenario(cfg, requests, accepts, num_steps=16, name="eager-above"))


def reject_all_scenario() -> Scenario:
    cfg = dataclasses.replace(buckets_scenario().config, accept_policy="reject_all", capture_sizes=(2, 4))
    return validate(dataclasses.replace(buckets_scenario(), config=cfg, num_steps=16, name="reject-all"))


EXTRA = {
    "buckets": buckets_scenario,
    "small_seqs": small_seqs_scenario,
    "eager_above": eager_above_scenario,
    "reject_all": reject_all_scenario,
}


def with_scope(scenario: Scenario, scope: str) -> Scenario:
    return dataclasses.replace(scenario, config=dataclasses.replace(scenario.config, graph_scope=scope))


#: Every fixed scenario by name: ``demo-<mode>`` for each demo mode, then the EXTRA ones.
ALL = [f"demo-{m}" for m in DEMO_MODES] + list(EXTRA)

#: (name, scope) pairs of the graph-vs-eager lockstep tests.
LOCKSTEP_CASES = [(f"demo-{m}", s) for m in ("topp", "naive") for s in SCOPES] + [
    (name, s) for name in ("buckets", "small_seqs", "eager_above") for s in SCOPES
]


def scenario_for(name: str, scope: str | None = None) -> Scenario:
    """The fixed scenario called ``name`` (``demo-<mode>`` or a key of EXTRA), in graph scope ``scope`` if given."""
    scenario = demo(name.removeprefix("demo-")) if name.startswith("demo-") else EXTRA[name]()
    return scenario if scope is None else with_scope(scenario, scope)


@functools.cache
def reference_results(name: str) -> list[StepResult]:
    """reference.decode of the named scenario (decoded once per session)."""
    from graphcheck.reference import decode

    return decode(scenario_for(name))


@functools.cache
def reference_weights(name: str) -> Weights:
    """The model weights of the named scenario (made once per session; read-only)."""
    from graphcheck.reference import make_weights

    return make_weights(scenario_for(name).config)


def engine_for(name: str, scope: str | None = None, **engine_kwargs: Any) -> tuple[Scenario, Engine]:
    """``scenario_for(name, scope)`` and an Engine on its weights (``engine_kwargs``: device, use_graphs)."""
    from graphcheck.backends.engine import Engine

    scenario = scenario_for(name, scope)
    return scenario, Engine(scenario.config, reference_weights(name), **engine_kwargs)


@dataclass
class Run:
    results: list[StepResult]
    infos: list[Any]


def run_engine(engine: Any, scenario: Scenario, on_step=None) -> Run:
    results, infos = [], []
    for t in range(scenario.num_steps):
        apply_events(engine, scenario, t)
        results.append(engine.step(t, scenario.accept_overrides_at(t)))
        infos.append(engine.last_step_info)
        if on_step is not None:
            on_step(t)
    return Run(results, infos)


def assert_same_results(expected: list[StepResult], actual: list[StepResult], what: str) -> None:
    """Exact StepResult equality; the reference must not have flagged any row ambiguous."""
    assert len(expected) == len(actual)
    for exp, act in zip(expected, actual):
        assert not any(r.ambiguous for r in exp.requests), f"{what}: reference step {exp.step} is ambiguous"
        assert act == exp, f"{what}: step {exp.step} differs\n  expected {exp}\n  actual   {act}"


def run_against_reference(engine: Engine, scenario: Scenario, name: str, label: str) -> Run:
    """Run ``engine`` through ``scenario`` (the one called ``name``); every StepResult must be the reference's.

    A difference is reported as ``"<name> <label>: step ..."``.
    """
    run = run_engine(engine, scenario)
    assert_same_results(reference_results(name), run.results, f"{name} {label}")
    return run


def assert_graph_policy(run: Run, config: EngineConfig) -> int:
    """Every decode step with R within the buckets replayed the smallest bucket >= R; returns #replayed."""
    largest = max(config.capture_sizes)
    replayed = 0
    for info in run.infos:
        if info.num_running == 0:
            assert not info.used_graph
            continue
        fits = [s for s in config.capture_sizes if s >= info.real_bsz]
        if info.has_prefill or not fits:
            assert not info.used_graph and info.bucket is None, info
            assert info.padded_tokens == info.real_tokens, info
        else:
            assert info.used_graph and info.bucket == min(fits), info
            assert info.padded_tokens == info.bucket * config.tokens_per_request, info
            replayed += 1
        assert info.real_bsz <= config.max_num_seqs <= config.max_padded_reqs - 1
        assert info.real_bsz <= largest or not info.used_graph
    return replayed


def _host(engine, name):
    return engine.xp.to_host(getattr(engine.buffers, name))


def compare_buffers(eager: Engine, graph: Engine, t: int) -> None:
    for name in STATE_FIELDS:
        np.testing.assert_array_equal(_host(graph, name), _host(eager, name), err_msg=f"step {t}: {name}")
    sink_rows = eager.config.block_size  # block 0
    for name in CACHE_FIELDS:
        np.testing.assert_array_equal(
            _host(graph, name)[sink_rows:], _host(eager, name)[sink_rows:], err_msg=f"step {t}: {name}"
        )
    info = eager.last_step_info
    if info is not None and info.num_running:
        T, R = info.real_tokens, info.real_bsz
        for name in ("ids", "positions", "batch_ids", "slot_mapping"):
            np.testing.assert_array_equal(_host(graph, name)[:T], _host(eager, name)[:T], err_msg=f"step {t}: {name}")
        for name in ("cu_seqlens_q", "cu_seqlens_out"):
            np.testing.assert_array_equal(
                _host(graph, name)[: R + 1], _host(eager, name)[: R + 1], err_msg=f"step {t}: {name}"
            )


def check_static_inputs(engine: Engine) -> None:
    current = engine.buffer_tensors()
    for graphs in engine.graphs.values():
        for graph in graphs.all():
            assert graph.stale_inputs(current) == []
            assert graph.dead_inputs() == []
            named = {inp.name for inp in graph.static_inputs}
            assert None not in named, "a graph reads a tensor the engine does not name"


#: Engine buffers that the bucket-8 graph of "buckets" must read under their engine names.
NAMED_STATIC_INPUTS = (
    "infer_seed",
    "seq_lens_this_time",
    "block_tables",
    "k_cache",
    "draft_k_cache",
    "accept_override",
    "weights.embed",
    "cu_seqlens_out",
)


def assert_reads_named_buffers(engine: Engine) -> set[str | None]:
    """The bucket-8 target graph reads every NAMED_STATIC_INPUTS buffer; returns all its static inputs' names."""
    names = {inp.name for inp in engine.graphs[8].target.static_inputs}
    for expected in NAMED_STATIC_INPUTS:
        assert expected in names
    return names


def memory_per_step(engine: Engine, scenario: Scenario) -> list[int]:
    """``engine.memory_bytes()`` after each step of ``scenario``."""
    sizes: list[int] = []
    run_engine(engine, scenario, on_step=lambda t: sizes.append(engine.memory_bytes()))
    return sizes


def lockstep(scenario, device: str = "cpu") -> int:
    """Eager and graph engines side by side; compare results and buffers after every step."""
    from graphcheck.backends.engine import Engine
    from graphcheck.reference import make_weights

    weights = make_weights(scenario.config)
    eager = Engine(scenario.config, weights, device=device, use_graphs=False)
    graph = Engine(scenario.config, weights, device=device)
    compare_buffers(eager, graph, -1)  # capture and warm replay leave the idle state untouched
    replayed = 0
    for t in range(scenario.num_steps):
        for spec in scenario.requests:
            if spec.abort_step == t:
                eager.abort(spec.request_id)
                graph.abort(spec.request_id)
        for spec in scenario.requests:
            if spec.arrival_step == t:
                eager.submit(spec)
                graph.submit(spec)
        overrides = scenario.accept_overrides_at(t)
        expected = eager.step(t, overrides)
        actual = graph.step(t, overrides)
        assert actual == expected, f"step {t}"
        info_e, info_g = eager.last_step_info, graph.last_step_info
        assert (info_e.real_bsz, info_e.real_tokens) == (info_g.real_bsz, info_g.real_tokens)
        replayed += info_g.used_graph
        compare_buffers(eager, graph, t)
        check_static_inputs(graph)
    return replayed
