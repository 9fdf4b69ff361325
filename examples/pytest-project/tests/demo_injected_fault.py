"""Fails on purpose, to show what a caught graph bug looks like: ``pytest tests/demo_injected_fault.py``.

Not collected by a plain ``pytest`` run (the file name does not match ``test_*.py``).
The engine is built with the ``rebind-output-offsets`` fault (a buffer assigned
instead of copied into, as in FastDeploy #7864); Hypothesis finds a scenario
whose graph replay reads the stale storage, shrinks it, and the failure names
the first divergence and the ``graphcheck replay`` command that re-runs it.
"""

from __future__ import annotations

from hypothesis import given

from graphcheck.strategies import scenarios


@given(scenario=scenarios(max_requests=2, max_steps=6))
def test_output_offsets_stay_bound_to_the_captured_storage(graphcheck_check, scenario):
    graphcheck_check(scenario, faults=["rebind-output-offsets"])
