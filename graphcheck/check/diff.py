"""Compare step results: which fields of which request diverged, and how.

``diff_steps(expected, actual, pair)`` compares two StepResults of the same step
field by field and returns Divergence records. Eager vs graph is compared bit
for bit. Against the reference, a mismatch on a request whose reference
decision was ambiguous (a float within AMBIGUITY_EPS of a sampling boundary)
is marked ``ambiguous``: it is reported apart and never fails a run, and the
request is left out of later comparisons (its trajectories may legitimately
differ from there on).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from graphcheck.check.jsonvalues import ValueCodec
from graphcheck.step_result import RequestStep, StepResult

KINDS = ("address", "shape", "state", "seed", "token", "value", "memory", "crash", "capture", "hang")

# RequestStep field -> (divergence kind, engine tensor it lives in)
_FIELDS: tuple[tuple[str, str, str], ...] = (
    ("accept_tokens", "token", "accept_tokens"),
    ("draft_tokens", "token", "draft_tokens"),
    ("stopped", "token", "stop_flags"),
    ("infer_seed", "seed", "infer_seed"),
    ("step_idx", "value", "step_idx"),
    ("seq_len", "value", "seq_lens_decoder"),
)


@dataclass(frozen=True)
class Divergence:
    """One disagreement: ``actual`` differs from ``expected`` in ``pair``."""

    kind: str
    step: int
    tensor: str
    pair: str  # e.g. "eager vs graph", "reference vs graph"
    expected: Any
    actual: Any
    request_id: str | None = None
    slot: int | None = None
    detail: str = ""
    ambiguous: bool = False

    def headline(self) -> str:
        where = f" request {self.request_id}" if self.request_id else ""
        where += f" slot {self.slot}" if self.slot is not None else ""
        return (
            f"step {self.step}: {self.kind} divergence in {self.tensor}{where} ({self.pair}): "
            f"expected {self.expected!r}, got {self.actual!r}"
        )

    def to_dict(self) -> dict[str, Any]:
        """Every field as JSON types, ``expected`` and ``actual`` exactly (``graphcheck.check.jsonvalues``)."""
        return _CODEC.fields(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Divergence:
        return _CODEC.rebuild(cls, data)


_CODEC = ValueCodec()


@dataclass
class DiffState:
    """Requests excluded from further reference comparison after an ambiguous row."""

    tainted: set[str] = field(default_factory=set)


def _field_divergences(
    exp: RequestStep, act: RequestStep, step: int, pair: str, ambiguous: bool, slots: Mapping[str, int]
) -> list[Divergence]:
    found = []
    for name, kind, tensor in _FIELDS:
        want, got = getattr(exp, name), getattr(act, name)
        if want != got:
            found.append(
                Divergence(
                    kind, step, tensor, pair, want, got, exp.request_id, slots.get(exp.request_id), ambiguous=ambiguous
                )
            )
    return found


def diff_steps(
    expected: StepResult,
    actual: StepResult,
    pair: str,
    *,
    state: DiffState | None = None,
    slots: Mapping[str, int] | None = None,
) -> list[Divergence]:
    """Divergences of ``actual`` from ``expected`` at one step.

    With a ``state``, ambiguity in ``expected`` (the reference) is honoured:
    mismatches on ambiguous requests are marked so, and those requests are not
    compared again.
    """
    slots = slots or {}
    exp_by, act_by = expected.by_id(), actual.by_id()
    step = expected.step
    found: list[Divergence] = []
    skip = state.tainted if state else set()
    ran_exp = sorted(set(exp_by) - skip)
    ran_act = sorted(set(act_by) - skip)
    if ran_exp != ran_act:
        found.append(Divergence("value", step, "running_requests", pair, ran_exp, ran_act))
    for rid in ran_exp:
        if rid not in act_by:
            continue
        ambiguous = bool(state is not None and exp_by[rid].ambiguous)
        diffs = _field_divergences(exp_by[rid], act_by[rid], step, pair, ambiguous, slots)
        if diffs and ambiguous and state is not None:
            state.tainted.add(rid)
        found.extend(diffs)
    return found


#: Within one step, the cause comes before its consequences: a stale address or a wrong
#: bucket explains the token and value mismatches it produces in the same step, and a buffer
#: whose state already differs (``state``) explains the seeds and tokens read from it.
_CAUSE_ORDER = {
    kind: i
    for i, kind in enumerate(
        ("hang", "capture", "crash", "address", "shape", "state", "seed", "memory", "token", "value")
    )
}


def failing(divergences: Iterable[Divergence]) -> list[Divergence]:
    """The divergences that fail a run (everything not ambiguous): by step, causes first."""
    return sorted((d for d in divergences if not d.ambiguous), key=lambda d: (d.step, _CAUSE_ORDER.get(d.kind, 99)))
