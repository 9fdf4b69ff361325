"""The graph engine's audits around each lockstep step, beside the token diff.

:class:`GraphAudit` checks what a replay can get wrong without any token differing yet:
static inputs whose storage was freed before a step, or rebound after capture (``address``);
the bucket and padding a step replayed, against graphcheck's policy or the engine's declared
one, and buffers too small for it (``shape``); memory that grows across replays
(``memory``, :class:`MemoryWatch`); eager and graph engines that schedule alike; and, for an
engine with state snapshots, eager vs graph on every buffer's meaningful rows and idle free
slots (``state``).
"""

from __future__ import annotations

from typing import Any

from graphcheck.adapter import EngineAdapter, ReportExtras, captured_graphs, graph_extras, input_label
from graphcheck.buckets import BucketPolicy
from graphcheck.capabilities import EngineCapabilities
from graphcheck.check.bindings import graph_label
from graphcheck.check.bucket_check import (
    check_graph_count,
    check_host_values,
    check_padding,
    check_unused_graph,
    policy_values,
)
from graphcheck.check.diff import Divergence
from graphcheck.check.numeric import Parting, Tolerance
from graphcheck.check.records import StepRecord
from graphcheck.check.state_diff import check_hygiene, diff_states
from graphcheck.scenario import Scenario
from graphcheck.state import EngineState


def expected_bucket(scenario: Scenario, real_bsz: int, has_prefill: bool) -> int | None:
    """The capture size a step must replay: the smallest >= R on decode-only steps."""
    if has_prefill or real_bsz == 0:
        return None
    fits = [s for s in scenario.config.capture_sizes if s >= real_bsz]
    return min(fits) if fits else None


class MemoryWatch:
    """Memory must stay flat across replays once every graph has replayed once.

    An engine that captures lazily (``ReportExtras.captured``) grows by each new graph: a
    capture starts the count again, and replays of the graphs that exist must stay flat."""

    def __init__(self) -> None:
        self.replays = 0
        self.baseline: int | None = None
        self.graph_count = -1  # graphs the graph engine held at the last check

    def check(self, rec: StepRecord, graphs: int, captured: bool) -> list[Divergence]:
        """The graph engine's record ``rec`` of a step, when it held ``graphs`` graphs."""
        if captured or graphs != self.graph_count:
            # A pipelined engine reports a capture with the batch it was for, a call after the
            # graph came to exist: the count of graphs says when.
            self.replays, self.baseline, self.graph_count = 0, None, graphs
        if not rec.used_graph:
            return []
        self.replays += 1
        if self.replays <= 1 or self.baseline is None:
            self.baseline = rec.memory_bytes
            return []
        if rec.memory_bytes <= self.baseline:
            return []
        grown = rec.memory_bytes - self.baseline
        detail = f"+{grown} bytes since the first replay"
        return [
            Divergence(
                "memory",
                rec.step,
                "memory_bytes",
                "replay vs first replay",
                self.baseline,
                rec.memory_bytes,
                detail=detail,
            )
        ]


def _same_runs(eager: Any, graph: Any) -> bool:
    """Whether two schedules ran the same requests alike (their cache reports are the engines' own)."""
    return (eager.runs, eager.pipeline_depth) == (graph.runs, graph.pipeline_depth)


class GraphAudit:
    """The graph engine's audits of one lockstep run (each freed input reported once)."""

    def __init__(self, scenario: Scenario, capabilities: EngineCapabilities, *, emulated: bool) -> None:
        self.scenario, self.capabilities, self.emulated = scenario, capabilities, emulated
        self.memory = MemoryWatch()
        self._freed_seen: set[tuple[str, str]] = set()  # (graph, input) reported
        self._occupants: dict[int, str] = {}  # slot -> the last request that ran there
        self.tokens: int | None = None  # the graph engine's ``sizes.tokens`` (EngineExtras), once built

    def capacity(self, slots: int) -> list[Divergence]:
        """Per-slot buffers of ``slots`` rows against what the config's largest bucket needs."""
        if self.capabilities.layout == "packed":  # no slots: padded tokens are checked every step
            return []
        cfg = self.scenario.config
        if slots >= cfg.max_padded_reqs:
            return []
        return [
            Divergence(
                "shape",
                0,
                "buffer capacity (slots)",
                "max(max_num_seqs, largest bucket) + 1 vs buffers",
                cfg.max_padded_reqs,
                slots,
            )
        ]

    def freed_inputs(self, graph: EngineAdapter, t: int) -> list[Divergence]:
        """Static inputs of any captured graph whose storage is gone, before step ``t`` runs."""
        consequence = (
            "the emulator still holds it, so the step runs and shows the stale read"
            if self.emulated
            else "replaying the graph would read freed memory, so the step was not run"
        )
        found = []
        for kind, bucket, captured in captured_graphs(graph):
            label = graph_label(kind, bucket)
            for inp in captured.dead_inputs():
                name = input_label(inp)
                if (label, name) in self._freed_seen:
                    continue
                self._freed_seen.add((label, name))
                detail = f"{label}: captured storage was freed before this step; {consequence}"
                found.append(
                    Divergence("address", t, name, "graph capture vs replay", hex(inp.data_ptr), None, detail=detail)
                )
        return found

    def address(self, rec: StepRecord) -> list[Divergence]:
        """The graph engine's bindings after a replay: rebound buffers, and freed ones not reported yet."""
        found = []
        for b in rec.bindings:
            if not b.stale or (b.graph, b.name) in self._freed_seen:
                continue
            if not b.alive:
                self._freed_seen.add((b.graph, b.name))
            what = (
                "captured storage was freed"
                if not b.alive
                else "buffer rebound after capture; the graph reads the old storage"
            )
            current = hex(b.current_ptr) if b.current_ptr is not None else None
            found.append(
                Divergence(
                    "address",
                    rec.step,
                    b.name,
                    "graph capture vs replay",
                    hex(b.captured_ptr),
                    current,
                    detail=f"{b.graph}: {what}",
                )
            )
        return found

    def shape(
        self, graph: Any, rec: StepRecord, eager: StepRecord, report: ReportExtras, parting: Parting
    ) -> list[Divergence]:
        """The bucket and padding the graph engine's step ``rec`` used, and its real tokens against the eager's."""
        if self.capabilities.buckets is not None:
            found = self._declared_buckets(self.capabilities.buckets, graph, rec, report)
        else:
            found = self._capture_size_buckets(graph, rec)
        rescheduled = bool(parting.parted) and rec.slots != eager.slots  # after a near tie (numeric)
        if rec.real_tokens != eager.real_tokens and not rescheduled:
            found.append(
                Divergence("shape", rec.step, "real_tokens", "eager vs graph", eager.real_tokens, rec.real_tokens)
            )
        return found

    def _declared_buckets(
        self, policy: BucketPolicy, graph: Any, rec: StepRecord, report: ReportExtras
    ) -> list[Divergence]:
        """The engine's own padding ``policy`` (``graphcheck.buckets``), recomputed from the real sizes it reports."""
        caps = self.capabilities
        values = policy_values(self.scenario.config.engine_options, report.limits, caps.options)
        found: list[Divergence] = []
        tokens = self.tokens
        if tokens is not None and rec.padded_tokens > tokens:
            found.append(
                Divergence(
                    "shape", rec.step, "buffer capacity (tokens)", "padded tokens vs buffers", tokens, rec.padded_tokens
                )
            )
        if rec.bucket is None:
            return found + check_unused_graph(policy, rec.step, report, graph.graphs, values)
        found += check_padding(policy, rec.step, report, values)
        graphs = graph.graphs
        if rec.bucket in graphs:
            target = graph_extras(graphs[rec.bucket].target)
            found += check_host_values(rec.step, report, target, graph_label("target", rec.bucket))
        found += check_graph_count(policy, rec.step, len(graphs), values, report.graph_sets)
        return found

    def _capture_size_buckets(self, graph: Any, rec: StepRecord) -> list[Divergence]:
        """graphcheck's own policy: the smallest capture size >= R on decode-only steps, eager otherwise."""
        has_prefill = graph.last_step_info.has_prefill
        want = expected_bucket(self.scenario, rec.real_bsz, has_prefill)
        found = []
        if rec.bucket != want:
            detail = f"R={rec.real_bsz}, prefill={has_prefill}"
            found.append(
                Divergence("shape", rec.step, "bucket", "policy vs graph engine", want, rec.bucket, detail=detail)
            )
        if rec.used_graph:
            assert rec.bucket is not None, "a report that used a graph names its bucket (promises refuses it otherwise)"
            padded = rec.bucket * self.scenario.config.tokens_per_request
            if rec.padded_tokens != padded:
                found.append(
                    Divergence("shape", rec.step, "padded_tokens", "policy vs graph engine", padded, rec.padded_tokens)
                )
        return found

    def schedules(self, step: int, eager: ReportExtras, graph: ReportExtras, parting: Parting) -> list[Divergence]:
        """An engine that schedules for itself must schedule eager and graph alike (until a near tie parts them)."""
        a, b = eager.schedule, graph.schedule
        if a is None or b is None or _same_runs(a, b) or parting.parted:
            return []
        what = [(r.request_id, r.query_tokens, r.first_position, r.produces) for r in a.runs]
        got = [(r.request_id, r.query_tokens, r.first_position, r.produces) for r in b.runs]
        detail = "(request, query tokens, first position, produces) of every request the step ran"
        return [Divergence("value", step, "schedule", "eager vs graph", what, got, detail=detail)]

    def state(
        self,
        snapshots: tuple[EngineState, EngineState],
        t: int,
        records: dict[str, StepRecord],
        parting: Parting,
        tolerance: Tolerance | None,
    ) -> list[Divergence]:
        """Eager vs graph on every buffer's meaningful rows, then each engine's free slots.

        With a float model, float buffers are compared within the tolerance; once
        requests have parted at a near tie only per-slot buffers of the slots both
        engines give the same unparted request are compared (cache blocks and packed
        rows follow the scheduling, which may then differ).
        """
        eager, graph = snapshots
        running = {slot: rid for rid, slot in records["graph"].slots}
        if not parting.parted:
            found = diff_states(eager, graph, t, "eager vs graph", running, tolerance=tolerance)
        else:
            same = set(records["eager"].slots) & set(records["graph"].slots)
            kept = {slot for rid, slot in same if rid not in parting.parted}
            found = diff_states(eager, graph, t, "eager vs graph", running, tolerance=tolerance, only_slots=kept)
        self._occupants.update(running)
        for name, state in (("eager engine", eager), ("graph engine", graph)):
            found += check_hygiene(state, t, name, self._occupants)
        return found


__all__ = ["GraphAudit", "MemoryWatch", "expected_bucket"]
