"""The test module of ``graphcheck run -j N``: one test per job, parametrized by graphcheck.parallel.xdist_plugin.

A job that diverged fails its test, so pytest's ``-x`` stops handing out jobs;
its SuiteResult goes back (as JSON) to the controller in the report's user properties.
"""

from __future__ import annotations

import pytest

from graphcheck.parallel.jobs import Job, result_json, run_job
from graphcheck.parallel.xdist_plugin import RESULT_PROPERTY, SPEC_KEY


def test_job(job: Job, request: pytest.FixtureRequest) -> None:
    """Run one job; fail when it found a divergence (or its backend is missing here)."""
    result = run_job(request.config.stash[SPEC_KEY], job)
    request.node.user_properties.append((RESULT_PROPERTY, result_json(result)))
    if result.stop is not None:
        pytest.fail(result.stop.message, pytrace=False)
    if result.headline is not None:
        pytest.fail(f"{job.id}: {result.headline}", pytrace=False)
