"""Shared test setup: Hypothesis profiles and the GPU marker."""

from __future__ import annotations

import os

import pytest
from hypothesis import settings

from graphcheck.pytest_plugin import TEST_PROFILE_EXAMPLES, profile_settings

# ci: small and deadline-free for a 2-core box; dev: the default; thorough: for nightly runs.
for _name in TEST_PROFILE_EXAMPLES:
    settings.register_profile(_name, **profile_settings(_name))
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _cuda_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device (none found)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
