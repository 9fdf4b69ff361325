"""``graphcheck run -j N``: the suites fuzzed by N pytest-xdist workers, merged into one report.

``-j auto`` picks N from the machine (graphcheck.parallel.workers). The parent sends the
run's plan with its jobs (graphcheck.parallel.jobs.JobList): for every suite, N jobs with
seeds ``seed .. seed+N-1`` (``-j 1`` fuzzes ``seed`` alone, in process), and
one job for the built-in demo scenarios; each runs through the suite runner ``-j 1`` uses. It runs ``python -m pytest`` over
graphcheck/parallel/xdist_jobs.py with the graphcheck.parallel.xdist_plugin plugin and xdist's
workers: ``-n N`` locally, or N ``--tx popen//env:CUDA_VISIBLE_DEVICES=K``
workers pinned to the GPUs round robin where a CUDA backend sees several (or one that
several workers share, whose memory each then bounds: graphcheck.parallel.gpu_share), or
the user's own ``--tx`` specs (other hosts) from ``--xdist-args``. Workers share failing examples
through the example database, which every job replays before it draws.
Without ``--keep-going``, pytest's ``-x`` stops handing out jobs after the
first divergence (jobs already running finish).

The parent then merges the SuiteResults the controller wrote to
``<report>/jobs/``: per suite, in suite order, the smallest shrunk scenario
over all seeds (then the lowest seed) is that suite's divergence, exactly as
``-j 1`` would report one; the exit codes are ``-j 1``'s.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any, Mapping, Sequence

from graphcheck.check.diff import Divergence
from graphcheck.check.records import CheckOutcome
from graphcheck.display import redacted
from graphcheck.errors import InputError, RunError
from graphcheck.files import write_atomic
from graphcheck.parallel.gpu_share import SHARE_ENV, memory_fraction
from graphcheck.parallel.jobs import (
    BUILTIN,
    DATABASE_ENV,
    Job,
    JobList,
    hang_marker_path,
    pending_path,
    plan_jobs,
    result_from_json,
)
from graphcheck.parallel.machine import DEVICE_ENV, auto_plan, visible_devices
from graphcheck.parallel.workers import AUTO, MAX_WORKERS, WorkerPlan, round_robin
from graphcheck.scenario import Scenario, read_regular_file
from graphcheck.search.fuzz import label_found
from graphcheck.search.plan import RunPlan
from graphcheck.search.result import CRASH, SuiteResult
from graphcheck.search.suite_run import RunHooks
from graphcheck.search.timed_search import scenario_size

_POLL_S = 0.5


def worker_args(workers: int, backend: Any, xdist_args: Sequence[str], environ: Mapping[str, str]) -> list[str]:
    """xdist's worker options: the user's ``--tx``/``-n`` if given, else N local workers, spread round robin
    over the devices where there are several; a cuda worker on a GPU that others share is also told how
    many do (``graphcheck.parallel.gpu_share``: its memory bound)."""
    if any(_names_workers(a) for a in xdist_args):
        return []
    devices = visible_devices(backend, environ)
    cuda = getattr(backend, "name", "") == "cuda"
    if len(devices) < 2 and not (cuda and devices and workers > 1):
        return ["-n", str(workers)]
    var = DEVICE_ENV[backend.name]
    gpu_of = round_robin(workers, len(devices))
    args: list[str] = []
    for gpu in gpu_of:
        sharing = gpu_of.count(gpu)
        share = f"//env:{SHARE_ENV}={sharing}" if cuda and sharing > 1 else ""
        args += ["--tx", f"popen//env:{var}={devices[gpu]}{share}"]
    return args


def memory_note(workers: int, backend: Any, xdist_args: Sequence[str], environ: Mapping[str, str]) -> str:
    """The memory bound of ``worker_args``' cuda workers, for the run's first line ("" when none is set)."""
    if getattr(backend, "name", "") != "cuda" or any(_names_workers(a) for a in xdist_args):
        return ""
    devices = visible_devices(backend, environ)
    most = max(Counter(round_robin(workers, len(devices))).values(), default=1)
    fraction = memory_fraction(most)
    if fraction is None:
        return ""
    return f"; {most} workers share a GPU, each bounded to {fraction:.1%} of its memory"


def _names_workers(arg: str) -> bool:
    return (
        arg in ("-n", "--numprocesses", "--tx")
        or arg.startswith(("--tx=", "--numprocesses="))
        or bool(re.fullmatch(r"-n(\d+|auto|logical)", arg))
    )


def pytest_command(
    spec_path: Path, results: Path, workers: list[str], keep_going: bool, xdist_args: Sequence[str]
) -> list[str]:
    """``python -m pytest`` over the job module, isolated from the project's own pytest configuration."""
    import graphcheck.parallel.xdist_jobs

    ini = results / "pytest.ini"
    ini.write_text("[pytest]\n", encoding="utf-8")
    # --tx workers need a --dist mode (-n implies "load"); jobs go to whichever worker is free.
    dist = [] if any(a in ("-d", "--dist") or a.startswith("--dist=") for a in xdist_args) else ["--dist", "load"]
    return [
        sys.executable,
        "-m",
        "pytest",
        str(Path(graphcheck.parallel.xdist_jobs.__file__)),
        "-p",
        "graphcheck.parallel.xdist_plugin",
        "--graphcheck-spec",
        str(spec_path),
        "-c",
        str(ini),
        "--rootdir",
        str(results),
        "--noconftest",
        "-p",
        "no:cacheprovider",
        "-q",
        *([] if keep_going else ["-x"]),
        *dist,
        *workers,
        *xdist_args,
    ]


def _child_env(environ: dict[str, str]) -> dict[str, str]:
    """The parent's environment, with graphcheck's own folder first on PYTHONPATH (for a checkout run in place)."""
    root = str(Path(__file__).resolve().parents[2])
    env = dict(environ)
    env["PYTHONPATH"] = os.pathsep.join([root, *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])])
    return env


def check_options(jobs: int | str, xdist_args: str) -> list[str]:
    """Validate ``-j`` (N or auto) and ``--xdist-args`` before anything is written; the xdist arguments, split.

    For ``-j auto`` what depends on the worker count is checked by :func:`choose_workers`."""
    if jobs != AUTO and not (isinstance(jobs, int) and 1 <= jobs <= MAX_WORKERS):
        raise InputError(f"-j/--jobs must be in [1, {MAX_WORKERS}] or auto, got {jobs}")
    try:
        split = shlex.split(xdist_args or "")
    except ValueError as err:
        raise InputError(f"--xdist-args: {err}") from None
    if jobs == AUTO:
        return split
    if split and jobs == 1:
        raise InputError("--xdist-args needs -j N with N > 1")
    if isinstance(jobs, int) and jobs > 1 and importlib.util.find_spec("xdist") is None:
        raise InputError("-j needs pytest-xdist: pip install 'graphcheck[parallel]'")
    return split


def choose_workers(
    jobs: int | str, backend: Any, xdist_args: Sequence[str], environ: Mapping[str, str]
) -> tuple[int, WorkerPlan | None]:
    """``-j`` as a worker count: N as given (no plan), or the ``-j auto`` plan for ``backend`` and its count."""
    if jobs != AUTO:
        return int(jobs), None
    plan = auto_plan(backend, environ)
    if xdist_args and plan.count == 1:
        raise InputError(f"--xdist-args needs more than one worker, but {plan.reason}")
    return plan.count, plan


def describe(plan: RunPlan, backend: Any, xdist_args: Sequence[str], results: Path) -> str:
    """The run's line about its workers: how many, their seeds, the jobs, the memory bound, the log."""
    jobs = plan_jobs(plan)
    bound = memory_note(plan.workers, backend, xdist_args, os.environ)
    return (
        f"{plan.workers} workers (pytest-xdist), seeds {plan.seed}..{plan.seed + plan.workers - 1}, {len(jobs)} jobs"
        f"{bound}; log: {results / 'pytest.log'}"
    )


def run_parallel(
    plan: RunPlan, results: Path, backend: Any, xdist_args: Sequence[str], hooks: RunHooks | None = None
) -> list[SuiteResult]:
    """Run ``plan``'s jobs through pytest-xdist, their files in ``results`` (made here); the merged results.

    ``backend``: the plan's device (which GPUs the workers go to); ``hooks.end_suite`` hears each job's
    result as it lands."""
    hooks = hooks or RunHooks()
    results.mkdir()
    jobs = JobList(plan, plan_jobs(plan), str(results))
    spec_path = results / "spec.json"
    write_atomic(spec_path, jobs.to_json())
    env = _child_env(dict(os.environ))
    env[DATABASE_ENV] = plan.database.location  # its credentials stay out of jobs/spec.json
    workers = worker_args(plan.workers, backend, xdist_args, env)
    command = pytest_command(spec_path, results, workers, plan.keep_going, xdist_args)
    try:
        code, found = _run_pytest(command, env, results, jobs, hooks)
    except _Stopped as stop:  # Ctrl-C, SIGTERM: what the finished jobs found goes into the report
        raise ParallelInterrupted(merge_results(jobs, stop.found, allow_empty=True)) from None
    stopped_by_x = code == 2 and any(not r.clean or r.stop for r in found.values())  # -x reports "interrupted"
    if code in (2, 3, 4, 5) and not stopped_by_x:  # interrupted, internal error, usage error, no tests
        tail = "\n".join((results / "pytest.log").read_text(encoding="utf-8", errors="replace").splitlines()[-15:])
        if code == 4:
            raise InputError(f"pytest-xdist rejected the command line (--xdist-args?):\n{tail}")
        raise ParallelRunError(f"pytest-xdist stopped with exit code {code}; the end of its log:\n{tail}")
    return merge_results(jobs, found)


def _run_pytest(
    command: list[str], env: dict[str, str], results: Path, jobs: JobList, hooks: RunHooks
) -> tuple[int, dict[str, SuiteResult]]:
    """Run pytest, handing each job's result to ``hooks.end_suite`` as it lands; pytest's exit code and the results."""
    try:
        return _watch_pytest(command, env, results, jobs, hooks)
    finally:
        _redact_file(results / "pytest.log")


def _redact_file(path: Path) -> None:
    """``path`` with every URL credential redacted (what a worker printed may quote the database URL)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return
    clean = redacted(text)
    if clean != text:
        write_atomic(path, clean)


def _watch_pytest(
    command: list[str], env: dict[str, str], results: Path, jobs: JobList, hooks: RunHooks
) -> tuple[int, dict[str, SuiteResult]]:
    found: dict[str, SuiteResult] = {}
    with open(results / "pytest.log", "w", encoding="utf-8") as log:
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            while True:
                done = proc.poll() is not None
                for job in jobs.jobs:
                    path = results / f"{job.key}.json"
                    if job.id not in found and path.exists():
                        found[job.id] = result_from_json(path.read_text(encoding="utf-8"))
                        if hooks.end_suite is not None:
                            hooks.end_suite(_labelled(found[job.id], job))
                if done:
                    return proc.returncode, found
                time.sleep(_POLL_S)
        except KeyboardInterrupt:
            proc.terminate()
            proc.wait()
            raise _Stopped(found) from None
        except BaseException:
            proc.terminate()
            proc.wait()
            raise


def _labelled(result: SuiteResult, job: Job) -> SuiteResult:
    """A job's result as the run shows it: a search named by its suite and seed (one row per job)."""
    if job.suite == BUILTIN:
        return result
    return dataclasses.replace(result, suite=job.suite, seed=job.seed, label=f"{job.suite} seed {job.seed}")


class _Stopped(KeyboardInterrupt):
    """The parallel run was stopped; ``found``: the results of the jobs that had finished."""

    def __init__(self, found: dict[str, SuiteResult]) -> None:
        super().__init__()
        self.found = found


class ParallelInterrupted(KeyboardInterrupt):
    """A stopped parallel run, with what its finished jobs found (merged as a whole run's would be)."""

    def __init__(self, results: list[SuiteResult]) -> None:
        super().__init__()
        self.results = results


def merge_results(jobs: JobList, found: dict[str, SuiteResult], *, allow_empty: bool = False) -> list[SuiteResult]:
    """One run's results, in job order: every job's (each search labelled with its seed); of each suite's
    searches, the smallest shrunk divergence over its seeds (then the lowest seed) is the one reported,
    as ``-j 1`` would report it, suite after suite until the first that diverged (all, with ``keep_going``);
    the demo scenarios are reported when no suite diverged (or with ``keep_going``).

    A job that ended on an error that is not a finding (the engine broke the adapter protocol, the
    memory limit, ...) raises that error, as ``-j 1`` does; a worker that died is a crash divergence
    on the scenario it was running. ``allow_empty``: a stopped run, whose errors are left out.
    """
    done = [(job, found[job.id]) for job in jobs.jobs if job.id in found]
    stopped = next((r.stop for _, r in done if r.stop is not None and r.stop.kind != CRASH), None)
    if stopped is not None and not allow_empty:
        raise stopped.error() or ParallelRunError(stopped.message)
    results = [
        _labelled(_with_crash(r, job, jobs) if r.stop is not None else r, job)
        for job, r in done
        if r.stop is None or r.stop.kind == CRASH
    ]
    results = [dataclasses.replace(r, reported=False) for r in results]
    keep_going = jobs.plan.keep_going
    for suite in jobs.plan.suites:
        diverged = [i for i, r in enumerate(results) if not r.builtin and r.suite == suite and not r.clean]
        if not diverged:
            continue
        best = min(diverged, key=lambda i: (_size(results[i].outcomes[0].scenario), results[i].seed))
        label_found(results[best].outcomes[0], suite)
        results[best] = dataclasses.replace(results[best], reported=True)
        if not keep_going:
            break
    found_any = any(r.reported for r in results)
    results = [dataclasses.replace(r, reported=keep_going or not found_any) if r.builtin else r for r in results]
    if not any(r.reported and r.outcomes for r in results) and not allow_empty:
        raise ParallelRunError(f"the parallel run produced no results; see {Path(jobs.results_dir) / 'pytest.log'}")
    return results


class ParallelRunError(RunError):
    """Parallel workers ended without results (or a job failed before running any scenario)."""


def _last_line(text: str) -> str:
    """The last non-empty line of a worker's error (its full text is in pytest.log)."""
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    return lines[-1][:300] if lines else "no error text"


def _size(scenario: Scenario) -> tuple[int, int, int]:
    return (*scenario_size(scenario), len(scenario.to_json()))


def _with_crash(result: SuiteResult, job: Job, jobs: JobList) -> SuiteResult:
    """A job whose worker died: a crash divergence on the scenario it was running, when it left one."""
    assert result.stop is not None
    pending = pending_path(jobs, job)
    if not pending.is_file():
        raise ParallelRunError(f"job {job.id!r} failed before running a scenario: {_last_line(result.stop.message)}")
    scenario = Scenario.from_json(pending.read_text(encoding="utf-8"))
    crash = Divergence(
        "crash",
        0,
        "worker",
        "worker process",
        "a finished job",
        "no result",
        detail=result.stop.message,
    )
    plan = jobs.plan
    outcome = CheckOutcome(scenario, plan.backend, "none", divergences=[crash], faults=plan.faults)
    hang = _hang_of(hang_marker_path(pending))
    if hang is not None:  # the worker's watchdog ended it: a hang the engine could not be interrupted in
        outcome.divergences = [hang]
        outcome.hung = hang.detail
    return dataclasses.replace(result, outcomes=(outcome,), stop=None)


def _hang_of(marker: Path) -> Divergence | None:
    """The hang a worker's watchdog recorded in ``marker`` before it ended the worker, if any."""
    try:
        data = json.loads(read_regular_file(marker))
        where, limit = str(data["where"]), float(data["limit_s"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    detail = f"the engine's {where} was still running after {limit:g} s (--hang-limit); the worker was ended"
    return Divergence("hang", 0, where, "engine", f"done within {limit:g} s", "still running", detail=detail)
