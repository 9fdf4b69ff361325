"""``pytest suites/``: the Hypothesis profiles of tests/conftest.py, picked by HYPOTHESIS_PROFILE.

Profiles already registered (by tests/conftest.py, when both folders are
collected) are kept; the suites run with whichever profile is active.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings
from hypothesis.errors import InvalidArgument

_EXAMPLES = {"ci": 15, "dev": 40, "thorough": 400}

for _name, _count in _EXAMPLES.items():
    try:
        settings.get_profile(_name)
    except InvalidArgument:
        settings.register_profile(
            _name, max_examples=_count, deadline=None, suppress_health_check=[HealthCheck.too_slow]
        )
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))
