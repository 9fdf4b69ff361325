"""Console rendering with rich: decoded scenarios and summaries."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from rich.console import Console
from rich.table import Table

from graphcheck.scenario import Scenario, StepResult


@dataclass(frozen=True)
class RequestSummary:
    """What one request did over a decoded scenario."""

    request_id: str
    steps: int
    tokens: tuple[int, ...]
    mean_accept: float
    stopped: bool
    final_seed: int


def summarize(results: Sequence[StepResult]) -> list[RequestSummary]:
    by_request: dict[str, list] = {}
    for result in results:
        for req in result.requests:
            by_request.setdefault(req.request_id, []).append(req)
    summaries = []
    for rid in sorted(by_request):
        steps = by_request[rid]
        tokens = tuple(tok for s in steps for tok in s.accept_tokens)
        decode_steps = steps[1:]  # the first step is the prefill
        mean = sum(s.accept_num for s in decode_steps) / len(decode_steps) if decode_steps else 1.0
        summaries.append(
            RequestSummary(rid, len(steps), tokens, mean, steps[-1].stopped, steps[-1].infer_seed)
        )
    return summaries


def decode_table(title: str, scenario: Scenario, results: Sequence[StepResult]) -> Table:
    table = Table(title=title, title_justify="left")
    for column in ("request", "steps", "generated tokens", "mean accept", "stopped", "infer_seed"):
        table.add_column(column)
    for s in summarize(results):
        shown = " ".join(map(str, s.tokens[:24])) + (" …" if len(s.tokens) > 24 else "")
        table.add_row(s.request_id, str(s.steps), shown, f"{s.mean_accept:.2f}", "yes" if s.stopped else "no", str(s.final_seed))
    return table


def make_console(quiet: bool = False) -> Console:
    return Console(highlight=False, quiet=quiet, soft_wrap=False)
