"""The test module of ``graphcheck run -j N``: one test per job, parametrized by graphcheck.parallel.xdist_plugin.

A job that diverged fails its test, so pytest's ``-x`` stops handing out jobs;
its JobResult goes back to the controller in the report's user properties.
"""

from __future__ import annotations

import pytest

from graphcheck.parallel.jobs import Job, run_job
from graphcheck.parallel.xdist_plugin import RESULT_PROPERTY, SPEC_KEY


def test_job(job: Job, request: pytest.FixtureRequest) -> None:
    """Run one job; fail when it found a divergence (or its backend is missing here)."""
    result = run_job(request.config.stash[SPEC_KEY], job)
    request.node.user_properties.append((RESULT_PROPERTY, result.to_json()))
    if result.error:
        pytest.fail(result.error, pytrace=False)
    if result.failing is not None:
        pytest.fail(f"{job.id}: {result.failing.first.headline()}", pytrace=False)
