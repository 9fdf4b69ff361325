"""The memory gate: a scenario whose engines would not fit is refused before anything is built.

An engine factory may carry the optional member ``memory_estimate(config,
requests) -> MemoryEstimate`` (``graphcheck.memory_estimate``): what the eager
and the graph engine of a lockstep run need, by part. ``admit(scenario,
factory)`` adds what the NumPy reference needs (``reference_memory``, counted
here, where the lockstep builds it) and raises :class:`MemoryLimitError` when
the total is above the limit: ``$GRAPHCHECK_MAX_ENGINE_MEMORY``, else
``DEFAULT_MAX_ENGINE_BYTES`` (4 GiB); ``none`` lifts it. The config alone is
judged first (the error names ``config``), then with the requests (``requests``:
the prompts made the difference). A factory without the member is not gated.
So an engine that cannot be allocated is never reported as a bug, and a
scenario is judged by its own engine's estimate, never by the built-in one's.

``Lockstep`` admits every scenario first; ``graphcheck replay`` admits its
file before it sets anything up, so that the error is the first thing it says.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Mapping, Sequence

from graphcheck.errors import InputError
from graphcheck.memory_estimate import (
    DEFAULT_MAX_ENGINE_BYTES,
    MAX_ENGINE_MEMORY_ENV,
    MemoryEstimate,
    format_bytes,
    parse_memory_size,
)
from graphcheck.scenario import EngineConfig, RequestSpec, Scenario


class MemoryLimitError(InputError):
    """A scenario's estimate is above the memory limit, or the limit itself is malformed.

    ``field`` is what the message names first: ``config``, ``requests`` or the
    environment variable; ``estimate`` and ``limit`` the bytes compared (None for a
    malformed limit). ``str(exc)`` is one ASCII line, ``FIELD: reason``.
    """

    def __init__(self, field: str, reason: str, *, estimate: MemoryEstimate | None = None, limit: int | None = None):
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason
        self.estimate = estimate
        self.limit = limit


def engine_memory_limit(environ: Mapping[str, str] | None = None) -> int | None:
    """The gate's limit: $GRAPHCHECK_MAX_ENGINE_MEMORY, else DEFAULT_MAX_ENGINE_BYTES; None for ``none``.

    A malformed value is a MemoryLimitError on the variable's name (call this once at
    start-up to fail fast).
    """
    env = os.environ if environ is None else environ
    text = env.get(MAX_ENGINE_MEMORY_ENV)
    if text is None or not text.strip():
        return DEFAULT_MAX_ENGINE_BYTES
    try:
        return parse_memory_size(text)
    except ValueError:
        shown = ascii(text[:60])
        raise MemoryLimitError(
            MAX_ENGINE_MEMORY_ENV,
            f"must be a byte count such as 4294967296, 4G or 512M (K, M, G, T: powers of 1024), or none; got {shown}",
        ) from None


def reference_memory(config: EngineConfig, requests: Sequence[RequestSpec] = ()) -> tuple[int, int]:
    """``(held, transient)`` bytes of the NumPy reference of a lockstep run.

    Held: its int64 weights (``reference.weights``: embeddings, lm_head and the
    position table, seven square matrices) with the arrays it derives from them
    (lm_head in float64, the two fused qkv matrices), and per request that can run at
    once a target and a draft cache (keys, values, hidden) of its whole length.
    Transient: one prefill's attention scores (the longest prompt, a request at a time).
    """
    from graphcheck.reference.weights import NPOS

    V, H, K1 = config.vocab_size, config.hidden_size, config.tokens_per_request
    held = 8 * (3 * V * H + NPOS * H + 7 * H * H) + 8 * (V * H + 6 * H * H)
    if not requests:
        return held, 0
    seqs = config.max_num_seqs
    rows = sorted((len(r.prompt) + r.max_dec_len + K1 + 1 for r in requests), reverse=True)[:seqs]
    held += 8 * 6 * H * sum(rows)
    longest = max(len(r.prompt) for r in requests)
    return held, 8 * 4 * longest * longest


def estimate(factory: Any, config: EngineConfig, requests: Sequence[RequestSpec] = ()) -> MemoryEstimate | None:
    """The factory's estimate of a lockstep run with the reference's part added; None without the member."""
    member = getattr(factory, "memory_estimate", None)
    if member is None:
        return None
    engines = member(config, tuple(requests))
    held, transient = reference_memory(config, requests)
    return dataclasses.replace(engines, working_set=max(engines.working_set, transient), reference=held)


def admit(scenario: Scenario, factory: Any, limit: int | None = None) -> MemoryEstimate | None:
    """The estimate of ``scenario`` on ``factory``'s engines (None when it has no ``memory_estimate``);
    MemoryLimitError when it is above ``limit`` (default: ``engine_memory_limit()``)."""
    if getattr(factory, "memory_estimate", None) is None:
        return None
    if limit is None:
        limit = engine_memory_limit()
    elif isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0:
        raise ValueError(f"limit must be a positive int or None, got {limit!r}")
    config_only = estimate(factory, scenario.config)
    _check(factory, "config", config_only, limit)
    full = estimate(factory, scenario.config, scenario.requests)
    _check(factory, "requests", full, limit)
    return full


def _engine_label(factory: Any) -> str:
    """Whose estimate it is: the built-in engine's (its subclasses' too), else the factory's name."""
    member = getattr(factory, "memory_estimate", None)
    if getattr(member, "__module__", None) == "graphcheck.backends.engine.memory":
        return "the built-in engine"
    name = getattr(factory, "__name__", None) or type(factory).__name__
    return f"engine {ascii(str(name))[1:-1][:60]}"


def _check(factory: Any, field: str, found: MemoryEstimate | None, limit: int | None) -> None:
    if found is None or limit is None or found.total <= limit:
        return
    total = found.total
    unit, size = ("G", 2**30) if total >= 2**30 else ("M", 2**20)
    suggest = f"{-(-total // size)}{unit}"
    if field == "config":
        what = "this engine configuration needs"
        shrink = "use a smaller max_num_seqs, max_model_len, hidden_size, vocab_size or capture sizes"
    else:
        what = "with these requests (prompt lengths, max_dec_len) the run needs"
        shrink = "use shorter prompts or fewer tokens"
    raise MemoryLimitError(
        field,
        f"{what} about {format_bytes(total)} ({total} bytes) on {_engine_label(factory)} (per engine "
        f"{format_bytes(found.eager_engine)} of buffers and weights, graphs {format_bytes(found.graphs)}, "
        f"working set {format_bytes(found.working_set)}, reference {format_bytes(found.reference)}), "
        f"above the limit of {format_bytes(limit)} ({limit} bytes); {shrink}, or raise the limit with "
        f"{MAX_ENGINE_MEMORY_ENV}={suggest} (bytes, or a K/M/G/T suffix)",
        estimate=found,
        limit=limit,
    )


__all__ = ["MemoryLimitError", "admit", "engine_memory_limit", "estimate", "reference_memory"]
