"""The situations graph-capture bugs hide in, and which of them one lockstep run reached.

A *situation* is a combination of events a scenario can produce: a slot reused
with values its previous occupant left set, an eos accepted as a draft, a batch
whose slot high-water mark R sits one above a capture size, a seed about to wrap
the modulus, ... Bugs written against a graph engine tend to need one of them,
and a fuzzing run that never reached it cannot have found such a bug. This
module names them (:data:`SITUATIONS`), reads from a finished run which ones
occurred (:func:`situations_hit`: the scenario and the records of the reference
and the graph engine, so only what actually ran counts), and tallies them over a
search (:class:`CoverageTally`), for the situation table of the console, the
HTML report and ``fuzz.json``.

A graph-only bug shows only where its situation meets a step the graph engine
*replayed* (``StepRecord.used_graph``; a step with a prefill, or with R above
every capture size, runs eagerly). So every situation is also counted on its
own when it happened on a replayed step (:func:`situations_reached`,
``CoverageTally.replayed``): each check names the steps where the situation's
defining event takes effect, and the situation counts as replayed when the
graph engine replayed one of them. Which steps those are is said per situation
in :data:`SITUATIONS` (``on_replay``): for a slot reuse, the new occupant's first
two steps (its prefill and its first decode step, while the slot still holds
what its previous occupant left); for a stop, the stopping step; for a seed near
the modulus, the step whose seed arithmetic crosses it (its advance, or its
last row's seed); for a reasoning change, the step the change is
applied in; for an event that forces an eager step (a prefill, R above every
capture size), that step or the next, where a graph first reads what the eager
step wrote.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Mapping, Sequence

from graphcheck.check.pressure import PRESSURE, pressure_events
from graphcheck.check.records import CheckOutcome, StepRecord
from graphcheck.reference import reasoning_status_at
from graphcheck.scenario import SEED_MODULUS, VERIFY_STRATEGIES, EngineConfig, RequestSpec, Scenario
from graphcheck.step_result import RequestStep

ACCEPT_POLICIES = ("normal", "accept_all", "reject_all")
GRAPH_SCOPES = ("step", "forward", "forward_sampling")
SPECULATIVE_TOKENS = (1, 2, 3, 4)
REASONING_STATUSES = (0, 1, 2, 3)


@dataclass(frozen=True)
class Applicability:
    """The situations an engine cannot reach (``left_out``: name -> why; ``graphcheck.check.applicable``
    works them out from its capabilities); every other one applies."""

    left_out: Mapping[str, str] = field(default_factory=dict)

    def applies(self, name: str) -> bool:
        return name not in self.left_out


@dataclass(frozen=True)
class Situation:
    """One situation: a stable ``name`` (used in JSON and Hypothesis events), its group and what it means.

    ``on_replay``: the step (or steps) where its defining event takes effect, one of which the graph
    engine must have replayed for the situation to count on a replayed step.
    """

    name: str
    group: str
    description: str
    on_replay: str = "a step it happened in was replayed"
    #: What an engine must have for the situation to be reachable on it (graphcheck.check.applicable).
    needs: tuple[str, ...] = ()


#: ``Situation.on_replay`` of the slot reuses: where the new occupant meets what the slot still holds.
_REUSE_REPLAYED = "the new occupant's prefill or first decode step was replayed"
#: ``Situation.on_replay`` of the events that force an eager step of their own.
_NEXT_REPLAYED = "that step or the next one was replayed (a graph reads what the eager step left)"


#: The cache-pressure situations (graphcheck.check.pressure), group "cache".
PRESSURE_SITUATIONS = tuple(Situation(p.name, "cache", p.description, p.on_replay, p.needs) for p in PRESSURE)


def _reasoning_situations() -> list[Situation]:
    return [
        Situation(
            f"reasoning {a}->{b}",
            "reasoning",
            f"a running request's reasoning_status changes from {a} to {b}",
            "the step the change is applied in was replayed",
            needs=("drafts", "reasoning"),
        )
        for a in REASONING_STATUSES
        for b in REASONING_STATUSES
        if a != b
    ]


#: Every situation, in table order.
SITUATIONS: tuple[Situation, ...] = (
    Situation(
        "slot reuse after finish",
        "slots",
        "a slot freed by a request that finished is taken by another",
        _REUSE_REPLAYED,
    ),
    Situation("slot reuse after abort", "slots", "a slot freed by an abort is taken by another", _REUSE_REPLAYED),
    Situation(
        "leftover accept override",
        "slots",
        "a slot is reused after its previous occupant's last step had a forced accept count",
        _REUSE_REPLAYED,
        needs=("drafts",),
    ),
    Situation(
        "leftover host override",
        "slots",
        "host-side per-slot state: a slot freed by a request forced X accepted drafts on its last step is "
        "taken at the next step by one forced the same X on its prefill and its first decode step. The "
        "engine keeps a host copy of each slot's forced count (the built-in engine's _override_host) and "
        "writes the device row only when the value changes; a release resets the device row, so a release "
        "that forgot the host copy would find nothing changed and leave the reset value on that decode step",
        "the new occupant's first decode step was replayed",
        needs=("drafts",),
    ),
    Situation(
        "leftover reasoning status",
        "slots",
        "a slot is reused after its previous occupant left with reasoning_status != 0, the new one differs",
        _REUSE_REPLAYED,
        needs=("drafts", "reasoning"),
    ),
    Situation(
        "leftover sampling params",
        "slots",
        "a slot is reused by a request whose temperature, top_p or top_k differ from the previous occupant's",
        _REUSE_REPLAYED,
        needs=("sampling",),
    ),
    Situation(
        "eos as accepted draft",
        "eos",
        "a request stops on an eos that was an accepted draft token",
        "the stopping step was replayed",
        needs=("drafts",),
    ),
    Situation(
        "eos as bonus token",
        "eos",
        "a request stops on an eos emitted as the bonus after all drafts",
        "the stopping step was replayed",
        needs=("drafts",),
    ),
    Situation(
        "eos as first token",
        "eos",
        "a request's first generated token is an eos",
        "its prefill (eager in the built-in engine) or the step after it, where the slot the stop freed "
        "first meets the other requests' batch, was replayed",
    ),
    Situation(
        "max_dec_len at the bonus token",
        "eos",
        "a request reaches max_dec_len on the bonus token after accepting every draft (the furthest the "
        "drafts reach: the drafter skips when step_idx + S >= max_dec_len, so the limit never falls inside them)",
        "the stopping step was replayed",
        needs=("drafts",),
    ),
    Situation(
        "drafter skipped near max_dec_len",
        "eos",
        "a decoding request has no drafts because step_idx + S >= max_dec_len",
        "the step whose drafter skipped, or the step that then decodes without drafts, was replayed",
        needs=("drafts",),
    ),
    Situation(
        "R equals a capture size", "batch", "a decode-only step whose R is a capture size", needs=("capture-sizes",)
    ),
    Situation(
        "R one above a capture size",
        "batch",
        "a decode-only step whose R is a capture size + 1",
        needs=("capture-sizes",),
    ),
    Situation(
        "R above every capture size",
        "batch",
        "a decode-only step whose R exceeds every capture size (eager fallback)",
        "the step after the fallback was replayed (the batch is back under a capture size)",
        needs=("capture-sizes",),
    ),
    Situation("prefill among decodes", "batch", "a step runs a prefill next to requests that decode", _NEXT_REPLAYED),
    Situation(
        "all finished then arrivals",
        "batch",
        "every request that ran has left, and later requests run",
        "the arrivals' first step or the one after it was replayed",
    ),
    Situation("bucket shrinks", "batch", "a replay uses a smaller bucket than the replay of the step before"),
    Situation(
        "seed near the modulus",
        "seeds",
        "a request's seeds cross the seed modulus in a step: its infer_seed wraps as it advances, or the "
        "seed of its last output row (infer_seed + 4j, row j) reaches the modulus; the seed is then within "
        "one step's increment 4(k+1) of it",
        "a step whose seeds cross was replayed",
        needs=("seeds",),
    ),
    Situation(
        "top_p = 1",
        "sampling",
        "a request samples with top_p = 1 (stochastic verify or NAIVE)",
        "a step of that request was replayed",
        needs=("sampling",),
    ),
    Situation(
        "top_k = 1",
        "sampling",
        "a request samples with top_k = 1 (stochastic verify or NAIVE)",
        "a step of that request was replayed",
        needs=("sampling",),
    ),
    *_reasoning_situations(),
    Situation("NAIVE mode", "config", "NAIVE mode (no drafts) ran at least one step", needs=("naive",)),
    *(
        Situation(
            f"scope {s}", "config", f"graph_scope {s} replayed a graph", "always (it needs a replay)", (f"scope:{s}",)
        )
        for s in GRAPH_SCOPES
    ),
    *(
        Situation(f"k={k}", "config", f"speculative decoding with k={k} ran a step", needs=("drafts",))
        for k in SPECULATIVE_TOKENS
    ),
    *(
        Situation(
            f"verify {v}",
            "config",
            f"speculative decoding with verify_strategy {v} ran a step",
            needs=("drafts", f"verify:{v}"),
        )
        for v in VERIFY_STRATEGIES
    ),
    *(
        Situation(
            f"policy {p}",
            "config",
            f"speculative decoding with accept_policy {p} ran a step",
            needs=("drafts", f"policy:{p}"),
        )
        for p in ACCEPT_POLICIES
    ),
    *PRESSURE_SITUATIONS,
)
SITUATION_NAMES: tuple[str, ...] = tuple(s.name for s in SITUATIONS)
_BY_NAME = {s.name: s for s in SITUATIONS}


def situation(name: str) -> Situation:
    """The situation called ``name`` (KeyError when there is none)."""
    return _BY_NAME[name]


# --------------------------------------------------------------------------- reading a run


@dataclass
class _Run:
    """What the finished run did, indexed for the situation checks."""

    scenario: Scenario
    reference: list[StepRecord]
    graph: list[StepRecord]
    specs: dict[str, RequestSpec] = field(init=False)
    first_step: dict[str, int] = field(init=False)  # request -> step of its prefill
    ran: dict[str, list[tuple[int, RequestStep]]] = field(init=False)  # request -> its steps, in order
    active: tuple[int, ...] = field(init=False)  # steps some request ran in
    replayed: frozenset[int] = field(init=False)  # steps the graph engine replayed a graph in

    def __post_init__(self) -> None:
        self.specs = {spec.request_id: spec for spec in self.scenario.requests}
        self.ran = {}
        for record in self.reference:
            for step in record.result.requests:
                self.ran.setdefault(step.request_id, []).append((record.step, step))
        self.first_step = {rid: steps[0][0] for rid, steps in self.ran.items()}
        self.active = tuple(r.step for r in self.reference if r.result.requests)
        self.replayed = frozenset(r.step for r in self.graph if r.used_graph)

    def steps_of(self, rid: str) -> tuple[int, ...]:
        """The steps request ``rid`` ran in, in order."""
        return tuple(t for t, _ in self.ran.get(rid, ()))

    @property
    def config(self) -> EngineConfig:
        return self.scenario.config

    @property
    def speculative(self) -> bool:
        return not self.config.naive_mode

    @property
    def stochastic(self) -> bool:
        return self.config.naive_mode or self.config.verify_strategy != "greedy"

    def running_at(self, t: int) -> set[str]:
        return {rid for rid, steps in self.ran.items() if any(s == t for s, _ in steps)}


@dataclass(frozen=True)
class SituationsReached:
    """What one lockstep run reached: ``anywhere``, every situation that happened; ``replayed``, those
    of them whose defining event took effect on a step the graph engine replayed (a subset)."""

    anywhere: frozenset[str]
    replayed: frozenset[str]


#: What a check yields: a situation and the steps where its defining event takes effect.
_Event = tuple[str, Iterable[int]]


def situations_reached(
    scenario: Scenario, outcome: CheckOutcome, applicable: Applicability | None = None
) -> SituationsReached:
    """The situations (names of :data:`SITUATIONS`) the lockstep run of ``scenario`` reached, anywhere
    and on a replayed step.

    Read from what ran: the reference's records (requests, tokens, seeds, stops)
    and the graph engine's (slots, R, buckets, which steps replayed a graph); a run
    stopped by a divergence counts up to its last step. ``applicable``: only the situations the engine
    can reach count (graphcheck.check.applicable).
    """
    run = _Run(scenario, outcome.records.get("reference", []), outcome.records.get("graph", []))
    if not run.reference:
        return SituationsReached(frozenset(), frozenset())
    anywhere: set[str] = set()
    replayed: set[str] = set()
    for check in (_config, _slots, _eos, _batches, _seeds_and_sampling, _reasoning, _pressure):
        for name, steps in check(run):
            if applicable is not None and not applicable.applies(name):
                continue
            anywhere.add(name)
            if name not in replayed and not run.replayed.isdisjoint(steps):
                replayed.add(name)
    return SituationsReached(frozenset(anywhere), frozenset(replayed))


def situations_hit(scenario: Scenario, outcome: CheckOutcome) -> frozenset[str]:
    """The situations the lockstep run of ``scenario`` reached, replayed or not (:func:`situations_reached`)."""
    return situations_reached(scenario, outcome).anywhere


def _config(run: _Run) -> Iterator[_Event]:
    cfg = run.config
    if run.replayed:
        yield f"scope {cfg.graph_scope}", run.replayed
    if not run.speculative:
        yield "NAIVE mode", run.active
        return
    yield f"k={cfg.num_speculative_tokens}", run.active
    yield f"verify {cfg.verify_strategy}", run.active
    yield f"policy {cfg.accept_policy}", run.active


def _slots(run: _Run) -> Iterator[_Event]:
    """Slot reuse, told apart by how the previous occupant left and what it left set."""
    occupant: dict[int, str] = {}
    for record in run.graph:
        for rid, slot in record.slots:
            previous = occupant.get(slot)
            occupant[slot] = rid
            if previous is None or previous == rid:
                continue
            yield from _reuse(run, previous, rid)


def _reuse(run: _Run, previous: str, rid: str) -> Iterator[_Event]:
    steps = run.ran.get(previous)
    old, new = run.specs.get(previous), run.specs.get(rid)
    if not steps or old is None or new is None:
        return
    last, final = steps[-1]
    meets = run.steps_of(rid)[:2]  # the new occupant's prefill and first decode step
    yield ("slot reuse after finish" if final.stopped else "slot reuse after abort"), meets
    left = run.scenario.accept_overrides_at(last).get(previous)
    if left is not None:
        yield "leftover accept override", meets
        handover = len(meets) == 2 and meets[0] == last + 1  # taken at once, and the new one decodes
        if handover and all(run.scenario.accept_overrides_at(t).get(rid) == left for t in meets):
            yield "leftover host override", meets[1:]
    status = reasoning_status_at(old, last)
    if status != 0 and reasoning_status_at(new, run.first_step.get(rid, last + 1)) != status:
        yield "leftover reasoning status", meets
    if (old.temperature, old.top_p, old.top_k) != (new.temperature, new.top_p, new.top_k):
        yield "leftover sampling params", meets


def _eos(run: _Run) -> Iterator[_Event]:
    for rid, steps in run.ran.items():
        spec = run.specs.get(rid)
        if spec is None:
            continue
        eos, emitted = set(spec.eos_token_ids), 0
        drafts: tuple[int, ...] = ()
        for i, (t, step) in enumerate(steps):
            tokens = step.accept_tokens
            emitted += len(tokens)
            if i == 0 and tokens and tokens[0] in eos:
                yield "eos as first token", (t, t + 1)
            if i > 0 and run.speculative and not drafts:
                yield "drafter skipped near max_dec_len", (steps[i - 1][0], t)
            if step.stopped and tokens:
                for name in _stop_against_drafts(tokens, tuple(drafts), eos, emitted == spec.max_dec_len):
                    yield name, (t,)
            drafts = step.draft_tokens


def _stop_against_drafts(
    tokens: tuple[int, ...], drafts: tuple[int, ...], eos: set[int], at_limit: bool
) -> Iterator[str]:
    """How a stopping step ended against the drafts it verified."""
    matched = len(tokens) - 1  # the tokens before the last one were accepted drafts when they match
    if not drafts or tuple(tokens[:matched]) != drafts[:matched]:
        return
    last, bonus = tokens[-1], matched == len(drafts)
    if at_limit:  # the limit stops on whatever the token was (FastDeploy's contract writes eos[0] there)
        if bonus:
            yield "max_dec_len at the bonus token"
    elif last in eos:
        if matched < len(drafts) and last == drafts[matched]:
            yield "eos as accepted draft"
        elif bonus:
            yield "eos as bonus token"


def _batches(run: _Run) -> Iterator[_Event]:
    sizes = run.config.capture_sizes
    previous: StepRecord | None = None
    seen: set[str] = set()  # requests that ran before this step
    for record in run.graph:
        t, R = record.step, record.real_bsz
        running = run.running_at(t)
        prefill = {rid for rid in running if run.first_step.get(rid) == t}
        if prefill and running - prefill:
            yield "prefill among decodes", (t, t + 1)
        if running and seen and not seen & running:
            yield "all finished then arrivals", (t, t + 1)
        if R and not prefill and sizes:
            for name in _bucket_position(R, sizes):
                yield name, (t, t + 1) if name == "R above every capture size" else (t,)
        if _shrinks(previous, record):
            yield "bucket shrinks", (t,)
        seen |= running
        previous = record


def _shrinks(previous: StepRecord | None, record: StepRecord) -> bool:
    """Whether ``record`` replays a smaller bucket than the replay of the step just before it."""
    if previous is None or previous.step != record.step - 1 or not (previous.used_graph and record.used_graph):
        return False
    return record.bucket is not None and previous.bucket is not None and record.bucket < previous.bucket


def _bucket_position(R: int, sizes: Sequence[int]) -> Iterator[str]:
    if R in sizes:
        yield "R equals a capture size"
    if R - 1 in sizes and R <= max(sizes):
        yield "R one above a capture size"
    if R > max(sizes):
        yield "R above every capture size"


def _seeds_and_sampling(run: _Run) -> Iterator[_Event]:
    for rid, steps in run.ran.items():
        spec = run.specs.get(rid)
        if spec is None:
            continue
        if crossing := _seeds_crossing(spec.seed, steps):
            yield "seed near the modulus", crossing
        if not run.stochastic:
            continue
        if spec.top_p == 1.0:
            yield "top_p = 1", run.steps_of(rid)
        if spec.top_k == 1:
            yield "top_k = 1", run.steps_of(rid)


def _seeds_crossing(seed: int, steps: Sequence[tuple[int, RequestStep]]) -> list[int]:
    """The steps whose seed arithmetic crosses the modulus, for a request that starts with ``seed``.

    A step uses the seed the request enters it with (its own, then each step's result): output row
    j samples with ``seed + 4j`` (one row per draft it verifies, plus one), and the step may advance
    the seed. Whatever the contract's arithmetic (modular or int64 wrap), an advance that crossed
    leaves a smaller seed behind."""
    crossing: list[int] = []
    drafts: tuple[int, ...] = ()
    for t, step in steps:
        last_row = 4 * len(drafts)  # the offset of its last output row's seed
        if seed + last_row >= SEED_MODULUS or step.infer_seed < seed:
            crossing.append(t)
        seed, drafts = step.infer_seed, step.draft_tokens
    return crossing


def _reasoning(run: _Run) -> Iterator[_Event]:
    if not run.speculative:  # reasoning_status plays no part in NAIVE mode
        return
    for rid, steps in run.ran.items():
        spec = run.specs.get(rid)
        if spec is None or not spec.reasoning:
            continue
        statuses = [(t, reasoning_status_at(spec, t)) for t, _ in steps]
        for (_, a), (t, b) in zip(statuses, statuses[1:]):
            if a != b:  # written into the slot at step t, before that step runs
                yield f"reasoning {a}->{b}", (t,)


def _pressure(run: _Run) -> Iterator[_Event]:
    """Cache pressure, from the schedules the graph engine reported (engines that schedule for themselves)."""
    yield from pressure_events([(r.step, r.schedule) for r in run.graph])


# --------------------------------------------------------------------------- tallies


@dataclass
class CoverageTally:
    """Situations over a search: how many examples hit each, how many of those diverged, and how
    many hit it on a replayed step (``replayed``, :func:`situations_reached`); and how many of the
    graph engine's steps replayed a captured graph (``graph_steps``, ``replayed_steps``): a run whose
    engine fell back to eager on most steps checked little of its graphs."""

    examples: int = 0
    hits: Counter[str] = field(default_factory=Counter)
    diverging: Counter[str] = field(default_factory=Counter)
    replayed: Counter[str] = field(default_factory=Counter)
    graph_steps: int = 0
    replayed_steps: int = 0

    def add(self, hit: Iterable[str], *, diverged: bool, replayed: Iterable[str] = ()) -> None:
        """One example: ``hit``, the situations it reached; ``replayed``, those it reached on a replayed step."""
        names = set(hit)
        self.examples += 1
        self.hits.update(names)
        self.replayed.update(names & set(replayed))
        if diverged:
            self.diverging.update(names)

    def add_reached(self, reached: SituationsReached, *, diverged: bool) -> None:
        """One example, from :func:`situations_reached`."""
        self.add(reached.anywhere, diverged=diverged, replayed=reached.replayed)

    def add_steps(self, outcome: CheckOutcome) -> None:
        """The graph engine's steps of one example that ran a request, and how many of them replayed a graph."""
        steps = [record for record in outcome.records.get("graph", []) if record.result.requests]
        self.graph_steps += len(steps)
        self.replayed_steps += sum(1 for record in steps if record.used_graph)

    def merge(self, other: CoverageTally) -> CoverageTally:
        """The tally of both searches (a new object)."""
        return CoverageTally(
            self.examples + other.examples,
            self.hits + other.hits,
            self.diverging + other.diverging,
            self.replayed + other.replayed,
            self.graph_steps + other.graph_steps,
            self.replayed_steps + other.replayed_steps,
        )

    def missing(self, applicable: Applicability | None = None) -> list[str]:
        """The situations no example reached, in table order (of those ``applicable``, when given)."""
        return [name for name in _names(applicable) if not self.hits.get(name)]

    def missing_on_replay(self, applicable: Applicability | None = None) -> list[str]:
        """The situations no example reached on a replayed step, in table order (of those ``applicable``)."""
        return [name for name in _names(applicable) if not self.replayed.get(name)]

    def only(self, applicable: Applicability) -> CoverageTally:
        """This tally without the situations the engine cannot reach (a new object)."""

        def keep(counts: Counter[str]) -> Counter[str]:
            return Counter({name: n for name, n in counts.items() if applicable.applies(name)})

        return CoverageTally(self.examples, keep(self.hits), keep(self.diverging), keep(self.replayed))

    def to_dict(self) -> dict[str, Any]:
        return {
            "examples": self.examples,
            "hits": dict(self.hits),
            "diverging": dict(self.diverging),
            "replayed": dict(self.replayed),
            "graph_steps": self.graph_steps,
            "replayed_steps": self.replayed_steps,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CoverageTally:
        return cls(
            int(data.get("examples", 0)),
            Counter(data.get("hits", {})),
            Counter(data.get("diverging", {})),
            Counter(data.get("replayed", {})),
            int(data.get("graph_steps", 0)),
            int(data.get("replayed_steps", 0)),
        )


@dataclass(frozen=True)
class SituationRow:
    """One row of the situation table."""

    situation: Situation
    examples: int  # examples that hit it
    diverging_examples: int  # of those, examples with a failing divergence
    involved: bool  # the reported (shrunk) diverging scenario hits it
    replayed_examples: int = 0  # of ``examples``, those that hit it on a replayed step

    def to_dict(self) -> dict[str, Any]:
        return {
            "situation": self.situation.name,
            "group": self.situation.group,
            "description": self.situation.description,
            "on_replay": self.situation.on_replay,
            "examples": self.examples,
            "replayed_examples": self.replayed_examples,
            "diverging_examples": self.diverging_examples,
            "involved": self.involved,
        }


def situation_table(
    tally: CoverageTally, involved: Iterable[str] = (), applicable: Applicability | None = None
) -> list[SituationRow]:
    """Every situation the engine can reach (``applicable``; None: every one) with its counts; ``involved``:
    situations of the reported diverging scenarios."""
    marked = set(involved)
    return [
        SituationRow(
            s,
            tally.hits.get(s.name, 0),
            tally.diverging.get(s.name, 0),
            s.name in marked,
            tally.replayed.get(s.name, 0),
        )
        for s in SITUATIONS
        if applicable is None or applicable.applies(s.name)
    ]


def _names(applicable: Applicability | None) -> tuple[str, ...]:
    if applicable is None:
        return SITUATION_NAMES
    return tuple(name for name in SITUATION_NAMES if applicable.applies(name))


def merged_coverage(tallies: Iterable[CoverageTally]) -> CoverageTally:
    """One tally of several searches (suites, or the jobs of a parallel run)."""
    total = CoverageTally()
    for tally in tallies:
        total = total.merge(tally)
    return total


def involved_situations(outcomes: Iterable[CheckOutcome]) -> frozenset[str]:
    """The situations the failing ``outcomes`` (the shrunk scenarios a run reports) reached."""
    found: set[str] = set()
    for outcome in outcomes:
        if not outcome.clean:
            found |= situations_hit(outcome.scenario, outcome)
    return frozenset(found)


__all__ = [
    "Applicability",
    "CoverageTally",
    "SITUATIONS",
    "SITUATION_NAMES",
    "Situation",
    "SituationRow",
    "SituationsReached",
    "involved_situations",
    "merged_coverage",
    "situation",
    "situation_table",
    "situations_hit",
    "situations_reached",
]
