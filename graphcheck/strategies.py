"""Hypothesis strategies for scenarios: small, composable building blocks.

Building blocks, bottom up:

* ``capture_size_sets()``, ``engine_configs(...)``: engine configurations;
  every knob of ``engine_configs`` takes a fixed value, a strategy, or None
  for its default spread. Its modes are keywords (``graph_scope``, ``naive_mode``,
  ``verify_strategy``, ...); its sizes (``max_num_seqs``, ``capture_sizes``, ``k``, ...)
  are one :class:`ConfigSizes` record, ``sizes=``.
* ``seeds(...)``, ``sampling_params(...)``, ``prompts(...)``,
  ``max_dec_lens(...)``, ``event_steps(...)``, ``reasoning_changes(...)``,
  ``eos_ids(...)``: the fields of a request.
* ``request_specs(config, num_steps, request_id, ...)``: one request; what every request
  of a script draws (events, seed and sampling strategies, prompt and eos sizes) is one
  :class:`RequestOptions` record, ``options=``.
* ``accept_runs`` / ``accept_overrides(config, requests, num_steps, ...)``:
  forced accept counts through the engine's draft-override hook.
* ``scripted_requests`` / ``request_scripts(config, num_steps, ...)``: the
  request script with its forced accepts. Arrivals cluster in bursts and
  lifetimes mix, so batches grow and shrink across bucket boundaries, slots
  get holes and steps mix prefill and decode. Each request's draws (its
  overrides included) are one block, and its events are offsets from its
  arrival, so the shrinker deletes or moves a request whole.
* ``scenarios(...)``: all of it. ``suites/scenarios.py`` turns its knobs
  towards one bug family per suite.

Every value drawn is valid by construction (``scenarios`` re-validates with
``graphcheck.scenario.validate``), and every strategy shrinks towards the
smallest, most boring choice: one request arriving at step 0 and decoding
throughout, two steps, greedy verification, no overrides, aborts or reasoning
changes, the default engine sizes (``EngineConfig()``).
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple, Sequence, TypeVar, Union, cast

from hypothesis import strategies as st

from graphcheck.contract import CONTRACT_NAMES, CONTRACTS
from graphcheck.scenario import (
    MAX_CANDIDATE_LEN,
    MAX_EOS_IDS,
    SEED_MODULUS,
    TEMPERATURE_RANGE,
    VERIFY_STRATEGIES,
    AcceptOverride,
    EngineConfig,
    ReasoningChange,
    RequestSpec,
    Scenario,
    one_eos_length,
    validate,
)

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])
Knob = Union[T, st.SearchStrategy[T], None]

DEFAULT = EngineConfig()
#: Capture-size sets tried first; the default comes first so shrinking ends there.
PRESET_CAPTURE_SIZES: tuple[tuple[int, ...], ...] = (
    DEFAULT.capture_sizes,
    (1, 2, 4, 8),
    (1,),
    (2, 4),
    (4,),
    (2, 4, 8),
    (1, 8),
    (1, 3, 6),
    (1, 2, 3, 4),
    (3, 6),
)
#: graph scopes, the default ("step") first
SCOPES = ("step", "forward", "forward_sampling")
#: request lifetimes: "long" first, so the simplest script is one request decoding throughout
LIFETIMES = ("long", "mixed", "short")


#: Strategy factories below are memoised: composites call them on every draw, and building and
#: validating a fresh strategy object each time dominated the cost of drawing (and of shrinking).
def _memo(factory: F) -> F:
    """``factory`` memoised on its arguments; built afresh when one is unhashable (a list)."""
    cached = functools.lru_cache(maxsize=4096)(factory)

    @functools.wraps(factory)
    def memoised(*args: Any, **kwargs: Any) -> Any:
        try:
            return cached(*args, **kwargs)
        except TypeError:  # unhashable: nothing to share
            return factory(*args, **kwargs)

    return cast(F, memoised)


def _memo_on(key: Callable[..., Any]) -> Callable[[F], F]:
    """Memoise a strategy factory on ``key(*args, **kwargs)``, which must hold all the strategy reads of
    its arguments: calls with equal keys share the strategy built for the first of them."""

    def decorate(factory: F) -> F:
        built: dict[Any, Any] = {}

        @functools.wraps(factory)
        def memoised(*args: Any, **kwargs: Any) -> Any:
            found = key(*args, **kwargs)
            try:
                return built[found]
            except KeyError:
                pass
            except TypeError:  # unhashable: nothing to share
                return factory(*args, **kwargs)
            if len(built) >= 4096:
                built.clear()
            built[found] = strategy = factory(*args, **kwargs)
            return strategy

        return cast(F, memoised)

    return decorate


def _request_view(config: EngineConfig) -> tuple[int, int, int, bool, bool]:
    """All that the request strategies read of a config: the room (max_model_len, k + 1), the
    vocabulary, the seed increment (k, naive mode) and whether the contract wants one eos length.
    A scenario draws a fresh config (its model seed alone makes it new), so a key holding the
    whole config would rarely hit."""
    view = config.vocab_size, config.max_model_len, config.num_speculative_tokens, config.naive_mode
    return (*view, _one_eos_length(config))


def _one_eos_length(config: EngineConfig) -> bool:
    """Whether the config's contract has every eos list of a scenario of one length (``eos_lengths``)."""
    contract = CONTRACTS.get(config.contract)
    return contract is not None and contract.eos_lengths == "uniform"


def _kw(kwargs: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    """Keyword arguments as a key."""
    return tuple(sorted(kwargs.items()))


@_memo
def _pick(*options: Any) -> st.SearchStrategy[Any]:
    """``sampled_from(options)``, memoised; shrinks to the first option."""
    return st.sampled_from(options)


@_memo
def _either(*strategies: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``one_of(strategies)``, memoised; shrinks towards the first."""
    return st.one_of(*strategies)


_just = _memo(st.just)  # just(value), memoised when ``value`` is hashable
_int = _memo(st.integers)  # integers(lo, hi), memoised: composites below ask for the same ranges again and again
#: Two distinct objects: one_of drops a repeated strategy, and None is two of the abort's three branches.
_NO_ABORT = (st.none(), st.none())


def _knob(value: Knob[T], default: st.SearchStrategy[T]) -> st.SearchStrategy[T]:
    """A knob is None (use ``default``), a fixed value, or a strategy."""
    if value is None:
        return default
    if isinstance(value, st.SearchStrategy):
        return value
    return _just(value)


@_memo
def toward(default: int, lo: int, hi: int) -> st.SearchStrategy[int]:
    """Integers in [lo, hi] that shrink towards ``default`` (clamped), then upwards from lo."""
    first = min(max(default, lo), hi)
    return st.sampled_from([first] + [v for v in range(lo, hi + 1) if v != first])


# ---------------------------------------------------------------------------
# Engine configurations
# ---------------------------------------------------------------------------


@_memo
def capture_size_sets(
    max_size: int = 8, *, max_entries: int = 4, allow_empty: bool = True
) -> st.SearchStrategy[tuple[int, ...]]:
    """Distinct capture sizes in any order: presets first (the default set), else arbitrary sets.

    Empty (no graphs: every step runs eagerly) only when ``allow_empty``.
    """
    presets = [p for p in PRESET_CAPTURE_SIZES if max(p) <= max_size and len(p) <= max_entries]
    drawn = st.sets(st.integers(1, max_size), min_size=0 if allow_empty else 1, max_size=max_entries)
    sizes = st.one_of(st.sampled_from(presets), drawn.map(lambda s: tuple(sorted(s))))
    # The engine must sort the sizes itself; shrinking restores ascending order.
    return sizes.flatmap(any_order)


@_memo
def any_order(sizes: tuple[int, ...]) -> st.SearchStrategy[tuple[int, ...]]:
    """``sizes`` in any order, memoised (a flatmap asks for it on every draw); shrinks to the order given."""
    return st.permutations(sizes).map(tuple)


@dataclass(frozen=True)
class ConfigSizes:
    """The sizes ``engine_configs`` draws: batch and graph sizes, draft counts, model dimensions.

    Each knob is a fixed value, a strategy, or None for its default spread. ``vocab_size``,
    ``hidden_size`` and ``max_model_len`` are fixed; ``max_seqs_cap`` bounds the default spread
    of ``max_num_seqs``. ``num_model_steps`` (S) is drawn up to whatever ``k`` was drawn (a fixed
    value is clamped to it).
    """

    max_num_seqs: Knob[int] = None
    capture_sizes: Knob[tuple[int, ...]] = None
    k: Knob[int] = None  # num_speculative_tokens
    num_model_steps: Knob[int] = None
    block_size: Knob[int] = None
    max_candidate_len: Knob[int] = None
    vocab_size: int = DEFAULT.vocab_size
    hidden_size: int = DEFAULT.hidden_size
    max_model_len: int = DEFAULT.max_model_len
    max_seqs_cap: int = 6


@_memo
@st.composite
def engine_configs(
    draw: st.DrawFn,
    *,
    graph_scope: Knob[str] = None,
    naive_mode: Knob[bool] = None,
    verify_strategy: Knob[str] = None,
    accept_policy: Knob[str] = None,
    contract: Knob[str] = None,
    model_seed: Knob[int] = None,
    sizes: ConfigSizes | None = None,
) -> EngineConfig:
    """An EngineConfig; each knob is a fixed value, a strategy, or None for the default spread.

    The keywords are the engine's modes (what an adapter narrows to what its engine supports:
    ``engine_configs(graph_scope="step", naive_mode=False)``) and its model's seed; ``sizes``
    (:class:`ConfigSizes`) the numbers: ``engine_configs(sizes=ConfigSizes(max_num_seqs=2, k=3))``.

    ``contract`` (a ``graphcheck.contract`` preset name) is "default" unless given; None
    draws nothing, so the default spread of every other knob stays as it was.

    By default max_num_seqs is often below the largest capture size (buffers
    must still hold the largest padded batch).
    """
    knobs = sizes or ConfigSizes()
    capture_sizes = draw(_knob(knobs.capture_sizes, capture_size_sets()))
    largest = max(capture_sizes, default=0)
    seqs_default = toward(DEFAULT.max_num_seqs, 1, knobs.max_seqs_cap)
    if largest > 1:
        seqs_default = _either(seqs_default, _int(1, largest - 1))
    k_value = draw(_knob(knobs.k, _int(1, 4)))
    candidates_default = toward(DEFAULT.max_candidate_len, 1, min(MAX_CANDIDATE_LEN, knobs.vocab_size - 1))
    return EngineConfig(
        max_num_seqs=draw(_knob(knobs.max_num_seqs, seqs_default)),
        num_speculative_tokens=k_value,
        num_model_steps=min(k_value, draw(_knob(knobs.num_model_steps, _int(1, k_value)))),
        capture_sizes=capture_sizes,
        vocab_size=knobs.vocab_size,
        hidden_size=knobs.hidden_size,
        block_size=draw(_knob(knobs.block_size, _pick(DEFAULT.block_size, 4, 16, 2))),
        max_model_len=knobs.max_model_len,
        verify_strategy=draw(_knob(verify_strategy, _pick(*VERIFY_STRATEGIES))),
        accept_policy=draw(_knob(accept_policy, _pick("normal", "normal", "accept_all", "reject_all"))),
        max_candidate_len=draw(_knob(knobs.max_candidate_len, candidates_default)),
        naive_mode=draw(_knob(naive_mode, _pick(False, False, False, True))),
        graph_scope=draw(_knob(graph_scope, _pick(*SCOPES))),
        model_seed=draw(_knob(model_seed, _int(0, 2**16))),
        contract="default" if contract is None else draw(_knob(contract, _pick(*CONTRACT_NAMES))),
    )


# ---------------------------------------------------------------------------
# Request fields
# ---------------------------------------------------------------------------


def seeds(config: EngineConfig | None = None, num_steps: int = 16) -> st.SearchStrategy[int]:
    """Request seeds: small ones, ones that wrap around SEED_MODULUS within the run, any.

    With a config, the near-modulus branch is sized by its seed increment so
    ``infer_seed`` wraps during the first ``num_steps`` steps.
    """
    return _seeds((config.seed_increment if config is not None else 24) * max(1, num_steps))


@_memo
def _seeds(span: int) -> st.SearchStrategy[int]:
    return st.one_of(
        st.integers(0, 1000),
        st.integers(1, min(span, SEED_MODULUS)).map(lambda d: SEED_MODULUS - d),
        st.integers(0, SEED_MODULUS - 1),
    )


#: (temperature, top_p, top_k) drawn together; shrinks to the defaults (1.0, 1.0, 0).
SamplingParams = tuple[float, float, int]


def sampling_params(config: EngineConfig, *, spread: str = "mixed") -> st.SearchStrategy[SamplingParams]:
    """Sampling parameters. ``spread``: "mixed" (typical and extreme values, any float),
    "random" (high entropy: a wrong random number shows as a wrong token), or "default"."""
    return _sampling_params(config.vocab_size, spread)


# Here and below: memoised on what is read of the config, not on the config (see _request_view).
@_memo
def _sampling_params(vocab_size: int, spread: str) -> st.SearchStrategy[SamplingParams]:
    lo_t, hi_t = TEMPERATURE_RANGE
    if spread == "default":
        return st.just((1.0, 1.0, 0))
    if spread == "random":
        temperature = st.sampled_from((2.0, hi_t, 5.0, 1.0))
        top_p = st.sampled_from((1.0, 0.99, 0.95))
        top_k = st.sampled_from((0, vocab_size, 32))
    else:
        temperature = st.one_of(st.sampled_from((1.0, 0.5, 0.8, 1.5, 2.0, lo_t, hi_t)), st.floats(lo_t, hi_t))
        top_p = st.one_of(st.sampled_from((1.0, 0.9, 0.7, 0.5, 0.3)), st.floats(0.01, 1.0))
        top_k = st.one_of(st.sampled_from((0, 1, 5, 20)), st.integers(0, vocab_size))
    return st.tuples(temperature, top_p, top_k)


def room(config: EngineConfig) -> int:
    """Prompt plus generated tokens a request may hold (scenario validation)."""
    return config.max_model_len - config.tokens_per_request


def prompts(config: EngineConfig, *, max_len: int = 12, long_len: int = 40) -> st.SearchStrategy[tuple[int, ...]]:
    """Prompts: usually short; sometimes long, past the position table (32 rows) and across KV blocks.

    A long prompt has at least 33 tokens (when the configuration has room): left to
    ``st.lists``, lengths cluster near the minimum and a long draw rarely got past 32.
    """
    return _prompts(room(config) - 1, config.vocab_size, max_len, long_len)


@_memo
@st.composite
def _prompts(draw: st.DrawFn, cap: int, vocab_size: int, max_len: int, long_len: int) -> tuple[int, ...]:
    short, long = min(max_len, cap), min(long_len, cap)
    longest = draw(_pick(short, long))
    shortest = 1 if longest == short else min(33, longest)
    width = _token_width(vocab_size)
    return token_ids(draw(_bytes(shortest * width, longest * width)), vocab_size)


def _token_width(vocab_size: int) -> int:
    """Bytes per token id (one while the vocabulary fits in a byte)."""
    return 1 if vocab_size <= 256 else 2


@_memo
def _bytes(min_size: int, max_size: int) -> st.SearchStrategy[bytes]:
    return st.binary(min_size=min_size, max_size=max_size)


def token_ids(raw: bytes, vocab_size: int) -> tuple[int, ...]:
    """Token ids from bytes, one or two bytes per token; all zero bytes give all token 0.

    A prompt is drawn as one byte string rather than a list of integers: one
    choice for Hypothesis instead of one per token, which made long prompts the
    costliest part of drawing a scenario; it still shrinks towards zeros.
    """
    width = _token_width(vocab_size)
    usable = len(raw) - len(raw) % width
    return tuple(int.from_bytes(raw[i : i + width], "little") % vocab_size for i in range(0, usable, width))


def max_dec_lens(
    config: EngineConfig, remaining: int, prompt_len: int, lifetime: str = "mixed"
) -> st.SearchStrategy[int]:
    """max_dec_len for a request with ``remaining`` steps left in the run.

    "short": ends within a few steps; "long": can outlive the run; "mixed": any
    of these or close to the remaining step count, so it finishes mid-run.
    """
    return _max_dec_lens(max(1, room(config) - prompt_len), remaining, config.tokens_per_request, lifetime)


@_memo
def _max_dec_lens(cap: int, remaining: int, tokens_per_request: int, lifetime: str) -> st.SearchStrategy[int]:
    short = st.integers(1, min(cap, 4))
    near = st.integers(1, min(cap, max(1, remaining)))
    long = st.integers(min(cap, remaining * tokens_per_request), cap)
    if lifetime == "short":
        return short
    if lifetime == "long":
        return long
    return st.one_of(near, short, long)


@_memo
def event_steps(first: int, last: int, *, near: int = 4) -> st.SearchStrategy[int]:
    """A step in [first, last], usually within ``near`` steps of ``first`` (while the request
    is likely still running), sometimes anywhere. Drawn as an offset from ``first``, so
    when the shrinker moves an arrival, the request's events move with it."""
    span = max(0, last - first)
    offsets = st.one_of(st.integers(0, min(span, near)), st.integers(0, span))
    return offsets.map(lambda offset: first + offset)


@_memo
@st.composite
def reasoning_excursions(draw: st.DrawFn, num_steps: int, arrival: int = 0) -> list[ReasoningChange]:
    """A reasoning_status change, usually soon after the arrival (the engine must sync it into
    a running slot; ``arrival`` itself is the admission path), often followed by a change back.
    Status 1 (every draft rejected) comes first and is weighted."""
    after = event_steps(min(arrival + 1, num_steps), num_steps)
    start = draw(_either(after, _just(arrival)))
    changes = [ReasoningChange(start, draw(_pick(1, 2, 1, 3, 0)))]
    if draw(st.booleans()):
        end = start + draw(_int(1, 4))
        if end <= num_steps:
            changes.append(ReasoningChange(end, draw(_pick(0, 2, 3, 1))))
    return changes


@_memo
def reasoning_changes(
    num_steps: int, arrival: int = 0, *, max_size: int = 2
) -> st.SearchStrategy[tuple[ReasoningChange, ...]]:
    """Up to ``max_size`` reasoning excursions of a request, as its sorted change list."""
    excursions = st.lists(reasoning_excursions(num_steps, arrival), max_size=max_size)
    return excursions.map(lambda xs: tuple(sorted((c for x in xs for c in x), key=lambda c: c.step)))


def eos_ids(config: EngineConfig, *, max_size: int = 2) -> st.SearchStrategy[tuple[int, ...]]:
    return _eos_ids(config.vocab_size, max_size)


@_memo
def _eos_ids(vocab_size: int, max_size: int) -> st.SearchStrategy[tuple[int, ...]]:
    token = st.integers(0, vocab_size - 1)
    return st.lists(token, min_size=1, max_size=min(max_size, MAX_EOS_IDS), unique=True).map(tuple)


# ---------------------------------------------------------------------------
# Requests and scripts
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class RequestOptions:
    """What every request of a script draws: which events, which seeds and sampling parameters, how large.

    ``aborts`` / ``reasoning``: whether a request may be aborted / change its reasoning_status;
    ``seed`` / ``sampling``: strategies for its seed and (temperature, top_p, top_k), None for the
    default spread (``seeds``, ``sampling_params``); ``max_prompt_len``: the usual prompt's
    longest (``prompts``); ``max_eos``: eos ids per request, at most. ``scenarios``,
    ``request_scripts`` and ``scripted_requests`` take them as keywords of their own.
    """

    aborts: bool = True
    reasoning: bool = True
    seed: st.SearchStrategy[int] | None = None
    sampling: st.SearchStrategy[SamplingParams] | None = None
    max_prompt_len: int = 12
    max_eos: int = 2


@_memo_on(lambda config, num_steps, request_id, **kw: (_request_view(config), num_steps, request_id, _kw(kw)))
@st.composite
def request_specs(
    draw: st.DrawFn,
    config: EngineConfig,
    num_steps: int,
    request_id: str,
    *,
    arrival: Knob[int] = None,
    lifetime: str = "mixed",
    options: RequestOptions | None = None,
) -> RequestSpec:
    """One request of the script; events (abort, reasoning) fall after its arrival. ``lifetime``:
    see ``max_dec_lens``; ``options`` (:class:`RequestOptions`): what it draws."""
    opts = options or RequestOptions()
    when = draw(_knob(arrival, _int(0, num_steps - 1)))
    prompt = draw(prompts(config, max_len=opts.max_prompt_len))
    temperature, top_p, top_k = draw(opts.sampling if opts.sampling is not None else sampling_params(config))
    abort = None
    if opts.aborts and when + 1 <= num_steps:
        abort = draw(_either(*_NO_ABORT, event_steps(when + 1, num_steps)))
    return RequestSpec(
        request_id=request_id,
        arrival_step=when,
        prompt=prompt,
        max_dec_len=draw(max_dec_lens(config, num_steps - when, len(prompt), lifetime)),
        eos_token_ids=draw(eos_ids(config, max_size=opts.max_eos)),
        temperature=temperature,
        top_p=top_p,
        top_k=top_k,
        seed=draw(opts.seed if opts.seed is not None else seeds(config, num_steps)),
        reasoning=draw(reasoning_changes(num_steps, when)) if opts.reasoning else (),
        abort_step=abort,
    )


@_memo
def burst_steps(num_steps: int, *, max_bursts: int = 3) -> st.SearchStrategy[tuple[int, ...]]:
    """A few steps at which several requests join together (sorted); shrinks to (0,)."""
    bursts = st.lists(_int(0, num_steps - 1), min_size=1, max_size=max_bursts, unique=True)
    return bursts.map(lambda b: tuple(sorted(b)))


#: A request that overrides may target: its id and the first step they may start at.
_Target = tuple[str, int]


def _targets(requests: Sequence[RequestSpec | str]) -> tuple[_Target, ...]:
    """What ``accept_runs`` reads of ``requests``: a spec's overrides start after its arrival, an id's at step 0."""
    return tuple((r.request_id, r.arrival_step + 1) if isinstance(r, RequestSpec) else (r, 0) for r in requests)


def accept_runs(
    config: EngineConfig, requests: Sequence[RequestSpec | str], num_steps: int, *, max_run: int = 4
) -> st.SearchStrategy[list[AcceptOverride]]:
    """Forced accept counts for 1..``max_run`` consecutive steps of one of ``requests``,
    starting after its arrival (usually soon after); counts favour the extremes 0 and k."""
    return _accept_runs(config.num_speculative_tokens, _targets(requests), num_steps, max_run)


# Memoised on what is read of the config and the requests: a freshly drawn spec as the key never hits.
@_memo
@st.composite
def _accept_runs(
    draw: st.DrawFn, k: int, targets: tuple[_Target, ...], num_steps: int, max_run: int
) -> list[AcceptOverride]:
    index = draw(_int(0, len(targets) - 1)) if len(targets) > 1 else 0
    rid, first = targets[index]
    start = draw(event_steps(min(first, num_steps - 1), num_steps - 1))
    length = draw(_int(1, max_run))
    count = _either(_pick(0, k), _int(0, k))
    return [AcceptOverride(step, rid, draw(count)) for step in range(start, min(num_steps, start + length))]


def _first_per_key(overrides: Sequence[AcceptOverride]) -> tuple[AcceptOverride, ...]:
    """At most one override per (step, request), the first one winning; sorted."""
    found: dict[tuple[int, str], AcceptOverride] = {}
    for acc in overrides:
        found.setdefault((acc.step, acc.request_id), acc)
    return tuple(found[key] for key in sorted(found))


def accept_overrides(
    config: EngineConfig,
    requests: Sequence[RequestSpec | str],
    num_steps: int,
    *,
    max_overrides: int = 6,
    max_run: int = 4,
) -> st.SearchStrategy[tuple[AcceptOverride, ...]]:
    """Forced accept counts through the draft-override hook: up to ``max_overrides`` runs
    (``accept_runs``) over any of ``requests``. Overrides on a request's prefill step or
    after it ended are legal no-ops."""
    return _accept_overrides(config.num_speculative_tokens, _targets(requests), num_steps, max_overrides, max_run)


@_memo
@st.composite
def _accept_overrides(
    draw: st.DrawFn, k: int, targets: tuple[_Target, ...], num_steps: int, max_overrides: int, max_run: int
) -> tuple[AcceptOverride, ...]:
    if not targets or max_overrides <= 0:
        return ()
    runs = draw(_run_lists(k, targets, num_steps, max_run, max_overrides))
    return _first_per_key([acc for run in runs for acc in run])


@_memo
def _run_lists(
    k: int, targets: tuple[_Target, ...], num_steps: int, max_run: int, max_overrides: int
) -> st.SearchStrategy[list[list[AcceptOverride]]]:
    return st.lists(_accept_runs(k, targets, num_steps, max_run), max_size=max_overrides)


@_memo
def _script_parts(
    config: EngineConfig,
    num_steps: int,
    bursts: tuple[int, ...],
    min_requests: int,
    max_requests: int,
    **request_kw: Any,
) -> st.SearchStrategy[list[Script]]:
    """``min_requests`` to ``max_requests`` ``scripted_requests``, memoised (drawn once per script)."""
    one = scripted_requests(config, num_steps, bursts, **request_kw)
    return st.lists(one, min_size=min_requests, max_size=max_requests)


class Script(NamedTuple):
    """A request script and its forced accept counts."""

    requests: tuple[RequestSpec, ...]
    accepts: tuple[AcceptOverride, ...]


@_memo_on(lambda config, num_steps, bursts=(0,), **kw: (_request_view(config), num_steps, bursts, _kw(kw)))
@st.composite
def scripted_requests(
    draw: st.DrawFn,
    config: EngineConfig,
    num_steps: int,
    bursts: Sequence[int] = (0,),
    *,
    lifetimes: Sequence[str] = LIFETIMES,
    max_accept_runs: int = 1,
    request_id: str = "r",
    **request_kw: Any,
) -> Script:
    """One request of a script with its own forced accepts: it arrives in one of the
    ``bursts`` or at any step, with a lifetime drawn from ``lifetimes``.

    All of a request's choices, its overrides included, form one contiguous
    block of draws, and its events are drawn relative to its arrival: the
    shrinker can delete any request, or move it, without disturbing the rest.
    ``request_kw``: the fields of :class:`RequestOptions` (``aborts``, ``max_eos``, ...).
    """
    arrival = draw(_either(_pick(*bursts), _int(0, num_steps - 1)))
    lifetime = draw(_pick(*lifetimes))
    options = RequestOptions(**request_kw)
    spec = draw(request_specs(config, num_steps, request_id, arrival=arrival, lifetime=lifetime, options=options))
    accepts = draw(accept_overrides(config, [spec], num_steps, max_overrides=max_accept_runs))
    return Script((spec,), accepts)


@_memo_on(lambda config, num_steps, **kw: (_request_view(config), num_steps, _kw(kw)))
@st.composite
def request_scripts(
    draw: st.DrawFn,
    config: EngineConfig,
    num_steps: int,
    *,
    min_requests: int = 1,
    max_requests: int = 5,
    max_bursts: int = 3,
    **request_kw: Any,
) -> Script:
    """The request script, ids r0, r1, ... in submission order, with forced accept counts.

    Arrivals cluster in a few bursts, and requests submitted together take the
    lowest free slots in script order, so mixing lifetimes across a burst
    leaves holes (a low slot frees while a higher one runs) or shrinks the
    slot high-water mark R (a high slot frees first); later bursts grow it
    again, and padded rows then exist where a larger batch ran before.
    ``request_kw`` goes to ``scripted_requests`` (``lifetimes``, ``max_accept_runs`` and the fields
    of :class:`RequestOptions`). Under a contract whose
    eos lists have one length (``eos_lengths`` ``uniform``) each is cut to the shortest's.
    """
    bursts = draw(burst_steps(num_steps, max_bursts=max_bursts))
    parts = draw(_script_parts(config, num_steps, bursts, min_requests, max_requests, **request_kw))
    requests: list[RequestSpec] = []
    accepts: list[AcceptOverride] = []
    for i, part in enumerate(parts):
        rid = f"r{i}"
        requests.append(dataclasses.replace(part.requests[0], request_id=rid))
        accepts.extend(dataclasses.replace(acc, request_id=rid) for acc in part.accepts)
    specs = one_eos_length(requests) if _one_eos_length(config) else tuple(requests)
    return Script(specs, _first_per_key(accepts))


@st.composite
def scenarios(
    draw: st.DrawFn,
    *,
    configs: st.SearchStrategy[EngineConfig] | None = None,
    min_requests: int = 1,
    max_requests: int = 5,
    min_steps: int = 2,
    max_steps: int = 16,
    name: str = "",
    **script_kw: Any,
) -> Scenario:
    """A whole scenario. ``script_kw`` goes to ``request_scripts`` (and on to
    ``scripted_requests`` and :class:`RequestOptions`): ``max_bursts``, ``lifetimes``,
    ``max_accept_runs`` (per request), ``aborts``, ``reasoning``, ``seed``, ``sampling``,
    ``max_prompt_len``, ``max_eos``."""
    config = draw(configs if configs is not None else engine_configs())
    num_steps = draw(_int(min_steps, max_steps))
    script = draw(request_scripts(config, num_steps, min_requests=min_requests, max_requests=max_requests, **script_kw))
    return validate(Scenario(config, script.requests, script.accepts, num_steps, name))


__all__ = [
    "PRESET_CAPTURE_SIZES",
    "accept_overrides",
    "accept_runs",
    "any_order",
    "burst_steps",
    "capture_size_sets",
    "ConfigSizes",
    "engine_configs",
    "eos_ids",
    "event_steps",
    "max_dec_lens",
    "prompts",
    "reasoning_changes",
    "reasoning_excursions",
    "request_scripts",
    "request_specs",
    "RequestOptions",
    "room",
    "sampling_params",
    "Script",
    "scenarios",
    "scripted_requests",
    "seeds",
    "toward",
]
