"""Which situations an engine can reach at all, read from its capabilities.

A situation needs something of the engine (``Situation.needs``): drafts, NAIVE
mode, a contract that samples or advances seeds, capture sizes as its padding
rule, a schedule of its own, a cache report... A situation the engine cannot
have is left out of its situation table, with the reason, and coverage is
counted over the rest. Everything is read from ``EngineCapabilities``, so it
holds for every engine alike.
"""

from __future__ import annotations

from typing import Any, Callable

from graphcheck.capabilities import EngineCapabilities
from graphcheck.check.situations import SITUATIONS, Applicability
from graphcheck.contract import CONTRACTS


def _contracts(caps: EngineCapabilities, test: Callable[[Any], bool]) -> bool:
    return any(test(CONTRACTS[name]) for name in caps.contracts if name in CONTRACTS)


#: need -> (whether the engine has it, why a situation needing it is left out)
_NEEDS: dict[str, tuple[Callable[[EngineCapabilities], bool], str]] = {
    "drafts": (lambda c: c.drafts, "the engine proposes no drafts (capabilities.drafts)"),
    "naive": (lambda c: c.naive, "the engine has no NAIVE mode (capabilities.naive)"),
    "capture-sizes": (
        lambda c: c.buckets is None,
        "the engine pads to graph keys of its own (capabilities.buckets), not to capture sizes",
    ),
    "sampling": (
        lambda c: _contracts(c, lambda k: k.sampling == "request"),
        "every contract the engine runs decodes greedily (no temperature, top_p or top_k)",
    ),
    "seeds": (
        lambda c: _contracts(c, lambda k: k.seed_advance != "none"),
        "no contract the engine runs has a per-request seed stream",
    ),
    "reasoning": (
        lambda c: _contracts(c, lambda k: k.reasoning != "none"),
        "no contract the engine runs reads a reasoning status",
    ),
    "engine-schedule": (
        lambda c: c.schedule == "engine",
        "graphcheck schedules the engine (a slot per request, every prompt in one prefill): its cache never runs out",
    ),
    "cache-report": (
        lambda c: c.cache_report,
        "the engine's schedule does not report its KV cache (capabilities.cache_report, Schedule.cache)",
    ),
}


def _has(caps: EngineCapabilities, need: str) -> tuple[bool, str]:
    """Whether ``caps`` meets ``need``, and the reason when not."""
    if need in _NEEDS:
        test, reason = _NEEDS[need]
        return bool(test(caps)), reason
    kind, _, value = need.partition(":")
    if kind == "scope":
        if caps.buckets is not None:
            return (
                False,
                "the engine captures graphs of its own design (capabilities.buckets): graph_scope is not its knob",
            )
        return value in caps.graph_scopes, f"{value} is not among the engine's graph scopes"
    if kind == "verify":
        return value in caps.verify_strategies, f"{value} is not among the engine's verify strategies"
    if kind == "policy":
        return value in caps.accept_policies, f"{value} is not among the engine's accept policies"
    raise ValueError(f"unknown situation need {need!r}")


def applicability(caps: EngineCapabilities | None) -> Applicability:
    """What of :data:`graphcheck.check.situations.SITUATIONS` the engine of ``caps`` can reach (None: all)."""
    if caps is None:
        return Applicability()
    left: dict[str, str] = {}
    for situation in SITUATIONS:
        for need in situation.needs:
            ok, reason = _has(caps, need)
            if not ok:
                left[situation.name] = reason
                break
    return Applicability(left)


def left_out_line(applicable: Applicability) -> str:
    """One console line: how many situations were left out, grouped by why."""
    reasons: dict[str, int] = {}
    for reason in applicable.left_out.values():
        reasons[reason] = reasons.get(reason, 0) + 1
    parts = "; ".join(f"{n}: {reason}" for reason, n in reasons.items())
    return f"situations left out, which the engine cannot reach: {len(applicable.left_out)} ({parts})"


__all__ = ["Applicability", "applicability", "left_out_line"]
