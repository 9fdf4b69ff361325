"""Drive a decoder (the reference or an engine) through a scenario's script.

A decoder is anything with ``submit(spec)``, ``abort(request_id)`` and
``step(t, overrides) -> StepResult``. At the start of step ``t`` the driver
aborts the requests whose ``abort_step == t``, then submits those whose
``arrival_step == t`` (in script order), then runs the step with the accept
overrides scripted for ``t``. Admission into slots (FIFO, at most
``max_num_seqs`` running) and reasoning-status changes are the decoder's job:
both follow reference/README.md §5.1.
"""

from __future__ import annotations

from typing import Iterator, Mapping, Protocol

from graphcheck.scenario import RequestSpec, Scenario
from graphcheck.step_result import StepResult


class Decoder(Protocol):
    def submit(self, spec: RequestSpec) -> None: ...

    def abort(self, request_id: str) -> None: ...

    def step(self, t: int, overrides: Mapping[str, int]) -> StepResult: ...


def apply_events(decoder: Decoder, scenario: Scenario, t: int) -> None:
    """Apply the aborts and arrivals scripted for step ``t``."""
    for spec in scenario.requests:
        if spec.abort_step == t:
            decoder.abort(spec.request_id)
    for spec in scenario.requests:
        if spec.arrival_step == t:
            decoder.submit(spec)


def iter_steps(decoder: Decoder, scenario: Scenario) -> Iterator[StepResult]:
    """Yield the result of every step of the scenario, in order."""
    for t in range(scenario.num_steps):
        apply_events(decoder, scenario, t)
        yield decoder.step(t, scenario.accept_overrides_at(t))


def run_script(decoder: Decoder, scenario: Scenario) -> list[StepResult]:
    return list(iter_steps(decoder, scenario))
