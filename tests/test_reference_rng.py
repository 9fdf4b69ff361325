"""reference.rng: splitmix64, uniforms and seed addition, scalar and array paths."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from graphcheck.reference.rng import add_mod, mix64, uniform, uniform_open0
from graphcheck.scenario import SEED_MODULUS as M

MASK = (1 << 64) - 1


def bigint_splitmix(x: int) -> int:
    """Textbook unsigned splitmix64 on Python big ints, returned as unsigned."""
    z = (x + 0x9E3779B97F4A7C15) % 2**64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) % 2**64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) % 2**64
    return z ^ (z >> 31)


SEEDS = [0, 1, 2, 42, 12345, 2**31 - 1, 2**32, 2**62 + 7, M - 1, 2**63 - 1]


def test_mix64_known_value_of_zero() -> None:
    # The first output of the published splitmix64 generator seeded with 0.
    assert mix64(0) & MASK == 0xE220A8397B1DCDAF


@pytest.mark.parametrize("x", SEEDS)
def test_mix64_matches_bigint(x: int) -> None:
    got = mix64(x)
    assert -(2**63) <= got < 2**63, "result must be the signed int64 view"
    assert got & MASK == bigint_splitmix(x)


def test_mix64_array_agrees_with_scalar() -> None:
    arr = np.array(SEEDS, dtype=np.int64)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an overflow warning would fail the test
        out = mix64(arr)
    assert out.dtype == np.int64
    assert [int(v) for v in out] == [mix64(x) for x in SEEDS]


def test_uniform_matches_bigint_and_ranges() -> None:
    for x in SEEDS:
        top = bigint_splitmix(x) >> 11
        assert uniform(x) == top * 2.0**-53
        assert uniform_open0(x) == (top + 1) * 2.0**-53
        assert 0.0 <= uniform(x) < 1.0
        assert 0.0 < uniform_open0(x) <= 1.0


def test_uniform_array_agrees_with_scalar() -> None:
    arr = np.arange(0, 4000, 4, dtype=np.int64) + (M - 2000)
    u, u0 = uniform(arr), uniform_open0(arr)
    assert u.dtype == np.float64 and u0.dtype == np.float64
    assert list(u) == [uniform(int(x)) for x in arr]
    assert list(u0) == [uniform_open0(int(x)) for x in arr]
    assert u.min() >= 0.0 and u.max() < 1.0 and u0.min() > 0.0 and u0.max() <= 1.0
    # Roughly uniform: the mean of 1000 draws is near 1/2.
    assert abs(u.mean() - 0.5) < 0.05


@pytest.mark.parametrize(
    "s,a,want",
    [(M - 1, 4, 3), (M - 4, 4, 0), (M - 5, 4, M - 1), (0, 0, 0), (5, M - 1, 4), (M - 1, M - 1, M - 2), (10, 16, 26)],
)
def test_add_mod_scalar(s: int, a: int, want: int) -> None:
    assert add_mod(s, a) == want == (s + a) % M


def test_add_mod_array_no_overflow() -> None:
    s = np.array([M - 1, M - 4, M - 5, 0, 5, M - 1, 10, M - 100], dtype=np.int64)
    a = np.array([4, 4, 4, 0, M - 1, M - 1, 16, 64], dtype=np.int64)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = add_mod(s, a)
    assert out.dtype == np.int64
    assert [int(v) for v in out] == [(int(x) + int(y)) % M for x, y in zip(s, a)]
    assert (out >= 0).all() and (out < M).all()


def test_add_mod_array_with_scalar_increment() -> None:
    s = np.array([M - 1, M - 17, 3], dtype=np.int64)
    assert [int(v) for v in add_mod(s, 16)] == [15, M - 1, 19]
