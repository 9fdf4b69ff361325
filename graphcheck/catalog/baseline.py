"""The peer-style check: what engines test today, for comparison with graphcheck.

vLLM's and SGLang's graph tests run a fixed set of prompts end to end with
graphs off and on and compare the generated text. ``run_baseline`` does the
same to an engine (the built-in one unless ``--engine`` names another): for each batch size (the first ``b`` of
``PROMPTS``, all arriving at step 0) and each sampling mode it decodes to the
end on an eager engine and on a graph engine and compares only the generated
token sequences per request. A mismatch, or an exception in either engine
(a peer test would fail on it), counts as detected.

The engine runs as shipped: ``EngineConfig`` defaults (graph scope, k, S),
except room for eight requests and a capture size for each batch size.
Nothing graphcheck adds is used: no reference, no address, seed, shape or
memory checks, no padding or arrival scripts, no forced accepts.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any, Sequence

from graphcheck.check.engines import EngineChoice, resolve_engine
from graphcheck.driver import run_script
from graphcheck.scenario import EngineConfig, RequestSpec, Scenario
from graphcheck.step_result import StepResult

#: Prompts of a peer test: fixed, of different lengths; batch size b uses the first b.
PROMPTS: tuple[tuple[int, ...], ...] = (
    (5, 17, 33, 2),
    (40, 8, 19, 61, 27, 3),
    (12, 12, 50),
    (7, 44, 29, 58, 1, 36, 22),
    (63, 9, 14, 25, 38),
    (30, 3, 47, 11, 56, 20, 4, 41),
    (18, 52, 6),
    (26, 35, 60, 13, 45, 9),
)
BATCH_SIZES = (1, 2, 4, 8)
MODES = ("greedy", "stochastic")
MAX_TOKENS = 24  # per request, like a peer test's max_tokens
EOS_IDS = (0,)


@dataclass(frozen=True)
class CaseResult:
    """One peer test case: ``batch_size`` prompts decoded eagerly and with graphs in ``mode``."""

    batch_size: int
    mode: str
    passed: bool
    reason: str = ""  # why it failed: the first differing request and position, or the exception

    @property
    def label(self) -> str:
        return f"batch {self.batch_size}, {self.mode}"


@dataclass(frozen=True)
class BaselineResult:
    """Every case of the peer-style check for one engine build (one fault, or none)."""

    cases: tuple[CaseResult, ...]
    elapsed_s: float

    @property
    def detected(self) -> bool:
        return any(not c.passed for c in self.cases)

    @property
    def failed(self) -> tuple[CaseResult, ...]:
        return tuple(c for c in self.cases if not c.passed)

    @property
    def first_failure(self) -> str:
        failed = self.failed
        return f"{failed[0].label}: {failed[0].reason}" if failed else ""


def baseline_config(mode: str) -> EngineConfig:
    """The engine's defaults, with room for the largest batch and a graph per batch size."""
    verify = "greedy" if mode == "greedy" else "target_match"
    return dataclasses.replace(
        EngineConfig(), max_num_seqs=max(BATCH_SIZES), capture_sizes=BATCH_SIZES, verify_strategy=verify
    )


def baseline_scenario(batch_size: int, mode: str) -> Scenario:
    """The first ``batch_size`` prompts at step 0, decoded long enough for every request to finish."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; known: {', '.join(MODES)}")
    stochastic = mode == "stochastic"
    requests = tuple(
        RequestSpec(
            f"p{i}",
            0,
            prompt,
            MAX_TOKENS,
            EOS_IDS,
            temperature=0.8 if stochastic else 1.0,
            top_p=0.9 if stochastic else 1.0,
            seed=1000 + i,
        )
        for i, prompt in enumerate(PROMPTS[:batch_size])
    )
    # Each step commits at least one token and the prefill step one more: MAX_TOKENS + 2 steps suffice.
    return Scenario(baseline_config(mode), requests, (), MAX_TOKENS + 2, f"baseline/b{batch_size}-{mode}")


def generated_tokens(results: Sequence[StepResult]) -> dict[str, tuple[int, ...]]:
    """Each request's generated tokens, in order: what a peer test compares."""
    out: dict[str, list[int]] = {}
    for result in results:
        for req in result.requests:
            out.setdefault(req.request_id, []).extend(int(t) for t in req.accept_tokens)
    return {rid: tuple(toks) for rid, toks in out.items()}


def first_difference(eager: dict[str, tuple[int, ...]], graph: dict[str, tuple[int, ...]]) -> str:
    """The first request whose sequences differ, and where; empty when all agree."""
    for rid in sorted(set(eager) | set(graph)):
        a, b = eager.get(rid, ()), graph.get(rid, ())
        if a != b:
            at = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            return f"request {rid} differs at token {at} (eager {len(a)} tokens, graph {len(b)})"
    return ""


def _decode(
    scenario: Scenario, backend: Any, faults: Sequence[str], use_graphs: bool, engine: EngineChoice
) -> dict[str, tuple[int, ...]]:
    from graphcheck.reference import make_weights

    with engine.graphs_on(backend):
        built = engine.factory(
            scenario.config, make_weights(scenario.config), device=backend, use_graphs=use_graphs, faults=faults
        )
        return generated_tokens(run_script(built, scenario))


def run_case(
    batch_size: int, mode: str, backend: Any, faults: Sequence[str] = (), engine: EngineChoice | None = None
) -> CaseResult:
    """One case: eager and graph engine end to end, generated tokens compared (the scenario fitted to the engine)."""
    engine = engine or resolve_engine()
    scenario = engine.capabilities.fit(baseline_scenario(batch_size, mode))
    try:
        eager = _decode(scenario, backend, faults, False, engine)
        graph = _decode(scenario, backend, faults, True, engine)
    except Exception as exc:  # a peer test fails on any engine error
        return CaseResult(batch_size, mode, False, f"engine raised {type(exc).__name__}: {exc}")
    reason = first_difference(eager, graph)
    return CaseResult(batch_size, mode, not reason, reason)


def run_baseline(
    backend: Any,
    faults: Sequence[str] = (),
    *,
    batch_sizes: Sequence[int] = BATCH_SIZES,
    modes: Sequence[str] = MODES,
    engine: EngineChoice | None = None,
) -> BaselineResult:
    """Every (batch size, mode) case on ``engine`` (default builtin); all run, so the report can say how many failed."""
    from graphcheck.check.threads import single_threaded  # the tiny model runs ~4x faster on one torch thread

    started = time.perf_counter()
    with single_threaded(backend):
        cases = tuple(run_case(b, m, backend, faults, engine) for m in modes for b in batch_sizes)
    return BaselineResult(cases, time.perf_counter() - started)


__all__ = [
    "BATCH_SIZES",
    "MODES",
    "PROMPTS",
    "BaselineResult",
    "CaseResult",
    "baseline_config",
    "baseline_scenario",
    "first_difference",
    "generated_tokens",
    "run_baseline",
    "run_case",
]
