"""Counter-based random numbers in integer tensor ops (reference/README.md §2, §3).

splitmix64 in wrapping int64 arithmetic: logical right shifts are an arithmetic
shift plus a mask, multiplications wrap modulo 2**64 (two's complement). Every
output row has its own seed and draws one number, so there is no generator state.
Plain helpers, called from inside kernels.

Two row-seed arithmetics, one per contract (``graphcheck.contract`` ``row_seed``):
:func:`add_mod` (``modular``, always in [0, M)) and :func:`add_int64_rem`
(``int64_wrap``: the int64 sum wraps and C's remainder keeps its sign, so it
can be negative). A negative seed hashes its two's complement bits, exactly as
``reference.rng`` does.
"""

from __future__ import annotations

from graphcheck.scenario import SEED_MODULUS

_MASK64 = (1 << 64) - 1


def _signed(value: int) -> int:
    """The int64 with the same 64 bits as the unsigned ``value``."""
    value &= _MASK64
    return value - (1 << 64) if value >= 1 << 63 else value


GOLDEN = _signed(0x9E3779B97F4A7C15)
MIX1 = _signed(0xBF58476D1CE4E5B9)
MIX2 = _signed(0x94D049BB133111EB)
TWO_POW_MINUS_53 = 2.0**-53


def mix64(xp, x):
    """splitmix64 finaliser of an int64 tensor (bit pattern as the reference's uint64)."""
    z = x + xp.const_like(x, GOLDEN)
    z = xp.bitwise_xor(z, xp.shift_right_logical(z, 30)) * xp.const_like(x, MIX1)
    z = xp.bitwise_xor(z, xp.shift_right_logical(z, 27)) * xp.const_like(x, MIX2)
    return xp.bitwise_xor(z, xp.shift_right_logical(z, 31))


def uniform(xp, seed):
    """``(mix64(seed) >>> 11) * 2**-53`` in [0, 1), float64."""
    top = xp.shift_right_logical(mix64(xp, seed), 11)
    return xp.astype(top, xp.float64) * TWO_POW_MINUS_53


def uniform_open0(xp, seed):
    """``((mix64(seed) >>> 11) + 1) * 2**-53`` in (0, 1], float64."""
    top = xp.shift_right_logical(mix64(xp, seed), 11) + 1
    return xp.astype(top, xp.float64) * TWO_POW_MINUS_53


def add_mod(xp, s, a):
    """``(s + a) mod SEED_MODULUS`` for 0 <= s, a < M without int64 overflow in the kept branch."""
    room = xp.const_like(s, SEED_MODULUS) - a
    return xp.where(xp.ge(s, room), s - room, s + a)


def add_int64_rem(xp, s, a):
    """``(s + a) % SEED_MODULUS`` as int64 C code computes it: the sum wraps (two's complement),
    the remainder takes the sign of the dividend (``reference.rules.row_seed``, ``int64_wrap``).

    Every int64 ``x`` has ``|x| <= 2**63 < 2 M``, so C's ``x % M`` is ``x - M`` when ``x >= M``,
    ``x + M`` when ``x <= -M``, and ``x`` otherwise: comparisons and one add, no division.
    """
    total = s + a
    modulus = xp.const_like(total, SEED_MODULUS)
    negated = xp.const_like(total, -SEED_MODULUS)
    return xp.where(xp.ge(total, modulus), total - modulus, xp.where(xp.le(total, negated), total + modulus, total))
