"""A third path for an engine's own model: every emitted token against a full recompute.

The lockstep compares eager with graph, so a bug both share (paging, cache
reuse, a chunked-prefill offset) is invisible to it. An engine that can also
run its model the plain way (``FullRecompute.recompute_scores``: the whole
sequence, one request, no cache, no batching) gets this check: after every
step, for each token the graph engine produced, the scores the engine
reported for it (its model report) must equal the recompute's within the float
tolerance, and the token must be the recompute's best unless the two best are
within the tolerance (a near tie, ambiguous). The recompute always
follows the engine's own sequence, so checking goes on after a near tie.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from graphcheck.check.diff import Divergence
from graphcheck.check.numeric import Tolerance
from graphcheck.step_result import StepResult


class RecomputeCheck:
    """Follows one engine's sequences and checks each new token against ``engine.recompute_scores``."""

    def __init__(self, engine: Any, prompts: Mapping[str, tuple[int, ...]], tolerance: Tolerance, source: str):
        self.engine = engine
        self.tolerance = tolerance
        self.pair = f"full recompute vs {source}"
        self._sequences = {rid: list(p) for rid, p in prompts.items()}

    def check(self, result: StepResult, reports: Mapping[str, Any], slots: Mapping[str, int]) -> list[Divergence]:
        found: list[Divergence] = []
        for req in result.requests:
            if not req.accept_tokens:
                continue
            rid, sequence = req.request_id, self._sequences.setdefault(req.request_id, [])
            found += self._token(result.step, rid, sequence, req.accept_tokens[0], reports.get(rid), slots.get(rid))
            sequence.extend(req.accept_tokens)
        return found

    def _token(
        self, step: int, rid: str, sequence: list[int], token: int, report: Any, slot: int | None
    ) -> list[Divergence]:
        want = np.asarray(self.engine.recompute_scores(tuple(sequence)), dtype=np.float64).reshape(-1)
        found = []
        if report is not None:
            got = np.asarray(report.scores, dtype=np.float64)[0].reshape(-1)
            close = self.tolerance.close(want, got) if got.shape == want.shape else np.zeros(1, dtype=bool)
            if not close.all():
                worst = int(np.argmax(np.abs(want - got))) if got.shape == want.shape else 0
                found.append(
                    Divergence(
                        "value",
                        step,
                        "scores",
                        self.pair,
                        float(want[worst]),
                        float(got[worst]) if got.shape == want.shape else tuple(got.shape),
                        rid,
                        slot,
                        detail=f"token {token}'s scores: the engine's differ from a full recompute of the "
                        f"{len(sequence)} tokens before it beyond the {self.tolerance.dtype} tolerance "
                        f"(largest at vocabulary id {worst})",
                    )
                )
        best = int(np.argmax(want))
        if token != best:
            gap = float(want[best] - want[token]) if 0 <= token < want.size else float("inf")
            tie = gap <= self.tolerance.bound(want)  # the engine's own sequence goes on: still checkable
            found.append(
                Divergence(
                    "token",
                    step,
                    "accept_tokens",
                    self.pair,
                    best,
                    token,
                    rid,
                    slot,
                    detail=f"a full recompute's best token is {best}, {gap:.3g} above the engine's",
                    ambiguous=tie,
                )
            )
        return found


__all__ = ["RecomputeCheck"]
