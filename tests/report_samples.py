"""Hand-built CheckOutcomes for the report tests: a clean run, a diverged run, every kind, a long run.

The step results come from a toy scheduler (not the engine): requests take the
lowest free slot, accept 1..k+1 made-up tokens a step (or what the accept script
forces) and leave on max_dec_len or abort. Divergences are then planted by hand.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Sequence

from graphcheck.check.diff import Divergence
from graphcheck.check.records import SOURCES, Binding, CheckOutcome, Localisation, StepRecord
from graphcheck.check.situations import SITUATION_NAMES, CoverageTally
from graphcheck.report import RunInfo
from graphcheck.scenario import SEED_MODULUS, RequestSpec, Scenario
from graphcheck.search.builtin import demo_scenario
from graphcheck.search.result import SuiteResult
from graphcheck.step_result import RequestStep, StepResult

STALE_CAPTURED = 0x7F3A_0000_4000
STALE_CURRENT = 0x7F3A_0001_8000
XSS = "<script>alert(1)</script>"
TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "backends/engine/step.py", line 212, in step\n'
    "    self._verify(batch)\n"
    '  File "backends/engine/verify.py", line 88, in _verify\n'
    f"    raise RuntimeError('index 7 out of range for buffer of size 5 {XSS}')\n"
    f"RuntimeError: index 7 out of range for buffer of size 5 {XSS} & friends\n"
)


@dataclass
class _Live:
    spec: RequestSpec
    slot: int
    generated: int = 0
    seed: int = 0
    step_idx: int = 0
    new: bool = True


def _tokens(step: int, rid: str, n: int, vocab: int) -> tuple[int, ...]:
    base = step * 7 + sum(map(ord, rid)) * 13
    return tuple((base + 5 * j) % vocab for j in range(n))


def _advance(live: _Live, step: int, scenario: Scenario) -> RequestStep:
    cfg, spec = scenario.config, live.spec
    forced = scenario.accept_overrides_at(step).get(spec.request_id)
    n = 1 if live.new else (forced + 1 if forced is not None else 1 + (step + live.slot) % cfg.tokens_per_request)
    n = min(n, spec.max_dec_len - live.generated)
    live.generated += n
    live.step_idx += n
    live.seed = (live.seed + cfg.seed_increment) % SEED_MODULUS
    stopped = live.generated >= spec.max_dec_len
    drafts = () if stopped else _tokens(step + 1, spec.request_id, cfg.num_speculative_tokens, cfg.vocab_size)
    return RequestStep(
        spec.request_id,
        _tokens(step, spec.request_id, n, cfg.vocab_size),
        drafts,
        live.seed,
        live.step_idx,
        len(spec.prompt) + live.generated - 1,
        stopped,
    )


def _bucket(scenario: Scenario, real_bsz: int) -> int | None:
    fits = [s for s in scenario.config.capture_sizes if s >= real_bsz]
    return min(fits) if fits else None


def _bindings(bucket: int, k1: int) -> tuple[Binding, ...]:
    graph = f"target/{bucket}"
    return tuple(
        Binding(
            graph, name, 0x7F3A_1000_0000 + i * 0x1000, 0x7F3A_1000_0000 + i * 0x1000, True, (bucket * k1,), "int64"
        )
        for i, name in enumerate(("input_ids", "cu_seqlens_q_output", "infer_seed"))
    )


def base_records(scenario: Scenario) -> list[StepRecord]:
    """One StepRecord per step of the toy scheduler (source "graph"; copy it for the others)."""
    cfg, free, live, records = scenario.config, list(range(scenario.config.max_num_seqs)), {}, []
    queue: list[RequestSpec] = []
    for step in range(scenario.num_steps):
        for rid in [r for r, lv in live.items() if lv.spec.abort_step == step]:
            free.append(live.pop(rid).slot)
        queue += [r for r in scenario.requests if r.arrival_step == step]
        while queue and free:
            spec = queue.pop(0)
            free.sort()
            live[spec.request_id] = _Live(spec, free.pop(0), seed=spec.seed)
        prefill = any(lv.new for lv in live.values())
        rows = tuple(_advance(live[rid], step, scenario) for rid in sorted(live))
        slots = tuple((rid, live[rid].slot) for rid in sorted(live))
        real_bsz = max((s for _, s in slots), default=-1) + 1
        bucket = None if prefill or not live else _bucket(scenario, real_bsz)
        real = sum(len(live[r].spec.prompt) if live[r].new else cfg.tokens_per_request for r in live)
        records.append(
            StepRecord(
                "graph",
                step,
                StepResult(step, rows),
                slots,
                bucket,
                bucket is not None,
                real_bsz,
                len(live),
                real,
                real if bucket is None else bucket * cfg.tokens_per_request,
                _bindings(bucket, cfg.tokens_per_request) if bucket else (),
                3 * 2**20,
            )
        )
        for rid in [r.request_id for r in rows if r.stopped]:
            free.append(live.pop(rid).slot)
        for lv in live.values():
            lv.new = False
    return records


def _as_source(records: list[StepRecord], source: str) -> list[StepRecord]:
    if source == "graph":
        return list(records)
    eager = source == "eager"
    return [
        dataclasses.replace(
            r,
            source=source,
            bucket=None,
            used_graph=False,
            bindings=(),
            padded_tokens=r.real_tokens,
            memory_bytes=2**20 if eager else 0,
        )
        for r in records
    ]


def outcome_for(
    scenario: Scenario, divergences: Sequence[Divergence] = (), faults: tuple[str, ...] = ()
) -> CheckOutcome:
    base = base_records(scenario)
    return CheckOutcome(
        scenario,
        "cpu",
        "emulated",
        {s: _as_source(base, s) for s in SOURCES},
        list(divergences),
        steps_run=scenario.num_steps,
        elapsed_s=0.42,
        faults=faults,
    )


def patch_request(outcome: CheckOutcome, source: str, step: int, rid: str, **changes: object) -> RequestStep:
    """Change one request's row of one source's record; returns the row as it was."""
    records = outcome.records[source]
    i = next(i for i, r in enumerate(records) if r.step == step)
    rows = records[i].result.requests
    j = next(j for j, r in enumerate(rows) if r.request_id == rid)
    new_rows = rows[:j] + (dataclasses.replace(rows[j], **changes),) + rows[j + 1 :]
    records[i] = dataclasses.replace(records[i], result=StepResult(step, new_rows))
    return rows[j]


def patch_record(outcome: CheckOutcome, source: str, step: int, **changes: object) -> None:
    records = outcome.records[source]
    i = next(i for i, r in enumerate(records) if r.step == step)
    records[i] = dataclasses.replace(records[i], **changes)


def run_info(**changes: object) -> RunInfo:
    info = RunInfo(
        run_id="20260509-073525",
        backend="cpu",
        runner="emulated",
        emulate=True,
        seed=1234,
        profile="ci",
        started_at="2026-05-09T07:35:25+00:00",
        elapsed_s=1.25,
        version="0.1.0",
    )
    return dataclasses.replace(info, **changes)


def clean_outcome() -> CheckOutcome:
    return outcome_for(demo_scenario(num_steps=8))


def diverged_outcome() -> CheckOutcome:
    """Address + token at step 3 (eager vs graph), an ambiguous row at step 5, a crash at step 7."""
    out = outcome_for(demo_scenario(num_steps=8), faults=("rebind_cu_seqlens",))
    graph3 = next(r for r in out.records["graph"] if r.step == 3)
    stale = Binding(
        f"target/{graph3.bucket}", "cu_seqlens_q_output", STALE_CAPTURED, STALE_CURRENT, True, (5,), "int32"
    )
    patch_record(out, "graph", 3, bindings=graph3.bindings[:1] + (stale,) + graph3.bindings[2:])
    was = patch_request(out, "graph", 3, "r0", accept_tokens=(63,))
    r2 = next(r for r in out.records["reference"][5].result.requests if r.request_id == "r2")
    amb = (r2.accept_tokens[0] + 1,) + r2.accept_tokens[1:]
    patch_request(out, "reference", 5, "r2", accept_tokens=amb, ambiguous=True)
    for source in ("eager", "graph"):
        out.records[source] = out.records[source][:7]
    out.steps_run = 7
    out.divergences = [
        Divergence(
            "address",
            3,
            "cu_seqlens_q_output",
            "captured vs current",
            STALE_CAPTURED,
            STALE_CURRENT,
            detail="buffer rebound after capture; the graph reads the old storage",
        ),
        Divergence("token", 3, "accept_tokens", "eager vs graph", was.accept_tokens, (63,), "r0", 0),
        Divergence("token", 5, "accept_tokens", "reference vs graph", amb, r2.accept_tokens, "r2", 2, ambiguous=True),
        Divergence("crash", 7, "engine.step", "eager vs graph", "step completed", "RuntimeError", detail=TRACEBACK),
    ]
    return out


def every_kind_outcome() -> CheckOutcome:
    """Shape, seed, value, memory and capture divergences on top of the diverged sample."""
    out = diverged_outcome()
    patch_record(out, "graph", 6, bucket=2, padded_tokens=8)
    was = patch_request(out, "graph", 5, "r1", infer_seed=123)
    for step in range(4, 7):
        patch_record(out, "graph", step, memory_bytes=3 * 2**20 + (step - 3) * 8192)
    out.divergences += [
        Divergence(
            "shape", 6, "bucket", "expected vs graph", 4, 2, detail="smallest capture size >= real_bsz (3) is 4"
        ),
        Divergence("seed", 5, "infer_seed", "reference vs graph", was.infer_seed, 123, "r1", 1),
        Divergence("value", 6, "seq_lens_decoder", "eager vs graph", 17, 18, "r2", 2),
        Divergence("memory", 6, "allocator_bytes", "step 4 vs step 6", 3 * 2**20 + 8192, 3 * 2**20 + 3 * 8192),
        Divergence(
            "capture",
            0,
            "draft/2",
            "eager vs graph",
            None,
            "HostSyncError",
            detail="HostSyncError: .item() inside graph capture\n  at backends/engine/draft.py:40",
        ),
    ]
    return out


#: Where ``localised_outcome`` says its first divergence began (values hostile where the page must escape them).
LOCALISATION = Localisation(
    step=3,
    method="kernel trace",
    reason=f"padding rows past the real tokens point at request rows the call then overwrote {XSS}",
    kernel="target_forward",
    argument="buf.slot_mapping",
    buffer="slot_mapping",
    position="kernel 2 of 12 of step 3 (graph engine)",
    where="inside graph #1 (target/4)",
    rows=(4, 5),
    expected="padding <sink> & co",
    actual=[19, 20],
    slot=0,
    request_id="r0",
    source_file="backends/engine/forward.py",
    source_line=72,
    caller="Engine._run_graph",
    caller_file="backends/engine/engine.py",
    caller_line=493,
)


def localised_outcome(localisation: Localisation = LOCALISATION) -> CheckOutcome:
    """The diverged sample with a localisation of its first failing divergence (the address at step 3)."""
    out = diverged_outcome()
    out.localisation = localisation
    return out


def long_outcome(num_steps: int = 500, diverge_at: int = 450) -> CheckOutcome:
    """A long mostly idle run with one failing step far beyond the timeline cap."""
    out = outcome_for(demo_scenario(num_steps=num_steps))
    out.divergences = [Divergence("value", diverge_at, "running_requests", "eager vs graph", [], ["r9"])]
    return out


#: The built-in suites, with the examples and steps of a made-up clean fuzzing run (160 examples, 1,234 steps).
SUITE_FIGURES = (
    ("addresses", 20, 150),
    ("padding", 20, 170),
    ("accept", 20, 160),
    ("seeds", 20, 140),
    ("capacity", 20, 180),
    ("memory", 30, 214),
    ("lifecycle", 30, 220),
)
BUILTIN_MODES = ("greedy", "target_match", "topp", "naive")


def builtin_outcomes() -> list[CheckOutcome]:
    """The four clean demo scenarios a run checks after fuzzing, named as ``graphcheck run`` names them."""
    outcomes = []
    for mode in BUILTIN_MODES:
        out = clean_outcome()
        out.scenario = dataclasses.replace(out.scenario, name=f"builtin/demo-{mode}")
        outcomes.append(out)
    return outcomes


#: Situations (of 46) each suite's scenarios reached, and reached on a replayed step.
SUITE_SITUATIONS = ((14, 12), (21, 17), (18, 15), (9, 7), (16, 13), (12, 10), (25, 19))


def coverage(reached: int = 0, replayed: int = 0, graph_steps: int = 0, replayed_steps: int = 0) -> CoverageTally:
    """A search's tally that reached the first ``reached`` situations, the first ``replayed`` of them on a replayed step."""
    return CoverageTally(
        hits=Counter({name: 1 for name in SITUATION_NAMES[:reached]}),
        replayed=Counter({name: 1 for name in SITUATION_NAMES[:replayed]}),
        graph_steps=graph_steps,
        replayed_steps=replayed_steps,
    )


def suite_result(
    name: str,
    examples: int,
    steps: int,
    elapsed_s: float,
    outcome: CheckOutcome | None = None,
    **fields: object,
) -> SuiteResult:
    """One fuzzed suite's result; ``outcome``: what its search found (reported, unless ``reported=False``)."""
    return SuiteResult(name, 0, examples, steps, elapsed_s, (outcome,) if outcome is not None else (), **fields)


def clean_suite_runs() -> list[SuiteResult]:
    return [
        suite_result(name, examples, steps, 1.5 + i, coverage=coverage(reached, replayed))
        for i, ((name, examples, steps), (reached, replayed)) in enumerate(zip(SUITE_FIGURES, SUITE_SITUATIONS))
    ]


def fuzzed_divergence() -> tuple[list[CheckOutcome], list[SuiteResult]]:
    """``graphcheck run --keep-going``: padding's search diverged (shrunk), the others clean, then the demo scenarios."""
    shrunk = diverged_outcome()
    shrunk.scenario = dataclasses.replace(shrunk.scenario, name="padding/shrunk")
    assert shrunk.first is not None
    runs = clean_suite_runs()
    runs[1] = dataclasses.replace(runs[1], examples=37, steps=260, outcomes=(shrunk,), first_failure_at=3)
    return [shrunk, *builtin_outcomes()], runs


class _Rows(HTMLParser):
    """The cell texts of every row of the table with id ``table_id``."""

    def __init__(self, table_id: str) -> None:
        super().__init__(convert_charrefs=True)
        self.table_id, self.inside = table_id, False
        self.rows: list[list[str]] = []
        self.cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table" and dict(attrs).get("id") == self.table_id:
            self.inside = True
        elif self.inside and tag == "tr":
            self.rows.append([])
        elif self.inside and tag in ("td", "th"):
            self.cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self.inside = False
        elif self.inside and tag in ("td", "th") and self.cell is not None:
            self.rows[-1].append("".join(self.cell).strip())
            self.cell = None

    def handle_data(self, data: str) -> None:
        if self.cell is not None:
            self.cell.append(data)


def table_rows(html: str, table_id: str) -> list[list[str]]:
    """Every row (header included) of the table ``id=table_id`` in ``html``, as cell texts."""
    rows = _Rows(table_id)
    rows.feed(html)
    rows.close()
    return rows.rows
