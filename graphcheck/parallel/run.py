"""``graphcheck run -j N``: the suites fuzzed by N pytest-xdist workers, merged into one report.

``-j auto`` picks N from the machine (graphcheck.parallel.workers). The parent plans a
RunSpec (graphcheck.parallel.jobs): for every suite, N jobs with
seeds ``seed .. seed+N-1`` (``-j 1`` fuzzes ``seed`` alone, in process), and
one job for the built-in demo scenarios. It runs ``python -m pytest`` over
graphcheck/parallel/xdist_jobs.py with the graphcheck.parallel.xdist_plugin plugin and xdist's
workers: ``-n N`` locally, or N ``--tx popen//env:CUDA_VISIBLE_DEVICES=K``
workers pinned to the GPUs round robin where a CUDA backend sees several (or one that
several workers share, whose memory each then bounds: graphcheck.parallel.gpu_share), or
the user's own ``--tx`` specs (other hosts) from ``--xdist-args``. Workers share failing examples
through the example database, which every job replays before it draws.
Without ``--keep-going``, pytest's ``-x`` stops handing out jobs after the
first divergence (jobs already running finish).

The parent then merges the JobResults the controller wrote to
``<report>/jobs/``: per suite, in suite order, the smallest shrunk scenario
over all seeds (then the lowest seed) is that suite's divergence, exactly as
``-j 1`` would report one; the exit codes are ``-j 1``'s.
"""

from __future__ import annotations

import argparse
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

from rich.console import Console
from rich.markup import escape

from graphcheck.check.diff import Divergence
from graphcheck.check.engines import EngineSpecError
from graphcheck.check.records import CheckOutcome
from graphcheck.check.watchdog import WATCHDOG
from graphcheck.display import one_line, redacted
from graphcheck.errors import BackendUnavailableError, EngineAbortedError, InputError, ResourceError, RunError
from graphcheck.files import write_atomic
from graphcheck.parallel.gpu_share import SHARE_ENV, memory_fraction
from graphcheck.parallel.jobs import (
    BUILTIN,
    DATABASE_ENV,
    Job,
    JobResult,
    RunSpec,
    hang_marker_path,
    pending_path,
)
from graphcheck.parallel.machine import DEVICE_ENV, auto_plan, visible_devices
from graphcheck.parallel.workers import AUTO, MAX_WORKERS, WorkerPlan, round_robin
from graphcheck.scenario import Scenario, read_regular_file
from graphcheck.search.fuzz import FuzzResult, label_found
from graphcheck.search.timed_search import scenario_size

_POLL_S = 0.5


def plan_jobs(suites: Sequence[str], seed: int, workers: int) -> tuple[Job, ...]:
    """Suite-major, so the first jobs handed out are the first suite's, as in a ``-j 1`` run."""
    fuzz = tuple(Job(suite, seed + i) for suite in suites for i in range(workers))
    return fuzz + (Job(BUILTIN),)


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


def run_parallel(args: argparse.Namespace, plan: Any, console: Console) -> tuple[list[CheckOutcome], list[FuzzResult]]:
    """Run ``plan`` through pytest-xdist; the merged outcomes and one FuzzResult per fuzz job."""
    xdist_args = plan.xdist_args
    results = plan.out_dir / "jobs"
    results.mkdir()
    spec = RunSpec(
        backend=plan.backend.name,
        emulate=bool(args.emulate),
        faults=tuple(plan.faults),
        examples=plan.examples,
        steps=args.steps,
        database=plan.database,
        results_dir=str(results),
        jobs=plan_jobs([s.name for s in plan.suites], plan.seed, plan.jobs),
        setup=plan.setup.to_dict(),
        engine=plan.engine.spec,
        emulator=getattr(plan.backend, "emulator", "kernel"),
        hang_limit=WATCHDOG.limit_s,  # what this process watches with (--hang-limit)
    )
    spec_path = results / "spec.json"
    write_atomic(spec_path, spec.to_json())
    env = _child_env(dict(os.environ))
    env[DATABASE_ENV] = plan.database.location  # its credentials stay out of jobs/spec.json
    command = pytest_command(
        spec_path, results, worker_args(plan.jobs, plan.backend, xdist_args, env), args.keep_going, xdist_args
    )
    bound = memory_note(plan.jobs, plan.backend, xdist_args, env)
    console.print(
        f"{plan.jobs} workers (pytest-xdist), seeds {plan.seed}..{plan.seed + plan.jobs - 1}, {len(spec.jobs)} jobs"
        f"{bound}; log: {results / 'pytest.log'}"
    )
    try:
        code, found = _run_pytest(command, env, results, spec, console, quiet=args.quiet)
    except _Stopped as stop:  # Ctrl-C, SIGTERM: what the finished jobs found goes into the report
        outcomes, fuzzed = merge_results(spec, stop.found, keep_going=True, allow_empty=True)
        raise ParallelInterrupted(outcomes, fuzzed) from None
    stopped_by_x = code == 2 and any(r.diverged or r.error for r in found.values())  # -x reports "interrupted"
    if code in (2, 3, 4, 5) and not stopped_by_x:  # interrupted, internal error, usage error, no tests
        tail = "\n".join((results / "pytest.log").read_text(encoding="utf-8", errors="replace").splitlines()[-15:])
        if code == 4:
            raise InputError(f"pytest-xdist rejected the command line (--xdist-args?):\n{tail}")
        raise ParallelRunError(f"pytest-xdist stopped with exit code {code}; the end of its log:\n{tail}")
    missing = [r for r in found.values() if r.backend_unavailable]
    if missing:
        raise BackendUnavailableError(f"a worker could not use the backend: {missing[0].error}")
    return merge_results(spec, found, keep_going=args.keep_going)


def _run_pytest(
    command: list[str], env: dict[str, str], results: Path, spec: RunSpec, console: Console, *, quiet: bool
) -> tuple[int, dict[str, JobResult]]:
    """Run pytest, printing each job's line as its result lands; pytest's exit code and the results."""
    try:
        return _watch_pytest(command, env, results, spec, console, quiet=quiet)
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
    command: list[str], env: dict[str, str], results: Path, spec: RunSpec, console: Console, *, quiet: bool
) -> tuple[int, dict[str, JobResult]]:
    found: dict[str, JobResult] = {}
    with open(results / "pytest.log", "w", encoding="utf-8") as log:
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            while True:
                done = proc.poll() is not None
                for job in spec.jobs:
                    path = results / f"{job.key}.json"
                    if job.id not in found and path.exists():
                        found[job.id] = JobResult.from_json(path.read_text(encoding="utf-8"))
                        if not quiet:
                            console.print(job_line(found[job.id]))
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


def job_line(result: JobResult) -> str:
    job = result.job
    name = "built-in scenarios" if job.suite == BUILTIN else escape(f"{one_line(job.suite)} seed {job.seed}")
    if result.error:
        return f"  [red]{name}: failed[/] {escape(one_line(result.error.splitlines()[0]))}"
    if not result.diverged:
        return f"  [green]{name}: clean[/] ({result.examples} scenarios, {result.elapsed_s:.1f}s)"
    first = result.failing.first
    at = f" at example {result.first_failure_at}" if result.first_failure_at else ""
    return f"  [red]{name}: divergence{at}[/] ({result.examples} scenarios, {result.elapsed_s:.1f}s): {escape(one_line(first.headline()))}"


class _Stopped(KeyboardInterrupt):
    """The parallel run was stopped; ``found``: the results of the jobs that had finished."""

    def __init__(self, found: dict[str, JobResult]) -> None:
        super().__init__()
        self.found = found


class ParallelInterrupted(KeyboardInterrupt):
    """A stopped parallel run, with what its finished jobs found (merged as a whole run's would be)."""

    def __init__(self, outcomes: list[CheckOutcome], fuzzed: list[FuzzResult]) -> None:
        super().__init__()
        self.outcomes, self.fuzzed = outcomes, fuzzed


def merge_results(
    spec: RunSpec, found: dict[str, JobResult], *, keep_going: bool, allow_empty: bool = False
) -> tuple[list[CheckOutcome], list[FuzzResult]]:
    """One report's outcomes: per suite the smallest shrunk divergence over its seeds, then the demo scenarios.

    A job that ran out of memory (or met the memory limit) is what ``-j 1`` makes of it: a
    :class:`WorkerOutOfResources`, the machine's limit (exit 2), never a crash divergence of the engine.
    """
    exhausted = [found[job.id] for job in spec.jobs if job.id in found and found[job.id].out_of_resources]
    if exhausted and not allow_empty:
        raise WorkerOutOfResources(f"job {exhausted[0].job.id!r}: {exhausted[0].error}")
    refused = next((found[j.id] for j in spec.jobs if j.id in found and found[j.id].engine_refused), None)
    if refused is not None:  # the engine's doing, not a finding: what -j 1 raises
        raise (EngineSpecError if refused.engine_refused == "protocol" else EngineAbortedError)(refused.error)
    results = [
        _with_crash(found[job.id], spec) if found[job.id].error else found[job.id]
        for job in spec.jobs
        if job.id in found and not found[job.id].out_of_resources
    ]
    fuzzed = [r.fuzz_result() for r in results if r.job.suite != BUILTIN]
    outcomes: list[CheckOutcome] = []
    for suite in dict.fromkeys(j.suite for j in spec.jobs if j.suite != BUILTIN):
        diverged = [r for r in results if r.job.suite == suite and r.diverged]
        if not diverged:
            continue
        best = min(diverged, key=lambda r: (_size(r.outcomes[0].scenario), r.job.seed))
        shrunk = best.outcomes[0]
        label_found(shrunk, suite)
        outcomes.append(shrunk)
        if not keep_going:
            break
    builtin = next((r for r in results if r.job.suite == BUILTIN), None)
    if builtin is not None and (keep_going or not outcomes):
        outcomes.extend(builtin.outcomes)
    if not outcomes and not allow_empty:
        raise ParallelRunError(f"the parallel run produced no results; see {Path(spec.results_dir) / 'pytest.log'}")
    return outcomes, fuzzed


class ParallelRunError(RunError):
    """Parallel workers ended without results (or a job failed before running any scenario)."""


class WorkerOutOfResources(ResourceError):
    """A worker's engine ran out of memory, or its scenario was above the memory limit: the machine's limit."""


def _last_line(text: str) -> str:
    """The last non-empty line of a worker's error (its full text is in pytest.log)."""
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    return lines[-1][:300] if lines else "no error text"


def _size(scenario: Scenario) -> tuple[int, int, int]:
    return (*scenario_size(scenario), len(scenario.to_json()))


def _with_crash(result: JobResult, spec: RunSpec) -> JobResult:
    """A job whose worker died: a crash divergence on the scenario it was running, when it left one."""
    pending = pending_path(spec, result.job)
    if not pending.is_file():
        raise ParallelRunError(f"job {result.job.id!r} failed before running a scenario: {_last_line(result.error)}")
    scenario = Scenario.from_json(pending.read_text(encoding="utf-8"))
    crash = Divergence(
        "crash",
        0,
        "worker",
        "worker process",
        "a finished job",
        "no result",
        detail=result.error,
    )
    outcome = CheckOutcome(scenario, spec.backend, "none", divergences=[crash], faults=spec.faults)
    hang = _hang_of(hang_marker_path(pending))
    if hang is not None:  # the worker's watchdog ended it: a hang the engine could not be interrupted in
        outcome.divergences = [hang]
        outcome.hung = hang.detail
    return dataclasses.replace(result, outcomes=[outcome])


def _hang_of(marker: Path) -> Divergence | None:
    """The hang a worker's watchdog recorded in ``marker`` before it ended the worker, if any."""
    try:
        data = json.loads(read_regular_file(marker))
        where, limit = str(data["where"]), float(data["limit_s"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    detail = f"the engine's {where} was still running after {limit:g} s (--hang-limit); the worker was ended"
    return Divergence("hang", 0, where, "engine", f"done within {limit:g} s", "still running", detail=detail)
