"""What the adapters shipped with graphcheck report about their graph runner and sizes, for engines with a
packed layout (no slots): ``graphcheck.adapter.RunnerInfo`` and ``SlotCapacity``."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Runner:
    name: str


@dataclass(frozen=True)
class Sizes:
    """Packed layout: no slots; ``tokens`` bounds the padded tokens of a step."""

    slots: int
    tokens: int


__all__ = ["Runner", "Sizes"]
