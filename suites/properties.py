"""The one property every suite checks, and a pytest test per suite.

The property: the lockstep run of a scenario (reference, eager engine and
graph engine stepped together) has no failing divergence. ``check`` runs it
and returns the CheckOutcome; ``assert_clean`` turns a failing outcome into
an AssertionError whose message is the first divergence's headline plus the
replayable scenario JSON.

The backend comes from ``GRAPHCHECK_BACKEND`` (default ``cpu``), and
``GRAPHCHECK_EMULATE=1`` runs that backend's framework path on the CPU with
the emulated graph runner. ``pytest tests/test_suites.py`` runs every suite
with the active Hypothesis profile (``HYPOTHESIS_PROFILE``).
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

from hypothesis import given

from graphcheck.adapter import EngineFactory
from graphcheck.check.checker import Checker, builtin_engine
from graphcheck.check.engines import engine_from_factory
from graphcheck.check.records import CheckOutcome
from graphcheck.check.threads import single_threaded  # re-exported for suites and tests
from graphcheck.scenario import Scenario
from graphcheck.suites import Suite


@functools.cache
def _resolve(name: str, emulate: bool) -> Any:
    from graphcheck.backends.devices import resolve

    return resolve(name, emulate=emulate)


def backend_from_env() -> Any:
    """The backend named by GRAPHCHECK_BACKEND (default cpu), emulated if GRAPHCHECK_EMULATE is set."""
    from graphcheck.backends.devices import choice_from_env

    return _resolve(*choice_from_env())


def check(
    scenario: Scenario,
    backend: Any = None,
    faults: Sequence[str] = (),
    *,
    engine_factory: EngineFactory | None = None,
) -> CheckOutcome:
    """``Checker(backend, engine).run(scenario)``; backend default: backend_from_env(), engine: the built-in one."""
    backend = backend if backend is not None else backend_from_env()
    engine = builtin_engine() if engine_factory is None else engine_from_factory(engine_factory)
    return Checker(backend, engine, faults=tuple(faults)).run(scenario)


def failure_message(outcome: CheckOutcome, scenario: Scenario | None = None) -> str:
    """The first divergence's headline, then the scenario as a replayable JSON file body."""
    first = outcome.first
    headline = first.headline() if first is not None else "no failing divergence"
    scenario = scenario if scenario is not None else outcome.scenario
    return f"{headline}\nsave as FILE.json and run `graphcheck replay FILE.json`:\n{scenario.to_json()}"


def assert_clean(outcome: CheckOutcome) -> None:
    assert outcome.clean, failure_message(outcome)


def property_test(
    suite: Suite, *, faults: Sequence[str] = (), engine_factory: EngineFactory | None = None
) -> Callable[[], None]:
    """A Hypothesis test (settings from the active profile) of ``suite``'s property."""

    def test(scenario: Scenario) -> None:
        assert_clean(check(scenario, faults=faults, engine_factory=engine_factory))

    test.__name__ = test.__qualname__ = f"test_suite_{suite.name}"
    test.__doc__ = f"Suite {suite.name!r}: {suite.description}"
    return given(suite.strategy())(test)


__all__ = ["assert_clean", "backend_from_env", "check", "failure_message", "property_test", "single_threaded"]
