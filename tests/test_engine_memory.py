"""The built-in engine's memory estimate, the memory gate, and out-of-memory handling.

``Engine.memory_estimate`` (``graphcheck.backends.engine.memory``) is pure
arithmetic over the engine's size tables; these tests build the real engine
(torch on the CPU, emulated graphs) and run real lockstep scenarios, and check
that the weights, buffers and graph-held storage are exactly what it counts and
that the whole estimate (with the reference's part the gate adds) is never
below what is measured and never more than 3x above it. Measured: the engines'
own ``memory_bytes()``, and the peak of every storage torch ops create during a
whole lockstep run (a dispatch mode; plus the emulator's capture snapshots)
plus the reference's NumPy arrays at their largest. Then the gate
(``graphcheck.check.memory_gate.admit``): validation knows no engine, the gate
judges a scenario by its own factory's estimate.
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import json
import weakref
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from graphcheck.check.memory_gate import MemoryLimitError, admit, engine_memory_limit, estimate
from graphcheck.errors import InputError
from graphcheck.memory_estimate import (
    DEFAULT_MAX_ENGINE_BYTES,
    MAX_ENGINE_MEMORY_ENV,
    MemoryEstimate,
    NamedEstimate,
    parse_memory_size,
)
from graphcheck.scenario import EngineConfig, RequestSpec, Scenario, load_scenario, validate
from graphcheck.search.builtin import demo_scenario
from graphcheck.strategies import scenarios

from _layers import fast_first

GiB = 2**30


def _scenario(config: EngineConfig, *, prompt_len: int, num_steps: int = 6, name: str = "memory") -> Scenario:
    """max_num_seqs + 1 requests at step 0 (one queues): a prefill of every slot, then decode steps
    over all of them (eager where the batch is above every capture size), long enough to replay."""
    k1 = config.tokens_per_request
    room = config.max_model_len - k1
    requests = []
    for i in range(config.max_num_seqs + 1):
        n = max(1, min(prompt_len - i, room - 8))
        prompt = tuple((3 * i + 5 * j + 1) % config.vocab_size for j in range(n))
        requests.append(RequestSpec(f"m{i}", 0, prompt, max_dec_len=min(room - n, 40), eos_token_ids=(0,), seed=i))
    return validate(Scenario(config, tuple(requests), (), num_steps, name))


CONFIGS = {
    "small": (EngineConfig(), 12),
    "medium": (
        EngineConfig(
            max_num_seqs=8,
            num_speculative_tokens=3,
            num_model_steps=2,
            capture_sizes=(1, 2, 4, 8),
            vocab_size=256,
            hidden_size=32,
            block_size=16,
            max_model_len=256,
            verify_strategy="topp",
            graph_scope="forward_sampling",
            model_seed=1,
        ),
        40,
    ),
    "large-vocab-hidden-len": (
        EngineConfig(
            max_num_seqs=3,
            num_speculative_tokens=2,
            num_model_steps=2,
            capture_sizes=(1, 4),
            vocab_size=2048,
            hidden_size=64,
            block_size=32,
            max_model_len=512,
            verify_strategy="greedy",
            graph_scope="step",
            model_seed=2,
        ),
        100,
    ),
    "eager-above-buckets": (
        EngineConfig(
            max_num_seqs=6,
            num_speculative_tokens=4,
            num_model_steps=1,
            capture_sizes=(1,),
            vocab_size=128,
            hidden_size=16,
            block_size=4,
            max_model_len=96,
            graph_scope="forward",
            model_seed=3,
        ),
        20,
    ),
    "naive-long-prompts": (
        EngineConfig(
            max_num_seqs=2,
            num_speculative_tokens=1,
            num_model_steps=1,
            capture_sizes=(2,),
            vocab_size=64,
            hidden_size=32,
            block_size=8,
            max_model_len=384,
            naive_mode=True,
            model_seed=4,
        ),
        300,
    ),
}


#: Float models (EngineConfig.model): their activations and weights are in the model dtype.
FLOAT_CONFIGS = {
    "small-float32": (dataclasses.replace(CONFIGS["small"][0], model="float32"), 12),
    "medium-bfloat16": (dataclasses.replace(CONFIGS["medium"][0], model="bfloat16"), 40),
    "naive-float32": (dataclasses.replace(CONFIGS["naive-long-prompts"][0], model="float32"), 300),
    "large-bfloat16": (dataclasses.replace(CONFIGS["large-vocab-hidden-len"][0], model="bfloat16"), 100),
}


# ---------------------------------------------------------------------------
# Measuring
# ---------------------------------------------------------------------------


def _tracker_class() -> type:
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    class PeakTracker(TorchDispatchMode):
        """Live bytes of the storages dispatched ops create (and of registered extras), and their peak."""

        def __init__(self) -> None:
            super().__init__()
            self.refs: dict[int, list[int]] = {}  # storage key -> [live handles, bytes]
            self.live = 0
            self.peak = 0

        def hold(self, key: int, nbytes: int, handle: Any) -> None:
            entry = self.refs.get(key)
            if entry is None:
                entry = self.refs[key] = [0, nbytes]
                self.live += nbytes
                self.peak = max(self.peak, self.live)
            entry[0] += 1
            weakref.finalize(handle, self._drop, key)

        def _drop(self, key: int) -> None:
            entry = self.refs.get(key)
            if entry is not None:
                entry[0] -= 1
                if entry[0] == 0:
                    self.live -= entry[1]
                    del self.refs[key]

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            stack = [out]
            while stack:
                item = stack.pop()
                if isinstance(item, (list, tuple)):
                    stack.extend(item)
                elif isinstance(item, torch.Tensor):
                    storage = item.untyped_storage()
                    self.hold(storage._cdata, storage.nbytes(), item)
            return out

    return PeakTracker


@dataclasses.dataclass
class Measured:
    eager: int  # eager engine memory_bytes() once built
    graph: int  # graph engine memory_bytes() once built and captured
    runner: int  # what the graph engine's captured graphs hold
    weights: int  # one engine's weight tensors
    buffers: int  # one engine's buffers
    peak: int  # torch peak over the whole lockstep run + the reference's NumPy arrays at their largest


def _counting_tracker(monkeypatch: pytest.MonkeyPatch) -> Any:
    """A PeakTracker that also counts the emulator's capture copies (storage clones)."""
    pytest.importorskip("torch")
    from graphcheck.capture.torch_ops import TorchOps

    tracker = _tracker_class()()
    snapshot = TorchOps.snapshot

    def counted_snapshot(self: Any, t: Any) -> Any:
        storage, saved = snapshot(self, t)
        tracker.hold(id(saved), saved.nbytes(), saved)
        return storage, saved

    monkeypatch.setattr(TorchOps, "snapshot", counted_snapshot)
    gc.collect()
    return tracker


def _measure(scenario: Scenario, monkeypatch: pytest.MonkeyPatch) -> Measured:
    from graphcheck.capture.devices import resolve
    from graphcheck.check.lockstep import Lockstep

    tracker = _counting_tracker(monkeypatch)
    with tracker:
        lockstep = Lockstep(scenario, resolve("cpu"))
        eager, graph = lockstep.eager, lockstep.graph
        built = (eager.memory_bytes(), graph.memory_bytes(), graph.runner.memory_bytes() if graph.runner else 0)
        reference = _numpy_bytes(lockstep.oracle.decoders())
        for t in range(scenario.num_steps):
            assert lockstep.step(t), [d.headline() for d in lockstep.outcome.failures]
            reference = max(reference, _numpy_bytes(lockstep.oracle.decoders()))
    nbytes = eager.xp.nbytes
    return Measured(
        *built,
        weights=sum(nbytes(t) for t in eager.weights.named_tensors().values()),
        buffers=sum(nbytes(t) for t in eager.buffers.named_tensors().values()),
        peak=tracker.peak + reference,
    )


def _measure_engines(scenario: Scenario, monkeypatch: pytest.MonkeyPatch) -> Measured:
    """As ``_measure``, for a float model: the eager and graph engines driven side by side, no reference
    (the integer reference does not decode a float model; ``peak`` is the engines' alone)."""
    from graphcheck.backends.engine import Engine
    from graphcheck.driver import apply_events
    from graphcheck.reference import make_weights

    tracker = _counting_tracker(monkeypatch)
    with tracker:
        weights = make_weights(scenario.config)
        eager = Engine(scenario.config, weights, use_graphs=False)
        graph = Engine(scenario.config, weights)
        built = (eager.memory_bytes(), graph.memory_bytes(), graph.runner.memory_bytes() if graph.runner else 0)
        for t in range(scenario.num_steps):
            for engine in (eager, graph):
                apply_events(engine, scenario, t)
                engine.step(t, scenario.accept_overrides_at(t))
    nbytes = eager.xp.nbytes
    return Measured(
        *built,
        weights=sum(nbytes(t) for t in eager.weights.named_tensors().values()),
        buffers=sum(nbytes(t) for t in eager.buffers.named_tensors().values()),
        peak=tracker.peak,
    )


def _numpy_bytes(root: Any) -> int:
    """Bytes of the NumPy arrays reachable from ``root``'s attributes and containers (each buffer once)."""
    import numpy as np

    seen: set[int] = set()
    arrays: dict[int, int] = {}
    stack = [root]
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, (str, bytes, int, float, type)):
            continue
        seen.add(id(obj))
        if isinstance(obj, np.ndarray):
            base = obj
            while isinstance(base.base, np.ndarray):
                base = base.base
            arrays[id(base)] = base.nbytes
        elif isinstance(obj, dict):
            stack.extend(obj.values())
        elif isinstance(obj, (list, tuple, set, frozenset)) or type(obj).__name__ == "deque":
            stack.extend(obj)
        elif hasattr(obj, "__dict__") and type(obj).__module__.startswith(("reference", "graphcheck")):
            stack.extend(vars(obj).values())
    return sum(arrays.values())


# ---------------------------------------------------------------------------
# The estimate against the real engine
# ---------------------------------------------------------------------------


def _engine_estimate(config: EngineConfig, requests: Any = ()) -> MemoryEstimate:
    from graphcheck.backends.engine import Engine

    return Engine.memory_estimate(config, requests)


@pytest.mark.parametrize("name", fast_first(list(CONFIGS), 1))
def test_estimate_covers_the_engine_and_is_not_absurdly_above(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from graphcheck.backends.engine import Engine

    config, prompt_len = CONFIGS[name]
    scenario = _scenario(config, prompt_len=prompt_len, name=name)
    got = _measure(scenario, monkeypatch)
    est = estimate(Engine, config, scenario.requests)  # the engine's parts and the reference's
    # The persistent parts are sums over the tables the engine allocates from.
    assert est.weights == got.weights
    assert est.buffers == got.buffers
    assert est.graphs == got.runner
    pairs = {
        "eager engine": (got.eager, est.eager_engine),
        "graph engine": (got.graph, est.graph_engine),
        "lockstep peak": (got.peak, est.total),
    }
    for part, (measured, estimated) in pairs.items():
        assert measured <= estimated, f"{name}: {part} measured {measured} > estimate {estimated}"
        assert estimated <= 3 * measured, f"{name}: {part} estimate {estimated} > 3 x measured {measured}"
    # The config alone (no requests) bounds everything but what the prompts add.
    assert estimate(Engine, config).total <= est.total


@pytest.mark.parametrize("name", fast_first(list(FLOAT_CONFIGS), 1))
def test_estimate_covers_a_float_model_engine(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    config, prompt_len = FLOAT_CONFIGS[name]
    scenario = _scenario(config, prompt_len=prompt_len, name=name)
    got = _measure_engines(scenario, monkeypatch)
    est = _engine_estimate(config, scenario.requests)  # the engines alone: no reference runs here
    assert est.reference == 0
    assert est.weights == got.weights
    assert est.buffers == got.buffers
    assert est.graphs == got.runner
    pairs = {
        "eager engine": (got.eager, est.eager_engine),
        "graph engine": (got.graph, est.graph_engine),
        "engines' peak": (got.peak, est.total),
    }
    for part, (measured, estimated) in pairs.items():
        assert measured <= estimated, f"{name}: {part} measured {measured} > estimate {estimated}"
        assert estimated <= 3 * measured, f"{name}: {part} estimate {estimated} > 3 x measured {measured}"


#: Every region shape graph_outputs tells apart: scope x verify strategy x NAIVE, the models, a
#: contract with an eos ban, several substeps and capture sizes.
_GRAPH_CASES = [
    EngineConfig(
        graph_scope=scope,
        verify_strategy=strategy,
        naive_mode=naive,
        model=("exact", "float32", "bfloat16")[i % 3],
        contract=("default", "fastdeploy")[(i // 3) % 2],
        num_speculative_tokens=3,
        num_model_steps=1 + i % 3,
        capture_sizes=((1, 3), (2,), (1, 2, 4))[i % 3],
    )
    for i, (scope, strategy, naive) in enumerate(
        (scope, strategy, naive)
        for scope in ("forward", "forward_sampling", "step")
        for strategy in ("greedy", "target_match", "topp")
        for naive in (False, True)
    )
]


@pytest.mark.parametrize(
    "config",
    _GRAPH_CASES,
    ids=[f"{c.graph_scope}-{c.verify_strategy}{'-naive' if c.naive_mode else ''}-{c.model}" for c in _GRAPH_CASES],
)
def test_the_graphs_hold_exactly_the_kernel_outputs_the_estimate_lists(config: EngineConfig) -> None:
    pytest.importorskip("torch")
    from graphcheck.backends.engine import Engine
    from graphcheck.backends.engine.memory import graph_outputs
    from graphcheck.reference import make_weights

    engine = Engine(config, make_weights(config))
    for size, bucket in engine.graphs.items():
        held = {}
        for graph in bucket.all():
            held.update(graph.held_storages())
        listed = sum(spec.nbytes for spec in graph_outputs(config, size))
        assert sum(t.untyped_storage().nbytes() for t in held.values()) == listed, size
    assert engine.runner.memory_bytes() == _engine_estimate(config).graphs


def test_estimate_grows_with_every_size_knob() -> None:
    base = EngineConfig()
    total = _engine_estimate(base).total
    for change in (
        dict(max_num_seqs=8),
        dict(max_model_len=256),
        dict(hidden_size=32),
        dict(vocab_size=512),
        dict(capture_sizes=(1, 2, 4, 8)),
        dict(num_speculative_tokens=5, num_model_steps=1),
    ):
        assert _engine_estimate(dataclasses.replace(base, **change)).total > total, change


def test_the_integer_position_table_matches_the_reference() -> None:
    from graphcheck.backends.engine.weights import POSITION_ROWS
    from graphcheck.reference.weights import NPOS

    assert POSITION_ROWS == NPOS


def test_the_reported_16_gib_config_is_estimated_far_above_the_limit() -> None:
    config = EngineConfig(max_num_seqs=256, max_model_len=8192, hidden_size=128)
    est = _engine_estimate(config)
    assert isinstance(est, MemoryEstimate)
    assert est.eager_engine > 10 * GiB  # KV caches alone: 4 x 2M rows x 128 x 8 bytes
    assert est.total > 16 * GiB


def test_the_reference_part_covers_its_arrays() -> None:
    """What the gate adds for the reference: its weights (and the arrays it derives) exactly, then its caches."""
    from graphcheck.check.memory_gate import reference_memory
    from graphcheck.reference import make_weights

    config = EngineConfig(vocab_size=96, hidden_size=24)
    weights = make_weights(config)
    arrays = [*weights.arrays().values(), weights.lm_head_f64, weights.qkv, weights.draft_qkv]
    assert reference_memory(config) == (sum(a.nbytes for a in arrays), 0)
    held, transient = reference_memory(config, demo_scenario().requests)
    assert held > sum(a.nbytes for a in arrays) and transient > 0


# ---------------------------------------------------------------------------
# The gate: validation knows no engine; admit judges by the factory's estimate
# ---------------------------------------------------------------------------


def _big_config_dict() -> dict:
    data = json.loads(demo_scenario().to_json())
    data["config"].update(max_num_seqs=256, max_model_len=8192, hidden_size=128)
    return data


def _engine() -> Any:
    from graphcheck.backends.engine import Engine

    return Engine


def test_validation_does_not_depend_on_the_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    """A scenario far too big for the built-in engine validates; the gate refuses it for the built-in
    factory, lets it through for a factory without ``memory_estimate``, and asks a factory that has one."""
    monkeypatch.delenv(MAX_ENGINE_MEMORY_ENV, raising=False)
    big = Scenario.from_dict(_big_config_dict())
    assert validate(big) == big and big.config.max_num_seqs == 256
    Engine = _engine()
    assert Engine.memory_estimate(big.config, big.requests).total > 16 * GiB
    with pytest.raises(MemoryLimitError) as info:
        admit(big, Engine)
    assert isinstance(info.value, InputError) and info.value.field == "config"

    def plain_factory(config, weights, *, device, use_graphs, faults):  # no memory_estimate: not gated
        return Engine(config, weights, device=device, use_graphs=use_graphs, faults=faults)

    assert admit(big, plain_factory) is None

    class SmallEngine(Engine):
        @staticmethod
        def memory_estimate(config, requests):
            return MemoryEstimate(weights=1, buffers=2, graphs=3, working_set=4)

    small = admit(big, SmallEngine)  # judged by its own estimate, plus the reference's part
    assert small is not None and small.working_set >= 4 and small.reference > 0
    assert small.total < DEFAULT_MAX_ENGINE_BYTES

    class HugeEngine(Engine):
        @staticmethod
        def memory_estimate(config, requests):
            return MemoryEstimate(weights=GiB, buffers=GiB, graphs=0, working_set=0)

    demo = demo_scenario()
    assert admit(demo, Engine).total < 16 * 2**20
    with pytest.raises(MemoryLimitError, match="on engine HugeEngine"):
        admit(demo, HugeEngine)  # its own estimate: named by the factory, not as the built-in engine

    class NamedHuge(HugeEngine):
        memory_estimate = NamedEstimate("engine \u00e9 named", HugeEngine.memory_estimate)

    with pytest.raises(MemoryLimitError, match=r"on engine \\xe9 named \("):
        admit(demo, NamedHuge)  # the owner it names, in ASCII


def test_lockstep_admits_before_building_anything(monkeypatch: pytest.MonkeyPatch) -> None:
    from graphcheck.capture.devices import resolve
    from graphcheck.check.lockstep import Lockstep

    monkeypatch.delenv(MAX_ENGINE_MEMORY_ENV, raising=False)
    built = []
    Engine = _engine()

    class Counted(Engine):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            built.append(1)
            super().__init__(*args, **kwargs)

    with pytest.raises(MemoryLimitError, match="^config: "):
        Lockstep(Scenario.from_dict(_big_config_dict()), resolve("cpu"), engine_factory=Counted)
    assert built == []


def test_huge_config_is_refused_on_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(MAX_ENGINE_MEMORY_ENV, raising=False)
    with pytest.raises(MemoryLimitError) as info:
        admit(Scenario.from_dict(_big_config_dict()), _engine())
    err = info.value
    assert err.field == "config" and err.limit == DEFAULT_MAX_ENGINE_BYTES and err.estimate is not None
    text = str(err)
    assert "4.0 GiB" in text and MAX_ENGINE_MEMORY_ENV in text and "GiB" in text.split("limit")[0]
    assert "on the built-in engine" in text
    assert text.isascii() and "\n" not in text


def test_limit_from_the_environment_and_the_argument(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    Engine = _engine()
    data = _big_config_dict()
    loaded = Scenario.from_dict(data)
    need = estimate(Engine, loaded.config, loaded.requests).total
    monkeypatch.setenv(MAX_ENGINE_MEMORY_ENV, f"{-(-need // GiB)}G")
    assert admit(loaded, Engine).total == need
    monkeypatch.setenv(MAX_ENGINE_MEMORY_ENV, "none")
    assert admit(loaded, Engine).total == need
    monkeypatch.setenv(MAX_ENGINE_MEMORY_ENV, "1M")
    with pytest.raises(MemoryLimitError, match="^config: "):
        admit(loaded, Engine)
    assert admit(loaded, Engine, need).total == need  # the argument wins
    path = tmp_path / "big.json"
    path.write_text(json.dumps(data))
    assert load_scenario(str(path)) == loaded  # loading is validation only
    with pytest.raises(MemoryLimitError, match="^requests: "):  # the config fits; its requests do not
        admit(loaded, Engine, need - 1)
    # Small scenarios pass under a tight limit.
    monkeypatch.delenv(MAX_ENGINE_MEMORY_ENV)
    demo = demo_scenario()
    assert admit(demo, Engine, 16 * 2**20) is not None
    with pytest.raises(MemoryLimitError, match="GRAPHCHECK_MAX_ENGINE_MEMORY=3M "):
        admit(demo, Engine, 2**20)
    with pytest.raises(ValueError):
        admit(demo, Engine, 0)


@functools.cache  # one engine, one answer: the property test below draws 40 scenarios against it
def _smallest_run_total() -> int:
    from graphcheck.backends.engine import Engine
    from graphcheck.check.memory_gate import smallest_run

    least = smallest_run(Engine, lambda s: s)
    assert least is not None
    return least.total


def test_check_limit_usable_refuses_only_below_the_smallest_run() -> None:
    from graphcheck.backends.engine import Engine
    from graphcheck.check.memory_gate import check_limit_usable

    least = _smallest_run_total()
    check_limit_usable(Engine, lambda s: s, least)
    with pytest.raises(InputError, match="no scenario could run"):
        check_limit_usable(Engine, lambda s: s, least - 1)


@settings(max_examples=40, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(scenario=scenarios(max_steps=2))
def test_no_scenario_needs_less_than_the_smallest_run(scenario: Scenario) -> None:
    """So ``check_limit_usable`` (above) refuses only a limit that every scenario would be refused under."""
    from graphcheck.backends.engine import Engine

    assert _smallest_run_total() <= estimate(Engine, scenario.config, scenario.requests).total


@pytest.mark.parametrize(
    "text, value",
    [
        ("4294967296", 4 * GiB),
        ("4G", 4 * GiB),
        ("4g", 4 * GiB),
        ("4GiB", 4 * GiB),
        ("4 GB", 4 * GiB),
        ("512M", 512 * 2**20),
        ("64k", 64 * 2**10),
        ("1T", 2**40),
        (" 7 ", 7),
        ("none", None),
        ("Unlimited", None),
    ],
)
def test_parse_memory_size(text: str, value: int | None) -> None:
    assert parse_memory_size(text) == value


@pytest.mark.parametrize("text", ["", "0", "0G", "-1", "4X", "4.5G", "G", "lots", "1" * 40, "4 G B", "\ud800"])
def test_malformed_limit_is_a_clear_error(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if text:
        with pytest.raises(ValueError):
            parse_memory_size(text)
    monkeypatch.setenv(MAX_ENGINE_MEMORY_ENV, text if text != "\ud800" else "\udcff")
    if not text:  # unset or empty: the default
        assert engine_memory_limit() == DEFAULT_MAX_ENGINE_BYTES
        return
    with pytest.raises(MemoryLimitError) as info:
        engine_memory_limit()
    assert info.value.field == MAX_ENGINE_MEMORY_ENV
    assert "4G" in str(info.value) and str(info.value).isascii()
    demo = demo_scenario()
    assert Scenario.from_json(demo.to_json()) == demo  # validation never reads the limit
    with pytest.raises(MemoryLimitError) as info:
        admit(demo, _engine())
    assert info.value.field == MAX_ENGINE_MEMORY_ENV


def test_default_limit_and_environment_mapping() -> None:
    assert DEFAULT_MAX_ENGINE_BYTES == 4 * GiB
    assert engine_memory_limit({}) == DEFAULT_MAX_ENGINE_BYTES
    assert engine_memory_limit({MAX_ENGINE_MEMORY_ENV: "2G"}) == 2 * GiB


def test_long_prompts_are_refused_on_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    """The config fits, but a prefill of four 8000-token prompts gathers [32k, 8192, 128] keys."""
    monkeypatch.delenv(MAX_ENGINE_MEMORY_ENV, raising=False)
    Engine = _engine()
    config = EngineConfig(max_num_seqs=4, max_model_len=8192, hidden_size=128, capture_sizes=(1, 2, 4))
    assert estimate(Engine, config).total < DEFAULT_MAX_ENGINE_BYTES
    requests = [
        {"request_id": f"r{i}", "arrival_step": 0, "prompt": [1] * 8000, "max_dec_len": 10, "eos_token_ids": [0]}
        for i in range(4)
    ]
    data = {"config": dataclasses.asdict(config), "requests": requests, "num_steps": 4}
    with pytest.raises(MemoryLimitError) as info:
        admit(Scenario.from_dict(data), Engine)
    assert info.value.field == "requests"
    data["requests"] = [dict(requests[0], prompt=[1] * 20)]
    assert admit(Scenario.from_dict(data), Engine) is not None


# ---------------------------------------------------------------------------
# Allocation failures while building or capturing: EngineOutOfMemory, never a divergence
# ---------------------------------------------------------------------------


def _oom_errors() -> list[BaseException]:
    errors: list[BaseException] = [
        MemoryError(),
        RuntimeError(
            "[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: "
            "you tried to allocate 17179869184 bytes. Error code 12 (Cannot allocate memory)"
        ),
        RuntimeError("CUDA error: out of memory"),
        RuntimeError("CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`"),
        MemoryError("(ResourceExhausted) Fail to alloc memory of 35184372088832 size, error code is 12."),
    ]
    torch = pytest.importorskip("torch")
    errors.append(torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB"))
    wrapped = RuntimeError("capture failed")
    wrapped.__cause__ = MemoryError()
    errors.append(wrapped)
    return errors


@pytest.mark.parametrize("phase", ["eager", "graph"])
@pytest.mark.parametrize("index", range(7))
def test_allocation_failure_in_construction_raises_engine_out_of_memory(phase: str, index: int) -> None:
    from graphcheck.backends.engine import Engine
    from graphcheck.capture.devices import resolve
    from graphcheck.check.lockstep import Lockstep
    from graphcheck.check.records import EngineOutOfMemory

    error = _oom_errors()[index]

    class Starved(Engine):
        def __init__(self, config, weights, *, use_graphs=True, **kwargs):
            if use_graphs == (phase == "graph"):
                raise error
            super().__init__(config, weights, use_graphs=use_graphs, **kwargs)

    scenario = demo_scenario()
    with pytest.raises(EngineOutOfMemory) as info:
        Lockstep(scenario, resolve("cpu"), engine_factory=Starved)
    oom = info.value
    assert isinstance(oom, Exception)
    assert oom.estimate_bytes == estimate(Engine, scenario.config, scenario.requests).total
    assert oom.where == ("graph engine construction and capture" if phase == "graph" else "eager engine construction")
    assert oom.message == str(oom) and "\n" not in str(oom) and "out of memory" in str(oom)
    assert oom.__cause__ is error and oom.detail


def test_an_allocation_failure_of_an_engine_without_an_estimate() -> None:
    from graphcheck.capture.devices import resolve
    from graphcheck.check.lockstep import Lockstep
    from graphcheck.check.records import EngineOutOfMemory

    def starved(config, weights, *, device, use_graphs, faults):  # a factory with no memory_estimate
        raise MemoryError("cannot allocate the KV cache")

    with pytest.raises(EngineOutOfMemory) as info:
        Lockstep(demo_scenario(), resolve("cpu"), engine_factory=starved)
    assert info.value.estimate_bytes is None
    assert "the engine gives no memory estimate" in str(info.value) and "\n" not in str(info.value)


def test_an_engine_bug_in_construction_is_still_a_capture_divergence() -> None:
    from graphcheck.backends.engine import Engine
    from graphcheck.capture.devices import resolve
    from graphcheck.check.lockstep import Lockstep

    class Broken(Engine):
        def __init__(self, config, weights, *, use_graphs=True, **kwargs):
            if use_graphs:
                raise RuntimeError("KV cache exhausted: no free block")
            super().__init__(config, weights, use_graphs=use_graphs, **kwargs)

    outcome = Lockstep(demo_scenario(), resolve("cpu"), engine_factory=Broken).run()
    assert outcome.first is not None and outcome.first.kind == "capture"


def test_a_real_allocation_failure_of_the_built_in_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    """A config the memory gate would refuse, built anyway: torch cannot allocate it; no divergence."""
    pytest.importorskip("torch")
    import graphcheck.backends.engine.buffers as buffers
    from graphcheck.capture.devices import resolve
    from graphcheck.check.checker import check_scenario
    from graphcheck.check.records import EngineOutOfMemory

    real = buffers.allocate_buffers

    def too_big(xp, config, sizes=None):  # the graph engine asks for 2**50 bytes of KV cache
        sizes = sizes or buffers.BufferSizes.for_config(config)
        return real(xp, config, dataclasses.replace(sizes, num_blocks=2**44))

    scenario = demo_scenario(num_steps=2)
    import graphcheck.backends.engine.engine as engine_module

    monkeypatch.setattr(engine_module, "allocate_buffers", too_big)
    with pytest.raises(EngineOutOfMemory) as info:
        check_scenario(scenario, resolve("cpu"))
    assert info.value.where == "eager engine construction"
    assert info.value.estimate_bytes == estimate(_engine(), scenario.config, scenario.requests).total
