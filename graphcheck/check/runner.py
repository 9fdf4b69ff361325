"""A configured lockstep harness: one backend, one engine factory; scenarios in, outcomes out.

This is what the pytest plugin's fixtures hand out (``graphcheck_lockstep`` is
a :class:`LockstepRunner`, ``graphcheck_check`` its :meth:`~LockstepRunner.check`),
and it works the same without pytest::

    runner = LockstepRunner(resolve("cpu"), engine_factory=MyAdapter)
    outcome = runner(scenario)            # CheckOutcome
    runner.check(scenario)                # raises ScenarioDiverged unless clean

A failing check's message is meant to be read in a test log: the first
failing divergence, what else failed, and how to replay the scenario.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Sequence

from graphcheck.adapter import EngineFactory
from graphcheck.check.lockstep import Lockstep
from graphcheck.check.pool import EnginePool
from graphcheck.check.records import CheckOutcome, replay_command_line
from graphcheck.check.setup import CheckSetup
from graphcheck.check.threads import single_threaded
from graphcheck.errors import DivergenceError
from graphcheck.scenario import Scenario

if TYPE_CHECKING:
    from graphcheck.backends.devices import Device


class ScenarioDiverged(DivergenceError, AssertionError):
    """A lockstep run found a failing divergence; ``outcome`` is the whole run.

    An AssertionError, so Hypothesis treats it as a failing example and shrinks it (and
    pytest reports a failed test, not an error); a ``graphcheck.errors.DivergenceError``
    like every exception graphcheck raises on purpose.
    The message is built when it is first shown: only then is the scenario re-run
    with a kernel trace to say where it diverged (not for every example a shrink
    tries).
    """

    def __init__(self, message: str | Callable[[], str], outcome: CheckOutcome):
        super().__init__("graphcheck: scenario diverged")
        self._message = message
        self.outcome = outcome

    def __str__(self) -> str:
        if callable(self._message):
            self._message = self._message()
        return self._message


@dataclass(frozen=True)
class LockstepRunner:
    """Runs scenarios in lockstep on ``backend`` with engines from ``engine_factory``.

    ``engine_factory`` None means the built-in engine (``graphcheck.backends.engine.Engine``).
    ``pool``: reuse the engines of earlier scenarios of the same configuration (``graphcheck.check.pool``).
    """

    backend: Device
    engine_factory: EngineFactory | None = None
    setup: CheckSetup = CheckSetup()  # the model, contract and oracle of every scenario
    pool: EnginePool | None = field(default=None, compare=False)  # engines kept between scenarios (check.pool)

    def __repr__(self) -> str:  # short: Hypothesis prints it in every falsifying example
        factory = self.engine_factory
        name = "built-in engine" if factory is None else getattr(factory, "__qualname__", repr(factory))
        return f"LockstepRunner({self.backend.name}, {name})"

    def build(self, scenario: Scenario, *, faults: Sequence[str] = ()) -> Lockstep:
        """The Lockstep of ``scenario``, engines built and graphs captured, no step run yet."""
        scenario = self.setup.apply(scenario)
        return Lockstep(
            scenario,
            self.backend,
            faults=faults,
            engine_factory=self.engine_factory,
            oracle=self.setup.oracle,
            pool=self.pool,
        )

    def __call__(self, scenario: Scenario, *, faults: Sequence[str] = ()) -> CheckOutcome:
        """Run ``scenario`` to its end or its first failing divergence."""
        with single_threaded(self.backend):
            return self.build(scenario, faults=faults).run()

    def check(self, scenario: Scenario, *, faults: Sequence[str] = ()) -> CheckOutcome:
        """Run ``scenario``; raise :class:`ScenarioDiverged` (with :func:`failure_report`) unless it is clean."""
        __tracebackhide__ = True  # pytest: the failure is the message, not this frame
        outcome = self(scenario, faults=faults)
        if not outcome.clean:
            raise ScenarioDiverged(lambda: self._report(outcome, faults), outcome)
        return outcome

    def _report(self, outcome: CheckOutcome, faults: Sequence[str]) -> str:
        from graphcheck.check.localise import localise_outcome

        if outcome.localisation is None and outcome.device_error is None:
            with single_threaded(self.backend):
                outcome.localisation = localise_outcome(
                    outcome, self.backend, faults=faults, engine_factory=self.engine_factory
                )
        return failure_report(outcome, self.backend, self.engine_factory)


def replay_command(backend: Device, faults: Sequence[str], path: str = "scenario.json") -> str:
    """The ``graphcheck replay`` command line that re-runs a saved scenario on the same backend."""
    emulate = backend.emulated and backend.name != "cpu"  # cpu is always emulated; the flag is for cuda/npu/xpu
    return replay_command_line(path, backend.name, emulate=emulate, faults=faults)


def _is_builtin(engine_factory: EngineFactory | None) -> bool:
    if engine_factory is None:
        return True
    from graphcheck.backends.engine import Engine

    return engine_factory is Engine


def failure_report(outcome: CheckOutcome, backend: Device, engine_factory: EngineFactory | None = None) -> str:
    """A failing outcome for a test log: headline, its detail, the other failures, a replay hint, the scenario."""
    first = outcome.first
    if first is None:
        return f"scenario {outcome.scenario.name or '(unnamed)'}: no failing divergence"
    faults = f", faults: {', '.join(outcome.faults)}" if outcome.faults else ""
    lines = [
        f"graphcheck: {first.headline()}",
        f"  on {backend.name} ({outcome.runner} graph runner){faults}, after {outcome.steps_run} step(s)",
    ]
    if first.detail:
        lines += ["  " + line for line in first.detail.rstrip().splitlines()]
    if outcome.localisation is not None:
        lines.append(f"  where: {outcome.localisation.headline()}")
    rest = Counter(d.kind for d in outcome.failures[1:])
    if rest:
        lines.append("  also failing: " + ", ".join(f"{kind} x{n}" for kind, n in sorted(rest.items())))
    lines.append(f"replay: save the scenario below as scenario.json, then `{replay_command(backend, outcome.faults)}`")
    if not _is_builtin(engine_factory):
        lines.append(
            "  (the command replays the built-in engine; replay on yours with "
            "graphcheck_lockstep(Scenario.from_json(text)) or LockstepRunner(backend, your_factory))"
        )
    lines.append(outcome.scenario.to_json(indent=None))
    return "\n".join(lines)


__all__ = ["LockstepRunner", "ScenarioDiverged", "failure_report", "replay_command"]
