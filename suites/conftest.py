"""``pytest suites/``: the Hypothesis profiles of tests/conftest.py, picked by HYPOTHESIS_PROFILE.

Registered unconditionally (Hypothesis ships a built-in "ci" profile of its own),
from the one table both use (graphcheck.pytest_plugin.profile_settings).
"""

from __future__ import annotations

import os

from hypothesis import settings

from graphcheck.pytest_plugin import TEST_PROFILE_EXAMPLES, profile_settings

for _name in TEST_PROFILE_EXAMPLES:
    settings.register_profile(_name, **profile_settings(_name))
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))
