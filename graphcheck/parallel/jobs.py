"""The jobs of a parallel ``graphcheck run -j N``: what each worker runs, and what it sends back.

A :class:`JobList` is the run's plan (``graphcheck.search.plan.RunPlan``, as the parent
made it) and its jobs: one per (suite, seed) pair, seeds ``seed .. seed+N-1`` for every
suite, and one ``builtin`` job for the demo scenarios. ``run_job`` runs one job in a
worker: the plan narrowed to it (``RunPlan.for_job``) through the suite runner
``-j 1`` runs (``graphcheck.search.suite_run.run_plan``); the job's
``SuiteResult`` goes back as JSON, so ``jobs/*.json`` stays readable.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import re
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from graphcheck.check.watchdog import HardHang, watching
from graphcheck.errors import GraphcheckError
from graphcheck.files import write_atomic
from graphcheck.search.database import DatabaseSpec
from graphcheck.search.plan import DATABASE_ENV, RunPlan
from graphcheck.search.result import BUILTIN, Stop, SuiteResult
from graphcheck.search.suite_run import run_plan

_KEY_LENGTH = 64  # characters of a job's id kept in its file names


@dataclass(frozen=True)
class Job:
    """One unit of work: fuzz ``suite`` with ``seed``, or (suite ``builtin``) check the demo scenarios."""

    suite: str
    seed: int = 0

    @property
    def id(self) -> str:
        return BUILTIN if self.suite == BUILTIN else f"{self.suite}-seed{self.seed}"

    @property
    def key(self) -> str:
        """``id`` made safe as a file name and a pytest id: a plugin's suite may be named ``org/padding``,
        ``..`` or longer than a file name may be. Letters, digits, ``-`` and ``_`` are kept, anything
        else becomes ``_``; a key that had to change (or be cut) ends in a hash of the id, so two jobs
        never share one."""
        safe = re.sub(r"[^A-Za-z0-9_-]", "_", self.id)
        if safe == self.id and len(safe) <= _KEY_LENGTH:
            return safe
        digest = hashlib.sha256(self.id.encode("utf-8", "surrogatepass")).hexdigest()[:12]
        return f"{safe[:_KEY_LENGTH]}-{digest}"


def plan_jobs(plan: RunPlan) -> tuple[Job, ...]:
    """Suite-major, so the first jobs handed out are the first suite's, as in a ``-j 1`` run; the demo job last."""
    fuzz = tuple(Job(suite, plan.seed + i) for suite in plan.suites for i in range(plan.workers))
    return fuzz + ((Job(BUILTIN),) if plan.demos else ())


@dataclass(frozen=True)
class JobList:
    """The run's plan and its jobs, and where results go; sent to each worker as JSON (xdist's ``workerinput``)."""

    plan: RunPlan
    jobs: tuple[Job, ...]
    results_dir: str  # on the parent's machine; a remote worker's pending files go to its temp dir

    def to_json(self, *, secret: bool = False) -> str:
        """As JSON; the database URL's credentials redacted unless ``secret`` (what goes to the workers
        over xdist's channel, never to disk: ``jobs/spec.json`` is a report file)."""
        data = {
            "plan": self.plan.to_dict(secret=secret),
            "jobs": [dataclasses.asdict(job) for job in self.jobs],
            "results_dir": self.results_dir,
        }
        return json.dumps(data, indent=1)

    @classmethod
    def from_json(cls, text: str) -> JobList:
        data = json.loads(text)
        return cls(RunPlan.from_dict(data["plan"]), tuple(Job(**job) for job in data["jobs"]), data["results_dir"])

    def with_database(self, environ: Mapping[str, str]) -> JobList:
        """These jobs with the database the parent put in ``environ`` (``DATABASE_ENV``), whose
        credentials ``jobs/spec.json`` does not hold."""
        return dataclasses.replace(self, plan=self.plan.with_database(environ))


def result_json(result: SuiteResult) -> str:
    return json.dumps(result.to_dict(), indent=1)


def result_from_json(text: str) -> SuiteResult:
    return SuiteResult.from_dict(json.loads(text))


def pending_path(jobs: JobList, job: Job) -> Path:
    """Where ``job`` writes the scenario about to run: the parent's results folder when this machine has it."""
    folder = Path(jobs.results_dir)
    if not folder.is_dir():
        folder = Path(tempfile.gettempdir())
    return folder / f"pending-{job.key}.json"


def hang_marker_path(pending: Path) -> Path:
    """Where a worker whose engine hung outside Python says so, beside the job's pending scenario."""
    return pending.with_suffix(".hang.json")


def _hang_marker(pending: Path) -> Any:
    """The watchdog's last word in a worker: the hang, beside the pending scenario, for the parent to report."""

    def mark(hang: HardHang) -> int:
        write_atomic(hang_marker_path(pending), json.dumps({"where": hang.where, "limit_s": hang.limit_s}))
        return 1

    return mark


def run_job(jobs: JobList, job: Job) -> SuiteResult:
    """Run ``job`` here (a worker): its result, or one whose ``stop`` says what ended it; a crash mid-job
    leaves its scenario in ``pending_path``."""
    from graphcheck.check.boundary import user_stops
    from graphcheck.check.threads import single_threaded

    plan = jobs.plan.for_job(None if job.suite == BUILTIN else job.suite, job.seed)
    pending = pending_path(jobs, job)
    started = time.perf_counter()
    try:
        resolved = plan.resolve()
    except GraphcheckError as err:  # the backend is missing here, or (another sys.path) the engine
        return SuiteResult(job.suite, job.seed, stop=Stop.of(err))
    # Workers share the cores: one intra-op thread each (on the CPU) is faster than contending pools.
    # A worker is stopped by its parent, never by a KeyboardInterrupt of the engine's own.
    with single_threaded(resolved.backend), user_stops(), watching(plan.hang_limit, _hang_marker(pending)):
        results = run_plan(resolved, pending, database=_open_database(plan.database))
    result = results[-1] if results else SuiteResult(job.suite, job.seed)
    result = dataclasses.replace(result, elapsed_s=time.perf_counter() - started)
    if result.stop is None and all(
        o.engine_error is None for o in result.outcomes
    ):  # an engine that tried to exit: its scenario stays
        pending.unlink(missing_ok=True)
    return result


@functools.cache
def _open_database(spec: DatabaseSpec) -> Any:
    """One database per worker process, shared by its jobs (opening a Redis one pings the server)."""
    return spec.open()


__all__ = [
    "BUILTIN",
    "DATABASE_ENV",
    "Job",
    "JobList",
    "hang_marker_path",
    "pending_path",
    "plan_jobs",
    "result_from_json",
    "result_json",
    "run_job",
]
