"""Per-kind detail tables: stale bindings, buckets, seeds, token sequences, memory, tracebacks."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from graphcheck.check.diff import KINDS, Divergence
from graphcheck.check.records import SOURCES, Binding, CheckOutcome, StepRecord
from graphcheck.report.fmt import Capped, cap, hex_ptr, human_bytes, show, signed_bytes
from graphcheck.report.views import DivRow, div_rows, records_by_step

MAX_DETAIL_ROWS = 200
MAX_SEQUENCE_TOKENS = 400
MAX_TRACEBACK_CHARS = 20_000

TITLES: dict[str, tuple[str, str]] = {
    "address": (
        "Address",
        "A graph static input no longer points at the storage it captured: the buffer was "
        "rebound instead of updated in place, or the captured storage was freed. Replays read stale memory.",
    ),
    "shape": ("Shape", "Bucket choice, padded vs real token counts, output slicing or buffer capacity disagree."),
    "state": (
        "State",
        "An engine buffer's meaningful rows (running slots, the step's real-token rows, the cache blocks "
        "of running requests) differ between the eager and the graph engine after a step, or a free "
        "slot does not hold its idle value (slot hygiene): the cause, before it reaches a token.",
    ),
    "seed": (
        "Seed",
        "infer_seed after a step disagrees: a path that does not advance it, advances it outside "
        "the graph, or by the wrong amount.",
    ),
    "token": ("Token", "Accepted tokens, draft tokens or stop flags differ."),
    "value": ("Value", "Lengths, step_idx, the running set or other state the next step depends on differ."),
    "memory": ("Memory", "Memory held by the engine and its graphs grew across replays after warmup."),
    "crash": ("Crash", "The engine raised, or its worker died."),
    "capture": ("Capture", "Capturing a graph failed, for example on a host sync inside the captured region."),
    "hang": ("Hang", "A call into the engine (build, capture, step, reset) ran past --hang-limit seconds."),
}


@dataclass(frozen=True)
class Cell:
    text: str
    css: str = ""
    title: str = ""


@dataclass(frozen=True)
class BindingRow:
    graph: str
    name: str
    captured: str
    current: str
    alive: bool
    moved: bool
    shape: str
    dtype: str
    steps: str


@dataclass(frozen=True)
class ShapeRow:
    step: int
    real_bsz: int
    num_running: int
    expected_bucket: str
    used_bucket: str
    real_tokens: int
    padded_tokens: int
    expected_padded: str
    bucket_ok: bool
    padded_ok: bool


@dataclass(frozen=True)
class SeedRow:
    step: int
    request_id: str
    slot: str
    cells: tuple[Cell, ...]  # one per source in SOURCES
    mismatch: bool


@dataclass(frozen=True)
class TokenSeq:
    request_id: str
    first_mismatch: int | None
    first_step: int | None
    start: int
    rows: tuple[tuple[str, int, tuple[Cell, ...]], ...]  # (source, full length, shown cells)
    hidden_after: int


@dataclass(frozen=True)
class MemoryRow:
    step: int
    eager: str
    graph: str
    delta: str
    flagged: bool


@dataclass(frozen=True)
class TracebackView:
    kind: str
    step: int
    where: str
    tensor: str
    text: str


@dataclass
class KindSection:
    kind: str
    title: str
    blurb: str
    rows: Capped[DivRow]
    bindings: list[BindingRow] = field(default_factory=list)
    shapes: list[ShapeRow] = field(default_factory=list)
    seeds: Capped[SeedRow] | None = None
    tokens: list[TokenSeq] = field(default_factory=list)
    memory: Capped[MemoryRow] | None = None
    tracebacks: list[TracebackView] = field(default_factory=list)


# -- address ----------------------------------------------------------------


def binding_rows(outcome: CheckOutcome) -> list[BindingRow]:
    """Every stale binding the graph engine reported, once, with the steps it was seen on."""
    seen: dict[tuple, tuple[Binding, list[int]]] = {}
    for rec in outcome.records.get("graph", []):
        for b in rec.bindings:
            if b.stale:
                key = (b.graph, b.name, b.captured_ptr, b.current_ptr, b.alive)
                seen.setdefault(key, (b, []))[1].append(rec.step)
    return [_binding_row(b, steps) for b, steps in list(seen.values())[:MAX_DETAIL_ROWS]]


def _binding_row(b: Binding, steps: list[int]) -> BindingRow:
    span = f"{steps[0]}" if len(steps) == 1 else f"{steps[0]}–{steps[-1]} ({len(steps)} replays)"
    return BindingRow(
        graph=b.graph,
        name=b.name,
        captured=hex_ptr(b.captured_ptr),
        current="— (no buffer)" if b.current_ptr is None else hex_ptr(b.current_ptr),
        alive=b.alive,
        moved=b.current_ptr != b.captured_ptr,
        shape="×".join(map(str, b.shape)) or "—",
        dtype=b.dtype or "—",
        steps=span,
    )


# -- shape ------------------------------------------------------------------


def expected_bucket(capture_sizes: Sequence[int], real_bsz: int) -> int | None:
    """The smallest capture size >= real_bsz; None when the batch is larger than every bucket."""
    fits = [s for s in capture_sizes if s >= real_bsz]
    return min(fits) if fits else None


def shape_rows(outcome: CheckOutcome, divs: Sequence[Divergence]) -> list[ShapeRow]:
    graph = records_by_step(outcome, "graph")
    cfg = outcome.scenario.config
    rows = []
    for step in sorted({d.step for d in divs})[:MAX_DETAIL_ROWS]:
        rec = graph.get(step)
        if rec is None:
            continue
        want = expected_bucket(cfg.capture_sizes, rec.real_bsz)
        want_padded = None if want is None else want * cfg.tokens_per_request
        rows.append(
            ShapeRow(
                step=step,
                real_bsz=rec.real_bsz,
                num_running=rec.num_running,
                expected_bucket="eager" if want is None else str(want),
                used_bucket="eager" if rec.bucket is None else str(rec.bucket),
                real_tokens=rec.real_tokens,
                padded_tokens=rec.padded_tokens,
                expected_padded="—" if want_padded is None else str(want_padded),
                bucket_ok=rec.bucket == want or not rec.used_graph,
                padded_ok=want_padded is None or not rec.used_graph or rec.padded_tokens == want_padded,
            )
        )
    return rows


# -- seed -------------------------------------------------------------------


def seed_table(outcome: CheckOutcome, divs: Sequence[Divergence]) -> Capped[SeedRow]:
    wanted = {d.request_id for d in divs if d.request_id is not None}
    by_source = [records_by_step(outcome, s) for s in SOURCES]
    steps = sorted(set().union(*by_source))
    rows = [row for rid in sorted(wanted) for step in steps if (row := _seed_row(step, rid, by_source))]
    return cap(rows, lambda r: r.mismatch, MAX_DETAIL_ROWS)


def _seed_row(step: int, rid: str, by_source: list[dict[int, StepRecord]]) -> SeedRow | None:
    seeds: list[int | None] = []
    slot = "—"
    for by_step in by_source:
        rec = by_step.get(step)
        req = rec.result.by_id().get(rid) if rec else None
        seeds.append(req.infer_seed if req else None)
        if rec and rid in rec.slot_of():
            slot = str(rec.slot_of()[rid])
    if all(s is None for s in seeds):
        return None
    present = {s for s in seeds if s is not None}
    reference = seeds[0]
    cells = tuple(Cell(show(s), "bad" if s is not None and len(present) > 1 and s != reference else "") for s in seeds)
    return SeedRow(step, rid, slot, cells, len(present) > 1)


# -- token ------------------------------------------------------------------


def sequences(outcome: CheckOutcome, rid: str) -> dict[str, list[tuple[int, int]]]:
    """(token, step) pairs each source accepted for ``rid``, in step order; sources without records left out."""
    out: dict[str, list[tuple[int, int]]] = {}
    for source in SOURCES:
        records = outcome.records.get(source, [])
        if not records:
            continue
        seq = out.setdefault(source, [])
        for rec in sorted(records, key=lambda r: r.step):
            req = rec.result.by_id().get(rid)
            if req is not None:
                seq.extend((int(tok), rec.step) for tok in req.accept_tokens)
    return out


def token_seq(outcome: CheckOutcome, rid: str, ambiguous_ids: set[str]) -> TokenSeq:
    seqs = sequences(outcome, rid)
    length = max((len(s) for s in seqs.values()), default=0)
    css = [_position_css(seqs, p, rid in ambiguous_ids) for p in range(length)]
    first = next((p for p, c in enumerate(css) if c), None)
    start = max(0, first - MAX_SEQUENCE_TOKENS // 4) if first and first >= MAX_SEQUENCE_TOKENS // 2 else 0
    stop = start + MAX_SEQUENCE_TOKENS
    rows = tuple(
        (
            source,
            len(seq),
            tuple(Cell(str(t), css[p], f"position {p}, step {s}") for p, (t, s) in enumerate(seq) if start <= p < stop),
        )
        for source, seq in seqs.items()
    )
    return TokenSeq(rid, first, _step_at(seqs, first), start, rows, max(0, length - stop))


def _step_at(seqs: dict[str, list[tuple[int, int]]], position: int | None) -> int | None:
    """The earliest step any source produced the token at ``position`` in."""
    if position is None:
        return None
    steps = [seq[position][1] for seq in seqs.values() if position < len(seq)]
    return min(steps) if steps else None


def _position_css(seqs: dict[str, list[tuple[int, int]]], p: int, ambiguous: bool) -> str:
    at = {src: (seq[p][0] if p < len(seq) else None) for src, seq in seqs.items()}
    if len(set(at.values())) <= 1:
        return ""
    engines = {at.get("eager"), at.get("graph")} if "eager" in at and "graph" in at else set()
    if len(engines) > 1 or not ambiguous:
        return "bad"
    return "amb"  # only the reference disagrees, after an ambiguous sampling decision


def token_seqs(outcome: CheckOutcome, divs: Sequence[Divergence]) -> list[TokenSeq]:
    ids = sorted({d.request_id for d in divs if d.request_id is not None})
    if any(d.request_id is None for d in divs) or not ids:
        ids = [r.request_id for r in outcome.scenario.requests]
    ambiguous_ids = {d.request_id for d in outcome.ambiguous if d.request_id is not None}
    return [token_seq(outcome, rid, ambiguous_ids) for rid in ids[:50]]


# -- memory and crashes -------------------------------------------------------


def memory_table(outcome: CheckOutcome, divs: Sequence[Divergence]) -> Capped[MemoryRow]:
    flagged = {d.step for d in divs}
    eager, graph = records_by_step(outcome, "eager"), records_by_step(outcome, "graph")
    rows, previous = [], None
    for step in sorted(set(eager) | set(graph)):
        g = graph[step].memory_bytes if step in graph else None
        e = eager[step].memory_bytes if step in eager else None
        delta = "—" if g is None or previous is None else signed_bytes(g - previous)
        rows.append(MemoryRow(step, _bytes(e), _bytes(g), delta, step in flagged))
        previous = g if g is not None else previous
    return cap(rows, lambda r: r.flagged, MAX_DETAIL_ROWS)


def _bytes(n: int | None) -> str:
    return "—" if n is None else f"{human_bytes(n)} ({n:,} B)"


def tracebacks(divs: Sequence[Divergence]) -> list[TracebackView]:
    views = []
    for d in divs[:20]:
        text = d.detail or show(d.actual, limit=MAX_TRACEBACK_CHARS)
        if len(text) > MAX_TRACEBACK_CHARS:
            text = f"… {len(text) - MAX_TRACEBACK_CHARS} characters cut …\n" + text[-MAX_TRACEBACK_CHARS:]
        where = ", ".join(
            x
            for x in (f"request {d.request_id}" if d.request_id else "", f"slot {d.slot}" if d.slot is not None else "")
            if x
        )
        views.append(TracebackView(d.kind, d.step, where or "—", d.tensor, text))
    return views


# -- assembly -----------------------------------------------------------------


def kind_section(outcome: CheckOutcome, kind: str, divs: list[Divergence]) -> KindSection:
    title, blurb = TITLES.get(kind, (kind.title(), ""))
    section = KindSection(kind, title, blurb, div_rows(divs))
    if kind == "address":
        section.bindings = binding_rows(outcome)
    elif kind == "shape":
        section.shapes = shape_rows(outcome, divs)
    elif kind == "seed":
        section.seeds = seed_table(outcome, divs)
    elif kind == "token":
        section.tokens = token_seqs(outcome, divs)
    elif kind == "memory":
        section.memory = memory_table(outcome, divs)
    elif kind in ("crash", "capture", "hang"):
        section.tracebacks = tracebacks(divs)
    return section


def kind_sections(outcome: CheckOutcome) -> list[KindSection]:
    """One section per kind that failed, in the order of diff.KINDS (unknown kinds last)."""
    by_kind: dict[str, list[Divergence]] = {}
    for div in outcome.failures:
        by_kind.setdefault(div.kind, []).append(div)
    order = [k for k in KINDS if k in by_kind] + sorted(k for k in by_kind if k not in KINDS)
    return [kind_section(outcome, kind, by_kind[kind]) for kind in order]
