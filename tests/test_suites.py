"""The suites: the clean engine passes every suite, and each suite catches and shrinks a bug of its family.

* ``test_suite_is_clean[NAME]`` runs a suite's property with the active
  Hypothesis profile (``HYPOTHESIS_PROFILE=ci|dev|thorough``).
* ``test_suite_finds_and_shrinks[NAME]`` injects a bug of the suite's family
  through an ``engine_factory`` subclass of the real engine and asks
  ``hypothesis.find`` for a failing scenario; the shrunk scenario must fail with
  the right kind of divergence and be small. Shrinking runs under a budget of
  distinct lockstep runs (deterministic: find's random source is seeded), so the
  test's cost is bounded on a 2-core CI box.
* ``TestLifecycle`` is the lifecycle state machine with a bounded step count;
  ``test_lifecycle_machine_catches_and_replays_a_bug`` runs it against an injected
  bug and replays the machine's scenario.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, find, settings
from hypothesis.stateful import run_state_machine_as_test

from graphcheck.backends.engine import Engine
from graphcheck.backends.engine.transfer import overwrite, release_slots
from graphcheck.capture.kernels import kernel
from graphcheck.scenario import SEED_MODULUS, EngineConfig, Scenario, validate
from graphcheck.strategies import scenarios
from graphcheck.suites import SUITES
from graphcheck.suites.lifecycle_machine import LifecycleMachine
from graphcheck.suites.properties import backend_from_env, check, property_test

from _layers import fast_first, slow


@pytest.fixture(scope="module")
def backend() -> Any:
    return backend_from_env()


# ---------------------------------------------------------------------------
# The clean engine passes every suite
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", fast_first(list(SUITES), lambda name: name in ("padding", "lifecycle", "all")))
def test_suite_is_clean(name: str) -> None:
    property_test(SUITES[name])()


def test_registry_is_well_formed() -> None:
    assert {"addresses", "padding", "accept", "seeds", "capacity", "memory", "lifecycle", "all"} <= set(SUITES)
    first = settings(max_examples=1, phases=(Phase.generate,), database=None, deadline=None)
    for name, suite in SUITES.items():
        assert suite.name == name and suite.description and suite.bug_classes
        assert all(1 <= c <= 17 for c in suite.bug_classes)
        simplest = find(suite.strategy(), lambda _: True, settings=first)
        assert isinstance(simplest, Scenario) and validate(simplest) == simplest
        assert simplest.num_steps >= 2 and simplest.requests, "the simplest example must decode"


def test_general_strategy_shrinks_to_the_simplest_scenario() -> None:
    """What every failing example shrinks towards: one request decoding from step 0 for two
    steps, greedy, k = 1, default sizes, no overrides, aborts or reasoning changes."""
    first = settings(max_examples=1, phases=(Phase.generate,), database=None, deadline=None)
    simplest = find(scenarios(), lambda _: True, settings=first)
    assert simplest.config == EngineConfig(num_speculative_tokens=1, verify_strategy="greedy")
    assert simplest.num_steps == 2 and len(simplest.requests) == 1 and simplest.accepts == ()
    (request,) = simplest.requests
    assert (request.arrival_step, request.abort_step, request.reasoning) == (0, None, ())
    assert (request.temperature, request.top_p, request.top_k, request.seed) == (1.0, 1.0, 0, 0)
    assert request.max_dec_len >= 2 * simplest.config.tokens_per_request  # outlives the run


REACHABLE: dict[str, Callable[[Scenario], bool]] = {
    "no graphs": lambda s: s.config.capture_sizes == (),
    "max_num_seqs below the largest bucket": lambda s: s.config.max_num_seqs < max(s.config.capture_sizes, default=0),
    "unsorted capture sizes": lambda s: list(s.config.capture_sizes) != sorted(s.config.capture_sizes),
    "NAIVE": lambda s: s.config.naive_mode,
    "TOPP with S = k > 1": lambda s: s.config.verify_strategy == "topp"
    and s.config.num_model_steps == s.config.num_speculative_tokens > 1,
    "a seed that wraps in the run": lambda s: any(r.seed > SEED_MODULUS - 4 * 5 * s.num_steps for r in s.requests),
    "a burst after step 0": lambda s: any(
        sum(r.arrival_step == t for r in s.requests) >= 2 for t in range(1, s.num_steps)
    ),
    "a request ending on max_dec_len mid-run": lambda s: any(
        r.max_dec_len < s.num_steps - r.arrival_step - 1 and len(s.requests) > 1 for r in s.requests
    ),
    "an abort": lambda s: any(r.abort_step is not None and r.abort_step < s.num_steps for r in s.requests),
    "reasoning 1 then back": lambda s: any([c.status for c in r.reasoning][:2] == [1, 0] for r in s.requests),
    "all k drafts forced": lambda s: any(a.accepted == s.config.num_speculative_tokens for a in s.accepts),
    "a prompt past the position table": lambda s: any(len(r.prompt) > 32 for r in s.requests),
}


@pytest.mark.parametrize("what", fast_first(list(REACHABLE), lambda what: what != "a prompt past the position table"))
def test_general_strategy_reaches(what: str) -> None:
    config = settings(
        max_examples=2000,
        phases=(Phase.generate,),
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    found = find(scenarios(), REACHABLE[what], settings=config, random=random.Random(0))
    assert validate(found) == found


# ---------------------------------------------------------------------------
# Injected bugs: subclasses of the real engine, one per suite family
# ---------------------------------------------------------------------------


class RebindsOffsets(Engine):
    """Class 1: every step assigns a fresh cu_seqlens_q instead of copying into it."""

    def step(self, t, overrides):
        if self.use_graphs:
            self.buffers.cu_seqlens_q = self.buffers.cu_seqlens_q.clone()
        return super().step(t, overrides)


class HoldsClonePerReplay(Engine):
    """Class 14: each replayed step keeps a clone of seq_lens_this_time alive."""

    def _run_graphs(self, *args, **kwargs):
        self.__dict__.setdefault("held", []).append(self.buffers.seq_lens_this_time.clone())
        return super()._run_graphs(*args, **kwargs)

    def memory_bytes(self):
        return super().memory_bytes() + sum(self.xp.nbytes(t) for t in self.__dict__.get("held", []))


class SeedFrozenInReplay(Engine):
    """Class 8: steps that replay a graph leave infer_seed where it was."""

    def _run_graphs(self, *args, **kwargs):
        saved = self.buffers.infer_seed.clone()
        result = super()._run_graphs(*args, **kwargs)
        overwrite(self.xp, self.buffers.infer_seed, saved)
        return result


class PicksLargestBucket(Engine):
    """Class 6: a decode step replays the largest capture size >= R, not the smallest."""

    def bucket_for(self, real_bsz):
        fits = [s for s in self.graphs if s >= real_bsz]
        return max(fits) if fits else None


class IgnoresReasoningChanges(Engine):
    """Class 16: the graph engine never writes reasoning_status changes after admission."""

    def _sync_reasoning(self, running, t):
        if not self.use_graphs:
            super()._sync_reasoning(running, t)


class SlotResetAfterReuse(Engine):
    """Class 3 (slot reuse): a freed slot is reset lazily, at the next admission, after a
    new request was admitted into it; the newcomer loses its state."""

    def _release(self, requests):
        slots = self.__dict__.setdefault("pending_reset", [])
        slots.extend(self.scheduler.release(r) for r in requests)

    def _admit_on_device(self, admitted, t):
        super()._admit_on_device(admitted, t)
        pending = self.__dict__.pop("pending_reset", [])
        if pending:
            slots = np.array(pending, dtype=np.int64)
            release_slots(self.xp, self.buffers, self.xp.from_numpy(slots))
            self._override_host[slots] = -1


@kernel
def _padding_rows_into_first_row(xp, buf, num_slots: int, num_tokens: int) -> None:
    """Point every padded token row's KV slot at the first real token's row (not the sink)."""
    pad = xp.ge(xp.arange(num_tokens), buf.cu_seqlens_q[num_slots])
    rows = buf.slot_mapping[:num_tokens]
    xp.assign_(buf.slot_mapping, slice(0, num_tokens), xp.where(pad, buf.slot_mapping[0:1], rows))


class PaddingWritesRealPages(Engine):
    """Class 4: padded token rows write KV into the first real request's page, not the sink.

    The target pre-process is wrapped while this engine captures or steps; an
    eager step packs exactly the real tokens, so only graph steps are hit.
    """

    def _patched(self, run: Callable[[], Any]) -> Any:
        import graphcheck.backends.engine.engine as module

        original = module.pack_target_inputs

        def pack(xp, buf, num_slots, num_tokens, *args, **kwargs):
            result = original(xp, buf, num_slots, num_tokens, *args, **kwargs)
            _padding_rows_into_first_row(xp, buf, num_slots, num_tokens)
            return result

        module.pack_target_inputs = pack
        try:
            return run()
        finally:
            module.pack_target_inputs = original

    def _capture_graphs(self):
        return self._patched(super()._capture_graphs)

    def step(self, t, overrides):
        return self._patched(lambda: super(PaddingWritesRealPages, self).step(t, overrides))


@dataclass(frozen=True)
class Injected:
    engine: type
    kinds: tuple[str, ...]  # acceptable kinds of the first divergence ("state": the cause, before its tokens)
    max_requests: int
    max_steps: int


INJECTED: dict[str, Injected] = {
    "addresses": Injected(RebindsOffsets, ("address",), 1, 2),
    "memory": Injected(HoldsClonePerReplay, ("memory",), 1, 3),
    "seeds": Injected(SeedFrozenInReplay, ("state", "seed"), 1, 2),
    "capacity": Injected(PicksLargestBucket, ("shape",), 1, 2),
    "padding": Injected(PaddingWritesRealPages, ("state", "token", "value", "seed"), 2, 8),
    "accept": Injected(IgnoresReasoningChanges, ("state", "token", "value"), 2, 8),
    "lifecycle": Injected(SlotResetAfterReuse, ("state", "token", "value", "seed", "crash"), 2, 4),
    "all": Injected(RebindsOffsets, ("address",), 1, 2),
}

#: Distinct lockstep runs one find() may spend (generation and shrinking together).
RUN_BUDGET = 150


def find_failure(name: str, engine: type, backend: Any, *, budget: int = RUN_BUDGET) -> tuple[Scenario, Any, int]:
    """Shrunk failing scenario of suite ``name`` against ``engine``, its outcome and the runs spent.

    Results are cached by scenario; once ``budget`` distinct scenarios have run,
    unseen ones count as passing, which ends shrinking where it stands.
    """
    seen: dict[str, bool] = {}

    def fails(scenario: Scenario) -> bool:
        key = scenario.to_json(indent=None)
        if key not in seen:
            if len(seen) >= budget:
                return False
            seen[key] = not check(scenario, backend, engine_factory=engine).clean
        return seen[key]

    config = settings(
        max_examples=budget,
        deadline=None,
        database=None,
        phases=(Phase.generate, Phase.shrink),
        suppress_health_check=list(HealthCheck),
    )
    shrunk = find(SUITES[name].strategy(), fails, settings=config, random=random.Random(0))
    return shrunk, check(shrunk, backend, engine_factory=engine), len(seen)


@pytest.mark.parametrize("name", fast_first(list(INJECTED), lambda name: name in ("lifecycle", "seeds")))
def test_suite_finds_and_shrinks(name: str, backend: Any) -> None:
    bug = INJECTED[name]
    shrunk, outcome, runs = find_failure(name, bug.engine, backend)
    first = outcome.first
    assert first is not None, f"{bug.engine.__name__}: the shrunk scenario no longer fails"
    assert first.kind in bug.kinds, first.headline()
    summary = f"{bug.engine.__name__} after {runs} runs: {first.headline()}\n{shrunk.to_json()}"
    assert len(shrunk.requests) <= bug.max_requests, summary
    assert shrunk.num_steps <= bug.max_steps, summary
    assert check(shrunk, backend).clean, "the shrunk scenario must pass on the clean engine"


# ---------------------------------------------------------------------------
# The lifecycle state machine
# ---------------------------------------------------------------------------

TestLifecycle = slow(LifecycleMachine.TestCase)
TestLifecycle.settings = settings(settings.default, stateful_step_count=20)


class _SlotReuseMachine(LifecycleMachine):
    """The machine against SlotResetAfterReuse; remembers its last instance."""

    engine_factory = SlotResetAfterReuse
    last: LifecycleMachine | None = None

    def __init__(self) -> None:
        super().__init__()
        type(self).last = self


def test_lifecycle_machine_catches_and_replays_a_bug(backend: Any) -> None:
    """The machine fails on the bug, and its scenario replays the failure (no shrinking here:
    every shrink attempt reruns the whole machine, which is slow on a CI box)."""
    config = settings(
        max_examples=50,
        stateful_step_count=12,
        deadline=None,
        database=None,
        phases=(Phase.generate,),
        suppress_health_check=list(HealthCheck),
    )
    with pytest.raises(AssertionError) as failure:
        run_state_machine_as_test(_SlotReuseMachine, settings=config)
    machine = _SlotReuseMachine.last  # the failing run
    assert machine is not None and machine.lockstep.outcome.first is not None
    assert machine.lockstep.outcome.first.headline() in str(failure.value)
    scenario = Scenario.from_json(machine.replayable().to_json())  # a replayable scenario file
    replayed = check(scenario, backend, engine_factory=SlotResetAfterReuse)
    assert replayed.first is not None and replayed.first.headline() == machine.lockstep.outcome.first.headline()
    assert check(scenario, backend).clean
