"""The configured checker: the one way a scenario is run, for every engine.

A :class:`Checker` is a backend, an engine (``--engine``: the built-in one by
default), the model / contract / oracle setup, the injected faults and,
optionally, a pool of built engines. ``graphcheck run``, ``replay``,
``catalog``, the ``-j`` workers, the benchmarks, the pytest plugin and the
Python API all run scenarios through one::

    checker = Checker(resolve("cpu"), resolve_engine("my_pkg.adapter:MyEngine"))
    outcome = checker.run(scenario)             # CheckOutcome
    checker.check(scenario)                     # raises ScenarioDiverged unless clean
    print(checker.replay_command("scenario.json"))

Before a scenario runs it is *prepared*: the setup's model and contract are
stamped on it, and its config is fitted to what the engine declares it
supports (``graphcheck.capabilities``). A failing check's message is meant to
be read in a test log: the first failing divergence, where it began, what
else failed, and how to replay the scenario.
"""

from __future__ import annotations

import dataclasses
import functools
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, ContextManager, Sequence

from graphcheck.check.chain import history_line, history_lines, prepare_chain, run_chain
from graphcheck.check.engines import BUILTIN, EngineChoice, resolve_engine
from graphcheck.check.honoured import check_honoured
from graphcheck.check.lockstep import Lockstep
from graphcheck.check.pool import EnginePool
from graphcheck.check.records import CheckOutcome, Localisation, replay_command_line
from graphcheck.check.setup import CheckSetup
from graphcheck.check.threads import single_threaded
from graphcheck.check.timings import LockstepTimings
from graphcheck.check.watchdog import chosen_hang_limit
from graphcheck.errors import DivergenceError
from graphcheck.scenario import Scenario

if TYPE_CHECKING:
    from graphcheck.capture.devices import Device


@functools.cache
def builtin_engine() -> EngineChoice:
    """The built-in engine, resolved once."""
    return resolve_engine(BUILTIN)


class ScenarioDiverged(DivergenceError, AssertionError):
    """A check found a failing divergence; ``outcome`` is the whole run.

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
class Checker:
    """Runs scenarios in lockstep: ``engine`` on ``backend``, with ``setup`` and ``faults``.

    ``pool``: reuse the engines of earlier scenarios of the same configuration
    (``graphcheck.check.pool``); None builds a pair per scenario.
    """

    backend: Device
    engine: EngineChoice = field(default_factory=builtin_engine)
    setup: CheckSetup = CheckSetup()
    faults: tuple[str, ...] = ()
    pool: EnginePool | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "faults", tuple(self.faults))
        check_honoured(self.engine.spec, self.engine.capabilities, self.setup, self.backend)

    def __repr__(self) -> str:  # short: Hypothesis prints it in every falsifying example
        faults = f", faults={list(self.faults)}" if self.faults else ""
        return f"Checker({self.backend.name}, {self.engine.spec}{faults})"

    # -- variants ---------------------------------------------------------
    def with_faults(self, faults: Sequence[str]) -> Checker:
        return dataclasses.replace(self, faults=tuple(faults))

    def with_pool(self, pool: EnginePool | None) -> Checker:
        return dataclasses.replace(self, pool=pool)

    def _faults(self, faults: Sequence[str] | None) -> Checker:
        return self if faults is None else self.with_faults(faults)

    # -- scenarios ----------------------------------------------------------
    def prepare(self, scenario: Scenario) -> Scenario:
        """``scenario`` as it runs: the setup's model and contract, the config fitted to the engine; its
        history (``Scenario.history``) prepared alike, on the one config they all run on."""
        if scenario.history:
            return prepare_chain(self._prepare_one, scenario)
        return self._prepare_one(scenario)

    def _prepare_one(self, scenario: Scenario) -> Scenario:
        return self.engine.capabilities.fit(self.setup.apply(scenario))

    def strategy(self, strategy: Any) -> Any:
        """A scenario strategy whose draws are prepared (:meth:`prepare`), each with a draw of the
        engine's own options (``EngineCapabilities.options``) stamped on its config; an option an
        injected fault lives under (``Fault.options``) keeps that fault's value."""
        caps = self.engine.capabilities
        options = caps.options
        if options:
            from hypothesis import strategies as st

            pinned = caps.pinned_options(self.faults)
            drawn = st.tuples(
                *(st.just(pinned[o.name]) if o.name in pinned else st.sampled_from(o.choices) for o in options)
            )
            strategy = st.tuples(strategy, drawn).map(lambda pair: _with_options(pair[0], options, pair[1]))
        return strategy.map(self.prepare)

    def missing_for(self, requires: Sequence[str]) -> tuple[str, ...]:
        """The capabilities of ``requires`` (a suite's) the engine lacks: the suite is skipped then."""
        return self.engine.capabilities.missing(requires)

    # -- running ------------------------------------------------------------
    def build(
        self, scenario: Scenario, *, faults: Sequence[str] | None = None, timings: LockstepTimings | None = None
    ) -> Lockstep:
        """The Lockstep of ``scenario`` (prepared), engines built and graphs captured, no step run yet."""
        chosen = self._faults(faults)
        return Lockstep(
            self.prepare(scenario),
            self.backend,
            faults=chosen.faults,
            engine_factory=self.engine.factory,
            engine_label=self.engine.spec,
            oracle=self.setup.oracle,
            pool=self.pool,
            timings=timings,
        )

    def run(
        self,
        scenario: Scenario,
        *,
        faults: Sequence[str] | None = None,
        localise: bool = False,
        timings: LockstepTimings | None = None,
    ) -> CheckOutcome:
        """Run ``scenario`` to its end or its first failing divergence.

        ``faults`` (None: the checker's own) for this run only. ``localise``: when the
        run fails, re-run it with a kernel trace and set ``outcome.localisation``
        (for a shrunk scenario, never inside a search loop; the trace builds new engines).
        A scenario with a history runs it first on a pair of its own (``graphcheck.check.chain``).
        """
        with single_threaded(self.backend), self.graph_api():
            if scenario.history:
                outcome = run_chain(self.with_pool(EnginePool(1)), self.prepare(scenario), faults, timings)
            else:
                outcome = self.build(scenario, faults=faults, timings=timings).run()
            stopped = outcome.device_error or outcome.engine_error or outcome.hung
            if localise and not outcome.clean and stopped is None:
                outcome.localisation = self.localise(outcome)
        return outcome

    __call__ = run

    def check(self, scenario: Scenario, *, faults: Sequence[str] | None = None) -> CheckOutcome:
        """Run ``scenario``; raise :class:`ScenarioDiverged` (with :meth:`failure_report`) unless it is clean."""
        __tracebackhide__ = True  # pytest: the failure is the message, not this frame
        outcome = self.run(scenario, faults=faults)
        if not outcome.clean:
            raise ScenarioDiverged(lambda: self._report(outcome), outcome)
        return outcome

    def localise(self, outcome: CheckOutcome) -> Localisation | None:
        """Where ``outcome``'s first failing divergence began (``graphcheck.check.localise``); never raises."""
        from graphcheck.check.localise import localise_outcome

        with single_threaded(self.backend), self.graph_api():
            return localise_outcome(outcome, self.backend, faults=outcome.faults, engine_factory=self.engine.factory)

    def graph_api(self) -> ContextManager[Any]:
        """What the engine's graphs run inside on this backend (``EngineChoice.graphs_on``)."""
        return self.engine.graphs_on(self.backend)

    def _report(self, outcome: CheckOutcome) -> str:
        if outcome.localisation is None and not (outcome.device_error or outcome.engine_error or outcome.hung):
            outcome.localisation = self.localise(outcome)
        return self.failure_report(outcome)

    # -- telling a reader ---------------------------------------------------
    def replay_command(self, path: str = "scenario.json", faults: Sequence[str] | None = None) -> str:
        """The ``graphcheck replay`` command line that re-runs a saved scenario with this checker's settings."""
        backend = self.backend
        return replay_command_line(
            path,
            backend.name,
            emulate=backend.emulated and backend.name != "cpu",  # cpu is always emulated
            faults=self.faults if faults is None else faults,
            engine=self.engine.spec,
            oracle=self.setup.oracle,
            emulator=getattr(backend, "emulator", "kernel"),
            hang_limit=chosen_hang_limit(),
        )

    def failure_report(self, outcome: CheckOutcome) -> str:
        """A failing outcome for a test log: headline, detail, where, other failures, replay hint, the scenario."""
        first = outcome.first
        if first is None:
            return f"scenario {outcome.scenario.name or '(unnamed)'}: no failing divergence"
        faults = f", faults: {', '.join(outcome.faults)}" if outcome.faults else ""
        engine = "" if self.engine.builtin else f", engine {self.engine.spec}"
        lines = [
            f"graphcheck: {first.headline()}",
            f"  on {self.backend.name} ({outcome.runner} graph runner){engine}{faults}, "
            f"after {outcome.steps_run} step(s)",
        ]
        if first.detail:
            lines += ["  " + line for line in first.detail.rstrip().splitlines()]
        if outcome.localisation is not None:
            lines.append(f"  where: {outcome.localisation.headline()}")
        history = history_line(outcome.scenario)
        if history is not None:
            lines += ["  " + history] + ["    " + line for line in history_lines(outcome.scenario)]
        rest = Counter(d.kind for d in outcome.failures[1:])
        if rest:
            lines.append("  also failing: " + ", ".join(f"{kind} x{n}" for kind, n in sorted(rest.items())))
        command = self.replay_command(faults=outcome.faults)
        lines.append(f"replay: save the scenario below as scenario.json, then `{command}`")
        lines.append(outcome.scenario.to_json(indent=None))
        return "\n".join(lines)


def check_scenario(
    scenario: Scenario,
    backend: Any,
    *,
    faults: Sequence[str] = (),
    localise: bool = False,
    oracle: str = "auto",
    pool: EnginePool | None = None,
    engine: EngineChoice | None = None,
) -> CheckOutcome:
    """``Checker(backend, engine, CheckSetup(oracle=oracle), faults, pool).run(scenario, localise=...)``."""
    checker = Checker(backend, engine or builtin_engine(), CheckSetup(oracle=oracle), tuple(faults), pool)
    return checker.run(scenario, localise=localise)


def checker_for(
    backend: str,
    emulate: bool,
    emulator: str,
    engine: EngineChoice,
    setup: CheckSetup,
    faults: Sequence[str] = (),
) -> Checker:
    """The Checker of a backend by name (``--backend``, ``--emulate``, ``--emulator``; a BackendError when missing)."""
    from graphcheck.capture.devices import resolve

    return Checker(resolve(backend, emulate=emulate, emulator=emulator), engine, setup, tuple(faults))


__all__ = ["Checker", "ScenarioDiverged", "builtin_engine", "check_scenario", "checker_for"]


def _with_options(scenario: Scenario, options: Sequence[Any], drawn: tuple[int, ...]) -> Scenario:
    """``scenario`` with the engine's ``options`` set to the ``drawn`` choices (a size drawn from what its
    requests need made a size: ``EngineOption.sized``)."""
    values = tuple((o.name, o.sized(choice, scenario)) for o, choice in zip(options, drawn))
    config = dataclasses.replace(scenario.config, engine_options=tuple(sorted(values)))
    return dataclasses.replace(scenario, config=config)
