"""``pytest suites/``: the Hypothesis profiles of tests/conftest.py, picked by HYPOTHESIS_PROFILE.

Registered unconditionally (Hypothesis ships a built-in "ci" profile of its own);
keep these in step with tests/conftest.py.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True
)
settings.register_profile("dev", max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))
