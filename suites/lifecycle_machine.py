"""A Hypothesis state machine that grows a scenario one step at a time, in lockstep.

``initialize`` draws an EngineConfig and builds a Lockstep on an empty
scenario. Rules add events for the current step t (``join``, ``abort``,
``reasoning``, ``force_accept``) or run it (``step``: the scenario grows to
t + 1 steps, the Lockstep gets it and runs step t; ``count`` > 1 repeats that for
the following steps, with no new events in between). The invariant: no failing
divergence so far. ``machine.scenario`` is valid after every rule, so a
failure is one ``machine.scenario.to_json()`` away from a replayable file
(``replayable()`` trims it to the steps that ran).

Subclass and set ``engine_factory`` / ``faults`` to run the machine against
an engine with an injected bug.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from graphcheck.adapter import EngineFactory
from graphcheck.check.threads import single_threaded
from graphcheck.scenario import AcceptOverride, EngineConfig, ReasoningChange, Scenario, validate
from graphcheck.strategies import RequestOptions, engine_configs, request_specs
from graphcheck.suites.properties import backend_from_env, checker

#: Requests waiting or running at once, beyond which ``join`` is not offered (keeps runs cheap).
MAX_LIVE = 6


class LifecycleMachine(RuleBasedStateMachine):
    engine_factory: EngineFactory | None = None
    faults: Sequence[str] = ()
    configs = engine_configs()

    def __init__(self) -> None:
        super().__init__()
        self.scenario: Scenario | None = None
        self.backend: Any = None
        self.lockstep: Any = None
        self.checker: Any = None
        self.t = 0  # the step the next ``step`` runs; events added now happen at step t
        self.live: list[str] = []  # joined, not aborted, not finished (in arrival order)
        self.joined = 0

    # ------------------------------------------------------------------ set-up
    @initialize(config=configs)
    def start(self, config: EngineConfig) -> None:
        self.scenario = validate(Scenario(config, (), (), num_steps=1, name="lifecycle-machine"))
        self.backend = backend_from_env()
        self.checker = checker(type(self).engine_factory, self.faults, self.backend)
        with single_threaded(self.backend):
            self.lockstep = self.checker.build(self.scenario)

    # ------------------------------------------------------------------ events for step t
    def _update(self, **changes: Any) -> None:
        self.scenario = validate(dataclasses.replace(self.scenario, **changes))

    def _replace_request(self, request_id: str, **changes: Any) -> None:
        requests = tuple(
            dataclasses.replace(r, **changes) if r.request_id == request_id else r for r in self.scenario.requests
        )
        self._update(requests=requests)

    def _started(self) -> list[str]:
        """Live requests that arrived before step t (an abort must come after the arrival)."""
        return [rid for rid in self.live if self.scenario.request(rid).arrival_step < self.t]

    @precondition(lambda self: len(self.live) < MAX_LIVE)
    @rule(data=st.data())
    def join(self, data: st.DataObject) -> None:
        rid = f"m{self.joined}"
        spec = data.draw(
            request_specs(
                self.scenario.config,
                self.t + 1,
                rid,
                arrival=self.t,
                options=RequestOptions(aborts=False, reasoning=False),
            ),
            label=rid,
        )
        self.joined += 1
        self.live.append(rid)
        self._update(requests=self.scenario.requests + (spec,))

    @precondition(lambda self: bool(self._started()))
    @rule(data=st.data())
    def abort(self, data: st.DataObject) -> None:
        rid = data.draw(st.sampled_from(self._started()), label="abort")
        self.live.remove(rid)
        self._replace_request(rid, abort_step=self.t)

    @precondition(lambda self: bool(self.live))
    @rule(data=st.data(), status=st.sampled_from((1, 0, 2, 3)))
    def reasoning(self, data: st.DataObject, status: int) -> None:
        rid = data.draw(st.sampled_from(self.live), label="reasoning")
        spec = self.scenario.request(rid)
        self._replace_request(rid, reasoning=spec.reasoning + (ReasoningChange(self.t, status),))

    @precondition(lambda self: bool(self.live))
    @rule(data=st.data())
    def force_accept(self, data: st.DataObject) -> None:
        rid = data.draw(st.sampled_from(self.live), label="force_accept")
        accepted = data.draw(st.integers(0, self.scenario.config.num_speculative_tokens), label="accepted")
        kept = tuple(a for a in self.scenario.accepts if (a.step, a.request_id) != (self.t, rid))
        self._update(accepts=kept + (AcceptOverride(self.t, rid, accepted),))

    # ------------------------------------------------------------------ running step t
    @precondition(lambda self: self.joined > 0)  # no idle steps before the first request
    @rule(count=st.integers(1, 3))
    def step(self, count: int) -> None:
        """Run steps t .. t + count - 1 (no new events between them); stop at a failure."""
        for _ in range(count):
            t = self.t
            self.lockstep.scenario = self.scenario
            with single_threaded(self.backend):
                ok = self.lockstep.step(t)
            self.t = t + 1
            self._update(num_steps=self.t + 1)
            records = self.lockstep.outcome.records["reference"]
            if records and records[-1].step == t:
                finished = {r.request_id for r in records[-1].result.requests if r.stopped}
                self.live = [rid for rid in self.live if rid not in finished]
            if not ok:
                return

    @invariant()
    def no_failing_divergence(self) -> None:
        if self.lockstep is not None:
            outcome = self.lockstep.outcome
            assert outcome.first is None, self.checker.failure_report(
                dataclasses.replace(outcome, scenario=self.replayable())
            )

    # ------------------------------------------------------------------ replay
    def replayable(self) -> Scenario:
        """The scenario trimmed to the steps run so far (at least one)."""
        n = max(1, self.t)
        requests = tuple(
            dataclasses.replace(
                r,
                abort_step=r.abort_step if r.abort_step is not None and r.abort_step <= n else None,
                reasoning=tuple(c for c in r.reasoning if c.step <= n),
            )
            for r in self.scenario.requests
            if r.arrival_step < n
        )
        kept = {r.request_id for r in requests}
        accepts = tuple(a for a in self.scenario.accepts if a.step < n and a.request_id in kept)
        return validate(dataclasses.replace(self.scenario, requests=requests, accepts=accepts, num_steps=n))


__all__ = ["LifecycleMachine", "MAX_LIVE"]
