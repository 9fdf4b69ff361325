"""The built-in engine under every decoding contract (graphcheck.contract), point by point.

For each point of the ``fastdeploy`` / ``fastdeploy-xpu`` presets: (a) the reference
shows the fact, (b) the engine on the CPU runs a scenario exercising it clean in lockstep
(eager vs graph bit for bit, both equal to the reference under that contract), and (c)
where the checker's verdict depends on the contract, it does: an engine that follows one
contract diverges from the reference of another. Kernel-level tests compare the batched
kernels (row seeds, the eos ban, the verify window) with the reference on hand-made
batches. A Hypothesis property closes: random scenarios are clean under both presets.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graphcheck import strategies as gst
from graphcheck.backends.engine import Engine
from graphcheck.backends.engine import rng as engine_rng
from graphcheck.backends.engine.buffers import allocate_buffers
from graphcheck.backends.engine.sampling import SamplingOptions, build_sampling_params
from graphcheck.backends.engine.sampling import ban_eos as engine_ban_eos
from graphcheck.backends.engine.verify import VerifyOptions, verify_drafts
from graphcheck.backends.xp import make_ops
from graphcheck.capture.devices import resolve
from graphcheck.check.checker import check_scenario
from graphcheck.check.lockstep import Lockstep
from graphcheck.contract import CONTRACT_NAMES, CONTRACTS, DEFAULT, FASTDEPLOY, FASTDEPLOY_XPU, Contract
from graphcheck.driver import run_script
from graphcheck.reference import make_weights
from graphcheck.reference import rng as ref_rng
from graphcheck.reference.decoder import ReferenceDecoder, decode
from graphcheck.reference.rules import BANNED_SCORE, ban_eos, decide, next_seed, row_seed
from graphcheck.reference.sampling import candidates, probabilities
from graphcheck.reference.verify import RowVerdict, VerifyInput, VerifyRule, judge_row
from graphcheck.reference.verify import verify as ref_verify
from graphcheck.scenario import MAX_EOS_IDS, SEED_MODULUS, AcceptOverride, EngineConfig, RequestSpec, Scenario, validate
from graphcheck.step_result import StepResult

pytest.importorskip("torch")

M = SEED_MODULUS
SCOPES = ("step", "forward", "forward_sampling")
FRAMEWORKS = ("torch", "paddle")


@pytest.fixture(scope="module")
def cpu():
    return resolve("cpu")


def _xp(framework: str):
    if framework == "paddle":
        pytest.importorskip("paddle")
    return make_ops(framework, "cpu")


def _config(contract: str = "fastdeploy", **kw: Any) -> EngineConfig:
    base: dict[str, Any] = dict(
        max_num_seqs=2,
        num_speculative_tokens=2,
        num_model_steps=2,
        capture_sizes=(1, 2),
        vocab_size=16,
        hidden_size=8,
        block_size=8,
        max_model_len=64,
        verify_strategy="greedy",
        graph_scope="step",
        model_seed=3,
        contract=contract,
    )
    base.update(kw)
    return EngineConfig(**base)


def _scenario(config: EngineConfig, *requests: RequestSpec, accepts=(), num_steps: int = 8) -> Scenario:
    return validate(Scenario(config, tuple(requests), tuple(accepts), num_steps, "contract-test"))


def _with(scenario: Scenario, **changes: Any) -> Scenario:
    return dataclasses.replace(scenario, config=dataclasses.replace(scenario.config, **changes))


def _engine_following(contract: str):
    """An engine factory that builds the built-in engine under ``contract``, whatever the scenario says."""

    def build(config: EngineConfig, weights: Any, **kw: Any) -> Engine:
        return Engine(dataclasses.replace(config, contract=contract), weights, **kw)

    return build


def _clean(scenario: Scenario, cpu) -> None:
    outcome = check_scenario(scenario, cpu)
    assert outcome.clean, outcome.first.headline() if outcome.first else outcome
    assert outcome.steps_run == scenario.num_steps


def _register_but(monkeypatch, base: Contract, point: str) -> str:
    name = f"{base.name}-but-{point}"
    monkeypatch.setitem(CONTRACTS, name, dataclasses.replace(base, name=name, **{point: getattr(DEFAULT, point)}))
    return name


@pytest.fixture
def fastdeploy_but(monkeypatch):
    """``fastdeploy_but(point)``: the name of a contract registered for this test only, ``fastdeploy``
    with ``point`` set back to the default's: a reference that differs from the engine in that point alone."""
    return functools.partial(_register_but, monkeypatch, FASTDEPLOY)


@pytest.fixture
def xpu_but(monkeypatch):
    """``xpu_but(point)``: as ``fastdeploy_but``, from ``fastdeploy-xpu``."""
    return functools.partial(_register_but, monkeypatch, FASTDEPLOY_XPU)


def _first_failure(scenario: Scenario, cpu, engine_contract: str):
    """The first failing divergence of an engine following ``engine_contract`` against the scenario's reference."""
    outcome = Lockstep(scenario, cpu, engine_factory=_engine_following(engine_contract)).run()
    assert not outcome.clean, f"an engine under {engine_contract} passed a {scenario.config.contract} check"
    return outcome.first


def _plain(results: list[StepResult]) -> list[StepResult]:
    return [
        dataclasses.replace(r, requests=tuple(dataclasses.replace(q, ambiguous=False) for q in r.requests))
        for r in results
    ]


def _tokens(results: list[StepResult], request_id: str) -> list[int]:
    return [t for r in results for q in r.requests if q.request_id == request_id for t in q.accept_tokens]


def _seeds(results: list[StepResult], request_id: str) -> list[int]:
    return [q.infer_seed for r in results for q in r.requests if q.request_id == request_id]


# ---------------------------------------------------------------------------
# 1. seed_advance "target_match_only"
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("strategy, naive", [("greedy", False), ("topp", False), ("target_match", True)])
def test_fastdeploy_reference_keeps_the_seed_unless_target_match_verifies(strategy: str, naive: bool) -> None:
    config = _config(verify_strategy=strategy, naive_mode=naive)
    assert not FASTDEPLOY.advances_seed(strategy, naive) and DEFAULT.advances_seed(strategy, naive)
    assert next_seed(FASTDEPLOY, config, 1234) == 1234
    assert next_seed(DEFAULT, config, 1234) == 1234 + config.seed_increment
    spec = RequestSpec("a", 0, (1, 2, 3), 20, (15,), temperature=1.5, seed=1234)
    results = decode(_scenario(config, spec, num_steps=5))
    assert set(_seeds(results, "a")) == {1234}


def test_fastdeploy_reference_advances_the_seed_under_target_match() -> None:
    config = _config(verify_strategy="target_match")
    spec = RequestSpec("a", 0, (1, 2, 3), 20, (15,), seed=1000)
    seeds = _seeds(decode(_scenario(config, spec, num_steps=3)), "a")
    assert seeds == [1012, 1024, 1036]


@pytest.mark.parametrize("scope", SCOPES)
@pytest.mark.parametrize(
    "strategy, naive", [("greedy", False), ("topp", False), ("target_match", False), ("topp", True)]
)
def test_the_engine_advances_the_seed_as_the_contract_says(cpu, scope: str, strategy: str, naive: bool) -> None:
    config = _config(verify_strategy=strategy, naive_mode=naive, graph_scope=scope)
    requests = (
        RequestSpec("a", 0, (1, 2, 3), 20, (15,), temperature=1.5, top_p=0.8, seed=77),
        RequestSpec("b", 1, (4, 5), 20, (14,), temperature=0.7, seed=M - 3),
    )
    _clean(_scenario(config, *requests, num_steps=6), cpu)


@pytest.mark.parametrize("strategy, naive", [("greedy", False), ("target_match", True)])
def test_a_seed_that_does_not_advance_diverges_under_the_default_contract(cpu, strategy: str, naive: bool) -> None:
    spec = RequestSpec("a", 0, (1, 2, 3), 20, (15,), seed=1234)
    scenario = _scenario(_config("default", verify_strategy=strategy, naive_mode=naive), spec, num_steps=3)
    first = _first_failure(scenario, cpu, "fastdeploy")
    assert (first.kind, first.tensor, first.step) == ("seed", "infer_seed", 0)
    assert first.actual == 1234


# ---------------------------------------------------------------------------
# 2. row_seed "int64_wrap"
# ---------------------------------------------------------------------------


def _c_row_seed(infer_seed: int, row: int) -> int:
    """What a C kernel computes: the int64 sum wraps, % keeps the dividend's sign."""
    return _c_sum(infer_seed, 4 * row)


def _c_sum(seed: int, offset: int) -> int:
    """``(seed + offset) % M`` as int64 C code computes it."""
    with np.errstate(over="ignore"):
        total = np.int64(seed) + np.int64(offset)
    return int(np.fmod(total, np.int64(M)))


def test_fastdeploy_row_seeds_wrap_in_int64_near_the_modulus() -> None:
    assert [row_seed(FASTDEPLOY, M - 1, j) for j in range(2)] == [M - 1, -1]
    assert [row_seed(DEFAULT, M - 1, j) for j in range(2)] == [M - 1, 3]
    seeds = [0, 1, 12345, M - 1, M - 2, M - 3, M - 4, M - 5, M - 8, M - 13, M - 17, M - 40]
    for s in seeds:
        for j in range(6):
            assert row_seed(FASTDEPLOY, s, j) == _c_row_seed(s, j)
    assert row_seed(FASTDEPLOY, M - 5, 2) < 0 and row_seed(FASTDEPLOY, M - 5, 1) == row_seed(DEFAULT, M - 5, 1)


def _seed_grid() -> tuple[np.ndarray, np.ndarray]:
    gen = np.random.default_rng(7)
    seeds = np.concatenate(
        [np.arange(M - 60, M, dtype=np.int64), np.arange(0, 40, dtype=np.int64), gen.integers(0, M, 200)]
    )
    rows = np.arange(8, dtype=np.int64)
    s, j = np.meshgrid(seeds, rows, indexing="ij")
    return s.reshape(-1), j.reshape(-1)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_engine_row_seeds_and_their_numbers_match_the_reference(framework: str) -> None:
    xp = _xp(framework)
    s, j = _seed_grid()
    got = xp.to_host(engine_rng.add_int64_rem(xp, xp.from_numpy(s), xp.from_numpy(j * 4)))
    want = np.array([row_seed(FASTDEPLOY, int(a), int(b)) for a, b in zip(s, j)], dtype=np.int64)
    np.testing.assert_array_equal(got, want)
    assert (want < 0).any()
    # A negative seed hashes its two's complement bits, as the reference does.
    t = xp.from_numpy(want)
    u = xp.to_host(engine_rng.uniform(xp, t))
    u1 = xp.to_host(engine_rng.uniform_open0(xp, t))
    np.testing.assert_array_equal(u, [ref_rng.uniform(int(v)) for v in want])
    np.testing.assert_array_equal(u1, [ref_rng.uniform_open0(int(v)) for v in want])


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("wrap", [False, True])
def test_build_sampling_params_gives_the_contracts_row_seeds(framework: str, wrap: bool) -> None:
    xp = _xp(framework)
    config = _config(num_speculative_tokens=4, num_model_steps=1, max_num_seqs=4, capture_sizes=(4,))
    buf = allocate_buffers(xp, config)
    seeds = [M - 1, M - 9, 5, M - 17]
    counts = [5, 0, 3, 5]  # output rows per slot; slot 1 is empty
    cu = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    rows = int(cu[-1]) + 3  # three padding rows
    owner = np.full(rows, -1, dtype=np.int64)
    for b, n in enumerate(counts):
        owner[cu[b] : cu[b] + n] = b
    _put(xp, buf.infer_seed, seeds)
    _put(xp, buf.cu_seqlens_out, cu)
    _put(xp, buf.batch_ids_out, owner)
    contract = FASTDEPLOY if wrap else DEFAULT
    seed, *_ = build_sampling_params(xp, buf, 4, rows, 20, SamplingOptions(advance_seed=False, wrap_row_seeds=wrap))
    want = [row_seed(contract, seeds[b], j) for b, n in enumerate(counts) for j in range(n)] + [0, 0, 0]
    assert xp.to_host(seed).tolist() == want
    assert xp.to_host(buf.infer_seed)[:4].tolist() == seeds  # advance_seed False: untouched


def _put(xp, dst, values) -> None:
    """``dst[:len(values)] = values`` (rows) in place."""
    arr = np.asarray(values, dtype=xp.to_host(dst).dtype)
    xp.assign_(dst, slice(0, arr.shape[0]), xp.from_numpy(arr))


def _wrapping_seed_scenario(contract: str, scope: str = "step") -> Scenario:
    """TARGET_MATCH, k = 2, forced to reach row 2 every step: after the prefill ``infer_seed`` is
    M - 1, so the decode steps' rows 1 and 2 add past 2**63 - 1 (row seeds -1 and -5 under int64_wrap)."""
    config = _config(contract, verify_strategy="target_match", graph_scope=scope)
    spec = RequestSpec("a", 0, (1, 2, 3), 20, (15,), temperature=2.0, seed=M - 13)
    accepts = tuple(AcceptOverride(t, "a", 2) for t in (1, 2, 3))
    return _scenario(config, spec, accepts=accepts, num_steps=4)


def test_wrapped_row_seeds_change_the_reference_tokens() -> None:
    scenario = _wrapping_seed_scenario("default")
    wrapped = ReferenceDecoder(scenario.config, contract=dataclasses.replace(DEFAULT, row_seed="int64_wrap"))
    assert _seeds(decode(scenario), "a")[0] == M - 1
    assert _tokens(decode(scenario), "a") != _tokens(run_script(wrapped, scenario), "a")


@pytest.mark.parametrize("scope", SCOPES)
def test_the_engine_samples_with_wrapped_row_seeds(cpu, scope: str) -> None:
    _clean(_wrapping_seed_scenario("fastdeploy", scope), cpu)


def test_wrapped_row_seeds_diverge_under_modular_row_seeds(cpu, fastdeploy_but) -> None:
    scenario = _with(_wrapping_seed_scenario("fastdeploy"), contract=fastdeploy_but("row_seed"))
    first = _first_failure(scenario, cpu, "fastdeploy")
    assert (first.kind, first.step, first.tensor) == ("token", 1, "accept_tokens")


# ---------------------------------------------------------------------------
# 2b. seed_advance_sum "int64_wrap"
# ---------------------------------------------------------------------------


def test_fastdeploy_seed_advance_wraps_in_int64_near_the_modulus() -> None:
    config = _config(verify_strategy="target_match", num_speculative_tokens=4, num_model_steps=1)
    assert config.seed_increment == 20
    assert next_seed(FASTDEPLOY, config, M - 13) == -9223372036854775803  # measured on FastDeploy's op
    assert next_seed(FASTDEPLOY_XPU, config, M - 13) == -9223372036854775803
    assert next_seed(DEFAULT, config, M - 13) == 7
    for s in (0, 12345, M - 1, M - 2, M - 19, M - 20, M - 21, M - 40, -9223372036854775803):
        assert next_seed(FASTDEPLOY, config, s) == _c_sum(s, 20)
    assert next_seed(FASTDEPLOY, config, M - 21) == M - 1  # below M - 20 + 2 nothing wraps


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("wrap", [False, True])
def test_build_sampling_params_advances_the_seed_with_the_contracts_sum(framework: str, wrap: bool) -> None:
    xp = _xp(framework)
    config = _config(num_speculative_tokens=4, num_model_steps=1, max_num_seqs=4, capture_sizes=(4,))
    buf = allocate_buffers(xp, config)
    seeds = [M - 13, M - 3, 5, -9223372036854775803]
    counts = [5, 1, 0, 5]  # slot 2 is empty: it keeps its seed
    cu = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    owner = np.full(int(cu[-1]), -1, dtype=np.int64)
    for b, n in enumerate(counts):
        owner[cu[b] : cu[b] + n] = b
    _put(xp, buf.infer_seed, seeds)
    _put(xp, buf.seq_lens_this_time, counts)
    _put(xp, buf.stop_flags, np.zeros(4, dtype=bool))
    _put(xp, buf.cu_seqlens_out, cu)
    _put(xp, buf.batch_ids_out, owner)
    options = SamplingOptions(wrap_row_seeds=True, wrap_seed_advance=wrap)
    build_sampling_params(xp, buf, 4, int(cu[-1]), 20, options)
    contract = dataclasses.replace(DEFAULT, seed_advance_sum="int64_wrap" if wrap else "modular")
    want = [next_seed(contract, config, s) if n else s for s, n in zip(seeds, counts)]
    assert xp.to_host(buf.infer_seed)[:4].tolist() == want
    assert (want[0] < 0) == wrap


def _advance_wrap_scenario(contract: str, scope: str = "step") -> Scenario:
    """TARGET_MATCH, k = 2: the prefill advances seed M - 5 past 2**63 - 1 (to -9223372036854775803
    under int64_wrap, 7 under modular), and the decode steps sample from the seeds that follow."""
    config = _config(contract, verify_strategy="target_match", graph_scope=scope)
    spec = RequestSpec("a", 0, (1, 2, 3), 20, (15,), temperature=2.0, seed=M - 5)
    return _scenario(config, spec, num_steps=4)


def test_a_wrapped_seed_advance_stays_negative_in_the_reference() -> None:
    seeds = _seeds(decode(_advance_wrap_scenario("fastdeploy")), "a")
    assert seeds == [-9223372036854775803, -9223372036854775791, -9223372036854775779, -9223372036854775767]
    assert _seeds(decode(_advance_wrap_scenario("default")), "a") == [7, 19, 31, 43]


@pytest.mark.parametrize("scope", SCOPES)
def test_the_engine_advances_the_seed_with_int64_wrap(cpu, scope: str) -> None:
    _clean(_advance_wrap_scenario("fastdeploy", scope), cpu)


def test_a_wrapped_seed_advance_diverges_under_the_modular_one(cpu, fastdeploy_but) -> None:
    scenario = _with(_advance_wrap_scenario("fastdeploy"), contract=fastdeploy_but("seed_advance_sum"))
    first = _first_failure(scenario, cpu, "fastdeploy")
    assert (first.kind, first.tensor, first.step) == ("seed", "infer_seed", 0)
    assert (first.expected, first.actual) == (7, -9223372036854775803)


# ---------------------------------------------------------------------------
# 3. topp_draw "unspecified"
# ---------------------------------------------------------------------------


def _topp_scenario(contract: str, scope: str = "step") -> Scenario:
    config = _config(contract, verify_strategy="topp", max_candidate_len=4, graph_scope=scope)
    requests = (
        RequestSpec("a", 0, (1, 2, 3), 20, (15,), temperature=4.0, top_p=1.0, seed=11),
        RequestSpec("b", 0, (6, 5, 4), 20, (14,), temperature=3.0, top_p=0.8, seed=M - 2),
    )
    return _scenario(config, *requests, num_steps=8)


def test_a_free_topp_draw_is_ambiguous_in_the_reference() -> None:
    scores = np.array([[4.0, 3.9, 3.8, 0.0]])
    cands = candidates(scores[0], 1.0, 1.0, 4)
    assert len(cands.accepted) > 1
    assert judge_row(VerifyRule("topp", 4, free_draw=True), scores[0], 1.0, 1.0, 0, 5).token_ambiguous
    assert not judge_row(VerifyRule("topp", 4), scores[0], 1.0, 1.0, 0, 5).token_ambiguous
    scenario = _topp_scenario("fastdeploy")
    seeded = ReferenceDecoder(scenario.config, contract=dataclasses.replace(FASTDEPLOY, topp_draw="row_seed"))
    free, fixed = decode(scenario), run_script(seeded, scenario)
    assert _plain(free) == _plain(fixed)  # same draws: the free contract only makes them ambiguous
    assert any(q.ambiguous for r in free for q in r.requests)
    assert not any(q.ambiguous for r in fixed for q in r.requests)


@pytest.mark.parametrize("scope", SCOPES)
def test_the_engine_draws_topp_from_the_row_seed_and_stays_clean(cpu, scope: str) -> None:
    scenario = _topp_scenario("fastdeploy", scope)
    _clean(scenario, cpu)
    # A valid choice of the free draw: the row seed's, exactly what a row_seed contract asks for.
    seeded = ReferenceDecoder(scenario.config, contract=dataclasses.replace(FASTDEPLOY, topp_draw="row_seed"))
    engine = Engine(scenario.config, make_weights(scenario.config), device=cpu)
    assert _plain(run_script(engine, scenario)) == _plain(run_script(seeded, scenario))


def test_following_a_free_draw_takes_eos_at_max_dec_len() -> None:
    """At max_dec_len the engine emits eos[0] (6) whatever it drew; the follow rule must take it even
    where the oracle's own draw is another eos id (3), which would stop the request on 3."""
    config = _config(verify_strategy="topp", max_candidate_len=3, vocab_size=8)
    spec = RequestSpec("a", 0, (1, 2), 5, (6, 3), top_p=1.0, seed=1)
    row = np.array([[0.0, 0.0, 3.0, 2.9, 2.8, 0.0, 0.0, 0.0]])  # candidates 2, 3, 4
    inp = VerifyInput(drafts=(), step_idx=4, max_dec_len=5, eos=(6, 3))

    def follow(tokens: tuple[int, ...], contract: Contract = FASTDEPLOY, at=inp) -> tuple[tuple[int, ...], bool]:
        res = decide(config, contract, spec, at, 1, lambda i: row[i], follow=tokens)
        return res.tokens, res.stopped

    assert decide(config, FASTDEPLOY, spec, inp, 1, lambda i: row[i]).tokens == (3,)  # its own draw: eos[1]
    assert follow((6,)) == ((6,), True)
    assert follow((4,)) == ((6,), True)  # a drawn candidate, replaced as the engine must
    assert follow((7,)) == ((3,), True)  # no draw emits 7: the oracle keeps its own, the check fails
    early = dataclasses.replace(inp, step_idx=1)
    assert follow((6,), at=early) == ((3,), True)  # 6 is no candidate before max_dec_len
    drawn = dataclasses.replace(inp, max_len_token="drawn")
    assert follow((6,), at=drawn) == ((3,), True)


class _OtherDraws(Engine):
    """The built-in engine drawing TOPP from other seeds (each request's seed + 1): a valid choice of a
    free draw that parts from the reference's. It reports the scenario's seeds (under fastdeploy TOPP
    never advance), so only the draws differ."""

    def submit(self, spec: RequestSpec) -> None:
        super().submit(dataclasses.replace(spec, seed=spec.seed + 1))

    def step(self, t: int, overrides: Any) -> StepResult:
        result = super().step(t, overrides)
        return dataclasses.replace(
            result, requests=tuple(dataclasses.replace(q, infer_seed=q.infer_seed - 1) for q in result.requests)
        )


def _knock_on_scenario() -> Scenario:
    """One slot, three queued requests, wide TOPP rows: a parts from the reference at a free draw and
    stops at another step, so b and c are admitted (and share their eos lists) at other steps (found by search)."""
    config = _config(verify_strategy="topp", max_num_seqs=1, capture_sizes=(1,), vocab_size=8, max_candidate_len=4)
    config = dataclasses.replace(config, model_seed=0)
    requests = (
        RequestSpec("a", 0, (1, 2, 3), 12, (0, 1), temperature=4.0, top_p=1.0, seed=11),
        RequestSpec("b", 0, (4, 5), 12, (1, 0), temperature=4.0, top_p=1.0, seed=20),
        RequestSpec("c", 1, (6, 5), 12, (0, 1), temperature=4.0, top_p=1.0, seed=30),
    )
    return _scenario(config, *requests, num_steps=10)


def test_the_exact_oracle_follows_a_request_parted_at_a_free_draw(cpu, monkeypatch) -> None:
    scenario = _knock_on_scenario()

    def build(config: EngineConfig, weights: Any, **kw: Any) -> Engine:
        return _OtherDraws(config, weights, **kw)

    outcome = Lockstep(scenario, cpu, engine_factory=build).run()
    assert outcome.clean, outcome.first.headline() if outcome.first else outcome
    assert any(d.ambiguous for d in outcome.divergences), "the draws part: reported apart"
    monkeypatch.setattr(ReferenceDecoder, "adopt", lambda self, step: False)  # leave the parted request out only
    first = Lockstep(scenario, cpu, engine_factory=build).run().first
    assert first is not None and (first.tensor, first.ambiguous) == ("running_requests", False)


def test_the_reference_adopts_an_engines_outcome_and_proposes_from_it() -> None:
    scenario = _topp_scenario("fastdeploy")
    decoder = ReferenceDecoder(scenario.config)
    for spec in scenario.requests:
        decoder.submit(spec)
    first = decoder.step(0, {}).by_id()["a"]
    other = next(t for t in range(16) if t != first.accept_tokens[0])
    assert not decoder.adopt(dataclasses.replace(first, accept_tokens=(99,)))  # outside the vocabulary
    assert not decoder.adopt(dataclasses.replace(first, accept_tokens=(1, 2)))  # more than the prefill computed
    assert decoder.generated("a") == first.accept_tokens
    assert decoder.adopt(dataclasses.replace(first, accept_tokens=(other,), stopped=True))
    assert decoder.generated("a") == (other,) and decoder.running_ids() == ("a", "b")
    assert decoder.step(1, {}).by_id().keys() == {"b"}, "a stopped with the engine"
    decoder = ReferenceDecoder(scenario.config)
    for spec in scenario.requests:
        decoder.submit(spec)
    decoder.step(0, {})
    proposed = decoder._all["a"].drafts
    assert decoder.adopt(dataclasses.replace(first, accept_tokens=(other,)))
    req = decoder._all["a"]
    scratch = dataclasses.replace(req, draft_written=0, draft=type(req.draft)(scenario.config.hidden_size))
    assert req.drafts == decoder._propose(scratch) != proposed  # proposed again, from the adopted token


# ---------------------------------------------------------------------------
# 4. eos_scope "batch"
# ---------------------------------------------------------------------------


def _batch_eos_scenario(contract: str, scope: str = "step") -> Scenario:
    """a (eos 15) and b (eos 4) arrive at step 0, in that order: b's list is the batch's, so b stops
    on 4 at step 1. c (eos 9) takes b's slot at step 2: from then on the batch stops on 9, so a
    emits 4 at step 3 and goes on, and stops on 9 at step 6, after c has left."""
    config = _config(contract, graph_scope=scope)
    requests = (
        RequestSpec("a", 0, (1, 2, 3), 20, (15,)),
        RequestSpec("b", 0, (4, 5), 20, (4,)),
        RequestSpec("c", 2, (6, 7, 8), 20, (9,)),
    )
    return _scenario(config, *requests, num_steps=10)


def test_fastdeploy_requests_stop_on_the_last_admitted_requests_eos() -> None:
    fd, default = decode(_batch_eos_scenario("fastdeploy")), decode(_batch_eos_scenario("default"))
    a_fd, a_default = _tokens(fd, "a"), _tokens(default, "a")
    assert a_fd == a_default[: len(a_fd)]  # the same tokens (greedy), cut at another stop
    assert a_fd[-1] == 9 and 4 in a_fd[1:] and 15 not in a_fd
    last = {q.request_id: (r.step, q.stopped) for r in fd for q in r.requests}
    assert last["a"] == (6, True) and last["b"] == (1, True) and last["c"] == (3, True)
    assert {q.request_id: (r.step, q.stopped) for r in default for q in r.requests}["a"] == (9, False)


def test_a_batch_eos_list_of_one_request_is_its_own() -> None:
    scenario = _batch_eos_scenario("fastdeploy")
    alone = dataclasses.replace(scenario, requests=scenario.requests[:1])
    own = ReferenceDecoder(alone.config, contract=dataclasses.replace(FASTDEPLOY, eos_scope="request"))
    assert _plain(decode(alone)) == _plain(run_script(own, alone))


@pytest.mark.parametrize("scope", SCOPES)
def test_the_engine_shares_one_eos_list_across_the_batch(cpu, scope: str) -> None:
    _clean(_batch_eos_scenario("fastdeploy", scope), cpu)


def test_the_batch_eos_list_lives_in_the_running_slots_only(cpu) -> None:
    scenario = _batch_eos_scenario("fastdeploy")
    engine = Engine(scenario.config, make_weights(scenario.config), device=cpu)
    rows = []
    for result in _steps(engine, scenario, 3):
        rows.append(engine.xp.to_host(engine.buffers.eos_ids)[:3, :2].tolist())
        assert result.step < 3
    # step 0: a and b hold b's list; step 1: b left; step 2: c admitted, a and c hold c's list.
    assert rows == [[[4, -1], [4, -1], [-1, -1]], [[4, -1], [-1, -1], [-1, -1]], [[9, -1], [9, -1], [-1, -1]]]


def _steps(engine: Engine, scenario: Scenario, count: int):
    from graphcheck.driver import iter_steps

    for _, result in zip(range(count), iter_steps(engine, scenario)):
        yield result


def test_a_batch_eos_list_diverges_under_request_eos_lists(cpu, fastdeploy_but) -> None:
    scenario = _with(_batch_eos_scenario("fastdeploy"), contract=fastdeploy_but("eos_scope"))
    first = _first_failure(scenario, cpu, "fastdeploy")
    assert (first.step, first.request_id) == (6, "a")  # a stops on c's 9


# ---------------------------------------------------------------------------
# 5. min_tokens
# ---------------------------------------------------------------------------


def test_ban_eos_in_the_reference() -> None:
    scores = np.arange(24, dtype=np.float64).reshape(3, 8)
    banned = ban_eos(scores, 1, (2, 5), 3)  # rows 0 and 1 have step 1 and 2 < 3
    assert np.isneginf(banned[:2, [2, 5]]).all() and np.isfinite(banned[2]).all()
    assert np.array_equal(np.delete(banned[:2], [2, 5], axis=1), np.delete(scores[:2], [2, 5], axis=1))
    assert ban_eos(scores, 3, (2,), 3) is scores
    assert ban_eos(scores, 0, tuple(range(8)), 3) is scores  # the ids cover the vocabulary: no ban


def _eos_first_scenario(contract: str, scope: str = "step", naive: bool = False) -> Scenario:
    """a's eos list holds the token its prompt leads to first (7; 8 under NAIVE's sample)."""
    config = _config(contract, graph_scope=scope, naive_mode=naive, verify_strategy="greedy")
    requests = (
        RequestSpec("a", 0, (1, 2, 3), 20, (7, 8)),
        RequestSpec("b", 1, (4, 5), 6, (4, 7)),
    )
    return _scenario(config, *requests, num_steps=6)


@pytest.mark.parametrize("naive", [False, True])
def test_eos_is_never_the_first_token_under_fastdeploy(naive: bool) -> None:
    default = decode(_eos_first_scenario("default", naive=naive))
    fd = decode(_eos_first_scenario("fastdeploy", naive=naive))
    assert default[0].by_id()["a"].stopped and default[0].by_id()["a"].accept_tokens[0] in (7, 8)
    first = fd[0].by_id()["a"]
    assert not first.stopped and first.accept_tokens[0] not in (7, 8)


@pytest.mark.parametrize("scope", SCOPES)
@pytest.mark.parametrize("naive", [False, True])
def test_the_engine_bans_eos_below_min_tokens(cpu, scope: str, naive: bool) -> None:
    _clean(_eos_first_scenario("fastdeploy", scope, naive), cpu)


def test_the_model_report_keeps_the_scores_before_the_ban(cpu) -> None:
    scenario = _eos_first_scenario("fastdeploy")
    engine = Engine(scenario.config, make_weights(scenario.config), device=cpu, use_graphs=False)
    (result,) = _steps(engine, scenario, 1)
    assert result.by_id()["a"].accept_tokens[0] != 7
    scores = engine.model_report()["a"].scores
    assert np.isfinite(scores).all() and int(np.argmax(scores[0])) == 7


def test_a_banned_eos_diverges_without_min_tokens(cpu, fastdeploy_but) -> None:
    scenario = _with(_eos_first_scenario("fastdeploy"), contract=fastdeploy_but("min_tokens"))
    first = _first_failure(scenario, cpu, "fastdeploy")
    assert (first.kind, first.step, first.request_id) == ("token", 0, "a")


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("min_tokens, covering", [(1, "unbanned"), (3, "unbanned"), (3, "uniform")])
def test_the_ban_kernel_matches_the_reference(framework: str, min_tokens: int, covering: str) -> None:
    xp = _xp(framework)
    V = 8
    config = _config(vocab_size=V, num_speculative_tokens=3, max_num_seqs=5, capture_sizes=(5,))
    buf = allocate_buffers(xp, config)
    counts = [4, 1, 0, 3, 4]
    steps = [0, 0, 0, 1, 2]
    eos = [(2, 5), (3,), (), tuple(range(V)), (0, 0, 7)]  # slot 3's cover the vocabulary
    cu = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    rows = int(cu[-1]) + 2
    owner = np.full(rows, -1, dtype=np.int64)
    table = np.full((5, MAX_EOS_IDS), -1, dtype=np.int64)
    for b, n in enumerate(counts):
        owner[cu[b] : cu[b] + n] = b
        table[b, : len(eos[b])] = eos[b]
    _put(xp, buf.cu_seqlens_out, cu)
    _put(xp, buf.batch_ids_out, owner)
    _put(xp, buf.step_idx, steps)
    _put(xp, buf.eos_ids, table)
    scores = np.random.default_rng(3).normal(size=(rows, V))
    got = xp.to_host(engine_ban_eos(xp, buf, xp.from_numpy(scores), min_tokens, covering == "uniform"))
    want = scores.copy()
    for b, n in enumerate(counts):
        want[cu[b] : cu[b] + n] = ban_eos(scores[cu[b] : cu[b] + n], steps[b], eos[b], min_tokens, covering)
    np.testing.assert_array_equal(got, want)
    assert np.isneginf(got).any()
    assert (got == BANNED_SCORE).any() == (covering == "uniform")


# ---------------------------------------------------------------------------
# 6. sampling_eps
# ---------------------------------------------------------------------------


def test_the_fastdeploy_band_flags_float32_close_cuts() -> None:
    scores = np.array([1.0, 0.0, -1.0, -2.0])
    p = probabilities(scores, 1.0)
    top_p = float(p[0]) + 5e-7  # a cut float32 arithmetic could place on either side
    assert candidates(scores, 1.0, top_p, 4, eps=FASTDEPLOY.sampling_eps).ambiguous
    assert not candidates(scores, 1.0, top_p, 4, eps=DEFAULT.sampling_eps).ambiguous


@pytest.mark.parametrize("strategy", ["topp", "target_match"])
def test_the_engine_is_clean_on_near_threshold_rows_under_the_wide_band(cpu, strategy: str) -> None:
    config = _config(verify_strategy=strategy, max_candidate_len=4)
    p = probabilities(np.zeros(16), 1.0)
    requests = (
        RequestSpec("a", 0, (1, 2, 3), 20, (15,), top_p=float(np.cumsum(p)[2]), seed=3),
        RequestSpec("b", 0, (4, 5), 20, (14,), temperature=0.3, top_p=0.95, seed=M - 7),
    )
    _clean(_scenario(config, *requests, num_steps=6), cpu)


# ---------------------------------------------------------------------------
# 7. verify_window (fastdeploy-xpu)
# ---------------------------------------------------------------------------


def _row(ranked: tuple[int, ...], length: int, token: int | None = None) -> RowVerdict:
    return RowVerdict(ranked[:length], ranked[0] if token is None else token, ranked=ranked)


def test_the_verify_window_accepts_second_then_top_drafts() -> None:
    rows = [_row((5, 0), 1), _row((3, 4), 1), _row((1, 2), 1), _row((6, 7), 1)]
    inp = VerifyInput(drafts=(0, 3, 1), step_idx=0, max_dec_len=20, eos=(15,))
    assert ref_verify(inp, lambda i: rows[i]).tokens == (5,)
    windowed = dataclasses.replace(inp, verify_window=FASTDEPLOY_XPU.verify_window)
    assert ref_verify(windowed, lambda i: rows[i]).tokens == (0, 3, 1, 6)
    # Every draft of the window must exist, and each must be its own row's top.
    assert ref_verify(dataclasses.replace(windowed, drafts=(0, 3)), lambda i: rows[i]).tokens == (5,)
    assert ref_verify(dataclasses.replace(windowed, drafts=(0, 3, 2)), lambda i: rows[i]).tokens == (5,)
    # The walk goes on after the window: a fourth draft accepted on its own.
    rows4 = rows[:3] + [_row((6, 7), 2), _row((9, 8), 1)]
    assert ref_verify(dataclasses.replace(windowed, drafts=(0, 3, 1, 7)), lambda i: rows4[i]).tokens == (0, 3, 1, 7, 9)
    # An eos inside the window stops the emit there.
    assert ref_verify(dataclasses.replace(windowed, eos=(3,)), lambda i: rows[i]).tokens == (0, 3)


def test_the_stored_window_reads_0_as_a_one_candidate_rows_second() -> None:
    rows = [_row((5, 4), 1), _row((3, 2), 1), _row((1, 2), 1), _row((6, 7), 1)]
    ranked = VerifyInput(drafts=(4, 3, 1), step_idx=0, max_dec_len=20, eos=(15,), verify_window=2)
    stored = dataclasses.replace(ranked, window_second="stored")
    assert ref_verify(ranked, lambda i: rows[i]).tokens == (4, 3, 1, 6)
    assert ref_verify(stored, lambda i: rows[i]).tokens == (5,)  # the stored second is 0, not 4
    zero = dataclasses.replace(stored, drafts=(0, 3, 1))
    assert ref_verify(zero, lambda i: rows[i]).tokens == (0, 3, 1, 6)
    assert ref_verify(dataclasses.replace(zero, window_second="ranked"), lambda i: rows[i]).tokens == (5,)
    # A row whose cut is never reached (length 0) is stored whole: its second is the real one.
    uncut = [_row((5, 4), 0)] + rows[1:]
    assert ref_verify(stored, lambda i: uncut[i]).tokens == (4, 3, 1, 6)
    # A length that a float library may put at 1 or 2 makes the stored second 0 or 4: ambiguous.
    unsure = [RowVerdict((5,), 5, ranked=(5, 4), lengths=(1, 2))] + rows[1:]
    res = ref_verify(zero, lambda i: unsure[i])
    assert res.tokens == (0, 3, 1, 6) and res.ambiguous
    assert not ref_verify(zero, lambda i: rows[i]).ambiguous


def _verify_batch(gen: np.random.Generator, G: int, K1: int, C: int, V: int):
    """A random verify batch: per slot n tokens, drafts, and per output row ranked candidates,
    their accepted length and the phase-2 token; drafts are often a row's first or second candidate."""
    counts = gen.integers(0, K1 + 1, size=G)
    cu = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    rows = int(cu[-1]) + 2
    ranked = np.stack([gen.permutation(V)[:C] for _ in range(rows)])
    length = gen.integers(0, 3, size=rows)
    token = gen.integers(0, V, size=rows)
    drafts = np.full((G, K1), -1, dtype=np.int64)
    for b in range(G):
        for i in range(max(0, int(counts[b]) - 1)):
            r = cu[b] + i
            pick = gen.integers(0, 4)
            drafts[b, i + 1] = ranked[r, 0] if pick < 2 else ranked[r, 1] if pick == 2 else gen.integers(0, V)
    return counts, cu, rows, ranked, length, token, drafts


def _table_rows(ranked: np.ndarray, length: np.ndarray, token: np.ndarray, first: int):
    """``row(i)`` of a slot whose output rows start at ``first``, from the batch's tables."""

    def row(i: int) -> RowVerdict:
        r = first + i
        ids = tuple(int(t) for t in ranked[r])
        return RowVerdict(ids[: int(length[r])], int(token[r]), ranked=ids)

    return row


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("window, second", [(0, "ranked"), (1, "ranked"), (2, "ranked"), (3, "ranked"), (2, "stored")])
def test_the_batched_verify_window_matches_the_reference(framework: str, window: int, second: str) -> None:
    xp = _xp(framework)
    G, k, C, V = 6, 4, 3, 5
    K1 = k + 1
    config = _config(num_speculative_tokens=k, max_num_seqs=G, capture_sizes=(G,), vocab_size=16)
    gen = np.random.default_rng(window if second == "ranked" else 6)  # 6: batches the stored second decides
    fired = stored_apart = 0
    for trial in range(40):
        counts, cu, rows, ranked, length, token, drafts = _verify_batch(gen, G, K1, C, V)
        override = np.where(gen.random(G) < 0.15, gen.integers(0, K1, size=G), -1)
        reasoning = np.where(gen.random(G) < 0.1, 1, 0)
        step_idx = gen.integers(0, 10, size=G)
        max_dec = gen.integers(5, 30, size=G)
        eos = np.full((G, MAX_EOS_IDS), -1, dtype=np.int64)
        eos[:, 0] = gen.integers(0, V + 3, size=G)  # sometimes outside the ids drawn
        buf = allocate_buffers(xp, config)
        _put(xp, buf.seq_lens_this_time, counts)
        _put(xp, buf.stop_flags, np.zeros(G, dtype=bool))
        _put(xp, buf.seq_lens_encoder, np.zeros(G, dtype=np.int64))
        _put(xp, buf.cu_seqlens_out, cu)
        _put(xp, buf.accept_override, override)
        _put(xp, buf.reasoning_status, reasoning)
        _put(xp, buf.step_idx, step_idx)
        _put(xp, buf.max_dec_len, max_dec)
        _put(xp, buf.eos_ids, eos)
        _put(xp, buf.draft_tokens, drafts)
        verify_drafts(
            xp,
            buf,
            xp.from_numpy(token),
            xp.from_numpy(ranked),
            xp.from_numpy(length),
            G,
            VerifyOptions(use_candidates=True, verify_window=window, window_stored=second == "stored"),
        )
        got_tokens, got_num = xp.to_host(buf.accept_tokens), xp.to_host(buf.accept_num)
        for b in range(G):
            if counts[b] == 0:
                assert got_num[b] == 0 and (got_tokens[b] == -1).all()  # idle slots untouched
                continue
            inp = VerifyInput(
                drafts=tuple(int(d) for d in drafts[b, 1 : counts[b]]),
                step_idx=int(step_idx[b]),
                max_dec_len=int(max_dec[b]),
                eos=(int(eos[b, 0]),),
                reasoning_status=int(reasoning[b]),
                override=None if override[b] < 0 else int(override[b]),
                verify_window=window,
                window_second=second,
            )
            row = _table_rows(ranked, length, token, int(cu[b]))
            want = ref_verify(inp, row)
            plain = ref_verify(dataclasses.replace(inp, verify_window=0), row)
            fired += want.tokens != plain.tokens
            stored_apart += want.tokens != ref_verify(dataclasses.replace(inp, window_second="ranked"), row).tokens
            got = tuple(int(t) for t in got_tokens[b, : got_num[b]])
            assert got == want.tokens, (trial, b, inp)
    assert fired > 0 if window else fired == 0
    assert stored_apart > 0 if second == "stored" else stored_apart == 0


def _window_scenario(contract: str, scope: str = "step", model_seed: int = 66) -> Scenario:
    """TOPP, k = S = 4, narrow candidates (found by search): at step 1 request a's drafts (0, 0, 4, 1)
    hold a verify window on a one-candidate row (3), whose stored second candidate is 0. With
    ``model_seed`` 289 a window holds at step 3 on the row's second-ranked token instead."""
    config = _config(
        contract,
        verify_strategy="topp",
        num_speculative_tokens=4,
        num_model_steps=4,
        vocab_size=8,
        max_candidate_len=3,
        model_seed=model_seed,
        graph_scope=scope,
    )
    requests = (
        RequestSpec("a", 0, (1, 2, 3), 30, (7,), top_p=0.3, seed=7),
        RequestSpec("b", 1, (4, 5), 30, (6,), temperature=0.5, top_p=0.5, seed=9),
    )
    return _scenario(config, *requests, num_steps=12)


def test_the_window_fires_in_the_window_scenario() -> None:
    with_window, without = decode(_window_scenario("fastdeploy-xpu")), decode(_window_scenario("fastdeploy"))
    assert _plain(with_window) != _plain(without)


def test_the_xpu_window_compares_with_the_stored_second_candidate(xpu_but) -> None:
    for model_seed in (66, 289):  # a window on a stored 0; one on a real second-ranked token
        scenario = _window_scenario("fastdeploy-xpu", model_seed=model_seed)
        stored = _plain(decode(scenario))
        ranked = _plain(decode(_with(scenario, contract=xpu_but("window_second"))))
        plain = _plain(decode(_window_scenario("fastdeploy", model_seed=model_seed)))
        assert stored != ranked
        assert (stored == plain) == (model_seed == 289) and (ranked == plain) == (model_seed == 66)


def test_a_stored_second_candidate_diverges_under_the_ranked_one(cpu, xpu_but) -> None:
    scenario = _with(_window_scenario("fastdeploy-xpu"), contract=xpu_but("window_second"))
    first = _first_failure(scenario, cpu, "fastdeploy-xpu")
    assert (first.kind, first.tensor, first.step, first.request_id) == ("token", "accept_tokens", 1, "a")


@pytest.mark.parametrize("scope", SCOPES)
def test_the_engine_verifies_with_the_window(cpu, scope: str) -> None:
    scenario = _window_scenario("fastdeploy-xpu", scope)
    _clean(scenario, cpu)
    # Not only clean: the engine's tokens are the reference's up to and through the window step.
    reference = decode(scenario)
    engine = run_script(Engine(scenario.config, make_weights(scenario.config), device=cpu), scenario)
    plain = decode(_window_scenario("fastdeploy", scope))
    step = next(t for t, (a, b) in enumerate(zip(_plain(reference), _plain(plain))) if a != b)
    assert _plain(engine)[: step + 1] == _plain(reference)[: step + 1]


def test_a_window_diverges_under_the_plain_fastdeploy_contract(cpu) -> None:
    first = _first_failure(_window_scenario("fastdeploy"), cpu, "fastdeploy-xpu")
    assert (first.kind, first.tensor) == ("token", "accept_tokens")


# ---------------------------------------------------------------------------
# 8. accept_all_eos "replace"
# ---------------------------------------------------------------------------


def test_the_accept_all_guard_replaces_an_eos_draft() -> None:
    rows = [_row((r, r + 1), 1) for r in (7, 8, 9, 10)]
    inp = VerifyInput(drafts=(3, 15, 2), step_idx=0, max_dec_len=20, eos=(15,), accept_policy="accept_all")
    guarded = dataclasses.replace(inp, accept_all_eos=FASTDEPLOY_XPU.accept_all_eos)
    assert FASTDEPLOY.accept_all_eos == FASTDEPLOY_XPU.accept_all_eos == "replace"
    assert ref_verify(inp, lambda i: rows[i]).tokens == (3, 15)
    res = ref_verify(guarded, lambda i: rows[i])
    assert (res.tokens, res.stopped) == ((3, 5, 2, 10), False)
    assert ref_verify(dataclasses.replace(guarded, eos=(15, 5)), lambda i: rows[i]).tokens == (3, 5)  # 5 stops too
    assert ref_verify(dataclasses.replace(guarded, override=3), lambda i: rows[i]).tokens == (3, 15)  # forced: no guard
    normal = dataclasses.replace(guarded, accept_policy="normal", drafts=(7, 15))
    assert ref_verify(normal, lambda i: rows[i]).tokens == (7, 8)  # rejected, not replaced


def _accept_all_eos_scenario(contract: str, scope: str = "step") -> Scenario:
    """accept_all, greedy: at step 1 request a's drafts are (13, 9), and 13 is its eos."""
    config = _config(contract, accept_policy="accept_all", graph_scope=scope)
    return _scenario(config, RequestSpec("a", 0, (1, 2, 3), 20, (13,)), num_steps=4)


def test_fastdeploy_emits_token_5_for_an_eos_draft_under_accept_all(fastdeploy_but) -> None:
    scenario = _accept_all_eos_scenario("fastdeploy")
    guarded = decode(scenario)[1].by_id()["a"]
    plain = decode(_with(scenario, contract=fastdeploy_but("accept_all_eos")))[1].by_id()["a"]
    assert (plain.accept_tokens, plain.stopped) == ((1, 13), True)
    assert (guarded.accept_tokens, guarded.stopped) == ((1, 5, 9), False)


@pytest.mark.parametrize("scope", SCOPES)
def test_the_engine_replaces_an_eos_draft_under_accept_all(cpu, scope: str) -> None:
    _clean(_accept_all_eos_scenario("fastdeploy", scope), cpu)


def test_an_eos_draft_replaced_diverges_where_it_is_emitted(cpu, fastdeploy_but) -> None:
    scenario = _with(_accept_all_eos_scenario("fastdeploy"), contract=fastdeploy_but("accept_all_eos"))
    first = _first_failure(scenario, cpu, "fastdeploy")
    assert (first.kind, first.step, first.tensor) == ("token", 1, "accept_tokens")
    assert (first.expected, first.actual) == ((1, 13), (1, 5, 9))


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_the_accept_all_guard_kernel_matches_the_reference(framework: str) -> None:
    xp = _xp(framework)
    G, k, C, V = 6, 4, 3, 8
    K1 = k + 1
    config = _config(num_speculative_tokens=k, max_num_seqs=G, capture_sizes=(G,), vocab_size=16)
    gen = np.random.default_rng(5)
    replaced = 0
    for trial in range(10):
        counts, cu, rows, ranked, length, token, drafts = _verify_batch(gen, G, K1, C, V)
        override = np.where(gen.random(G) < 0.2, gen.integers(0, K1, size=G), -1)
        step_idx, max_dec = gen.integers(0, 10, size=G), gen.integers(5, 30, size=G)
        eos = np.full((G, MAX_EOS_IDS), -1, dtype=np.int64)
        eos[:, :2] = gen.integers(0, V, size=(G, 2))  # often one of the drafts
        buf = allocate_buffers(xp, config)
        for name, values in (
            ("seq_lens_this_time", counts),
            ("stop_flags", np.zeros(G, dtype=bool)),
            ("seq_lens_encoder", np.zeros(G, dtype=np.int64)),
            ("cu_seqlens_out", cu),
            ("accept_override", override),
            ("step_idx", step_idx),
            ("max_dec_len", max_dec),
            ("eos_ids", eos),
            ("draft_tokens", drafts),
        ):
            _put(xp, getattr(buf, name), values)
        options = VerifyOptions(use_candidates=True, accept_policy="accept_all", accept_all_guard=True)
        verify_drafts(xp, buf, xp.from_numpy(token), xp.from_numpy(ranked), xp.from_numpy(length), G, options)
        got_tokens, got_num = xp.to_host(buf.accept_tokens), xp.to_host(buf.accept_num)
        for b in np.flatnonzero(counts):
            inp = VerifyInput(
                drafts=tuple(int(d) for d in drafts[b, 1 : counts[b]]),
                step_idx=int(step_idx[b]),
                max_dec_len=int(max_dec[b]),
                eos=tuple(int(e) for e in eos[b, :2]),
                accept_policy="accept_all",
                override=None if override[b] < 0 else int(override[b]),
                accept_all_eos="replace",
            )
            row = _table_rows(ranked, length, token, int(cu[b]))
            want = ref_verify(inp, row)
            replaced += want != ref_verify(dataclasses.replace(inp, accept_all_eos="emit"), row)
            assert tuple(int(t) for t in got_tokens[b, : got_num[b]]) == want.tokens, (trial, b, inp)
    assert replaced > 0


# ---------------------------------------------------------------------------
# 9. naive_params "packed_row"
# ---------------------------------------------------------------------------


def _packed_rows_scenario(contract: str, scope: str = "step") -> Scenario:
    """NAIVE, three slots: a (slot 0) is aborted at step 2, so from then on b (slot 1) has packed row 0
    and reads what a left in slot 0 (FastDeploy writes them only at insert), and c (slot 2) has row 1
    and reads b's top_p, top_k and seed."""
    config = _config(contract, naive_mode=True, max_num_seqs=3, capture_sizes=(1, 2, 3), graph_scope=scope)
    requests = (
        RequestSpec("a", 0, (1, 2, 3), 20, (15,), temperature=1.5, top_p=0.9, seed=5, abort_step=2),
        RequestSpec("b", 0, (4, 5), 20, (15,), temperature=2.0, top_p=0.6, top_k=4, seed=77),
        RequestSpec("c", 0, (6, 7, 8), 20, (15,), temperature=3.0, top_p=1.0, seed=M - 3),
    )
    return _scenario(config, *requests, num_steps=6)


def test_fastdeploy_naive_reads_sampling_values_by_packed_row(fastdeploy_but) -> None:
    scenario = _packed_rows_scenario("fastdeploy")
    packed, own = decode(scenario), decode(_with(scenario, contract=fastdeploy_but("naive_params")))
    assert _plain(packed[:2]) == _plain(own[:2])  # no free slot below a running one yet
    for rid in ("b", "c"):
        assert _tokens(packed, rid)[2:] != _tokens(own, rid)[2:]


def test_the_reference_finds_what_each_packed_row_reads() -> None:
    from graphcheck.driver import apply_events
    from graphcheck.reference.rules import SlotParams

    scenario = _packed_rows_scenario("fastdeploy")
    decoder = ReferenceDecoder(scenario.config)
    for t in range(3):
        apply_events(decoder, scenario, t)
        decoder.step(t, {})
        reads = decoder._naive_reads
        if t < 2:
            assert reads == {r.request_id: SlotParams(r.top_p, r.top_k, r.seed) for r in scenario.requests}
    left_by_a = SlotParams(0.9, FASTDEPLOY.top_k_of(0), 5)  # the free slot keeps its last occupant's values
    assert reads == {"b": left_by_a, "c": SlotParams(0.6, 4, 77)}


def test_a_free_slot_keeps_its_last_occupants_sampling_values_under_packed_row(cpu) -> None:
    """The built-in engine under packed_row leaves a released slot's top_p, top_k and seed (not checked
    for idle values then); under slot reads a release puts them back to idle."""
    scenario = _packed_rows_scenario("fastdeploy")
    for contract, kept in (("fastdeploy", True), ("default", False)):
        lockstep = Lockstep(_with(scenario, contract=contract), cpu)
        for t in range(3):
            assert lockstep.step(t), contract  # the free slot's values are not a hygiene divergence
        engine = lockstep.graph
        top_p = float(engine.xp.to_host(engine.buffers.top_p)[0])
        assert (top_p == 0.9) is kept, contract


@pytest.mark.parametrize("scope", SCOPES)
def test_the_engine_reads_naive_sampling_values_by_packed_row(cpu, scope: str) -> None:
    _clean(_packed_rows_scenario("fastdeploy", scope), cpu)


def test_packed_row_reads_diverge_under_slot_reads(cpu, fastdeploy_but) -> None:
    scenario = _with(_packed_rows_scenario("fastdeploy"), contract=fastdeploy_but("naive_params"))
    first = _first_failure(scenario, cpu, "fastdeploy")
    assert (first.kind, first.step, first.tensor) == ("token", 2, "accept_tokens")


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_build_sampling_params_reads_by_packed_row(framework: str) -> None:
    xp = _xp(framework)
    config = _config(naive_mode=True, max_num_seqs=4, capture_sizes=(4,))
    buf = allocate_buffers(xp, config)
    counts = [0, 1, 1, 0]  # NAIVE: one row per running slot; slots 0 and 3 are free
    cu = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    values = {"infer_seed": [0, 11, 22, 33], "top_p": [1.0, 0.5, 0.7, 0.9], "top_k": [0, 3, 4, 5]}
    for name, column in values.items():
        _put(xp, getattr(buf, name), column)
    _put(xp, buf.temperature, [1.0, 2.0, 3.0, 4.0])
    _put(xp, buf.cu_seqlens_out, cu)
    _put(xp, buf.batch_ids_out, [1, 2, -1])
    for by_row, slots in ((False, [1, 2]), (True, [0, 1])):
        seed, top_p, top_k, temperature = (
            xp.to_host(t).tolist()
            for t in build_sampling_params(xp, buf, 4, 3, 4, SamplingOptions(advance_seed=False, params_by_row=by_row))
        )
        assert seed == [values["infer_seed"][s] for s in slots] + [0]
        assert top_p == [values["top_p"][s] for s in slots] + [1.0]
        assert top_k == [values["top_k"][s] for s in slots] + [0]
        assert temperature == [2.0, 3.0, 1.0], "temperature: always the row's own slot"


# ---------------------------------------------------------------------------
# 10. covering_eos "uniform"
# ---------------------------------------------------------------------------


def test_eos_ids_covering_the_vocabulary_make_the_row_uniform() -> None:
    scores = np.arange(24, dtype=np.float64).reshape(3, 8)
    assert ban_eos(scores, 0, tuple(range(8)), 2) is scores
    banned = ban_eos(scores, 0, tuple(range(8)), 2, FASTDEPLOY.covering_eos)
    assert (banned[:2] == BANNED_SCORE).all() and np.array_equal(banned[2], scores[2])
    assert np.array_equal(probabilities(banned[0], 0.7), np.full(8, 1 / 8))
    assert ban_eos(scores, 2, tuple(range(8)), 2, "uniform") is scores  # past min_tokens: nothing


def _covering_eos_scenario(contract: str, scope: str = "step") -> Scenario:
    """vocabulary 8, every id an eos: the first token (banned below min_tokens 1) is 0 under a uniform
    row, 4 (the model's best) when nothing is banned; either stops the request."""
    config = _config(contract, vocab_size=8, max_candidate_len=3, graph_scope=scope)
    return _scenario(config, RequestSpec("a", 0, (1, 2, 3), 20, tuple(range(8))), num_steps=3)


def test_fastdeploy_bans_every_token_when_the_eos_ids_cover_the_vocabulary(fastdeploy_but) -> None:
    scenario = _covering_eos_scenario("fastdeploy")
    assert [(q.accept_tokens, q.stopped) for r in decode(scenario) for q in r.requests] == [((0,), True)]
    unbanned = decode(_with(scenario, contract=fastdeploy_but("covering_eos")))
    assert [(q.accept_tokens, q.stopped) for r in unbanned for q in r.requests] == [((4,), True)]


@pytest.mark.parametrize("scope", SCOPES)
def test_the_engine_bans_every_token_of_a_covered_row(cpu, scope: str) -> None:
    _clean(_covering_eos_scenario("fastdeploy", scope), cpu)


def test_a_uniform_covered_row_diverges_where_nothing_is_banned(cpu, fastdeploy_but) -> None:
    scenario = _with(_covering_eos_scenario("fastdeploy"), contract=fastdeploy_but("covering_eos"))
    first = _first_failure(scenario, cpu, "fastdeploy")
    assert (first.kind, first.step, first.expected, first.actual) == ("token", 0, (4,), (0,))


# ---------------------------------------------------------------------------
# 11. eos_lengths "uniform"
# ---------------------------------------------------------------------------


def _uneven_eos_scenario(contract: str) -> Scenario:
    config = _config(contract)
    requests = (
        RequestSpec("a", 0, (1, 2, 3), 20, (15, 9, 4)),
        RequestSpec("b", 0, (4, 5), 20, (14,)),
        RequestSpec("c", 1, (6,), 20, (13, 12)),
    )
    return _scenario(config, *requests, num_steps=4)


def test_fastdeploy_scenarios_are_fitted_to_one_eos_length() -> None:
    from graphcheck.check.setup import CheckSetup
    from graphcheck.scenario import fit_to_contract

    uneven = _uneven_eos_scenario("default")
    assert fit_to_contract(uneven) is uneven
    assert CheckSetup().apply(uneven) is uneven
    for name in ("fastdeploy", "fastdeploy-xpu"):
        fitted = CheckSetup(contract=name).apply(uneven)
        assert [r.eos_token_ids for r in fitted.requests] == [(15,), (14,), (13,)]
        assert fit_to_contract(fitted) is fitted
    caps = dataclasses.replace(Engine.capabilities, contracts=("fastdeploy",))
    assert [r.eos_token_ids for r in caps.fit(uneven).requests] == [(15,), (14,), (13,)]


@settings(max_examples=15, deadline=None)
@given(gst.request_scripts(_config("fastdeploy"), 6, min_requests=2, max_eos=4))
def test_fastdeploy_scripts_draw_eos_lists_of_one_length(script) -> None:
    assert len({len(r.eos_token_ids) for r in script.requests}) == 1


def test_default_scripts_draw_eos_lists_of_many_lengths() -> None:
    from hypothesis import Phase, find

    strategy = gst.request_scripts(_config("default"), 6, min_requests=2, max_eos=4)
    quick = settings(phases=[Phase.generate], database=None)
    find(strategy, lambda script: len({len(r.eos_token_ids) for r in script.requests}) > 1, settings=quick)


# ---------------------------------------------------------------------------
# seed_advance "none", sampling "greedy", max_len_token "drawn": the hf-cb preset
# (an engine's own preset: the built-in engine does not take it, tests/test_hf_cb.py runs its engine)
# ---------------------------------------------------------------------------

HF_CB = CONTRACTS["hf-cb"]


def test_the_hf_cb_preset_keeps_the_seed_and_decodes_greedily() -> None:
    assert not HF_CB.advances_seed("target_match", False) and not HF_CB.advances_seed("greedy", True)
    assert HF_CB.top_k_of(0) == 1 and HF_CB.top_k_of(7) == 1 and DEFAULT.top_k_of(7) == 7
    config = EngineConfig(naive_mode=True, num_speculative_tokens=0, contract="hf-cb")
    spec = RequestSpec("r", 0, (1, 2, 3), 6, (0,), temperature=5.0, top_p=0.9, seed=123)
    decoder = ReferenceDecoder(config, make_weights(config))
    decoder.submit(spec)
    outcomes = [decoder.step(t, {}).by_id()["r"] for t in range(4)]
    assert {o.infer_seed for o in outcomes} == {123}, "no seed stream: the seed never moves"
    greedy = ReferenceDecoder(dataclasses.replace(config, contract="default"), make_weights(config))
    greedy.submit(dataclasses.replace(spec, temperature=1.0, top_p=1.0, top_k=1))
    assert [o.accept_tokens for o in outcomes] == [greedy.step(t, {}).by_id()["r"].accept_tokens for t in range(4)]


@pytest.mark.parametrize(("max_len_token", "expected"), [("eos", 9), ("drawn", 4)])
def test_the_token_at_max_dec_len_is_eos_or_the_drawn_one(max_len_token: str, expected: int) -> None:
    from graphcheck.reference.verify import naive_step

    last = naive_step(4, step_idx=5, max_dec_len=6, eos=(9,), max_len_token=max_len_token)
    assert last.tokens == (expected,) and last.stopped
    early = naive_step(4, step_idx=2, max_dec_len=6, eos=(9,), max_len_token=max_len_token)
    assert early.tokens == (4,) and not early.stopped


def test_the_builtin_engine_does_not_take_an_engines_own_preset() -> None:
    caps = Engine.capabilities
    assert "hf-cb" not in caps.contracts and caps.fit_config(EngineConfig(contract="hf-cb")).contract == "default"


# ---------------------------------------------------------------------------
# All points at once: random scenarios
# ---------------------------------------------------------------------------

_FASTDEPLOY_CONTRACTS = st.sampled_from(("fastdeploy", "fastdeploy-xpu"))


@settings(max_examples=10, deadline=None)
@given(gst.scenarios(configs=gst.engine_configs(contract=_FASTDEPLOY_CONTRACTS), max_requests=3, max_steps=8))
def test_random_scenarios_are_clean_under_the_fastdeploy_contracts(cpu, scenario: Scenario) -> None:
    _clean(scenario, cpu)


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(gst.scenarios(configs=gst.engine_configs(contract=_FASTDEPLOY_CONTRACTS)))
def test_random_scenarios_are_clean_under_the_fastdeploy_contracts_long(cpu, scenario: Scenario) -> None:
    _clean(scenario, cpu)


def test_engine_configs_draw_the_contract_knob() -> None:
    from hypothesis import Phase, find

    drawn = settings(phases=[Phase.generate], database=None)  # what is drawn; shrinking adds nothing here
    assert find(gst.engine_configs(), lambda c: True, settings=drawn).contract == "default"
    pinned = find(gst.engine_configs(contract="fastdeploy-xpu"), lambda c: True, settings=drawn)
    assert pinned.contract == "fastdeploy-xpu"
    knob = gst.engine_configs(contract=st.sampled_from(CONTRACT_NAMES))
    assert find(knob, lambda c: c.contract == "fastdeploy-xpu", settings=drawn).contract == "fastdeploy-xpu"


def test_every_point_of_the_presets_is_covered_here() -> None:
    """The points this file tests, one section each: a new contract field needs a section."""
    assert [name for name, _ in FASTDEPLOY.points()] == [f.name for f in dataclasses.fields(Contract)][1:]
    assert {name for name, _ in FASTDEPLOY_XPU.points()} == {
        "seed_advance",
        "row_seed",
        "topp_draw",
        "eos_scope",
        "min_tokens",
        "sampling_eps",
        "verify_window",
        "sampling",
        "max_len_token",
        "seed_advance_sum",
        "window_second",
        "accept_all_eos",
        "naive_params",
        "covering_eos",
        "eos_lengths",
        "reasoning",
    }
