"""The jobs of a parallel ``graphcheck run -j N``: what each worker runs, and what it sends back.

A RunSpec is the whole run as the parent planned it (backend, faults, budget,
example database, where results go) plus its jobs: one per (suite, seed) pair,
seeds ``seed .. seed+N-1`` for every suite, and one ``builtin`` job for the
demo scenarios. ``run_job`` runs one job in a worker process and returns a
JobResult; the outcomes travel pickled (workers and parent run the same
graphcheck), the rest as plain JSON so ``jobs/*.json`` stays readable.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import hashlib
import json
import pickle
import re
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from graphcheck.check.checker import Checker
from graphcheck.check.engines import resolve_engine
from graphcheck.check.noise import NumericTally
from graphcheck.check.records import CheckOutcome
from graphcheck.check.setup import CheckSetup
from graphcheck.check.situations import CoverageTally
from graphcheck.check.watchdog import DEFAULT_HANG_LIMIT_S, HardHang, watching
from graphcheck.display import redacted
from graphcheck.files import write_atomic
from graphcheck.search.builtin import builtin_scenarios
from graphcheck.search.database import DatabaseSpec, database_key
from graphcheck.search.fuzz import FuzzResult, fuzz_suite, write_pending
from graphcheck.search.suite_registry import load_suites

BUILTIN = "builtin"
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


#: The run's database location (a URL with its credentials), from the parent to the xdist controller.
DATABASE_ENV = "GRAPHCHECK_JOB_DATABASE"


@dataclass(frozen=True)
class RunSpec:
    """Everything a worker needs; sent to each worker as JSON (xdist's ``workerinput``)."""

    backend: str
    emulate: bool
    faults: tuple[str, ...]
    examples: int
    steps: int
    database: DatabaseSpec
    results_dir: str  # on the parent's machine; a remote worker's pending files go to its temp dir
    jobs: tuple[Job, ...]
    setup: dict[str, Any] = dataclasses.field(default_factory=dict)  # CheckSetup.to_dict()
    engine: str = "builtin"  # --engine SPEC; each worker resolves it again
    emulator: str = "kernel"  # --emulator
    hang_limit: float = DEFAULT_HANG_LIMIT_S  # --hang-limit, seconds (inf: unbounded)

    def to_json(self, *, secret: bool = False) -> str:
        """As JSON; the database URL's credentials redacted unless ``secret`` (what goes to the workers
        over xdist's channel, never to disk: ``jobs/spec.json`` is a report file)."""
        data = dataclasses.asdict(self)
        if not secret:
            data["database"]["location"] = redacted(self.database.location)
        return json.dumps(data, indent=1)

    def with_database(self, environ: Mapping[str, str]) -> RunSpec:
        """This spec with the database the parent put in ``environ`` (:data:`DATABASE_ENV`), whose
        credentials ``jobs/spec.json`` does not hold."""
        location = environ.get(DATABASE_ENV)
        if not location or self.database.kind == "none":
            return self
        return dataclasses.replace(self, database=DatabaseSpec(self.database.kind, location))

    @classmethod
    def from_json(cls, text: str) -> RunSpec:
        data = json.loads(text)
        data["faults"] = tuple(data["faults"])
        data["database"] = DatabaseSpec(**data["database"])
        data["jobs"] = tuple(Job(**job) for job in data["jobs"])
        return cls(**data)


@dataclass
class JobResult:
    """What one job found. ``outcomes``: the shrunk failing one (fuzz), or every demo scenario's (builtin)."""

    job: Job
    examples: int = 0
    steps: int = 0
    elapsed_s: float = 0.0
    first_failure_at: int | None = None
    outcomes: list[CheckOutcome] = field(default_factory=list)
    error: str = ""  # why the job could not run (its backend, say); empty when it ran
    backend_unavailable: bool = False
    #: ``error`` is the machine's limit (memory: a ResourceError) or a refused input, not an engine failure
    out_of_resources: bool = False
    #: ``error`` is the engine's, not a finding: "protocol" (it broke the adapter protocol, exit 2) or
    #: "aborted" (it raised what would end graphcheck outside a lockstep run, exit 6); empty otherwise
    engine_refused: str = ""
    ambiguous_examples: int = 0  # examples with an ambiguous divergence (FuzzResult.ambiguous_examples)
    coverage: CoverageTally = field(default_factory=CoverageTally)  # FuzzResult.coverage
    numeric: NumericTally = field(default_factory=NumericTally)  # FuzzResult.numeric

    @property
    def failing(self) -> CheckOutcome | None:
        """The first outcome with a failing divergence, or None."""
        return next((o for o in self.outcomes if not o.clean), None)

    @property
    def diverged(self) -> bool:
        return self.failing is not None

    def fuzz_result(self) -> FuzzResult:
        """As a FuzzResult, its suite labelled with the seed (one row per job in the summary)."""
        return FuzzResult(
            f"{self.job.suite} seed {self.job.seed}",
            self.examples,
            self.steps,
            self.failing,
            self.elapsed_s,
            self.first_failure_at,
            ambiguous_examples=self.ambiguous_examples,
            coverage=self.coverage,
            numeric=self.numeric,
        )

    def to_json(self) -> str:
        failing = self.failing
        data = {
            "job": dataclasses.asdict(self.job),
            "id": self.job.id,
            "examples": self.examples,
            "steps": self.steps,
            "elapsed_s": self.elapsed_s,
            "first_failure_at": self.first_failure_at,
            "headline": failing.first.headline() if failing else None,
            "error": redacted(self.error),
            "backend_unavailable": self.backend_unavailable,
            "out_of_resources": self.out_of_resources,
            "engine_refused": self.engine_refused,
            "ambiguous_examples": self.ambiguous_examples,
            "coverage": self.coverage.to_dict(),
            "numeric": self.numeric.to_dict(),
            "outcomes": base64.b64encode(pickle.dumps(self.outcomes)).decode("ascii"),
        }
        return json.dumps(data, indent=1)

    @classmethod
    def from_json(cls, text: str) -> JobResult:
        data = json.loads(text)
        return cls(
            Job(**data["job"]),
            data["examples"],
            data["steps"],
            data["elapsed_s"],
            data["first_failure_at"],
            pickle.loads(base64.b64decode(data["outcomes"])),
            data["error"],
            data["backend_unavailable"],
            data.get("out_of_resources", False),
            data.get("engine_refused", ""),
            data.get("ambiguous_examples", 0),
            CoverageTally.from_dict(data.get("coverage", {})),
            NumericTally.from_dict(data.get("numeric")),
        )


def pending_path(spec: RunSpec, job: Job) -> Path:
    """Where ``job`` writes the scenario about to run: the parent's results folder when this machine has it."""
    folder = Path(spec.results_dir)
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


def run_job(spec: RunSpec, job: Job) -> JobResult:
    """Run ``job`` here (a worker); a crash mid-job leaves its scenario in ``pending_path``."""
    from graphcheck.backends.devices import BackendError, resolve
    from graphcheck.check.boundary import user_stops
    from graphcheck.check.engines import EngineSpecError
    from graphcheck.check.memory_gate import MemoryLimitError
    from graphcheck.errors import EngineAbortedError, InputError, ResourceError

    try:
        backend = resolve(spec.backend, emulate=spec.emulate, emulator=spec.emulator)
    except BackendError as err:
        return JobResult(job, error=str(err), backend_unavailable=True)
    try:
        checker = Checker(backend, resolve_engine(spec.engine), CheckSetup.from_dict(spec.setup), spec.faults)
    except InputError as err:  # the parent resolved it: only a worker with another sys.path gets here
        return JobResult(job, error=str(err))
    from graphcheck.check.threads import single_threaded

    pending = pending_path(spec, job)
    started = time.perf_counter()
    # Workers share the cores: one intra-op thread each (on the CPU) is faster than contending pools.
    try:  # a worker is stopped by its parent, never by a KeyboardInterrupt of the engine's own
        with single_threaded(backend), user_stops(), watching(spec.hang_limit, _hang_marker(pending)):
            if job.suite == BUILTIN:
                result = _run_builtin(spec, job, checker, pending)
            else:
                result = _run_fuzz(spec, job, checker, pending)
    except (ResourceError, MemoryLimitError) as err:  # the machine's limit (or the memory gate's): no finding
        return JobResult(job, error=str(err), out_of_resources=True)
    except EngineSpecError as err:  # a broken promise of the adapter protocol: what -j 1 makes of it
        return JobResult(job, error=str(err), engine_refused="protocol")
    except EngineAbortedError as err:
        return JobResult(job, error=str(err), engine_refused="aborted")
    result.elapsed_s = time.perf_counter() - started
    if all(o.engine_error is None for o in result.outcomes):  # an engine that tried to exit: its scenario stays
        pending.unlink(missing_ok=True)
    return result


@functools.cache
def _open_database(spec: DatabaseSpec) -> Any:
    """One database per worker process, shared by its jobs (opening a Redis one pings the server)."""
    return spec.open()


def _run_fuzz(spec: RunSpec, job: Job, checker: Checker, pending: Path) -> JobResult:
    suite = load_suites()[job.suite]
    fuzzed = fuzz_suite(
        suite.name,
        checker.strategy(suite.strategy()),
        checker,
        examples=spec.examples,
        seed=job.seed,
        pending_path=pending,
        database=_open_database(spec.database),
        database_key=database_key(suite.name, checker),
    )
    outcomes = [fuzzed.outcome] if fuzzed.outcome is not None else []
    return JobResult(
        job,
        fuzzed.examples,
        fuzzed.steps,
        fuzzed.elapsed_s,
        fuzzed.first_failure_at,
        outcomes,
        ambiguous_examples=fuzzed.ambiguous_examples,
        coverage=fuzzed.coverage,
        numeric=fuzzed.numeric,
    )


def _run_builtin(spec: RunSpec, job: Job, checker: Checker, pending: Path) -> JobResult:
    outcomes = []
    for scenario in builtin_scenarios(spec.steps):
        scenario = checker.prepare(scenario)
        write_pending(pending, scenario)
        outcomes.append(checker.run(scenario, localise=True))
    return JobResult(job, len(outcomes), sum(o.steps_run for o in outcomes), outcomes=outcomes)
