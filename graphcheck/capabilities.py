"""What an engine says it supports, so that graphcheck draws only scenarios it can run.

An engine factory (the class or function ``--engine`` names) may carry a
``capabilities`` attribute, an :class:`EngineCapabilities`. graphcheck then

* fits every drawn scenario to it (:meth:`EngineCapabilities.fit`): a config
  value the engine does not support is replaced by one it does, so the fuzzer
  never reports "your engine rejected NAIVE mode" as a divergence;
* skips a suite whose ``requires`` names a capability the engine lacks, with
  the reason printed (:meth:`EngineCapabilities.missing`);
* accepts ``--inject NAME`` only for the faults the engine declares, and lists
  them in ``graphcheck faults --engine X``.

A factory without the attribute is taken to support every config value the
scenario format has (what graphcheck assumed before engines could say) and
to implement no faults. Whether an engine has the optional members (state
snapshots, reset, model report, its memory estimate) is seen on the factory or
the engine itself; :func:`optional_members` lists them.

A leaf: standard library, ``graphcheck.scenario``, ``graphcheck.contract`` and ``graphcheck.buckets``
only, so that backends/ and user engines can import it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Iterable, Literal, Sequence

from graphcheck.buckets import BucketPolicy
from graphcheck.contract import CONTRACT_NAMES, GENERAL_CONTRACTS
from graphcheck.scenario import (
    ACCEPT_POLICIES,
    GRAPH_SCOPES,
    MODELS,
    VERIFY_STRATEGIES,
    EngineConfig,
    Scenario,
    fit_to_contract,
    validate,
)

Layout = Literal["slot", "packed"]
ScheduleSource = Literal["harness", "engine"]
SCHEDULE_SOURCES = ("harness", "engine")
GraphApi = Literal["runner", "torch.cuda"]
GRAPH_APIS = ("runner", "torch.cuda")


def check_name(kind: str, name: Any) -> None:
    """A name an engine declares is shown on consoles, in CI annotations and reports: one printable word
    (no newline, which would start a line of its own such as a forged ``::error::``; no bidi control)."""
    if (
        not isinstance(name, str)
        or not 0 < len(name) <= 100
        or not name.isprintable()
        or any(c.isspace() for c in name)
    ):
        raise ValueError(f"{kind} name must be one printable word of at most 100 characters, got {ascii(name)[:80]}")


def check_line(kind: str, text: Any) -> None:
    """A description an engine declares (a fault's summary, say) is shown the same way: one printable line."""
    if not isinstance(text, str) or len(text) > 2000 or not text.isprintable():
        raise ValueError(f"{kind} must be one printable line of at most 2000 characters, got {ascii(text)[:80]}")


@dataclass(frozen=True)
class Fault:
    """One injectable bug an engine implements (``--inject NAME``).

    ``bug_class``: its number in docs/bug-classes.md; ``summary``: what the switch
    breaks and where; ``mirrors``: the shipped bug it reproduces; ``signal``: the
    first divergence graphcheck must report; ``breaks``: the kernels, functions and
    buffers it changes, which the localisation of its divergence should name
    (``graphcheck catalog`` checks that); ``options``: engine options the bug lives
    under (``(name, value)``, e.g. an async mode): a search with it injected draws
    only those values, since every other draw cannot show it.
    """

    name: str
    bug_class: int
    summary: str = ""
    mirrors: str = ""
    signal: str = ""
    breaks: tuple[str, ...] = ()
    options: tuple[tuple[str, int], ...] = ()

    def __post_init__(self) -> None:
        check_name("Fault", self.name)
        for option, _ in self.options:
            check_name("Fault option", option)
        for field in ("summary", "mirrors", "signal"):
            check_line(f"Fault {self.name} {field}", getattr(self, field))
        for target in self.breaks:
            check_line(f"Fault {self.name} breaks", target)


@dataclass(frozen=True)
class EngineOption:
    """A knob of the engine that graphcheck fuzzes (``EngineConfig.engine_options``).

    ``choices``: the values to draw, the first the simplest (Hypothesis shrinks
    towards it, and a scenario that does not set the option gets it).

    ``scale``: ``""``, the value is one of ``choices``; ``"need"``, a size the engine
    holds requests in (a KV cache, in tokens), drawn from what the scenario's requests
    need: each choice is a share in percent of the tokens of all its requests (prompt
    and ``max_dec_len`` each), never below the largest request's own (an engine cannot
    serve a request larger than its whole cache), 0 left as 0 (the engine's default
    size). The config records the size in tokens (:meth:`sized`).
    """

    name: str
    choices: tuple[int, ...]
    summary: str = ""
    scale: str = ""

    def __post_init__(self) -> None:
        check_name("EngineOption", self.name)
        check_line(f"EngineOption {self.name} summary", self.summary)
        if not self.choices or any(not isinstance(c, int) or c < 0 for c in self.choices):
            raise ValueError(f"EngineOption {self.name!r}: choices must be non-negative integers, got {self.choices!r}")
        if self.scale not in OPTION_SCALES:
            raise ValueError(f"EngineOption {self.name!r}: scale is one of {OPTION_SCALES!r}, got {self.scale!r}")

    def allows(self, value: Any) -> bool:
        """Whether ``value`` is a value of this option a config may record."""
        if self.scale == "need":
            return isinstance(value, int) and value >= 0
        return value in self.choices

    def sized(self, choice: int, scenario: Scenario) -> int:
        """The value recorded for the drawn ``choice`` on ``scenario`` (itself unless ``scale`` is "need")."""
        if self.scale != "need" or choice == 0:
            return choice
        needs = request_needs(scenario) or [1]
        return max(max(needs), -(-choice * sum(needs) // 100))

    def floor(self, value: int, scenario: Scenario) -> int:
        """``value`` raised to the largest request of ``scenario`` where ``scale`` is "need" (0 stays 0)."""
        if self.scale != "need" or value == 0:
            return value
        return max([value] + request_needs(scenario))


def request_needs(scenario: Scenario) -> list[int]:
    """The tokens each request of ``scenario`` can hold in its run: its prompt, and what it can generate
    before the scenario ends (``max_dec_len`` at most; k + 1 tokens a step with drafts, else 1)."""
    config = scenario.config
    per_step = 1 if config.naive_mode else config.tokens_per_request
    return [
        len(r.prompt) + min(r.max_dec_len, (scenario.num_steps - r.arrival_step) * per_step) for r in scenario.requests
    ]


#: How an option's value relates to its choices (``EngineOption.scale``).
OPTION_SCALES = ("", "need")


#: Capability names a suite may require (``Suite.requires``), with what each means.
REQUIREMENTS = {
    "drafts": "MTP drafts: a proposer whose drafts the target verifies (configs with naive_mode off)",
    "naive": "NAIVE mode: decoding without a proposer",
    "slot-layout": "per-slot buffers, so that free slots can be checked for their idle values",
    "cache-report": "a schedule of its own that reports the KV cache (cache_report): cache pressure can be seen",
}


@dataclass(frozen=True)
class EngineCapabilities:
    """What an engine supports. The defaults are every value of the scenario format, and no faults."""

    drafts: bool = True  # MTP: drafts proposed and verified (naive_mode=False)
    naive: bool = True  # NAIVE mode (naive_mode=True)
    graph_scopes: tuple[str, ...] = GRAPH_SCOPES
    verify_strategies: tuple[str, ...] = VERIFY_STRATEGIES
    accept_policies: tuple[str, ...] = ACCEPT_POLICIES
    models: tuple[str, ...] = MODELS
    contracts: tuple[str, ...] = GENERAL_CONTRACTS  # hf-cb is declared by its engine alone
    #: The backends' frameworks the engine runs on ("torch", "paddle"); an engine whose graph_api is
    #: "torch.cuda" runs on torch alone whatever it says here (graphcheck.check.honoured).
    frameworks: tuple[str, ...] = ("torch", "paddle")
    layout: Layout = "slot"
    faults: tuple[Fault, ...] = ()
    #: How the engine captures graphs: "runner" (through the Device's graph runner, as the built-in
    #: engine does) or "torch.cuda" (it calls torch.cuda.CUDAGraph / torch.cuda.graph itself; on a CPU
    #: backend graphcheck then runs it inside graphcheck.emulate.cuda_graphs()).
    graph_api: GraphApi = "runner"
    #: Knobs graphcheck draws for this engine and records in the scenario (``engine_options``).
    options: tuple[EngineOption, ...] = ()
    #: Who decides which requests run and on how many tokens: "harness" (graphcheck's FIFO model,
    #: checked by prediction) or "engine" (the engine reports a ``Schedule`` every step, checked for
    #: conservation by the engine-scheduled oracle; ``graphcheck.schedule``).
    schedule: ScheduleSource = "harness"
    #: The padding policy of the engine's graphs (``graphcheck.buckets``); None: graphcheck's own
    #: (the smallest capture size >= R on decode-only steps, eager otherwise).
    buckets: BucketPolicy | None = None
    #: The engine's schedule reports its KV cache every step (``graphcheck.schedule.CacheReport``: blocks,
    #: failed allocations, requests waiting for blocks or evicted), so cache pressure can be counted.
    cache_report: bool = False

    def __post_init__(self) -> None:
        if not (self.drafts or self.naive):
            raise ValueError("EngineCapabilities: an engine must support drafts or NAIVE mode (or both)")
        for name, have, known in (
            ("graph_scopes", self.graph_scopes, GRAPH_SCOPES),
            ("verify_strategies", self.verify_strategies, VERIFY_STRATEGIES),
            ("accept_policies", self.accept_policies, ACCEPT_POLICIES),
            ("models", self.models, MODELS),
            ("contracts", self.contracts, CONTRACT_NAMES),
            ("frameworks", self.frameworks, ("torch", "paddle")),
        ):
            unknown = [v for v in have if v not in known]
            if not have or unknown:
                raise ValueError(
                    f"EngineCapabilities.{name}: need a non-empty subset of {', '.join(known)}, got {have!r}"
                )
        if self.graph_api not in GRAPH_APIS:
            raise ValueError(f"EngineCapabilities.graph_api: one of {', '.join(GRAPH_APIS)}, got {self.graph_api!r}")
        if self.layout not in ("slot", "packed"):
            raise ValueError(f"EngineCapabilities.layout: 'slot' or 'packed', got {self.layout!r}")
        names = [f.name for f in self.faults]
        if len(set(names)) != len(names):
            raise ValueError("EngineCapabilities.faults: two faults share a name")
        if len({o.name for o in self.options}) != len(self.options):
            raise ValueError("EngineCapabilities.options: two options share a name")
        if self.schedule not in SCHEDULE_SOURCES:
            raise ValueError(f"EngineCapabilities.schedule: 'harness' or 'engine', got {self.schedule!r}")

    # -- what a run may do with this engine -----------------------------
    @property
    def fault_names(self) -> tuple[str, ...]:
        return tuple(sorted(f.name for f in self.faults))

    def fault(self, name: str) -> Fault:
        """The declared fault ``name`` (KeyError when the engine does not implement it)."""
        for fault in self.faults:
            if fault.name == name:
                return fault
        raise KeyError(name)

    def pinned_options(self, faults: Sequence[str]) -> dict[str, int]:
        """The engine options injected ``faults`` live under (``Fault.options``); unknown names add none."""
        pinned: dict[str, int] = {}
        for fault in self.faults:
            if fault.name in faults:
                pinned.update(fault.options)
        return pinned

    def has(self, requirement: str) -> bool:
        """Whether the engine has the capability ``requirement`` (a key of :data:`REQUIREMENTS`)."""
        if requirement not in REQUIREMENTS:
            raise ValueError(f"unknown capability {requirement!r}; known: {', '.join(REQUIREMENTS)}")
        if requirement == "slot-layout":
            return self.layout == "slot"
        if requirement == "cache-report":
            return self.schedule == "engine" and self.cache_report
        return bool(getattr(self, requirement))

    def missing(self, requirements: Iterable[str]) -> tuple[str, ...]:
        """The capabilities of ``requirements`` this engine lacks, in order."""
        return tuple(r for r in requirements if not self.has(r))

    @property
    def supports_everything(self) -> bool:
        """Every config value of the scenario format is supported: :meth:`fit` changes nothing."""
        return dataclasses.replace(self, faults=(), layout="slot") == EngineCapabilities()

    def fit_options(self, options: tuple[tuple[str, int], ...]) -> tuple[tuple[str, int], ...]:
        """``options`` with one entry per declared option: a declared value kept, anything else the first
        choice; options the engine does not declare dropped."""
        given = dict(options)
        fitted = {o.name: given[o.name] if o.allows(given.get(o.name)) else o.choices[0] for o in self.options}
        return tuple(sorted(fitted.items()))

    def floor_options(self, scenario: Scenario) -> Scenario:
        """``scenario`` with every size option (``scale="need"``) at least its largest request: a batch's
        scenarios share the first one's config, whose sizes were drawn from its own requests."""
        given = dict(scenario.config.engine_options)
        floored = {o.name: o.floor(given[o.name], scenario) for o in self.options if o.name in given}
        if all(floored[name] == given[name] for name in floored):
            return scenario
        options = tuple(sorted({**given, **floored}.items()))
        return dataclasses.replace(scenario, config=dataclasses.replace(scenario.config, engine_options=options))

    # -- fitting scenarios ------------------------------------------------
    def fit_config(self, config: EngineConfig) -> EngineConfig:
        """``config`` with every unsupported value replaced by the first supported one."""
        changes: dict[str, Any] = {}
        if config.naive_mode and not self.naive:
            changes["naive_mode"] = False
        elif not config.naive_mode and not self.drafts:
            changes["naive_mode"] = True
        for field, allowed in (
            ("graph_scope", self.graph_scopes),
            ("verify_strategy", self.verify_strategies),
            ("accept_policy", self.accept_policies),
            ("model", self.models),
            ("contract", self.contracts),
        ):
            if getattr(config, field) not in allowed:
                changes[field] = allowed[0]
        options = self.fit_options(config.engine_options)
        if options != config.engine_options:
            changes["engine_options"] = options
        return dataclasses.replace(config, **changes) if changes else config

    def fit(self, scenario: Scenario) -> Scenario:
        """``scenario`` with its config fitted (:meth:`fit_config`); forced accepts go when drafts do, and
        a contract fitted to may constrain the requests (``graphcheck.scenario.fit_to_contract``).

        The result is validated again (a fitted config can make a field invalid,
        e.g. an accept override in NAIVE mode).
        """
        config = self.fit_config(scenario.config)
        if config is scenario.config:
            fitted = fit_to_contract(self.floor_options(scenario))
            return scenario if fitted is scenario else validate(fitted)
        accepts = () if config.naive_mode else scenario.accepts
        fitted = self.floor_options(dataclasses.replace(scenario, config=config, accepts=accepts))
        return validate(fit_to_contract(fitted))

    def describe(self) -> list[str]:
        """One line per capability, for ``graphcheck faults --engine`` and reports."""
        modes = [m for m, on in (("MTP drafts", self.drafts), ("NAIVE", self.naive)) if on]
        return [
            f"decoding: {', '.join(modes)}",
            f"graph scopes: {', '.join(self.graph_scopes)}",
            f"verify strategies: {', '.join(self.verify_strategies)}",
            f"accept policies: {', '.join(self.accept_policies)}",
            f"models: {', '.join(self.models)}",
            f"contracts: {', '.join(self.contracts)}",
            f"layout: {self.layout}",
            f"graphs captured through: {self.graph_api}",
            f"schedule: {'the engine' if self.schedule == 'engine' else 'graphcheck'}'s",
            f"bucket policy: {', '.join(p.name for p in self.buckets.paths) if self.buckets else 'capture sizes'}",
            *(["cache report: yes"] if self.cache_report else []),
            *(f"option {o.name}: {', '.join(map(str, o.choices))}" for o in self.options),
            f"faults: {len(self.faults)}",
        ]


#: The adapter's optional members (docs/adapters.md) and what each gives graphcheck.
OPTIONAL_MEMBERS = {
    "state_snapshot": "state snapshots: state and slot-hygiene checks, kernel-level localisation",
    "reset": "reset: engines pooled per configuration",
    "model_report": "model report: the model-agnostic oracle and the float tolerance",
    "memory_estimate": "memory estimate: scenarios too large for the machine are refused before they run",
    "recompute_scores": "full recompute: every emitted token against the model run without batching",
}


def optional_members(obj: Any) -> tuple[str, ...]:
    """The optional adapter members ``obj`` (a factory class, or an engine) has, in OPTIONAL_MEMBERS order."""
    return tuple(name for name in OPTIONAL_MEMBERS if callable(getattr(obj, name, None)))


__all__ = [
    "EngineCapabilities",
    "EngineOption",
    "Fault",
    "OPTIONAL_MEMBERS",
    "REQUIREMENTS",
    "optional_members",
    "request_needs",
]
