"""Bucket policies: how an engine pads a step's real sizes up to the shape of a captured graph.

A graph is captured for fixed sizes, so an engine pads each step's real sizes
(requests, query tokens, cache tokens read, ...) up to one of a finite set of
shapes and replays the graph captured for that shape. The built-in engine's
policy is one dimension ("the smallest capture size >= R, none on prefill");
a real engine's is several, per code path. An engine declares its policy
(``EngineCapabilities.buckets``) and reports, every step, the path it took
and the real sizes (``StepReport.real_sizes``); graphcheck then recomputes the
padded sizes itself (:meth:`BucketPolicy.padded`) and compares them with the
sizes the engine actually replayed (``StepReport.padded_sizes``), and bounds
the number of distinct graphs the policy allows (:meth:`BucketPolicy.max_graphs`).

A rule's ``step``, ``cap`` and ``floor`` are integers, or names looked up, in
this order, in the scenario's ``engine_options`` and in the engine's reported
``limits`` (``StepReport.limits``: sizes the engine derives at construction,
like its token budget).

A leaf: standard library and ``graphcheck.errors`` only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, Mapping

from graphcheck.errors import EngineError

PadKind = Literal["exact", "interval", "pow2", "zero", "sizes"]
PAD_KINDS = ("exact", "interval", "pow2", "zero", "sizes")
Value = int | str


class PolicyError(EngineError, ValueError):
    """A policy names a value neither the scenario's options nor the engine's limits hold."""


def _resolve(value: Value | None, values: Mapping[str, int]) -> int | None:
    if value is None or isinstance(value, int):
        return value
    if value not in values:
        raise PolicyError(f"bucket policy: no engine option or limit named {value!r} (have {', '.join(values)})")
    return values[value]


@dataclass(frozen=True)
class Pad:
    """How one real size is padded.

    ``exact``: not at all; ``interval``: the smallest positive multiple of
    ``step`` that is >= the size; ``pow2``: the smallest power of two >= the size
    and >= ``floor`` (and >= 1); ``zero``: always 0 (the dimension is unused on
    this path); ``sizes``: the smallest of a set of capture sizes that is >= the
    size (``step`` names the set, a bit mask: bit ``s`` set for size ``s``, see
    :func:`size_mask`), and the size itself above all of them (no graph holds it:
    the step runs eagerly). Every kind but ``zero`` is then capped at ``cap`` when one is given.
    """

    kind: PadKind
    step: Value = 1
    cap: Value | None = None
    floor: Value = 0
    #: A dimension only some configurations have (a second attention kind): not checked where the
    #: step reports no real size for it.
    optional: bool = False

    def __post_init__(self) -> None:
        if self.kind not in PAD_KINDS:
            raise ValueError(f"Pad.kind: one of {', '.join(PAD_KINDS)}, got {self.kind!r}")

    def apply(self, real: int, values: Mapping[str, int]) -> int:
        """The padded size of ``real``."""
        if self.kind == "zero":
            return 0
        cap = _resolve(self.cap, values)
        if self.kind == "exact":
            padded = real
        elif self.kind == "sizes":
            fitting = [size for size in sizes_of(_resolve(self.step, values) or 0) if size >= real]
            padded = fitting[0] if fitting else real
        elif self.kind == "interval":
            step = max(1, _resolve(self.step, values) or 1)
            padded = max(1, math.ceil(real / step)) * step
        else:
            floor = _resolve(self.floor, values) or 0
            padded = 1 << max(0, max(real, floor, 1) - 1).bit_length()
        return padded if cap is None else min(padded, cap)

    def choices(self, values: Mapping[str, int]) -> int | None:
        """How many padded values this rule can give (None: unbounded, an ``exact`` rule without a cap)."""
        if self.kind == "zero":
            return 1
        cap = _resolve(self.cap, values)
        if cap is None and self.kind != "sizes":
            return None
        if self.kind == "sizes":
            return len(sizes_of(_resolve(self.step, values) or 0))
        if self.kind == "exact":
            return cap + 1
        if self.kind == "interval":
            return math.ceil(cap / max(1, _resolve(self.step, values) or 1)) + 1
        return max(1, cap).bit_length() + 1


def size_mask(sizes: tuple[int, ...] | list[int]) -> int:
    """A set of capture sizes as one integer (bit ``s`` set for size ``s``), as a ``sizes`` rule reads it."""
    mask = 0
    for size in sizes:
        mask |= 1 << int(size)
    return mask


def sizes_of(mask: int) -> list[int]:
    """The sizes of a :func:`size_mask`, ascending."""
    return [bit for bit in range(mask.bit_length()) if mask >> bit & 1]


@dataclass(frozen=True)
class PathPolicy:
    """The padding of one code path (``name``, e.g. "varlen" or "decode"): one rule per dimension."""

    name: str
    dims: tuple[tuple[str, Pad], ...]


@dataclass(frozen=True)
class BucketPolicy:
    """An engine's padding policy: one :class:`PathPolicy` per code path that replays graphs.

    ``keyed``: the engine keys its graphs by the padded sizes themselves (in the
    path's dimension order; one dimension: the size alone). graphcheck then also
    reports a step that ran eagerly although a graph of its padded key had been
    captured: its tokens are right, but the graph that covers it was wasted.
    """

    paths: tuple[PathPolicy, ...]
    keyed: bool = False

    def key_of(self, padded: Mapping[str, int]) -> int | tuple[int, ...]:
        """The graph key of ``padded`` sizes when ``keyed``: the one size, or the sizes in order."""
        values = tuple(padded.values())
        return values[0] if len(values) == 1 else values

    def path(self, name: str | None) -> PathPolicy:
        """The policy of path ``name``; a KeyError for a name it has none of (None: a step that names no path)."""
        for p in self.paths:
            if p.name == name:
                return p
        raise KeyError(f"bucket policy has no path {name!r} (have {', '.join(p.name for p in self.paths)})")

    def padded(self, path: str | None, real: Mapping[str, int], values: Mapping[str, int]) -> dict[str, int]:
        """The sizes a step on ``path`` with ``real`` sizes must replay (one per dimension of the path)."""
        rules = [(dim, rule) for dim, rule in self.path(path).dims if dim in real or not rule.optional]
        missing = [dim for dim, _ in rules if dim not in real]
        if missing:
            raise PolicyError(f"bucket policy: the step reports no real size for {', '.join(missing)} on path {path!r}")
        return {dim: rule.apply(real[dim], values) for dim, rule in rules}

    def max_graphs(self, values: Mapping[str, int]) -> int | None:
        """The most distinct graphs this policy can ask for (None: unbounded)."""
        total = 0
        for p in self.paths:
            count = 1
            for _, rule in p.dims:
                n = rule.choices(values)
                if n is None:
                    return None
                count *= n
            total += count
        return total


__all__ = ["BucketPolicy", "PAD_KINDS", "Pad", "PathPolicy", "PolicyError", "size_mask", "sizes_of"]
