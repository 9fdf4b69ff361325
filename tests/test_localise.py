"""Kernel-level localisation: where a divergence began (graphcheck.check.localise).

Each injected fault runs on its fixed scenario (tests/_fault_scenarios.py); the
localisation must name what the fault's registry entry declares it breaks
(``Fault.breaks``). The trace itself must find nothing on clean runs. The same
checks run on CUDA (per-kernel capture) where there is a GPU.
"""

from __future__ import annotations

import functools

import pytest

from graphcheck.backends.engine import Engine, faults
from graphcheck.backends.engine.faults import FAULTS
from graphcheck.capture import kernels
from graphcheck.capture.devices import resolve
from graphcheck.check.align import first_parting
from graphcheck.check.call_diff import padded_sizes
from graphcheck.check.checker import check_scenario
from graphcheck.check.localise import _Run, localise_outcome
from graphcheck.check.records import Localisation
from graphcheck.check.trace import KernelTrace
from graphcheck.search.builtin import demo_scenario, late_joiner, shrinking_batch

from _fault_scenarios import FAULT_SCENARIOS, joiner, with_scope
from _layers import fast_first

#: Where eager and graph engines are identically wrong, only the reference sees it: no kernel of
#: either engine differs from the other, so the localisation names the last kernel that wrote
#: the buffer, not the one whose switch is on (see the README's localisation notes).
REFERENCE_ONLY = {faults.SEED_INDEXED_BY_TOKEN, faults.OFFSETS_CUT_SHORT}
SCOPES = ("step", "forward", "forward_sampling")


@pytest.fixture(scope="module")
def cpu():
    return resolve("cpu")


@functools.cache
def cuda():
    return resolve("cuda")


def localised(scenario, backend, fault: str) -> Localisation:
    outcome = check_scenario(scenario, backend, faults=[fault], localise=True)
    assert not outcome.clean
    assert outcome.localisation is not None
    assert outcome.localisation.method != "unavailable", outcome.localisation.reason
    return outcome.localisation


def matches(fault: str, loc: Localisation) -> bool:
    return bool(set(FAULTS[fault].breaks) & loc.names())


# --------------------------------------------------------------------------- the three stories


def check_rebound_buffer(backend) -> None:
    loc = localised(late_joiner("forward_sampling"), backend, faults.REBIND_OUTPUT_OFFSETS)
    assert loc.method == "graph inputs" and loc.buffer == "cu_seqlens_out"
    assert loc.where.startswith("inside ") and loc.kernel and loc.source_line
    assert matches(faults.REBIND_OUTPUT_OFFSETS, loc)


def check_stale_padding_row(backend) -> None:
    scenario = shrinking_batch("target_match", "step", num_steps=7)
    loc = localised(scenario, backend, faults.STALE_PADDING_ROWS)
    assert (loc.method, loc.kernel, loc.argument, loc.buffer) == (
        "kernel trace",
        "target_forward",
        "buf.slot_mapping",
        "slot_mapping",
    )
    assert loc.rows and loc.actual and all(isinstance(v, int) and v > 0 for v in loc.actual)  # not the sink row
    assert loc.source_file and loc.source_file.endswith("forward.py")
    assert "inside graph" in loc.where


def check_frozen_seed(backend) -> None:
    loc = localised(joiner(), backend, faults.SEED_ADVANCE_OUTSIDE_GRAPH)
    assert (loc.kernel, loc.buffer) == ("advance_infer_seed", "infer_seed")
    assert "only in the eager engine" in loc.position
    assert loc.caller and loc.caller.endswith("_run_eager")


def test_a_rebound_buffer_is_localised_to_the_graph_kernel_that_reads_it(cpu) -> None:
    check_rebound_buffer(cpu)


def test_a_stale_padding_row_is_localised_to_the_kernel_and_the_rows(cpu) -> None:
    check_stale_padding_row(cpu)


def test_a_frozen_seed_is_localised_to_the_advance_the_graph_lost(cpu) -> None:
    check_frozen_seed(cpu)


def test_a_seed_frozen_in_both_engines_is_localised_against_the_reference(cpu) -> None:
    loc = localised(FAULT_SCENARIOS[faults.NAIVE_SEED_FROZEN](), cpu, faults.NAIVE_SEED_FROZEN)
    assert loc.method == "reference" and loc.buffer == "infer_seed"


def test_a_leak_from_construction_is_localised_to_the_call_that_left_it(cpu) -> None:
    loc = localised(joiner(), cpu, faults.WARMUP_STATE_LEAKS)
    assert (loc.kernel, loc.buffer, loc.caller) == ("overwrite", "accept_override", "Engine._warm_replay")
    assert "construction" in loc.position


def test_a_frozen_host_value_is_named(cpu) -> None:
    loc = localised(FAULT_SCENARIOS[faults.HOST_MAX_SEQ_LEN_BAKED](), cpu, faults.HOST_MAX_SEQ_LEN_BAKED)
    assert (loc.kernel, loc.argument) == ("target_forward", "span_blocks")
    assert loc.expected > loc.actual == 1  # eager attends over more blocks than the capture saw


def test_a_capture_failure_is_localised_to_the_engine_frame(cpu) -> None:
    loc = localised(FAULT_SCENARIOS[faults.HOST_SYNC_IN_CAPTURE](), cpu, faults.HOST_SYNC_IN_CAPTURE)
    assert loc.method == "traceback" and loc.kernel == "_region_tokens"
    assert loc.source_file and loc.source_file.endswith("engine.py")


@pytest.mark.parametrize("fault", fast_first(sorted(FAULTS), lambda f: f in (faults.DRAFT_PADDING_WRITES_KV,)))
def test_every_fault_is_localised_to_what_it_declares(cpu, fault: str) -> None:
    loc = localised(FAULT_SCENARIOS[fault](), cpu, fault)
    if fault in REFERENCE_ONLY:
        assert loc.method == "reference"  # documented misses: the engines agree with each other
    else:
        assert matches(fault, loc), (fault, loc.headline())


# --------------------------------------------------------------------------- no false localisation


def trace_clean_run(scenario, backend) -> list:
    """Every step of a clean scenario traced on both engines; what the localiser says for each step."""
    run = _Run(scenario, backend, (), Engine)
    said = []
    for t in range(scenario.num_steps):
        run.step(t, traced=True)
        eager = run.traces["eager"].phase_calls(f"step {t}")
        graph = run.traces["graph"].phase_calls(f"step {t}")
        assert eager and graph
        sizes = padded_sizes(run.engines["graph"].last_step_info, scenario.config.tokens_per_request)
        said.append(first_parting(eager, graph, t, sizes))
    return said


#: Every scope with TARGET_MATCH, every verify mode in the step scope (the fast layer: step, target_match).
CLEAN_TRACES = fast_first(
    [
        ("step", "target_match"),
        ("step", "topp"),
        ("step", "naive"),
        ("forward", "target_match"),
        ("forward_sampling", "target_match"),
    ],
    lambda case: case == ("step", "target_match"),
)


@pytest.mark.parametrize("scope, mode", CLEAN_TRACES)
def test_the_trace_finds_nothing_on_a_clean_run(cpu, scope: str, mode: str) -> None:
    demo = demo_scenario(mode if mode != "naive" else "target_match", naive_mode=mode == "naive", num_steps=8)
    scenario = with_scope(demo, scope)
    found = trace_clean_run(scenario, cpu)
    assert found == [None] * scenario.num_steps, [f.headline() for f in found if f]


def test_the_trace_sees_each_replayed_kernel(cpu) -> None:
    run = _Run(joiner(), cpu, (), Engine)
    run.step(0, traced=False)
    run.step(1, traced=True)  # the first replay
    calls = run.traces["graph"].phase_calls("step 1")
    inside = [c for c in calls if c.graph]
    assert inside and all(c.source and c.line for c in inside)
    assert {"target_forward", "verify_drafts"} <= {c.kernel for c in inside}
    assert [c.index for c in calls] == list(range(len(calls)))


def test_tracing_is_not_reentrant_and_ends_cleanly() -> None:
    trace = KernelTrace("t")
    with kernels.tracing(trace):
        with pytest.raises(RuntimeError):
            with kernels.tracing(KernelTrace("u")):
                pass
    assert kernels.current_tracer() is None


def test_a_localisation_that_fails_says_so(cpu) -> None:
    outcome = check_scenario(joiner(), cpu, faults=[faults.SEED_ADVANCE_OUTSIDE_GRAPH])

    def broken(*args, **kwargs):
        raise RuntimeError("the engine cannot be rebuilt")

    loc = localise_outcome(outcome, cpu, faults=[faults.SEED_ADVANCE_OUTSIDE_GRAPH], engine_factory=broken)
    assert loc is not None and loc.method == "unavailable" and "cannot be rebuilt" in loc.reason


def test_an_engine_without_traced_kernels_is_told_so(cpu, monkeypatch: pytest.MonkeyPatch) -> None:
    """An engine whose kernels graphcheck cannot see gets its divergence, and a localisation that says why
    it has no kernel (never a claim about which one)."""
    from graphcheck.check import trace

    monkeypatch.setattr(trace.KernelTrace, "trace_call", lambda self, fn, args, kwargs, *, graph: fn(*args, **kwargs))
    fault = [faults.SEED_ADVANCE_OUTSIDE_GRAPH]
    loc = localise_outcome(check_scenario(joiner(), cpu, faults=fault), cpu, faults=fault)
    assert loc is not None and loc.method == "unavailable" and loc.kernel is None
    assert "kernel decorator" in loc.reason


def test_a_clean_outcome_has_no_localisation(cpu) -> None:
    outcome = check_scenario(joiner(), cpu, localise=True)
    assert outcome.clean and outcome.localisation is None


# --------------------------------------------------------------------------- CUDA: per-kernel capture


@pytest.mark.gpu
def test_cuda_localises_the_three_stories() -> None:
    check_rebound_buffer(cuda())
    check_stale_padding_row(cuda())
    check_frozen_seed(cuda())


@pytest.mark.gpu
@pytest.mark.parametrize("scope", SCOPES)
def test_cuda_trace_finds_nothing_on_a_clean_run(scope: str) -> None:
    scenario = with_scope(demo_scenario(num_steps=8), scope)
    assert trace_clean_run(scenario, cuda()) == [None] * scenario.num_steps


@pytest.mark.gpu
@pytest.mark.parametrize("scope", SCOPES)
def test_cuda_per_kernel_graphs_replay_like_one_graph(scope: str) -> None:
    """A per-kernel capture is a faithful replay: the lockstep with it is clean and bit-exact."""
    from graphcheck.check.lockstep import Lockstep

    outcome = Lockstep(with_scope(demo_scenario(), scope), cuda().for_tracing()).run()
    assert outcome.clean, [d.headline() for d in outcome.failures]
    assert any(r.used_graph for r in outcome.records["graph"])


def test_a_wasted_graph_is_localised_to_the_dispatch_choice_without_a_rerun(cpu) -> None:
    """A step that ran eagerly although its key's graph was captured is a choice, not a kernel's output:
    the localisation names the dispatch and its key, and no engine is built to trace kernels."""
    from graphcheck.check.localise import localise
    from graphcheck.check.records import CheckOutcome, Divergence

    wasted = Divergence("shape", 3, "graph dispatch", "policy vs graph engine", 12, None, detail="(a wasted graph)")
    outcome = CheckOutcome(demo_scenario(num_steps=4), "cpu", "emulated", divergences=[wasted])

    def no_engine(*args: object, **kwargs: object) -> None:
        raise AssertionError("a policy finding needs no engine")

    loc = localise(outcome, cpu, engine_factory=no_engine)
    assert loc is not None and loc.method == "policy" and loc.step == 3
    assert "graph dispatch" in loc.names() and "12" in loc.reason
