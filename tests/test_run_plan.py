"""The run plan and the run's results: frozen, JSON both ways, and one path for ``-j 1`` and ``-j N``.

``RunPlan`` (graphcheck.search.plan) is what a run is; ``SuiteResult`` (graphcheck.search.result) what
each suite found; a -j worker receives the one and sends back the other as JSON, the outcomes whole
(``CheckOutcome.to_dict``, graphcheck.check.jsonvalues): no pickle crosses a process.
"""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path

import pytest
from _hostile_engines import HOSTILE, make_hostile
from hypothesis import given
from hypothesis import strategies as st

from graphcheck.check.engines import EngineSpecError
from graphcheck.check.jsonvalues import Shown, ValueCodec
from graphcheck.check.memory_gate import MemoryLimitError
from graphcheck.check.records import CheckOutcome
from graphcheck.check.setup import CheckSetup
from graphcheck.cli import exitcodes, main
from graphcheck.errors import EngineAbortedError, ResourceError
from graphcheck.parallel.jobs import BUILTIN, Job, JobList, plan_jobs, result_from_json, result_json, run_job
from graphcheck.parallel.run import merge_results
from graphcheck.search.database import DatabaseSpec
from graphcheck.search.plan import DATABASE_ENV, RunPlan, SkippedSuite, make_plan
from graphcheck.search.result import CRASH, Stop, SuiteResult

import report_samples as samples
from _layers import slow

ROOT = Path(__file__).resolve().parent.parent

# -- values, records and outcomes as JSON -------------------------------------------------------

_scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8) | st.binary(max_size=4)
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=3)
    | st.lists(inner, max_size=3).map(tuple)
    | st.dictionaries(st.integers() | st.text(max_size=4), inner, max_size=3)
    | st.frozensets(st.integers(), max_size=3),
    max_leaves=10,
)


def _same(a: object, b: object) -> bool:
    """Equal, NaN included, and of the same types all the way down."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return a == b


@given(_values)
def test_a_value_survives_json_exactly(value: object) -> None:
    codec = ValueCodec()
    text = json.dumps(codec.encode(value), allow_nan=False)
    assert _same(codec.decode(json.loads(text)), value)


def test_a_value_json_cannot_hold_prints_as_it_did() -> None:
    class Odd:
        def __repr__(self) -> str:
            return "<odd 7>"

    back = ValueCodec().decode(json.loads(json.dumps(ValueCodec().encode([Odd()]))))
    assert back == [Shown("<odd 7>")] and f"{back[0]!r}" == "<odd 7>"


def test_numpy_values_come_back_as_numpy() -> None:
    np = pytest.importorskip("numpy")
    codec = ValueCodec()
    array = np.arange(6, dtype=np.int16).reshape(2, 3)
    back = codec.decode(json.loads(json.dumps(codec.encode((array, np.float32(1.5))))))
    assert back[0].dtype == np.int16 and (back[0] == array).all() and back[1] == np.float32(1.5)
    assert type(back[1]) is np.float32


@pytest.mark.parametrize(
    "outcome",
    [samples.localised_outcome(), samples.diverged_outcome(), samples.clean_outcome(), *samples.builtin_outcomes()],
    ids=["localised", "diverged", "clean", "demo1", "demo2", "demo3", "demo4"],
)
def test_an_outcome_survives_json_whole(outcome: CheckOutcome) -> None:
    back = CheckOutcome.from_dict(json.loads(json.dumps(outcome.to_dict(), allow_nan=False)))
    assert back == outcome
    assert [d.headline() for d in back.divergences] == [d.headline() for d in outcome.divergences]


def test_a_suite_result_survives_json_with_its_outcome_and_tallies() -> None:
    outcomes, suites = samples.fuzzed_divergence()
    result = suites[1]
    back = result_from_json(result_json(result))
    assert back == result and back.headline == result.headline and back.situations_reached == 21
    stopped = SuiteResult("padding", 2, stop=Stop("EngineSpecError", "step() returned dict"))
    assert result_from_json(result_json(stopped)) == stopped


# -- the plan --------------------------------------------------------------------------------

_plans = st.builds(
    RunPlan,
    suites=st.lists(st.sampled_from(["padding", "seeds", "org/x"]), unique=True).map(tuple),
    examples=st.integers(1, 100_000),
    seed=st.integers(0, 2**32),
    backend=st.sampled_from(["cpu", "cuda", "npu", "xpu"]),
    emulate=st.booleans(),
    emulator=st.sampled_from(["kernel", "ops"]),
    engine=st.sampled_from(["builtin", "pkg.mod:Engine"]),
    setup=st.sampled_from([CheckSetup(), CheckSetup.parse("float32", None, None)]),
    faults=st.lists(st.text(min_size=1, max_size=6), max_size=2).map(tuple),
    demo_steps=st.integers(1, 10_000),
    demos=st.booleans(),
    keep_going=st.booleans(),
    database=st.sampled_from([DatabaseSpec("none"), DatabaseSpec("directory", "/tmp/db")]),
    hang_limit=st.sampled_from([300.0, 0.5, math.inf]),
    workers=st.integers(1, 64),
    skipped=st.lists(st.builds(SkippedSuite, st.text(max_size=5), st.text(max_size=5)), max_size=2).map(tuple),
)


@given(_plans)
def test_a_plan_survives_json(plan: RunPlan) -> None:
    assert RunPlan.from_dict(json.loads(json.dumps(plan.to_dict(), allow_nan=False))) == plan


def test_a_plan_on_disk_holds_no_credentials_and_a_worker_gets_them_from_its_environment() -> None:
    url = "redis://:s3cr@t@127.0.0.1:6379/0"
    plan = RunPlan(("padding",), 8, database=DatabaseSpec("redis", url))
    shown = json.dumps(plan.to_dict())
    assert "s3cr" not in shown and "s3cr" in json.dumps(plan.to_dict(secret=True))
    back = RunPlan.from_dict(json.loads(shown)).with_database({DATABASE_ENV: url})
    assert back == plan


def test_a_job_is_the_same_plan_narrowed_to_its_suite_and_seed() -> None:
    plan = RunPlan(("padding", "seeds"), 8, seed=4, workers=2, keep_going=True)
    jobs = plan_jobs(plan)
    assert jobs == (Job("padding", 4), Job("padding", 5), Job("seeds", 4), Job("seeds", 5), Job(BUILTIN))
    one = plan.for_job("seeds", 5)
    assert (one.suites, one.seed, one.demos, one.workers, one.keep_going) == (("seeds",), 5, False, 1, True)
    demos = plan.for_job(None, 0)
    assert demos.suites == () and demos.demos
    listed = JobList(plan, jobs, "/tmp/r")
    assert JobList.from_json(listed.to_json()) == listed


def test_make_plan_checks_names_and_ranges() -> None:
    from graphcheck.errors import InputError

    plan = make_plan(suites=["padding", "padding"], examples=3, faults=["stale-padding-rows"])
    assert plan.suites == ("padding",) and plan.faults == ("stale-padding-rows",) and plan.engine == "builtin"
    for bad in (
        dict(suites=["nope"], examples=3),
        dict(suites=None, examples=0),
        dict(suites=None, examples=3, faults=["x"]),
    ):
        with pytest.raises(InputError):
            make_plan(**bad)  # type: ignore[arg-type]


# -- what ends a run: the same error, whichever process raised it -----------------------------------


@pytest.mark.parametrize(
    "error",
    [
        EngineSpecError("step() returned dict"),
        MemoryLimitError("config", "above the limit"),
        ResourceError("out of memory"),
        EngineAbortedError("SystemExit: 0 in step"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_a_stopped_result_raises_again_what_stopped_it(error: Exception) -> None:
    rebuilt = result_from_json(result_json(SuiteResult("padding", stop=Stop.of(error)))).stop.error()
    assert type(rebuilt) is type(error) and str(rebuilt) == str(error)
    assert exitcodes.exit_for(rebuilt) == exitcodes.exit_for(error)
    assert Stop(CRASH, "worker died").error() is None


@pytest.fixture
def hostile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    site = make_hostile(tmp_path / "site")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), str(ROOT), os.environ.get("PYTHONPATH", "")]))
    for name in [m for m in sys.modules if m.startswith(HOSTILE)]:
        monkeypatch.delitem(sys.modules, name)
    return site


def _args(tmp_path: Path, *extra: str) -> list[str]:
    engine = f"{HOSTILE}:BreaksLater"
    common = ["--suite", "addresses", "--examples", "4", "--steps", "3", "--database", "none", "--quiet"]
    return ["run", "--engine", engine, *common, "--report-dir", str(tmp_path / "reports"), *extra]


def test_an_engine_breaking_its_protocol_mid_run_ends_a_job_as_it_ends_a_j1_run(
    hostile: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """-j 1 in process, then one -j N job in process (the worker's code) and the parent's merge: one exit code."""
    import gc_hostile

    code = main(_args(tmp_path))
    captured = capsys.readouterr()
    assert code == exitcodes.USAGE and "step() returned dict" in captured.err and "DIVERGENCE" not in captured.out
    gc_hostile.BreaksLater.steps = 0
    plan = make_plan(suites=["addresses"], examples=4, engine=f"{HOSTILE}:BreaksLater", demo_steps=3, workers=2)
    jobs = JobList(plan, plan_jobs(plan), str(tmp_path))
    result = result_from_json(result_json(run_job(jobs, jobs.jobs[0])))
    assert result.stop is not None and result.stop.kind == "EngineSpecError"
    with pytest.raises(EngineSpecError) as raised:
        merge_results(jobs, {jobs.jobs[0].id: result})
    assert exitcodes.exit_for(raised.value).code == code
    assert exitcodes.exit_for(raised.value).message(raised.value) == captured.err.strip()


@slow  # two pytest-xdist workers start (about 10 s)
def test_an_engine_breaking_its_protocol_mid_run_is_exit_2_under_j1_and_j2(
    hostile: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("xdist")
    codes = []
    for jobs in ("1", "2"):
        codes.append(main(_args(tmp_path / jobs, "-j", jobs)))
        captured = capsys.readouterr()
        assert "step() returned dict" in captured.err and "DIVERGENCE" not in captured.out, jobs
    assert codes == [exitcodes.USAGE, exitcodes.USAGE]
