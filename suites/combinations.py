"""Scenarios built to reach the rare situations directly (graphcheck.check.situations).

Random scripts reach most situations by themselves, but a few need events to
line up: an eos that is exactly an accepted draft token, a max_dec_len that falls
inside a run of accepted drafts, a request walking through every reasoning_status
transition while it decodes, a batch whose high slots all leave at once so the
next replay takes a smaller bucket, more requests than the largest bucket, a
slot handed straight to a request forced the accept count its previous occupant
was forced (the host-side copy of the slot's override looks current). This
suite builds those on purpose, swarm style: every example switches on a random
subset of *recipes* (at least one) over a configuration that suits them, on top
of a few ordinary requests. Where a recipe needs to know what the model will say
(which token a draft will be), it asks the NumPy reference: it decodes the
scenario once and plants the eos or the length limit at a position the
reference shows, on a step that runs no prefill when it can (a prefill makes the
step eager, and a graph-only bug needs the situation on a replayed step).
"""

from __future__ import annotations

import dataclasses
from typing import Collection, NamedTuple, Sequence

from hypothesis import strategies as st

from graphcheck.reference import decode
from graphcheck.scenario import AcceptOverride, EngineConfig, ReasoningChange, RequestSpec, Scenario, validate
from graphcheck.step_result import StepResult
from graphcheck.strategies import ConfigSizes, RequestOptions, engine_configs, request_specs, sampling_params

#: A closed walk over the four reasoning statuses taking every one of the 12 transitions once
#: (the complete digraph on 0..3 is Eulerian); any rotation of it is one too.
REASONING_TOUR = (0, 1, 0, 2, 0, 3, 1, 2, 1, 3, 2, 3)

#: Request-level recipes (any speculative configuration) and batch shapes (one per example).
STOP_KINDS = ("max_dec_len at the bonus token", "eos as accepted draft", "eos as bonus token")
SHAPES = ("shrinking batch", "past every bucket", "mixed", "handover")


_SHAPE = st.sampled_from(SHAPES[:2] + SHAPES)  # the two batch shapes weighted up
_LIFETIME = st.sampled_from(("short", "mixed", "long"))


class Recipe(NamedTuple):
    """What one example switches on."""

    tour: bool  # a long request walks through reasoning transitions
    stops: tuple[str, ...]  # of STOP_KINDS, each planted on its own request with the reference's help
    shape: str  # one of SHAPES


@st.composite
def recipes(draw: st.DrawFn) -> Recipe:
    """A swarm subset: each recipe on or off, at least one switched on; shrinks to a planted eos.
    The handover shape takes no tour (r0, the rider, leaves early there)."""
    stops = tuple(kind for kind in STOP_KINDS if draw(st.booleans()))
    tour = draw(st.booleans())
    shape = draw(_SHAPE)
    if not stops and not tour and shape == "mixed":
        stops = STOP_KINDS[:1]
    return Recipe(tour and shape != "handover", stops, shape)


# --------------------------------------------------------------------------- configurations

# Strategies built once, not on every draw (engine_configs is memoised on them).
_NAIVE = st.sampled_from((False, True))
_POLICY = st.sampled_from(("accept_all", "normal", "accept_all", "reject_all"))
_ACCEPTING_POLICY = st.sampled_from(("accept_all", "normal"))
_SHRINKING_SIZES = st.sampled_from(((1, 2, 4), (2, 4), (1, 2, 3, 4), (2, 4, 8), (1, 4), (2, 3), (1, 2)))
_SMALL_SIZES = st.sampled_from(((1,), (2,), (1, 2), (1, 3), (2, 3), (3,)))
_HANDOVER_SIZES = st.sampled_from(((1, 2, 4), (2, 4), (1, 2, 4, 8), (4,), (1, 4), (2, 4, 8), (4, 8)))


def _config(draw: st.DrawFn, recipe: Recipe) -> EngineConfig:
    speculative = recipe.tour or bool(recipe.stops)
    naive = False if speculative else _NAIVE
    policy = _POLICY
    if recipe.stops:  # a planted stop needs accepted drafts
        policy = _ACCEPTING_POLICY
    if recipe.shape == "shrinking batch":
        sizes = _SHRINKING_SIZES
        config = draw(
            engine_configs(
                naive_mode=naive, accept_policy=policy, sizes=ConfigSizes(max_num_seqs=8, capture_sizes=sizes)
            )
        )
        return dataclasses.replace(config, max_num_seqs=max(config.capture_sizes))
    if recipe.shape == "past every bucket":
        sizes = _SMALL_SIZES
        config = draw(engine_configs(naive_mode=naive, accept_policy=policy, sizes=ConfigSizes(capture_sizes=sizes)))
        return dataclasses.replace(config, max_num_seqs=max(config.capture_sizes) + draw(st.integers(1, 3)))
    if recipe.shape == "handover":  # forced accept counts need drafts; one slot per request, no queue
        config = draw(
            engine_configs(naive_mode=False, accept_policy=policy, sizes=ConfigSizes(capture_sizes=_HANDOVER_SIZES))
        )
        return dataclasses.replace(config, max_num_seqs=max(config.capture_sizes))
    return draw(engine_configs(naive_mode=naive, accept_policy=policy))


# --------------------------------------------------------------------------- scripts


def _requests(
    draw: st.DrawFn, config: EngineConfig, recipe: Recipe, num_steps: int, handover: int | None = None
) -> list[RequestSpec]:
    """The batch shape's requests, ids r0, r1, ...; r0 lives long (the tour rides on it).

    ``handover`` (shape handover): the step r0 is aborted at and the last request arrives at."""
    short_from = None  # requests from this index on leave after about one decode step
    exactly_one = False  # ... after exactly one: the prefill's token, then one
    if recipe.shape == "shrinking batch":
        n = max(config.capture_sizes)
        keep = draw(st.integers(1, max(1, n // 2)))  # the low slots keep decoding
        lifetimes = ["long"] * keep + ["short"] * (n - keep)
        arrivals = [0] * n
        short_from = keep
    elif recipe.shape == "past every bucket":
        largest = max(config.capture_sizes)
        n = draw(st.integers(largest + 1, config.max_num_seqs))
        lifetimes = ["long"] * n
        arrivals = [0] * n
        if draw(st.booleans()):  # the slots past the largest bucket leave after the first fallback: a replay next
            short_from, exactly_one = largest, True
            lifetimes[largest:] = ["short"] * (n - largest)
    elif recipe.shape == "handover":
        # r0 holds slot 0 until its abort at ``handover``; the last request arrives then and takes slot 0,
        # the lowest free one. The others all arrive at step 0, so no prefill runs beside the
        # newcomer's first decode step, and they leave room under the largest bucket for planted stops.
        room_left = max(config.capture_sizes) - 1 - len(recipe.stops)
        n = 2 + draw(st.integers(0, max(0, room_left)))
        lifetimes = ["long"] + [draw(_LIFETIME) for _ in range(n - 2)] + ["long"]
        arrivals = [0] * (n - 1) + [handover if handover is not None else 0]
    else:
        n = draw(st.integers(2, 5))
        lifetimes = ["long"] + [draw(_LIFETIME) for _ in range(n - 1)]
        arrivals = [0] + [draw(st.integers(0, num_steps - 1)) for _ in range(n - 1)]
    sampling = sampling_params(config)
    specs = [
        draw(
            request_specs(
                config,
                num_steps,
                f"r{i}",
                arrival=arrivals[i],
                lifetime=lifetimes[i],
                options=RequestOptions(aborts=recipe.shape == "mixed" and i > 0, reasoning=False, sampling=sampling),
            )
        )
        for i in range(n)
    ]
    if short_from is not None:  # the high slots leave after one replay (or eager step) of the full batch
        last_step = 2 if exactly_one else 1 + config.tokens_per_request  # the prefill's token, then one step's worth
        specs = specs[:short_from] + [
            dataclasses.replace(spec, max_dec_len=draw(st.integers(2, last_step))) for spec in specs[short_from:]
        ]
    if recipe.shape == "handover" and handover is not None:
        specs[0] = dataclasses.replace(specs[0], abort_step=handover)
    return specs


def _tour(draw: st.DrawFn, spec: RequestSpec, num_steps: int) -> RequestSpec:
    """``spec`` with reasoning changes at every step from its arrival, following a rotation of the tour."""
    start = draw(st.integers(0, len(REASONING_TOUR) - 1))
    length = min(num_steps - spec.arrival_step, len(REASONING_TOUR) + 1)
    statuses = [REASONING_TOUR[(start + i) % len(REASONING_TOUR)] for i in range(length)]
    changes = tuple(ReasoningChange(spec.arrival_step + i, s) for i, s in enumerate(statuses))
    return dataclasses.replace(spec, reasoning=changes)


@st.composite
def combination_scenarios(draw: st.DrawFn) -> Scenario:
    """An example of the combinations suite (see the module docstring)."""
    recipe = draw(recipes())
    config = _config(draw, recipe)
    num_steps = draw(st.integers(14, 16) if recipe.tour else st.integers(5, 14))
    # The handover: r0 is aborted at this step, and a newcomer takes its slot (a prefill, then a replay).
    handover = draw(st.integers(3, num_steps - 2)) if recipe.shape == "handover" else None
    requests = _requests(draw, config, recipe, num_steps, handover)
    newcomer = requests[-1].request_id if handover is not None else None  # takes r0's slot at the handover
    pair = {"r0", newcomer} if newcomer is not None else set()  # they carry no planted stop
    for i in range(len(requests), int(recipe.tour) + len(recipe.stops) + len(pair)):  # a request per recipe
        arrival = draw(st.integers(0, 2))
        requests.append(
            draw(
                request_specs(
                    config,
                    num_steps,
                    f"r{i}",
                    arrival=arrival,
                    lifetime="long",
                    options=RequestOptions(reasoning=False),
                )
            )
        )
    if recipe.tour:
        requests[0] = _tour(draw, requests[0], num_steps)
    accepts = _forced_accepts(draw, config, requests, num_steps, recipe, avoid=pair)
    if newcomer is not None and handover is not None:
        forced = _handover_accepts(draw, config, newcomer, handover)
        accepts = tuple(sorted(accepts + forced, key=lambda a: (a.step, a.request_id)))
    scenario = validate(Scenario(config, tuple(requests), accepts, num_steps, "combinations"))
    # One reference decode plans everything: a request's tokens do not depend on the others'
    # eos ids or limits, only on its own prompt, seed and parameters.
    decoded = decode(scenario)
    taken = ({"r0"} if recipe.tour else set()) | pair
    for kind in recipe.stops:
        pick = draw(st.integers(0, 2**16))
        scenario, planted = plant_stop(scenario, kind, pick, avoid=taken, decoded=decoded)
        taken |= planted
    if recipe.tour or recipe.shape in ("shrinking batch", "handover"):  # r0 must outlive the tour, or the exits
        scenario = keep_running(scenario, "r0", rounds=1, decoded=decoded)
    if newcomer is not None:  # it must decode after its prefill
        scenario = keep_running(scenario, newcomer, rounds=1, decoded=decoded)
    return scenario


def _handover_accepts(
    draw: st.DrawFn, config: EngineConfig, newcomer: str, handover: int
) -> tuple[AcceptOverride, ...]:
    """The handover's forced counts: r0 is forced X on its last step (before its abort at ``handover``),
    the newcomer the same X on its prefill and its first decode step, so a host copy of the slot's
    override that the release forgot would still look current (``leftover host override``)."""
    x = draw(st.integers(0, config.num_speculative_tokens))
    return (
        AcceptOverride(handover - 1, "r0", x),
        AcceptOverride(handover, newcomer, x),
        AcceptOverride(handover + 1, newcomer, x),
    )


def _forced_accepts(
    draw: st.DrawFn,
    config: EngineConfig,
    requests: Sequence[RequestSpec],
    num_steps: int,
    recipe: Recipe,
    avoid: Collection[str] = (),
) -> tuple[AcceptOverride, ...]:
    """Under the normal policy a planted stop needs drafts accepted: the requests that may carry one
    (not those of ``avoid``) accept all k drafts on every step after their arrival (the override hook),
    from a drawn first step."""
    if not recipe.stops or config.accept_policy != "normal" or config.naive_mode:
        return ()
    k, first = config.num_speculative_tokens, draw(st.integers(1, 3))
    carriers = [spec for spec in (requests[1:] if recipe.tour else requests) if spec.request_id not in avoid]
    return tuple(
        sorted(
            (
                AcceptOverride(t, spec.request_id, k)
                for spec in carriers
                for t in range(spec.arrival_step + first, num_steps)
            ),
            key=lambda a: (a.step, a.request_id),
        )
    )


# --------------------------------------------------------------------------- planting with the reference


class _Spot(NamedTuple):
    request_id: str
    token: int  # the token to become the eos (planted eos)
    limit: int  # the max_dec_len that ends the request at this token (planted length)
    beside_prefill: bool = False  # another request prefills in that step (an eager step)


def plant_stop(
    scenario: Scenario, kind: str, pick: int, avoid: Collection[str] = (), decoded: Sequence[StepResult] | None = None
) -> tuple[Scenario, set[str]]:
    """``scenario`` with one request's eos ids or max_dec_len changed so that it stops as ``kind`` says.

    The reference decodes the scenario once (or ``decoded`` is its decode); the candidate spots are where a
    request accepted drafts (for an eos as the bonus token: all of them), those on steps that run no
    prefill preferred (a prefill makes a step eager: the stop would not meet a replay), and
    ``pick`` chooses one; requests in ``avoid`` are left alone. Returns the scenario
    and the request changed (none, and the scenario unchanged, when there is no spot).
    """
    spots = _spots(decode(scenario) if decoded is None else decoded, kind, avoid)
    if not spots:
        return scenario, set()
    spots = [spot for spot in spots if not spot.beside_prefill] or spots
    spot = spots[pick % len(spots)]
    spec = scenario.request(spot.request_id)
    if kind == "max_dec_len at the bonus token":
        new = dataclasses.replace(spec, max_dec_len=spot.limit)
    else:
        new = dataclasses.replace(spec, eos_token_ids=(spot.token,))
    return _with_request(scenario, new), {spec.request_id}


def _with_request(scenario: Scenario, new: RequestSpec) -> Scenario:
    """``scenario`` with the request of ``new``'s id replaced by ``new``, re-validated."""
    requests = tuple(new if r.request_id == new.request_id else r for r in scenario.requests)
    return validate(dataclasses.replace(scenario, requests=requests))


def _spots(decoded: Sequence[StepResult], kind: str, avoid: Collection[str]) -> list[_Spot]:
    found: list[_Spot] = []
    emitted: dict[str, list[int]] = {}
    drafts: dict[str, tuple[int, ...]] = {}
    for result in decoded:
        prefill = any(step.request_id not in emitted for step in result.requests)
        for step in result.requests:
            rid, tokens = step.request_id, step.accept_tokens
            before = emitted.setdefault(rid, [])
            proposed = drafts.get(rid, ())
            if rid not in avoid and proposed:
                spots = _spots_in_step(kind, rid, tokens, proposed, before)
                found.extend(spot._replace(beside_prefill=prefill) for spot in spots)
            before.extend(tokens)
            drafts[rid] = step.draft_tokens
    return found


def _spots_in_step(
    kind: str, rid: str, tokens: tuple[int, ...], proposed: tuple[int, ...], before: list[int]
) -> list[_Spot]:
    accepted = 0  # leading tokens of the step that are accepted drafts
    while accepted < min(len(tokens) - 1, len(proposed)) and tokens[accepted] == proposed[accepted]:
        accepted += 1
    seen = set(before)
    if kind != "eos as accepted draft":
        bonus = accepted == len(proposed) and len(tokens) == accepted + 1
        if not bonus or (kind == "eos as bonus token" and tokens[-1] in seen | set(tokens[:-1])):
            return []
        return [_Spot(rid, tokens[-1], len(before) + len(tokens))]
    return [
        _Spot(rid, tokens[j], len(before) + j + 1)
        for j in range(accepted)
        if tokens[j] not in seen and tokens[j] not in tokens[:j]
    ]


def keep_running(
    scenario: Scenario, request_id: str, *, rounds: int = 3, decoded: Sequence[StepResult] | None = None
) -> Scenario:
    """``scenario`` with ``request_id``'s eos ids swapped for a token it never emits in the run (when one
    exists), so that it decodes to the end; checked with the reference up to ``rounds`` times (the first
    time on ``decoded``, the scenario's decode, when given)."""
    for _ in range(rounds):
        results = decode(scenario) if decoded is None else decoded
        decoded = None
        emitted = {
            t for result in results for s in result.requests if s.request_id == request_id for t in s.accept_tokens
        }
        spec = scenario.request(request_id)
        if not emitted & set(spec.eos_token_ids):
            return scenario
        unused = [t for t in range(scenario.config.vocab_size) if t not in emitted]
        if not unused:
            return scenario
        scenario = _with_request(scenario, dataclasses.replace(spec, eos_token_ids=(unused[-1],)))
    return scenario


__all__ = ["REASONING_TOUR", "Recipe", "combination_scenarios", "keep_running", "plant_stop", "recipes"]
