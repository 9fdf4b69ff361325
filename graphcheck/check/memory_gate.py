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
``graphcheck run`` checks first that the limit holds the smallest run its engine
can make (``check_limit_usable``), before it claims a report folder.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from graphcheck.adapter import factory_extras
from graphcheck.contract import CONTRACT_NAMES
from graphcheck.display import one_line
from graphcheck.errors import InputError
from graphcheck.memory_estimate import (
    DEFAULT_MAX_ENGINE_BYTES,
    MAX_ENGINE_MEMORY_ENV,
    MemoryEstimate,
    format_bytes,
    parse_memory_size,
)
from graphcheck.scenario import GRAPH_SCOPES, MODELS, VERIFY_STRATEGIES, EngineConfig, RequestSpec, Scenario


class MemoryLimitError(InputError):
    """A scenario's estimate is above the memory limit, or the limit itself is malformed.

    ``field`` is what the message names first: ``config``, ``requests`` or the
    environment variable; ``estimate`` and ``limit`` the bytes compared (None for a
    malformed limit); ``scenario`` the refused scenario's name (None for a malformed
    limit). ``str(exc)`` is one line, ``FIELD: reason``.
    """

    def __init__(
        self,
        field: str,
        reason: str,
        *,
        estimate: MemoryEstimate | None = None,
        limit: int | None = None,
        scenario: str | None = None,
    ):
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason
        self.estimate = estimate
        self.limit = limit
        self.scenario = scenario

    def kept(self, path: Path | None) -> MemoryLimitError:
        """This refusal, its message naming the refused scenario and ``path``, the file it is kept in (None: none)."""
        name = one_line(self.scenario or "(unnamed)")
        where = f" is kept in {one_line(path)}" if path is not None else " could not be kept on disk"
        reason = f"{self.reason}; the refused scenario {name}{where}"
        return MemoryLimitError(self.field, reason, estimate=self.estimate, limit=self.limit, scenario=self.scenario)


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
    member = factory_extras(factory).memory_estimate
    if member is None:
        return None
    engines = _engines_estimate(factory, member, config, requests)
    held, transient = reference_memory(config, requests)
    return dataclasses.replace(engines, working_set=max(engines.working_set, transient), reference=held)


def admit(scenario: Scenario, factory: Any, limit: int | None = None) -> MemoryEstimate | None:
    """The estimate of ``scenario`` on ``factory``'s engines (None when it has no ``memory_estimate``);
    MemoryLimitError when it is above ``limit`` (default: ``engine_memory_limit()``)."""
    if factory_extras(factory).memory_estimate is None:
        return None
    if limit is None:
        limit = engine_memory_limit()
    elif isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0:
        raise ValueError(f"limit must be a positive int or None, got {limit!r}")
    config_only = estimate(factory, scenario.config)
    _check(factory, "config", config_only, limit, scenario.name)
    full = estimate(factory, scenario.config, scenario.requests)
    _check(factory, "requests", full, limit, scenario.name)
    return full


#: Every size of a scenario's config at the least ``graphcheck.scenario`` accepts.
_LEAST_SIZES: Mapping[str, Any] = {
    "max_num_seqs": 1,
    "num_speculative_tokens": 1,
    "num_model_steps": 1,
    "capture_sizes": (),
    "vocab_size": 8,
    "hidden_size": 2,
    "block_size": 1,
    "max_model_len": 8,
    "max_candidate_len": 1,
}


def least_configs() -> list[EngineConfig]:
    """The configs of the least sizes, one per choice of each field that changes what an engine allocates."""
    choices = itertools.product(MODELS, GRAPH_SCOPES, VERIFY_STRATEGIES, (False, True), CONTRACT_NAMES)
    return [
        EngineConfig(**_LEAST_SIZES, model=m, graph_scope=g, verify_strategy=v, naive_mode=n, contract=c)
        for m, g, v, n, c in choices
    ]


def smallest_run(factory: Any, prepare: Callable[[Scenario], Scenario]) -> MemoryEstimate | None:
    """The least estimate a scenario can have on ``factory`` (None without ``memory_estimate``): over
    :func:`least_configs` as ``prepare`` makes them run (a Checker's: its model, fitted to the engine)."""
    if factory_extras(factory).memory_estimate is None:
        return None
    configs = {prepare(Scenario(config, (), num_steps=1)).config for config in least_configs()}
    found = [e for e in (estimate(factory, config) for config in configs) if e is not None]
    return min(found, key=lambda e: e.total, default=None)


def check_limit_usable(factory: Any, prepare: Callable[[Scenario], Scenario], limit: int | None = None) -> None:
    """InputError when ``limit`` (default: ``engine_memory_limit()``) is below :func:`smallest_run`:
    no scenario could pass the gate, so a run would refuse its first one, whatever it drew."""
    if limit is None:
        limit = engine_memory_limit()
    if limit is None:  # ``none``: no limit
        return
    least = smallest_run(factory, prepare)
    if least is None or least.total <= limit:
        return
    raise InputError(
        f"{MAX_ENGINE_MEMORY_ENV}: the limit of {format_bytes(limit)} ({limit} bytes) is below the smallest "
        f"lockstep run {_engine_label(factory)} can make (about {format_bytes(least.total)}, every size of the "
        f"config at its least), so no scenario could run; raise it (the default is "
        f"{format_bytes(DEFAULT_MAX_ENGINE_BYTES)}) or set it to none"
    )


def _engines_estimate(factory: Any, member: Any, config: EngineConfig, requests: Sequence[RequestSpec]) -> Any:
    """``member(config, requests)`` through the engine boundary; anything but a MemoryEstimate breaks the protocol."""
    from graphcheck.check.boundary import EngineAborted, call
    from graphcheck.check.engines import EngineSpecError
    from graphcheck.check.promises import shown

    try:
        found = call("memory_estimate()", member, config, tuple(requests))
    except EngineAborted:
        raise
    except Exception as err:
        raise EngineSpecError(
            f"{_engine_label(factory)} broke the engine adapter protocol: memory_estimate() raised "
            f"{type(err).__name__}: {str(err)[:200]} (docs/adapters.md)"
        ) from None
    if not isinstance(found, MemoryEstimate):
        raise EngineSpecError(
            f"{_engine_label(factory)} broke the engine adapter protocol: memory_estimate() returned "
            f"{shown(found)}, expected a graphcheck.memory_estimate.MemoryEstimate (docs/adapters.md)"
        )
    return found


def _engine_label(factory: Any) -> str:
    """Whose estimate it is: the owner a ``NamedEstimate`` names (the built-in engine's, its subclasses'
    too, unless they estimate themselves), else ``engine`` and the factory's name."""
    owner = factory_extras(factory).estimate_owner
    if owner is not None:
        return _one_line(owner)
    return f"engine {_one_line(str(getattr(factory, '__name__', None) or type(factory).__name__))}"


def _one_line(name: str) -> str:
    """``name`` as ASCII on one line, at most 60 characters."""
    return ascii(name)[1:-1][:60]


def _check(factory: Any, field: str, found: MemoryEstimate | None, limit: int | None, scenario: str) -> None:
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
        scenario=scenario,
    )


__all__ = [
    "MemoryLimitError",
    "admit",
    "check_limit_usable",
    "engine_memory_limit",
    "estimate",
    "least_configs",
    "reference_memory",
    "smallest_run",
]
