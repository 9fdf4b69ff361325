"""The engine's splitmix64 hash, uniforms and add_mod against reference.rng, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

import graphcheck.reference.rng as ref
from graphcheck.backends.engine import rng
from graphcheck.backends.xp import make_ops
from graphcheck.scenario import SEED_MODULUS as M

pytest.importorskip("torch")

EDGE = [
    0,
    1,
    2,
    3,
    4,
    5,
    7,
    8,
    11,
    12,
    42,
    255,
    256,
    2**31 - 1,
    2**31,
    2**32 - 1,
    2**32,
    2**53,
    2**53 + 1,
    2**62,
    M - 1,
    M - 2,
    M - 3,
    M - 4,
    M - 5,
    M - 37,
    M - 256,
    2**63 - 1,
    -1,
    -2,
    -(2**63),
    -(2**62),
    0x61C8864680B583EB,
    12345,
    922337203685477580,
]


def _values(n: int = 4000) -> np.ndarray:
    gen = np.random.default_rng(20240601)
    rand = gen.integers(-(2**63), 2**63 - 1, size=n, dtype=np.int64, endpoint=True)
    return np.concatenate([np.array(EDGE, dtype=np.int64), rand])


@pytest.fixture(scope="module")
def xp():
    return make_ops("torch", "cpu")


def test_mix64_bit_exact(xp):
    x = _values()
    got = xp.to_host(rng.mix64(xp, xp.from_numpy(x)))
    np.testing.assert_array_equal(got, ref.mix64(x))
    for v in EDGE:  # also the reference's pure-int path
        assert int(xp.to_host(rng.mix64(xp, xp.from_numpy(np.array([v], dtype=np.int64))))[0]) == ref.mix64(v)


def test_uniforms_bit_exact(xp):
    seeds = np.abs(_values()) % M  # the engine only draws from seeds in [0, M)
    t = xp.from_numpy(seeds)
    u = xp.to_host(rng.uniform(xp, t))
    u1 = xp.to_host(rng.uniform_open0(xp, t))
    np.testing.assert_array_equal(u.view(np.int64), np.asarray(ref.uniform(seeds)).view(np.int64))
    np.testing.assert_array_equal(u1.view(np.int64), np.asarray(ref.uniform_open0(seeds)).view(np.int64))
    assert (u >= 0).all() and (u < 1).all() and (u1 > 0).all() and (u1 <= 1).all()
    for s in seeds[:50]:
        assert u[list(seeds).index(s)] == ref.uniform(int(s))


def test_add_mod_bit_exact_and_wraps(xp):
    gen = np.random.default_rng(7)
    s = np.concatenate(
        [
            np.array([0, 1, M - 1, M - 1, M - 4, M - 3, M - 2, M - 5, 5, M - 100], dtype=np.int64),
            gen.integers(0, M, size=3000, dtype=np.int64),
        ]
    )
    a = np.concatenate(
        [
            np.array([0, M - 1, 1, M - 1, 4, 4, 4, 16, M - 5, 99], dtype=np.int64),
            gen.integers(0, M, size=3000, dtype=np.int64),
        ]
    )
    got = xp.to_host(rng.add_mod(xp, xp.from_numpy(s), xp.from_numpy(a)))
    expected = np.array([(int(x) + int(y)) % M for x, y in zip(s, a)], dtype=np.int64)
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(got, ref.add_mod(s, a))
    # A Python-int increment, as the engine advances infer_seed by 4(k+1).
    inc = xp.to_host(rng.add_mod(xp, xp.from_numpy(s), 16))
    np.testing.assert_array_equal(inc, np.array([(int(x) + 16) % M for x in s], dtype=np.int64))


def test_row_seeds_match_reference_seed_schedule(xp):
    """Row j of a step uses add_mod(infer_seed, 4j); the seed wraps around M within a few steps."""
    seed = M - 37
    for _ in range(6):
        rows = np.arange(4, dtype=np.int64) * 4
        got = xp.to_host(rng.add_mod(xp, xp.from_numpy(np.full(4, seed, dtype=np.int64)), xp.from_numpy(rows)))
        assert list(got) == [ref.add_mod(seed, int(r)) for r in rows]
        seed = ref.add_mod(seed, 16)
