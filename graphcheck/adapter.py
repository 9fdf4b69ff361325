"""The engine adapter protocol: everything the lockstep runner asks of an engine.

graphcheck never imports an engine's internals. ``Lockstep`` builds two
engines through an :class:`EngineFactory` (one eager, one with graphs), drives
both with :class:`EngineAdapter`'s three decoding calls, and after every step
reads what the engine says about that step (:class:`StepReport`), the graphs it
captured per capture size (:class:`CaptureBucket`, :class:`CapturedGraph`,
:class:`GraphInput`), its named buffers, its memory, its graph runner's name and
its per-slot capacity. Nothing else: an engine that satisfies these protocols
can be checked, and ``tests/test_adapter_protocol.py`` proves it with a second
adapter that exposes only these members.

The built-in engine (``graphcheck.backends.engine.Engine``) is the worked example; its
classes match member for member:

=====================  ==========================================
protocol               built-in engine
=====================  ==========================================
EngineFactory          the ``Engine`` class itself
EngineAdapter          ``Engine``
StepReport             ``graphcheck.backends.engine.engine.StepInfo``
CaptureBucket          ``graphcheck.backends.engine.engine.BucketGraphs``
CapturedGraph          ``graphcheck.capture.base.Graph``
GraphInput             ``graphcheck.capture.base.StaticInput``
RunnerInfo             ``graphcheck.capture.base.GraphRunner``
SlotCapacity           ``graphcheck.backends.engine.buffers.BufferSizes``
StateSnapshots         ``Engine.state_snapshot`` (optional protocol)
Resettable             ``Engine.reset`` (optional protocol)
MemoryEstimates        ``Engine.memory_estimate`` (optional, on the factory)
=====================  ==========================================

Capture and replay themselves are the engine's business: the harness never
calls ``capture`` or ``replay``. It audits what a capture recorded (the
static-input table of every graph of the bucket a step replayed) against the
engine's current buffers, so the protocol asks for the table, not the calls.

State snapshots (optional). An engine may also implement
:class:`StateSnapshots`: ``state_snapshot()`` returns, per named buffer, the
rows that mean something now (``graphcheck.state``: the rows of running
slots, the step's real-token rows, the cache rows of blocks running requests
own) and, for per-slot buffers, the rows of free slots with the value they
must hold. The lockstep then compares those rows eager vs graph bit for bit
after every step and checks that free slots are idle (``state``
divergences), and a kernel trace can name the first kernel where the engines
part. Rows the engine does not declare (padding, scratch, free cache blocks)
are never compared. An engine without it gets every other check.

Reset (optional). An engine that implements :class:`Resettable` is kept after
a lockstep run and reused, after ``reset()``, by the next scenario of the same
configuration (``graphcheck.check.pool``): a fuzzed batch then builds and
captures one engine pair. An engine without it is built anew for every scenario.

Memory estimate (optional). A factory that implements :class:`MemoryEstimates`
tells, from the configuration and the requests alone, how much memory the two
engines of a lockstep run would need; the memory gate
(``graphcheck.check.memory_gate.admit``) adds the reference's part and refuses a
scenario above ``$GRAPHCHECK_MAX_ENGINE_MEMORY`` (4 GiB by default) before
anything is built. A factory without it is never refused.

Engines that schedule, pad and capture for themselves (optional, for a real serving engine;
``graphcheck.engines.hf_cb`` is the worked example). The factory's ``capabilities`` say so and
``StepReport`` carries more fields, typed in :class:`ReportExtras` (:class:`SchedulingStepReport`
declares them on the report) and read once per step by :func:`report_extras`, so that engines
without them are unaffected:

* ``schedule`` (``graphcheck.schedule.Schedule``), with ``capabilities.schedule = "engine"``:
  who ran, on how many query tokens from which position, who produced a token. The
  engine-scheduled oracle checks it for conservation and eager and graph must agree on it.
* ``path``, ``real_sizes``, ``padded_sizes``, ``limits``, with ``capabilities.buckets`` (a
  ``graphcheck.buckets.BucketPolicy``): graphcheck pads the real sizes with the declared
  policy itself and compares with what the engine replayed; ``bucket`` is then the engine's
  graph key (any hashable value) instead of a capture size.
* ``host_values``, with ``CapturedGraph.host_values``: the host sizes a step's kernels are
  shaped by, and those the replayed graph froze at capture; they must match.
* ``captured``: a graph was captured in this step (lazily, mid-run). Its static-input table
  is audited right away, the memory baseline starts again, and the number of graphs must stay
  within what the policy allows.

* ``graph_sets``: how many independent sets of graphs the engine keeps (two for a
  double-buffered engine, one per IO pair); the graph-count bound is per set.

A pipelined engine (:class:`Pipelined`: async, double-buffered batching) schedules a batch
before the previous batch's results are in. Each ``step`` then reports the batch launched
``pipeline_depth`` calls earlier (its schedule, outcomes, sizes and graph), and its schedules
say so (``Schedule.pipeline_depth``), so the oracle lets a request that stopped or was aborted
run in the batches that were in flight by then. After the scenario's last step the lockstep
calls ``drain`` once per batch still in flight, and checks those reports like any step.

With ``capabilities.layout = "packed"`` the engine has no slots: ``SlotCapacity.slots`` is
not checked, and ``sizes.tokens`` (when present) must hold every step's padded tokens. An
engine that can run its model without batching (``FullRecompute.recompute_scores``) gets a
third path for float models: every emitted token's scores against a full recompute.

All protocols are ``runtime_checkable``: ``isinstance(engine, EngineAdapter)``
checks that the members exist (not their types or semantics; the lockstep run
checks those).

Optional members are read in one place each, into typed frozen records with the
defaults an engine without them gets: :func:`engine_extras` (:class:`EngineExtras`: the
engine's optional members), :func:`report_extras` (:class:`ReportExtras`: a step report's
eight optional fields), :func:`factory_extras` (:class:`FactoryExtras`: the factory's) and
:func:`graph_extras` (:class:`GraphExtras`: a captured graph's). The harness reads nothing
optional of an engine any other way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Iterable,
    Iterator,
    Mapping,
    Protocol,
    Sequence,
    runtime_checkable,
)

from graphcheck.capabilities import EngineCapabilities
from graphcheck.memory_estimate import MemoryEstimate, NamedEstimate
from graphcheck.model_report import ModelStep
from graphcheck.scenario import EngineConfig, RequestSpec
from graphcheck.schedule import Schedule
from graphcheck.state import EngineState
from graphcheck.step_result import StepResult

if TYPE_CHECKING:
    from graphcheck.capture.devices import Device


@runtime_checkable
class GraphInput(Protocol):
    """One row of a captured graph's static-input table.

    A static input is a tensor the graph read at capture that existed before
    capture began: every replay reads that storage again, whatever the engine's
    buffers point to by then.
    """

    @property
    def name(self) -> str | None:
        """The engine's name for the buffer: a key of ``EngineAdapter.buffer_tensors()``.

        None for a tensor the engine has no name for; such rows are not audited.
        """

    @property
    def tensor_id(self) -> int:
        """An identity of the captured tensor object, unique among the graph's rows.

        Rows returned by ``stale_inputs`` and ``dead_inputs`` are matched to
        ``static_inputs`` by this value (``id(tensor)`` in the built-in engine).
        """

    @property
    def data_ptr(self) -> int:
        """The device address the graph reads (the tensor's data pointer at capture)."""

    @property
    def shape(self) -> tuple[int, ...]:
        """The captured tensor's shape (shown in reports)."""

    @property
    def dtype(self) -> str:
        """The captured tensor's dtype name (shown in reports)."""


@runtime_checkable
class CapturedGraph(Protocol):
    """The audit view of one captured graph."""

    @property
    def static_inputs(self) -> Sequence[GraphInput]:
        """The graph's static-input table, fixed at capture (read again at every step)."""

    def stale_inputs(self, current: Mapping[str, Any]) -> Iterable[tuple[GraphInput, int]]:
        """The named rows whose buffer in ``current`` (name -> tensor) is no longer the captured one.

        ``current`` is ``EngineAdapter.buffer_tensors()`` at the moment of the
        check. A row is stale when ``current[row.name]`` is another tensor
        object than the captured one or has another data pointer. Yields
        ``(row, current data pointer)``, the pointer 0 where the binding is not
        a tensor. Rows without a name, or whose name ``current`` lacks, are
        never stale.
        """

    def dead_inputs(self) -> Iterable[GraphInput]:
        """The rows whose captured storage no longer exists (the engine let go of it)."""


@runtime_checkable
class CaptureBucket(Protocol):
    """The graphs captured for one capture size (bucket)."""

    @property
    def target(self) -> CapturedGraph | None:
        """The graph of the target step region (the forward, or more: the engine's graph scope)."""

    @property
    def draft(self) -> CapturedGraph | None:
        """The graph of one MTP draft substep, or None when the draft runs inside ``target`` or not at all."""


@runtime_checkable
class StepReport(Protocol):
    """How the engine ran its last step (``EngineAdapter.last_step_info``)."""

    @property
    def bucket(self) -> int | None:
        """The capture size whose graphs the step replayed; None when it ran eagerly.

        The policy graphcheck checks: a decode-only step replays the smallest
        capture size >= ``real_bsz``; a step with a prefill, an idle step, or one
        with ``real_bsz`` above every capture size runs eagerly.
        """

    @property
    def used_graph(self) -> bool:
        """True when the step replayed ``bucket``'s graphs (audits and memory checks apply)."""

    @property
    def real_bsz(self) -> int:
        """R, the batch the engine pads up to a bucket: 1 + the highest occupied slot (0 when idle).

        A slot-based engine (FastDeploy) counts holes below the highest running
        slot; an engine that packs running requests densely reports
        ``num_running``.
        """

    @property
    def num_running(self) -> int:
        """Requests that ran in the step."""

    @property
    def real_tokens(self) -> int:
        """Target input tokens of the requests that ran (a prompt in prefill, 1 + drafts in decode)."""

    @property
    def padded_tokens(self) -> int:
        """Tokens the target forward processed: ``bucket * (k + 1)`` on a replay, ``real_tokens`` eagerly."""

    @property
    def has_prefill(self) -> bool:
        """True when a request that ran was in its prefill (such a step must run eagerly)."""

    @property
    def slots(self) -> tuple[tuple[str, int], ...]:
        """``(request id, slot)`` of every request that ran, so divergences name their slot."""


@runtime_checkable
class RunnerInfo(Protocol):
    """The graph runner an engine captured with."""

    @property
    def name(self) -> str:
        """What reports say produced the graph records: "emulated", "cuda", "npu", "xpu", ..."""


@runtime_checkable
class SlotCapacity(Protocol):
    """The engine's buffer sizes, as far as graphcheck checks them."""

    @property
    def slots(self) -> int:
        """Rows of every per-slot buffer.

        Must be at least ``config.max_padded_reqs`` (max(max_num_seqs, largest
        capture size) + 1), else a capacity shape divergence is reported.
        """


@runtime_checkable
class EngineAdapter(Protocol):
    """An engine as the lockstep runner sees it.

    Decoding follows the contract of ``reference/README.md``: the scenario's
    requests, scripted through ``submit``/``abort`` at the start of a step,
    admitted FIFO into at most ``config.max_num_seqs`` slots, decoded with the
    model whose weights the factory received, and compared with the NumPy
    reference after every step.
    """

    def submit(self, spec: RequestSpec) -> None:
        """Queue a request; it is admitted by a later ``step`` (the same step when a slot is free)."""

    def abort(self, request_id: str) -> None:
        """Drop a waiting or running request; its slot is free for the next step. Unknown ids are ignored."""

    def step(self, t: int, overrides: Mapping[str, int]) -> StepResult:
        """Run decode step ``t`` and return what every request that ran produced.

        ``overrides`` (request id -> accepted draft count) is the scenario's
        accept script for ``t``: the engine must force those counts through its
        draft-override hook. In an engine built with graphs, a decode-only step
        replays the graphs of ``last_step_info.bucket``.
        """

    @property
    def last_step_info(self) -> StepReport | None:
        """How the last ``step`` ran; None before the first step (read only after one)."""

    @property
    def graphs(self) -> Mapping[int, CaptureBucket]:
        """Capture size -> its graphs. Empty for an engine built without graphs.

        Looked up with ``last_step_info.bucket`` after every replayed step.
        """

    def buffer_tensors(self) -> Mapping[str, Any]:
        """Buffer name -> the tensor the engine holds under that name now.

        Called after every replayed step and passed to
        ``CapturedGraph.stale_inputs``: every buffer a graph reads should be
        here, under the name its ``GraphInput`` rows carry, and must be updated
        in place, never rebound.
        """

    def memory_bytes(self) -> int:
        """Bytes the engine holds on its device now: allocator statistics, or live tensor storage.

        Must stay flat across replays after the first one, else a memory
        divergence is reported.
        """

    @property
    def runner(self) -> RunnerInfo | None:
        """The graph runner of an engine built with graphs, None without one."""

    @property
    def sizes(self) -> SlotCapacity:
        """The engine's buffer sizes (``sizes.slots`` is checked against the config)."""


@runtime_checkable
class StateSnapshots(Protocol):
    """Optional: an engine that can say which rows of its buffers are request state now."""

    def state_snapshot(self, *, during_step: bool = False) -> EngineState:
        """The meaningful rows of every named buffer, copied to the host (``graphcheck.state``).

        Called after every step (``during_step`` False): per-slot buffers give
        the rows of the slots still running and, as idle rows, every free slot
        (released this step or earlier) with the buffer's idle value; packed
        per-token buffers the rows of the step just run; caches the rows of the
        blocks running requests own. Buffer names are those of
        ``buffer_tensors()``. ``during_step`` True: called between the kernels
        of a step by a kernel trace; rows follow the step under way.
        """


@runtime_checkable
class Resettable(Protocol):
    """Optional: an engine that can return to the state it had right after construction."""

    def reset(self) -> None:
        """Return exactly to the post-construction state (after capture and any warm-up replay).

        Called between two scenarios of the same config, faults and ``use_graphs``,
        never during one. Afterwards the engine must be indistinguishable from a
        new one: the same buffer objects as after construction (the addresses its
        graphs froze), their contents copied back in place, no request queued or
        running, every host-side field as construction left it; its graphs are
        kept. Raise when that is impossible (for example a buffer it let go of no
        longer exists): the engine is then dropped and a new one built.
        """


@runtime_checkable
class ModelReports(Protocol):
    """Optional: an engine that reports what its own model produced (needed by the model-agnostic
    oracle and by the float tolerance, ``graphcheck.check.oracles`` / ``graphcheck.check.numeric``)."""

    def model_report(self) -> Mapping[str, ModelStep]:
        """Per request that ran in the last step: its target scores at every output row and its
        draft margins (``graphcheck.model_report.ModelStep``). Called after every step."""


@runtime_checkable
class FullRecompute(Protocol):
    """Optional: an engine that can run its own model the plain way (``graphcheck.check.recompute``)."""

    def recompute_scores(self, tokens: tuple[int, ...]) -> Any:
        """The model's scores ``[vocab]`` for the token after ``tokens``: the whole sequence in one
        forward, one request, no cache and no batching."""


@runtime_checkable
class Pipelined(Protocol):
    """Optional: an engine whose results come ``pipeline_depth`` calls after the batch was launched."""

    @property
    def pipeline_depth(self) -> int:
        """Calls between a batch's launch and its report (0: the step that launched it reports it)."""

    def drain(self, t: int) -> StepResult:
        """Report the oldest batch still in flight without launching another (called as step ``t``
        after the scenario's last step, once per batch in flight); an empty result when none is."""


@runtime_checkable
class MemoryEstimates(Protocol):
    """Optional, on the factory (a static or class method, or an attribute of a factory object):
    the engines' memory, estimated before any of them is built (``graphcheck.check.memory_gate``)."""

    def memory_estimate(self, config: EngineConfig, requests: Sequence[RequestSpec]) -> MemoryEstimate:
        """Bytes that an eager and a graph engine of ``config`` need for ``requests`` (empty: the
        config alone), by part: one engine's ``weights`` and ``buffers``, what the graph engine's
        captured graphs hold (``graphs``) and the largest transient (``working_set``). Leave
        ``reference`` 0: the gate adds the NumPy reference's part. Pure arithmetic, cheap: it is
        called for every scenario."""
        ...


@runtime_checkable
class EngineFactory(Protocol):
    """Builds one engine for a lockstep run; ``Lockstep`` calls it twice per scenario.

    ``config`` is the scenario's EngineConfig; ``weights`` the model weights
    the reference decodes with (``graphcheck.reference.make_weights(config)``: a
    ``graphcheck.reference.weights.Weights`` of read-only int64 NumPy arrays named as in
    reference/README.md §1); ``device`` the resolved backend
    (``graphcheck.capture.devices.Device``: framework, device string, graph runner
    factory); ``use_graphs`` False for the eager engine and True for the graph
    engine, which captures its graphs before returning (a failure there is
    reported as a capture divergence); ``faults`` the injected fault names
    (``--inject``): raise on a name the engine does not implement, so that an
    injected fault never silently does nothing (an exception here is reported
    as a capture divergence, naming it).
    """

    def __call__(
        self,
        config: EngineConfig,
        weights: Any,
        *,
        device: Device,
        use_graphs: bool,
        faults: Sequence[str],
    ) -> EngineAdapter: ...


@runtime_checkable
class SchedulingStepReport(StepReport, Protocol):
    """Optional: the eight fields a :class:`StepReport` adds for an engine that schedules, pads and
    captures for itself (module docstring). Each may be left out; :func:`report_extras` reads them."""

    @property
    def schedule(self) -> Schedule | None:
        """Who ran, on how many query tokens from which position, who produced a token
        (with ``capabilities.schedule = "engine"``)."""

    @property
    def path(self) -> str | None:
        """The padding path the step took (a name of the declared ``BucketPolicy``)."""

    @property
    def real_sizes(self) -> Mapping[str, int]:
        """The step's real sizes by dimension, before padding."""

    @property
    def padded_sizes(self) -> Mapping[str, int]:
        """The sizes the engine padded them to (and replayed)."""

    @property
    def limits(self) -> Mapping[str, int] | None:
        """The engine's limits that the policy's named values resolve against."""

    @property
    def host_values(self) -> Mapping[str, int] | None:
        """The host values the step's kernels are shaped by (against ``GraphExtras.host_values``)."""

    @property
    def captured(self) -> bool:
        """A graph was captured in this step (lazily, mid-run)."""

    @property
    def graph_sets(self) -> int:
        """Independent sets of graphs the engine keeps; the graph-count bound is per set."""


@dataclass(frozen=True)
class ReportExtras:
    """A step report's optional fields (:class:`SchedulingStepReport`), with the value an engine
    that leaves one out gets. Read once per report by :func:`report_extras`."""

    schedule: Schedule | None = None
    path: str | None = None
    real_sizes: Mapping[str, int] = field(default_factory=dict)
    padded_sizes: Mapping[str, int] = field(default_factory=dict)
    limits: Mapping[str, int] | None = None
    host_values: Mapping[str, int] | None = None
    captured: bool = False
    graph_sets: int = 1


#: The optional report fields, in :class:`ReportExtras`' order.
REPORT_FIELDS = tuple(ReportExtras.__dataclass_fields__)


def report_extras(info: Any) -> ReportExtras:
    """The optional fields of ``info`` (a :class:`StepReport`, or None before the first step), read once:
    the one place graphcheck reads them. Sizes an engine reports as None read as empty; ``captured``
    is its truth value."""
    if info is None:
        return ReportExtras()
    return ReportExtras(
        schedule=getattr(info, "schedule", None),
        path=getattr(info, "path", None),
        real_sizes=dict(getattr(info, "real_sizes", None) or {}),
        padded_sizes=dict(getattr(info, "padded_sizes", None) or {}),
        limits=getattr(info, "limits", None),
        host_values=getattr(info, "host_values", None),
        captured=bool(getattr(info, "captured", False)),
        graph_sets=getattr(info, "graph_sets", 1),
    )


@dataclass(frozen=True)
class EngineExtras:
    """An engine's optional members (:class:`StateSnapshots`, :class:`Resettable`, :class:`ModelReports`,
    :class:`FullRecompute`, :class:`Pipelined`, and ``sizes.tokens`` of a packed engine), as
    :func:`engine_extras` found them: the bound member, or None (0 for ``pipeline_depth``) without it."""

    state_snapshot: Callable[..., EngineState] | None = None
    reset: Callable[[], None] | None = None
    model_report: Callable[[], Mapping[str, ModelStep]] | None = None
    recompute_scores: Callable[[tuple[int, ...]], Any] | None = None
    pipeline_depth: int = 0
    tokens: int | None = None

    @property
    def snapshots(self) -> bool:
        """Whether the engine implements ``state_snapshot()``."""
        return self.state_snapshot is not None

    @property
    def resettable(self) -> bool:
        """Whether the engine implements ``reset()``."""
        return self.reset is not None


def _member(obj: Any, name: str) -> Any:
    """``obj.name`` when it is callable, else None."""
    member = getattr(obj, name, None)
    return member if callable(member) else None


def engine_extras(engine: Any, *, sizes: bool = False) -> EngineExtras:
    """The optional members of ``engine``, read once: the one place graphcheck reads them.
    ``sizes``: read ``sizes.tokens`` too (``sizes`` is a required member, which may raise)."""
    return EngineExtras(
        state_snapshot=_member(engine, "state_snapshot"),
        reset=_member(engine, "reset"),
        model_report=_member(engine, "model_report"),
        recompute_scores=_member(engine, "recompute_scores"),
        pipeline_depth=getattr(engine, "pipeline_depth", 0),
        tokens=getattr(engine.sizes, "tokens", None) if sizes else None,
    )


@dataclass(frozen=True)
class FactoryExtras:
    """A factory's optional members: ``capabilities`` (None: graphcheck's defaults) and
    ``memory_estimate`` (:class:`MemoryEstimates`; None: the factory is never refused), with
    ``estimate_owner``: whose figures that estimate gives, where it is a
    :class:`~graphcheck.memory_estimate.NamedEstimate` (None: unnamed)."""

    capabilities: Any = None
    memory_estimate: Callable[[EngineConfig, Sequence[RequestSpec]], MemoryEstimate] | None = None
    estimate_owner: str | None = None

    def declared(self) -> EngineCapabilities:
        """The capabilities the factory declares, else graphcheck's defaults."""
        found = self.capabilities
        return found if isinstance(found, EngineCapabilities) else EngineCapabilities()


def factory_extras(factory: Any, *, capabilities: bool = False) -> FactoryExtras:
    """The optional members of ``factory``, read once: the one place graphcheck reads them.
    ``capabilities``: read that member too (a property that may raise)."""
    estimate = getattr(factory, "memory_estimate", None)
    return FactoryExtras(
        capabilities=getattr(factory, "capabilities", None) if capabilities else None,
        memory_estimate=estimate,
        estimate_owner=estimate.owner if isinstance(estimate, NamedEstimate) else None,
    )


@dataclass(frozen=True)
class GraphExtras:
    """A captured graph's optional members: the host values its capture froze (against
    ``ReportExtras.host_values``), and what graphcheck's own runners' graphs add: their recorded
    kernel calls (``kernel_calls()``: ``(fn, args, kwargs)``) and a label for reports."""

    host_values: Mapping[str, int] | None = None
    kernel_calls: Callable[[], Iterable[tuple[Any, tuple[Any, ...], dict[str, Any]]]] | None = None
    label: str = "a graph"


def graph_extras(graph: Any) -> GraphExtras:
    """The optional members of a :class:`CapturedGraph`, read once: the one place graphcheck reads them."""
    return GraphExtras(
        host_values=getattr(graph, "host_values", None),
        kernel_calls=getattr(graph, "kernel_calls", None),
        label=getattr(graph, "label", "a graph"),
    )


def captured_graphs(engine: EngineAdapter, bucket: int | None = None) -> Iterator[tuple[str, int, CapturedGraph]]:
    """``(kind, capture size, graph)`` of every graph ``engine`` captured (of one ``bucket`` when given);
    ``kind`` is "target" or "draft", buckets without a draft graph give only their target."""
    sizes = [bucket] if bucket is not None else list(engine.graphs)
    for size in sizes:
        graphs = engine.graphs[size]
        for kind, graph in (("target", graphs.target), ("draft", graphs.draft)):
            if graph is not None:
                yield kind, size, graph


def input_label(inp: GraphInput) -> str:
    """How reports name a static input: the engine's buffer name, else ``<unnamed DTYPE[SHAPE]>``."""
    if inp.name is not None:
        return inp.name
    return f"<unnamed {inp.dtype}[{', '.join(str(n) for n in inp.shape)}]>"


__all__ = [
    "REPORT_FIELDS",
    "CaptureBucket",
    "CapturedGraph",
    "EngineAdapter",
    "EngineExtras",
    "EngineFactory",
    "FactoryExtras",
    "FullRecompute",
    "GraphExtras",
    "GraphInput",
    "MemoryEstimates",
    "ModelReports",
    "Pipelined",
    "ReportExtras",
    "Resettable",
    "RunnerInfo",
    "SchedulingStepReport",
    "SlotCapacity",
    "StateSnapshots",
    "StepReport",
    "captured_graphs",
    "engine_extras",
    "factory_extras",
    "graph_extras",
    "input_label",
    "report_extras",
]
