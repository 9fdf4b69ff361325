"""The engine on PaddlePaddle (the ``xpu --emulate`` path): facade, eager and emulated graphs.

The engine code is the torch engine's, unchanged; only the array facade
(``graphcheck.backends.xp.paddle_xp``) and the emulator's framework ops
(``graphcheck.capture.paddle_ops``) differ. So:

* the facade agrees with the torch facade op for op on the traps that differ
  between the frameworks (exact int64 constants, scalars in ``where``, floor
  modulo, logical shifts, stable sorts, in-place writes), and the splitmix64
  hash is bit-exact with the reference;
* the eager paddle engine matches ``graphcheck.reference.decode`` on every fixed scenario;
* the emulated-graph paddle engine matches the eager one bit for bit (results
  and buffers, after every step), in every graph scope;
* the paddle engine and the torch engine agree bit for bit, buffers included.
"""

from __future__ import annotations

import numpy as np
import pytest

paddle = pytest.importorskip("paddle")

import graphcheck.reference.rng as ref_rng  # noqa: E402
from graphcheck.backends.engine import Engine, rng  # noqa: E402
from graphcheck.backends.engine.buffers import CACHE_FIELDS, STATE_FIELDS  # noqa: E402
from graphcheck.backends.xp import make_ops  # noqa: E402
from graphcheck.capture.devices import resolve  # noqa: E402
from graphcheck.reference import make_weights  # noqa: E402
from graphcheck.scenario import SEED_MODULUS  # noqa: E402

from _engine_scenarios import (  # noqa: E402
    ALL,
    LOCKSTEP_CASES,
    SCOPES,
    apply_events,
    assert_graph_policy,
    assert_reads_named_buffers,
    engine_for,
    lockstep,
    memory_per_step,
    run_against_reference,
    scenario_for,
)
from _layers import fast_first  # noqa: E402


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """Tiny tensors: intra-op threads only add overhead on a busy 2-core box."""
    set_threads = getattr(paddle.base.core, "set_num_threads", None)
    if set_threads is not None:
        set_threads(1)
    try:
        import torch
    except ImportError:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # the torch engine of the cross-framework test
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def xpu():
    return resolve("xpu", emulate=True)


@pytest.fixture(scope="module")
def xp():
    return make_ops("paddle", "cpu")


# --------------------------------------------------------------------------- the facade


def test_xpu_emulate_is_paddle_on_cpu(xpu):
    assert (xpu.framework, xpu.device, xpu.emulated) == ("paddle", "cpu", True)
    ops = make_ops("paddle", "cpu")
    assert ops.framework == "paddle" and isinstance(ops.zeros((2,), ops.int64), paddle.Tensor)


def test_int64_constants_are_exact(xp):
    big = [2**53 + 1, 2**62 + 1, 2**63 - 1, -(2**63), rng.GOLDEN, rng.MIX1, rng.MIX2, -0x5A5A5A5A5A5A5A5A]
    for value in big:
        assert int(xp.to_host(xp.full((3,), value, xp.int64))[2]) == value
        like = xp.zeros((2, 2), xp.int64)
        assert int(xp.to_host(xp.const_like(like, value))[1, 1]) == value


def test_rng_is_bit_exact_with_the_reference(xp):
    gen = np.random.default_rng(20240601)
    edge = np.array([0, 1, 2**53 + 1, 2**63 - 1, -1, -(2**63), SEED_MODULUS - 1], dtype=np.int64)
    x = np.concatenate([edge, gen.integers(-(2**63), 2**63 - 1, size=2000, dtype=np.int64, endpoint=True)])
    np.testing.assert_array_equal(xp.to_host(rng.mix64(xp, xp.from_numpy(x))), ref_rng.mix64(x))
    seeds = np.abs(x) % SEED_MODULUS
    u = xp.to_host(rng.uniform(xp, xp.from_numpy(seeds)))
    u1 = xp.to_host(rng.uniform_open0(xp, xp.from_numpy(seeds)))
    np.testing.assert_array_equal(u.view(np.int64), np.asarray(ref_rng.uniform(seeds)).view(np.int64))
    np.testing.assert_array_equal(u1.view(np.int64), np.asarray(ref_rng.uniform_open0(seeds)).view(np.int64))
    a = gen.integers(0, SEED_MODULUS, size=seeds.size, dtype=np.int64)
    np.testing.assert_array_equal(
        xp.to_host(rng.add_mod(xp, xp.from_numpy(seeds), xp.from_numpy(a))), ref_rng.add_mod(seeds, a)
    )


def _facade_cases(xp):
    """name -> a function of a facade returning one numpy result; run on torch and paddle."""
    ints = np.array([-17, -8, -1, 0, 1, 7, 8, 15, 2**40 + 3, -(2**40) - 5], dtype=np.int64)
    floats = np.array([0.5, -1.25, 3.0, 2.5, -2.5, 1e-9], dtype=np.float64)
    mask = np.array([True, False, True, True, False, False])
    one = np.float64(1.0)
    ulps = np.array([np.nextafter(one, 0), one, np.nextafter(one, 2), 1.0 - 1e-7], dtype=np.float64)
    m2 = np.array([[1, 5, 5, 2], [7, 7, 0, 7], [3, 9, 9, 9]], dtype=np.int64)

    def f(fn):
        return lambda ops: ops.to_host(fn(ops, lambda a: ops.from_numpy(a)))

    return {
        "floor_div": f(lambda o, T: o.floor_div(T(ints), 4)),
        "floor_div_tensor": f(lambda o, T: o.floor_div(T(ints), T(np.full(10, -3, dtype=np.int64)))),
        "mod": f(lambda o, T: o.mod(T(ints), 7)),
        "mod_negative_divisor": f(lambda o, T: o.mod(T(ints), -4)),
        "shift_logical": f(lambda o, T: o.shift_right_logical(T(ints), 30)),
        "shift_arithmetic": f(lambda o, T: o.shift_right_arithmetic(T(ints), 3)),
        "where_int_scalar": f(lambda o, T: o.where(T(mask), T(ints[:6]), -1)),
        "where_float_scalar": f(lambda o, T: o.where(T(mask), T(floats), 1.0)),
        "where_bool_scalar": f(lambda o, T: o.where(T(mask), True, T(~mask))),
        "where_two_int_scalars": f(lambda o, T: o.where(T(mask), 1, 0)),
        "where_float_scalar_int_tensor": f(lambda o, T: o.where(T(mask), o.astype(T(ints[:6]), o.float64), 0)),
        "where_int_scalar_bool_tensor": f(lambda o, T: o.where(T(mask), T(~mask), 7)),
        "where_broadcast": f(
            lambda o, T: o.where(
                o.lt(o.reshape(o.arange(4), (1, 4)), T(np.array([[1], [3], [0]]))), T(m2), o.full((3, 1), -9, o.int64)
            )
        ),
        "minimum_scalar": f(lambda o, T: o.minimum(T(ints), 3)),
        "maximum_scalar": f(lambda o, T: o.maximum(T(ints), 0)),
        "clip": f(lambda o, T: o.clip(T(ints), -2, 9)),
        "eq_float": f(lambda o, T: o.eq(T(floats), 3.0)),
        # paddle's own == is approximate on floats: one ulp apart must still be unequal
        "eq_float_one_ulp": f(lambda o, T: o.eq(T(ulps), 1.0)),
        "eq_float_tensors": f(lambda o, T: o.eq(T(ulps), T(np.ones_like(ulps)))),
        "ne_float_one_ulp": f(lambda o, T: o.ne(T(ulps), 1.0)),
        "eq_float32_one_ulp": f(lambda o, T: o.eq(o.astype(T(ulps), o.float32), o.full((4,), 1.0, o.float32))),
        "le_ge_float_one_ulp": f(lambda o, T: o.concat([o.le(T(ulps), 1.0), o.ge(T(ulps), 1.0)], 0)),
        "sort_desc_stable": f(lambda o, T: o.concat(list(o.sort(T(m2), -1, descending=True)), 1)),
        "searchsorted_right": f(
            lambda o, T: o.searchsorted(T(np.array([0, 2, 2, 5])), T(np.array([0, 1, 2, 5, 9])), right=True)
        ),
        "gather": f(lambda o, T: o.gather(T(m2), T(np.array([[3, 0], [1, 1], [2, 0]])), 1)),
        "take2d": f(lambda o, T: o.take2d(T(m2), T(np.array([2, 0, 1])), T(np.array([1, 3, 0])))),
        "cumsum_f64": f(lambda o, T: o.cumsum(T(np.abs(floats)), 0)),
        "round_to_int": f(lambda o, T: o.round_to_int(T(floats * 4))),
        "int_matmul": f(lambda o, T: o.int_matmul(T(m2), o.transpose(T(m2), (1, 0)))),
        "any": f(lambda o, T: o.any(o.gt(T(m2), 8), 1)),
        "max_keepdims": f(lambda o, T: o.max(T(m2), -1, keepdims=True)),
        "exp": f(lambda o, T: o.exp(T(floats))),
    }


def _writes(ops):
    """In-place writes: index_put_, put2d_, assign_ with slices and tuples, masked_assign_, copy_."""
    t = ops.from_numpy(np.arange(20, dtype=np.int64).reshape(5, 4))
    flags = ops.full((5,), True, ops.bool)
    ops.index_put_(t, ops.from_numpy(np.array([4, 1])), ops.full((2, 4), -1, ops.int64))
    rows, cols = ops.from_numpy(np.array([0, 3])), ops.from_numpy(np.array([2, 1]))
    ops.put2d_(t, rows, cols, ops.from_numpy(np.array([70, 80])))
    ops.assign_(t, (slice(0, 2), 0), ops.from_numpy(np.array([5, 6])))
    ops.assign_(t, (slice(2, 4), slice(2, None)), 9)
    ops.masked_assign_(t, slice(0, 3), ops.from_numpy(np.array([True, False, True])), ops.full((3, 4), 100, ops.int64))
    ops.masked_assign_(flags, slice(1, 4), ops.from_numpy(np.array([True, False, True])), False)
    ops.index_put_(flags, ops.from_numpy(np.array([4])), ops.full((1,), False, ops.bool))
    dst = ops.zeros((4,), ops.int64)
    ops.copy_(dst, ops.arange(4) * 3)
    return np.concatenate([ops.to_host(t).ravel(), ops.to_host(flags).astype(np.int64), ops.to_host(dst)])


def test_facade_agrees_with_torch_op_for_op(xp):
    pytest.importorskip("torch")
    tx = make_ops("torch", "cpu")
    for name, case in _facade_cases(xp).items():
        got, want = case(xp), case(tx)
        assert got.dtype == want.dtype and got.shape == want.shape, name
        np.testing.assert_array_equal(got, want, err_msg=name)
    np.testing.assert_array_equal(_writes(xp), _writes(tx))


def test_in_place_writes_keep_the_storage(xp):
    t = xp.zeros((6, 3), xp.int64)
    ptr = t.data_ptr()
    xp.assign_(t, slice(0, 2), 1)
    xp.index_put_(t, xp.from_numpy(np.array([5])), xp.full((1, 3), 2, xp.int64))
    xp.put2d_(t, xp.from_numpy(np.array([3])), xp.from_numpy(np.array([1])), xp.from_numpy(np.array([3])))
    xp.masked_assign_(t, (slice(0, 6), 2), xp.gt(xp.arange(6), 3), 4)
    xp.copy_(t, t + 1)
    assert t.data_ptr() == ptr
    assert xp.to_host(t).tolist() == [[2, 2, 2], [2, 2, 2], [1, 1, 1], [1, 4, 1], [1, 1, 5], [3, 3, 5]]


# --------------------------------------------------------------------------- engine vs reference


@pytest.mark.parametrize("name", ALL)
def test_eager_paddle_engine_matches_reference(name, xpu):
    scenario, engine = engine_for(name, device=xpu, use_graphs=False)
    assert engine.xp.framework == "paddle" and engine.graphs == {}
    run = run_against_reference(engine, scenario, name, "paddle eager")
    assert all(not info.used_graph for info in run.infos)


@pytest.mark.parametrize("scope", fast_first(SCOPES, lambda scope: scope == "step"))
@pytest.mark.parametrize("name", ["demo-topp", "buckets", "eager_above"])
def test_emulated_graph_paddle_engine_matches_reference(name, scope, xpu):
    scenario, engine = engine_for(name, scope, device=xpu)
    assert engine.runner.name == "xpu-emulated" and type(engine.runner.ops).__name__ == "PaddleOps"
    run = run_against_reference(engine, scenario, name, f"paddle graphs/{scope}")
    assert assert_graph_policy(run, scenario.config) > 0, "no decode step replayed a graph"


# --------------------------------------------------------------------------- graph vs eager


@pytest.mark.parametrize("name,scope", fast_first(LOCKSTEP_CASES, 2))
def test_paddle_graph_matches_paddle_eager_bit_for_bit(name, scope, xpu):
    """Results, per-slot state, KV caches and packed scratch after every step; live static inputs."""
    assert lockstep(scenario_for(name, scope), xpu) > 0


def test_paddle_static_inputs_name_the_engine_buffers(xpu):
    _, engine = engine_for("buckets", "step", device=xpu)
    assert None not in assert_reads_named_buffers(engine)


def test_paddle_memory_is_flat_across_replays(xpu):
    scenario, engine = engine_for("buckets", "forward", device=xpu)
    sizes = memory_per_step(engine, scenario)
    assert len(set(sizes)) == 1 and sizes[0] > 0


# --------------------------------------------------------------------------- torch vs paddle


def _host_state(engine):
    return {name: engine.xp.to_host(getattr(engine.buffers, name)) for name in STATE_FIELDS + CACHE_FIELDS}


@pytest.mark.parametrize("use_graphs", [False, True], ids=["eager", "graphs"])
def test_torch_and_paddle_engines_agree_bit_for_bit(use_graphs, xpu):
    pytest.importorskip("torch")
    scenario = scenario_for("buckets", "forward_sampling")
    weights = make_weights(scenario.config)
    engines = [Engine(scenario.config, weights, device=d, use_graphs=use_graphs) for d in (resolve("cpu"), xpu)]
    assert [e.xp.framework for e in engines] == ["torch", "paddle"]
    t_run, p_run = [], []
    for t in range(scenario.num_steps):
        for engine, out in zip(engines, (t_run, p_run)):
            apply_events(engine, scenario, t)
            out.append(engine.step(t, scenario.accept_overrides_at(t)))
        assert p_run[-1] == t_run[-1], f"step {t}"
        assert engines[0].last_step_info == engines[1].last_step_info
        torch_state, paddle_state = (_host_state(e) for e in engines)
        for name, value in torch_state.items():
            assert paddle_state[name].dtype == value.dtype, name
            np.testing.assert_array_equal(paddle_state[name], value, err_msg=f"step {t}: {name}")
    assert any(r.requests for r in p_run)
