"""The pytest plugin that ``graphcheck run -j N`` hands to pytest-xdist, with graphcheck/parallel/xdist_jobs.py.

``graphcheck.parallel.run`` runs ``pytest -p graphcheck.parallel.xdist_plugin
graphcheck/parallel/xdist_jobs.py --graphcheck-spec SPEC.json`` with xdist's workers:

- controller: reads the JobList (the run's plan and its jobs) and ships it to every
  worker in xdist's ``workerinput`` (so workers on other hosts need no shared files),
  and writes each job's SuiteResult, which comes back as JSON in the test report's
  user properties, to ``<results_dir>/<job key>.json``; a worker that died mid-job
  leaves a result whose ``stop`` is a crash instead.
- workers: ``xdist_jobs.test_job`` is parametrized with the jobs; a cuda worker on a
  GPU that other workers share bounds its memory to its share as it starts
  (``graphcheck.parallel.gpu_share``).

Harmless in any other pytest run: without a spec it does nothing.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from graphcheck.parallel.gpu_share import bound_worker_memory
from graphcheck.parallel.jobs import JobList, result_from_json, result_json
from graphcheck.search.result import CRASH, Stop, SuiteResult

RESULT_PROPERTY = "graphcheck_job_result"
SPEC_KEY = pytest.StashKey[JobList]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--graphcheck-spec", metavar="FILE", help="graphcheck run -j: the JobList JSON of this run")


def pytest_configure(config: pytest.Config) -> None:
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None and "graphcheck_spec" in workerinput:
        text = workerinput["graphcheck_spec"]
    elif config.getoption("graphcheck_spec"):
        text = Path(config.getoption("graphcheck_spec")).read_text(encoding="utf-8")
    else:
        return
    spec = JobList.from_json(text).with_database(os.environ)
    config.stash[SPEC_KEY] = spec
    if workerinput is None:
        config.pluginmanager.register(_ResultWriter(Path(spec.results_dir), spec), "graphcheck-result-writer")
    else:
        bound_worker_memory(spec.plan.backend, spec.plan.emulate, os.environ)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist controller: every worker gets the spec with its other start-up data."""
    spec = node.config.stash.get(SPEC_KEY, None)
    if spec is not None:
        node.workerinput["graphcheck_spec"] = spec.to_json(secret=True)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "job" not in metafunc.fixturenames:
        return
    spec = metafunc.config.stash.get(SPEC_KEY, None)
    jobs = spec.jobs if spec is not None else ()
    metafunc.parametrize("job", jobs, ids=[job.key for job in jobs])


class _ResultWriter:
    """Controller side: one JSON file per finished job, written as its report arrives."""

    def __init__(self, folder: Path, spec: JobList):
        self.folder = folder
        self.by_id = {job.key: job for job in spec.jobs}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        texts = [value for name, value in report.user_properties if name == RESULT_PROPERTY]
        if texts and report.when == "call":
            result = result_from_json(str(texts[-1]))
        elif report.failed and report.when in ("setup", "call", "???"):  # "???": xdist's report of a dead worker
            job = self.by_id.get(report.nodeid.rpartition("[")[2].rstrip("]"))
            if job is None:
                return
            result = SuiteResult(job.suite, job.seed, stop=Stop(CRASH, str(report.longrepr) or "job failed"))
        else:
            return
        key = report.nodeid.rpartition("[")[2].rstrip("]")
        tmp = self.folder / f".{key}.json.tmp"
        tmp.write_text(result_json(result), encoding="utf-8")
        tmp.replace(self.folder / f"{key}.json")
