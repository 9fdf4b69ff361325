"""What an engine's own model produced in a step: the input of the model-agnostic oracle.

An engine that runs a model graphcheck cannot compute (a real transformer in
bfloat16, say) reports, after every step and for every request that ran, the
target's scores at each output row it verified, and how close each draft
proposal was to a tie. The oracle (``graphcheck.reference.oracle``) recomputes
everything downstream of the model from these and the scenario alone; the
checker uses the scores to tell a near tie (two engines legitimately pick
different tokens) from a real divergence.

Scores: ``softmax(scores / temperature)`` are the row's probabilities, so an
engine reports its logits as they enter sampling, before temperature and
before any contract penalty (the oracle applies those). The built-in integer
model reports ``logits / 8``.

A leaf: standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ModelStep:
    """One request's model outputs in one step.

    ``scores``: array-like ``[rows, vocab]`` of floats, one row per output row
    of the step in order: a prefill has 1 row (the last prompt position), a
    decode step ``1 + len(verified drafts)``, a NAIVE step 1.
    ``draft_margins``: for each draft token proposed this step (the request's
    ``draft_tokens``), the draft model's best score minus its second best: how
    far that proposal was from a tie; ``draft_runners_up``: each proposal's
    second-best token (a near tie eager vs graph swaps the best and the runner-up).
    """

    request_id: str
    scores: Any
    draft_margins: tuple[float, ...] = ()
    draft_runners_up: tuple[int, ...] = ()


__all__ = ["ModelStep"]
