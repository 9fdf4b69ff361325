"""Aligning the kernel calls of the eager and the graph engine in one step, and finding where they part.

:func:`first_parting` aligns the two call sequences by kernel name and walks
them in order: the first aligned pair that differs
(``graphcheck.check.call_diff``), or the first call only one engine makes that
writes request state, is where the step went wrong. A device graph that
replays as one launch is compared as a whole region.
"""

from __future__ import annotations

import difflib
from dataclasses import replace

from graphcheck.check.call_diff import (
    SHOWN,
    STATE_KINDS,
    Found,
    at_call,
    host_difference,
    input_difference,
    padding_pointer,
    plain,
    return_differences,
    rewritten_by,
    stale_input,
    unnamed_shape_mismatch,
    values_at,
    write_differences,
    written_rows,
)
from graphcheck.check.records import Localisation
from graphcheck.check.trace import CallRecord


class _Localiser:
    def __init__(self, eager: list[CallRecord], graph: list[CallRecord], step: int, padded: set[int]) -> None:
        self.eager, self.graph, self.step, self.padded = eager, graph, step, padded

    def _result(self, call: CallRecord, calls: list[CallRecord], found: Found, engine: str) -> Localisation:
        return at_call(call, len(calls), engine, found, step=self.step, method="kernel trace")

    def run(self) -> Localisation | None:
        matcher = difflib.SequenceMatcher(
            a=[c.kernel for c in self.eager], b=[c.kernel for c in self.graph], autojunk=False
        )
        unmatched: list[CallRecord] = []
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag == "equal":
                for e, g in zip(self.eager[i1:i2], self.graph[j1:j2]):
                    hit = self._pair(e, g, unmatched)
                    if hit is not None:
                        return hit
                    unmatched = []
                continue
            hit = self._unmatched(self.eager[i1:i2], self.graph[j1:j2])
            if hit is not None:
                return hit
            unmatched += self.eager[i1:i2]
        return None

    def _unmatched(self, eager: list[CallRecord], graph: list[CallRecord]) -> Localisation | None:
        opaque = [g for g in graph if g.opaque]
        if opaque and eager:  # a device graph that replays as one launch: compare the region as a whole
            e, g = eager[-1], opaque[-1]
            region = CallRecord(g.index, g.phase, g.kernel, None, None, g.graph, before=eager[0].before, after=e.after)
            diffs = write_differences(region, replace(g, before=graph[0].before))
            if diffs:
                d = diffs[0]
                d.reason += "; the device graph replays as one launch, so the region is as far as the trace sees"
                return self._result(g, self.graph, d, "graph engine")
            return None
        for calls, engine, all_calls in (
            (eager, "only in the eager engine", self.eager),
            (graph, "only in the graph engine", self.graph),
        ):
            for call in calls:
                changed = written_rows(call)
                kinds = {b.name: b.kind for b in call.after.buffers} if call.after is not None else {}
                state = [n for n in changed if kinds.get(n) in STATE_KINDS]
                if state:
                    name = state[0]
                    rows = changed[name]
                    got = values_at(call.after, name, rows)
                    return self._result(
                        call,
                        all_calls,
                        Found(
                            name,
                            name,
                            f"this call runs {engine} and writes request state",
                            rows,
                            None,
                            plain(got[0][:SHOWN]) if got else None,
                        ),
                        engine,
                    )
        return None

    def _pair(self, e: CallRecord, g: CallRecord, unmatched: list[CallRecord]) -> Localisation | None:
        shape = unnamed_shape_mismatch(e, g)
        diffs = write_differences(e, g) + return_differences(e, g)
        if shape is None and not diffs:
            return None
        stale = stale_input(g)
        if stale is not None:
            return self._result(g, self.graph, stale, "graph engine")
        skipped = rewritten_by(unmatched, g)
        if skipped is not None:
            call, buffer = skipped
            found = Found(
                buffer,
                buffer,
                f"runs only in the eager engine; the graph engine's {g.kernel} then reads {buffer} without it",
            )
            return self._result(call, self.eager, found, "eager engine")
        explanation = shape or padding_pointer(g, diffs) or host_difference(e, g, self.padded) or input_difference(e, g)
        found = explanation or diffs[0]
        if explanation is not None and diffs and explanation.expected is None:
            found.expected, found.actual = diffs[0].expected, diffs[0].actual
        return self._result(g, self.graph, found, "graph engine")


def first_parting(eager: list[CallRecord], graph: list[CallRecord], step: int, padded: set[int]) -> Localisation | None:
    """Where the eager and graph engines' calls of step ``step`` first part; None when they never do.

    ``padded``: the graph step's padded sizes (its bucket and token capacity),
    host arguments a graph legitimately passes instead of the real sizes.
    """
    return _Localiser(eager, graph, step, padded).run()
