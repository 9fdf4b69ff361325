"""Collection shim: ``pytest suites/`` runs one Hypothesis test per suite (see properties.py)."""

from graphcheck.suites.properties import *  # noqa: F401,F403  (test_suite_<name> for every suite)
