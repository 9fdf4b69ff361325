"""Counter-based random numbers and seed arithmetic (README §2, §3).

Every sampled row draws exactly one number from its own seed, so the reference
keeps no generator state: a row's random number is a pure function of its seed.
Each function accepts a Python int (the per-row path the decoder uses) or an
int64 NumPy array (the shape an engine computes in), and both paths give the
same bits. Arrays use wrapping int64 arithmetic, the way a GPU kernel would.
"""

from __future__ import annotations

from typing import Union, overload

import numpy as np

from graphcheck.scenario import SEED_MODULUS

IntOrArray = Union[int, np.ndarray]

_MASK64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15
_MUL1 = 0xBF58476D1CE4E5B9
_MUL2 = 0x94D049BB133111EB
_TWO_POW_M53 = 2.0**-53


def _as_int64(value: int) -> np.int64:
    """A 64-bit pattern as the int64 scalar with the same bits (two's complement)."""
    value &= _MASK64
    return np.int64(value - (1 << 64) if value >= 1 << 63 else value)


def _to_signed(value: int) -> int:
    value &= _MASK64
    return value - (1 << 64) if value >= 1 << 63 else value


def _lsr(z: np.ndarray, n: int) -> np.ndarray:
    """Logical right shift of int64 bits: arithmetic shift, then clear the sign-fill."""
    return (z >> n) & np.int64((1 << (64 - n)) - 1)


def _mix64_int(x: int) -> int:
    z = (x + _GOLDEN) & _MASK64
    z = ((z ^ (z >> 30)) * _MUL1) & _MASK64
    z = ((z ^ (z >> 27)) * _MUL2) & _MASK64
    return _to_signed(z ^ (z >> 31))


def _mix64_array(x: np.ndarray) -> np.ndarray:
    z = np.asarray(x, dtype=np.int64)
    with np.errstate(over="ignore"):
        z = z + _as_int64(_GOLDEN)
        z = (z ^ _lsr(z, 30)) * _as_int64(_MUL1)
        z = (z ^ _lsr(z, 27)) * _as_int64(_MUL2)
        return z ^ _lsr(z, 31)


@overload
def mix64(x: int) -> int: ...
@overload
def mix64(x: np.ndarray) -> np.ndarray: ...
def mix64(x: IntOrArray) -> IntOrArray:
    """splitmix64 finaliser; the result is the int64 (signed) view of the 64 bits."""
    if isinstance(x, (int, np.integer)):
        return _mix64_int(int(x))
    return _mix64_array(x)


def _top53(x: IntOrArray) -> IntOrArray:
    """The top 53 bits of mix64(x), as a non-negative integer."""
    m = mix64(x)
    if isinstance(m, int):
        return (m & _MASK64) >> 11
    return _lsr(m, 11)


def uniform(seed: IntOrArray) -> float | np.ndarray:
    """A number in [0, 1): the top 53 bits of mix64(seed) times 2^-53 (exact in float64)."""
    top = _top53(seed)
    if isinstance(top, int):
        return top * _TWO_POW_M53
    return top.astype(np.float64) * _TWO_POW_M53


def uniform_open0(seed: IntOrArray) -> float | np.ndarray:
    """A number in (0, 1], like curand_uniform: (top 53 bits + 1) times 2^-53."""
    top = _top53(seed)
    if isinstance(top, int):
        return (top + 1) * _TWO_POW_M53
    return (top + 1).astype(np.float64) * _TWO_POW_M53


def add_mod(s: IntOrArray, a: IntOrArray) -> IntOrArray:
    """(s + a) mod M for 0 <= s, a < M, never forming s + a when it would reach M.

    The engine does this in int64, where s + a could overflow past 2^63 - 1; the
    subtraction form keeps every intermediate in range, and we use it for arrays
    so the reference exercises the same arithmetic.
    """
    m = SEED_MODULUS
    if isinstance(s, (int, np.integer)) and isinstance(a, (int, np.integer)):
        s, a = int(s), int(a)
        return s - (m - a) if s >= m - a else s + a
    s_arr = np.asarray(s, dtype=np.int64)
    room = np.int64(m) - np.asarray(a, dtype=np.int64)
    return np.where(s_arr >= room, s_arr - room, s_arr + (np.int64(m) - room))


__all__ = ["mix64", "uniform", "uniform_open0", "add_mod"]
