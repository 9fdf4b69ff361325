"""Small text helpers shared by the report views: values, pointers, byte counts, capped lists."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Generic, Sequence, TypeVar, Union

T = TypeVar("T")

#: Longest rendering of one expected/actual value before it is cut.
MAX_VALUE_CHARS = 240


@dataclass(frozen=True)
class Omitted:
    """A run of ``count`` rows left out of a capped table."""

    count: int


@dataclass(frozen=True)
class Capped(Generic[T]):
    """Rows kept by ``cap`` (with Omitted markers where rows were dropped)."""

    rows: list[Union[T, Omitted]]
    total: int

    @property
    def hidden(self) -> int:
        return sum(r.count for r in self.rows if isinstance(r, Omitted))


def hex_ptr(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return show(value)
    return f"0x{value:012x}"


def show(value: Any, kind: str = "", limit: int = MAX_VALUE_CHARS) -> str:
    """A divergence value as a user reads it: pointers in hex, sequences as [a, b], None as —."""
    if value is None:
        return "—"
    if kind == "address" and isinstance(value, int) and not isinstance(value, bool):
        return hex_ptr(value)
    if kind == "memory" and isinstance(value, int) and not isinstance(value, bool):
        return f"{human_bytes(value)} ({value:,} B)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        text = "[" + ", ".join(show(v, kind, limit) for v in value) + "]"
    elif isinstance(value, str):
        text = value
    elif hasattr(value, "tolist"):
        return show(value.tolist(), kind, limit)
    else:
        text = str(value)
    return clip(text, limit)


def clip(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, the last one an ellipsis when cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def human_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(size) < 1024 or unit == "GiB":
            return f"{int(size)} B" if unit == "B" else f"{size:.2f} {unit}"
        size /= 1024
    return f"{n} B"  # pragma: no cover


def signed_bytes(n: int) -> str:
    if n == 0:
        return "±0"
    return ("+" if n > 0 else "−") + human_bytes(abs(n))


def sources_of(pair: str) -> tuple[str, str]:
    """("eager", "graph") from "eager vs graph"; ("idle value", "graph engine") from a state divergence's
    "slot hygiene (graph engine)"; generic labels otherwise."""
    left, sep, right = pair.partition(" vs ")
    if sep:
        return left.strip(), right.strip()
    if pair.startswith("slot hygiene"):
        return "idle value", pair.partition("(")[2].rstrip(")").strip() or "engine"
    return "expected", "actual"


def cap(items: Sequence[T], important: Callable[[T], bool], limit: int, context: int = 2) -> Capped[T]:
    """At most ``limit`` items: every important one (with ``context`` neighbours) first, then the earliest."""
    n = len(items)
    if n <= limit:
        return Capped(list(items), n)
    keep: set[int] = set()
    for i, item in enumerate(items):
        if important(item):
            keep.update(range(max(0, i - context), min(n, i + context + 1)))
    keep = set(sorted(keep)[:limit])
    for i in range(n):
        if len(keep) >= limit:
            break
        keep.add(i)
    return Capped(_with_gaps(items, sorted(keep)), n)


def _with_gaps(items: Sequence[T], kept: list[int]) -> list[Union[T, Omitted]]:
    rows: list[Union[T, Omitted]] = []
    previous = -1
    for i in kept:
        if i - previous > 1:
            rows.append(Omitted(i - previous - 1))
        rows.append(items[i])
        previous = i
    if previous < len(items) - 1:
        rows.append(Omitted(len(items) - 1 - previous))
    return rows
