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
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graphcheck import strategies as gst
from graphcheck.backends.devices import resolve
from graphcheck.backends.engine import Engine
from graphcheck.backends.engine import rng as engine_rng
from graphcheck.backends.engine.buffers import allocate_buffers
from graphcheck.backends.engine.sampling import ban_eos as engine_ban_eos
from graphcheck.backends.engine.sampling import build_sampling_params
from graphcheck.backends.engine.verify import verify_drafts
from graphcheck.backends.xp import make_ops
from graphcheck.check.checker import check_scenario
from graphcheck.check.lockstep import Lockstep
from graphcheck.contract import CONTRACT_NAMES, CONTRACTS, DEFAULT, FASTDEPLOY, FASTDEPLOY_XPU, Contract
from graphcheck.driver import run_script
from graphcheck.reference import make_weights
from graphcheck.reference import rng as ref_rng
from graphcheck.reference.decoder import ReferenceDecoder, decode
from graphcheck.reference.rules import ban_eos, next_seed, row_seed
from graphcheck.reference.sampling import candidates, probabilities
from graphcheck.reference.verify import RowVerdict, VerifyInput, judge_row
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


@pytest.fixture
def fastdeploy_but(monkeypatch):
    """``fastdeploy_but(point)``: the name of a contract registered for this test only, ``fastdeploy``
    with ``point`` set back to the default's: a reference that differs from the engine in that point alone."""

    def register(point: str) -> str:
        name = f"fastdeploy-but-{point}"
        changed = dataclasses.replace(FASTDEPLOY, name=name, **{point: getattr(DEFAULT, point)})
        monkeypatch.setitem(CONTRACTS, name, changed)
        return name

    return register


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
    spec = RequestSpec("a", 0, (1, 2, 3), 20, (15,), seed=M - 5)
    seeds = _seeds(decode(_scenario(config, spec, num_steps=3)), "a")
    assert seeds == [int(ref_rng.add_mod(M - 5, 12)), int(ref_rng.add_mod(M - 5, 24)), int(ref_rng.add_mod(M - 5, 36))]


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
    with np.errstate(over="ignore"):
        total = np.int64(infer_seed) + np.int64(4 * row)
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
    seed, *_ = build_sampling_params(xp, buf, 4, rows, 20, False, wrap_row_seeds=wrap)
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
    assert judge_row("topp", scores[0], 1.0, 1.0, 0, 5, 4, free_draw=True).token_ambiguous
    assert not judge_row("topp", scores[0], 1.0, 1.0, 0, 5, 4).token_ambiguous
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
@pytest.mark.parametrize("min_tokens", [1, 3])
def test_the_ban_kernel_matches_the_reference(framework: str, min_tokens: int) -> None:
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
    got = xp.to_host(engine_ban_eos(xp, buf, xp.from_numpy(scores), min_tokens))
    want = scores.copy()
    for b, n in enumerate(counts):
        want[cu[b] : cu[b] + n] = ban_eos(scores[cu[b] : cu[b] + n], steps[b], eos[b], min_tokens)
    np.testing.assert_array_equal(got, want)
    assert np.isneginf(got).any()


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
@pytest.mark.parametrize("window", [0, 1, 2, 3])
def test_the_batched_verify_window_matches_the_reference(framework: str, window: int) -> None:
    xp = _xp(framework)
    G, k, C, V = 6, 4, 3, 5
    K1 = k + 1
    config = _config(num_speculative_tokens=k, max_num_seqs=G, capture_sizes=(G,), vocab_size=16)
    gen = np.random.default_rng(window)
    fired = 0
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
            True,
            "normal",
            verify_window=window,
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
            )
            row = _table_rows(ranked, length, token, int(cu[b]))
            want = ref_verify(inp, row)
            plain = ref_verify(dataclasses.replace(inp, verify_window=0), row)
            fired += want.tokens != plain.tokens
            got = tuple(int(t) for t in got_tokens[b, : got_num[b]])
            assert got == want.tokens, (trial, b, inp)
    assert fired > 0 if window else fired == 0


def _window_scenario(contract: str, scope: str = "step") -> Scenario:
    """TOPP, k = S = 4, narrow candidates: at step 3 request a's drafts hold a verify window (found by search)."""
    config = _config(
        contract,
        verify_strategy="topp",
        num_speculative_tokens=4,
        num_model_steps=4,
        vocab_size=8,
        max_candidate_len=3,
        model_seed=289,
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
    from hypothesis import find

    assert find(gst.engine_configs(), lambda c: True).contract == "default"
    assert find(gst.engine_configs(contract="fastdeploy-xpu"), lambda c: True).contract == "fastdeploy-xpu"
    drawn = find(gst.engine_configs(contract=st.sampled_from(CONTRACT_NAMES)), lambda c: c.contract == "fastdeploy-xpu")
    assert drawn.contract == "fastdeploy-xpu"


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
    }
