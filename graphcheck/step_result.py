"""Step results: what the reference and every engine report after a decode step.

``StepResult`` holds one ``RequestStep`` per request that ran in the step; the
lockstep compares them between the reference and both engines. A leaf: it
imports only the standard library, so that ``reference/`` and ``backends/``
share it with the harness (the scenario format is ``graphcheck.scenario``).
"""

from __future__ import annotations

from dataclasses import dataclass

#: Float decisions closer than this to their threshold are ambiguous across libraries.
AMBIGUITY_EPS = 1e-9


@dataclass(frozen=True)
class RequestStep:
    """One request's outcome of one step (only requests that ran in the step appear).

    ``seq_len`` counts positions that hold target KV (committed length - 1);
    ``draft_tokens`` are the proposals for the next step (empty when the drafter
    skipped or in NAIVE mode); ``ambiguous`` is set by the reference only, when a
    sampling decision sat within AMBIGUITY_EPS of a float boundary.
    """

    request_id: str
    accept_tokens: tuple[int, ...]
    draft_tokens: tuple[int, ...]
    infer_seed: int
    step_idx: int
    seq_len: int
    stopped: bool
    ambiguous: bool = False

    @property
    def accept_num(self) -> int:
        return len(self.accept_tokens)


@dataclass(frozen=True)
class StepResult:
    """All requests that ran in step ``step``, ordered by request id."""

    step: int
    requests: tuple[RequestStep, ...]

    def by_id(self) -> dict[str, RequestStep]:
        return {r.request_id: r for r in self.requests}


__all__ = ["AMBIGUITY_EPS", "RequestStep", "StepResult"]
