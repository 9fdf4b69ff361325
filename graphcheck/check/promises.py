"""What the members of the adapter protocol promise to return, checked as each value crosses the boundary.

A broken promise (a step that returns None, a memory figure that is a string, a step report whose
sizes are not numbers) is not a finding about graph capture: nothing can be compared with it. It is
:class:`EngineProtocolError`, one line naming the member and what was wrong, a usage error (exit 2)
like an engine that lacks a member, under ``-j 1`` and ``-j N`` alike, never counted as a divergence.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Callable, TypeGuard

from graphcheck.check.engines import EngineSpecError
from graphcheck.display import one_line
from graphcheck.step_result import StepResult


class EngineProtocolError(EngineSpecError):
    """The engine under test broke a promise of the adapter protocol (docs/adapters.md)."""

    def __init__(self, label: str, member: str, problem: str) -> None:
        super().__init__(
            f"--engine {one_line(label)} broke the engine adapter protocol: {member} {problem} (docs/adapters.md)"
        )
        self.member = member


def shown(value: Any) -> str:
    """``value`` as a message quotes it: its type, and a short repr (the repr is the engine's code too)."""
    try:
        text = repr(value)
    except Exception:
        text = "?"
    text = text if len(text) <= 60 else text[:57] + "..."
    return f"{type(value).__name__} {one_line(text)}"


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _step_result(value: Any) -> str | None:
    return None if isinstance(value, StepResult) else f"returned {shown(value)}, expected a StepResult"


def _mapping(value: Any) -> str | None:
    return None if isinstance(value, Mapping) else f"returned {shown(value)}, expected a mapping"


def _memory(value: Any) -> str | None:
    return None if _is_int(value) and value >= 0 else f"returned {shown(value)}, expected a non-negative int"


_REPORT_INTS = ("real_bsz", "num_running", "real_tokens", "padded_tokens")
_REPORT_BOOLS = ("used_graph", "has_prefill")


def _step_report(value: Any) -> str | None:
    """A StepReport (or None before the first step): its sizes ints, its flags bools, its slots pairs."""
    if value is None:
        return None
    for name in _REPORT_INTS:
        field = getattr(value, name, None)
        if not _is_int(field) or field < 0:
            return f"has {name} {shown(field)}, expected a non-negative int"
    for name in _REPORT_BOOLS:
        field = getattr(value, name, None)
        if not isinstance(field, bool):
            return f"has {name} {shown(field)}, expected a bool"
    slots = getattr(value, "slots", None)
    if not isinstance(slots, (tuple, list)) or not all(
        isinstance(p, (tuple, list)) and len(p) == 2 and isinstance(p[0], str) and _is_int(p[1]) for p in slots
    ):
        return f"has slots {shown(slots)}, expected (request id, slot) pairs"
    if value.used_graph and value.bucket is None:
        return "says used_graph but its bucket is None"
    return None


def _sizes(value: Any) -> str | None:
    slots = getattr(value, "slots", 0)
    return None if _is_int(slots) and slots >= 0 else f"has slots {shown(slots)}, expected a non-negative int"


def _runner(value: Any) -> str | None:
    if value is None or isinstance(getattr(value, "name", None), str):
        return None
    return f"is {shown(value)}, expected None or a runner with a str name"


#: Member -> what its value (a method's: its result) must be; a member not listed is not checked here.
CHECKS: Mapping[str, Callable[[Any], str | None]] = {
    "step": _step_result,
    "drain": _step_result,
    "memory_bytes": _memory,
    "buffer_tensors": _mapping,
    "graphs": _mapping,
    "model_report": _mapping,
    "last_step_info": _step_report,
    "sizes": _sizes,
    "runner": _runner,
}


def kept(label: str, member: str, value: Any) -> Any:
    """``value`` when it is what ``member`` promises, else :class:`EngineProtocolError`."""
    check = CHECKS.get(member)
    problem = check(value) if check is not None else None
    if problem is not None:
        raise EngineProtocolError(label, member + ("()" if member in _METHODS else ""), problem)
    return value


_METHODS = frozenset({"step", "drain", "memory_bytes", "buffer_tensors", "model_report"})


def bucket_declared(label: str, bucket: Any, graphs: Mapping[Any, Any]) -> None:
    """A step that replayed ``bucket`` must have captured it: a key of its ``graphs``."""
    try:
        known = bucket in graphs
    except TypeError:  # an unhashable bucket
        known = False
    if not known:
        raise EngineProtocolError(
            label,
            "last_step_info.bucket",
            f"is {shown(bucket)}, which the engine says it replayed but is not a captured size "
            f"(its graphs: {', '.join(map(str, list(graphs)[:8])) or 'none'})",
        )


__all__ = ["CHECKS", "EngineProtocolError", "bucket_declared", "kept", "shown"]
