"""The one property every suite checks, and a pytest test per suite.

The property: the lockstep run of a scenario (reference, eager engine and
graph engine stepped together) has no failing divergence. ``checker`` is the
``graphcheck.check.checker.Checker`` of an engine factory; ``check`` runs a
scenario and returns the CheckOutcome; ``property_test`` raises the checker's
ScenarioDiverged (its ``failure_report``: the first divergence, where it
began, the replay command and the scenario JSON).

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
    from graphcheck.capture.devices import resolve

    return resolve(name, emulate=emulate)


def backend_from_env() -> Any:
    """The backend named by GRAPHCHECK_BACKEND (default cpu), emulated if GRAPHCHECK_EMULATE is set."""
    from graphcheck.capture.devices import choice_from_env

    return _resolve(*choice_from_env())


def check(
    scenario: Scenario,
    backend: Any = None,
    faults: Sequence[str] = (),
    *,
    engine_factory: EngineFactory | None = None,
) -> CheckOutcome:
    """``checker(engine_factory, faults, backend).run(scenario)``."""
    return checker(engine_factory, faults, backend).run(scenario)


def checker(engine_factory: EngineFactory | None = None, faults: Sequence[str] = (), backend: Any = None) -> Checker:
    """The Checker of ``engine_factory`` (None: the built-in engine) on ``backend`` (None: backend_from_env())."""
    backend = backend if backend is not None else backend_from_env()
    engine = builtin_engine() if engine_factory is None else engine_from_factory(engine_factory)
    return Checker(backend, engine, faults=tuple(faults))


def property_test(
    suite: Suite, *, faults: Sequence[str] = (), engine_factory: EngineFactory | None = None
) -> Callable[[], None]:
    """A Hypothesis test (settings from the active profile) of ``suite``'s property.

    A failing example raises ScenarioDiverged (an AssertionError) with ``Checker.failure_report``.
    """

    def test(scenario: Scenario) -> None:
        checker(engine_factory, faults).check(scenario)

    test.__name__ = test.__qualname__ = f"test_suite_{suite.name}"
    test.__doc__ = f"Suite {suite.name!r}: {suite.description}"
    return given(suite.strategy())(test)


__all__ = ["backend_from_env", "check", "checker", "property_test", "single_threaded"]
