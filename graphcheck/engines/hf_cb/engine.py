"""The adapter: transformers' continuous batching, stepped one batch per ``step`` call.

One engine is one ``ContinuousBatchingManager`` over a tiny random-weight
model (:mod:`.model`), driven in-process without its background thread: a
request is handed to ``add_request`` when the scenario submits it and to
``cancel_request`` when it aborts, and every ``step`` runs the body of the
manager's generation loop once (``prepare_next_batch``, the generation step,
``update_batch``). The engine schedules for itself (token budget, chunked
prefill, requests waiting for cache blocks), so every step reports its
:class:`~graphcheck.schedule.Schedule`; it pads each batch to a graph key and
captures a graph the first time a key comes up (lazily, mid-run), so every step
reports the path, real and padded sizes, the host values its kernels were
shaped by, and whether it captured.

The graph engine is built with graphs on both paths (``use_cuda_graph``); the
eager engine without, and therefore without padding. Graph tables come from the
emulator on the CPU (``graph_api="torch.cuda"``: the harness runs the engine
inside ``graphcheck.emulate.cuda_graphs()``) and from the capture observer on a
GPU; static inputs are named by their attribute paths under ``io``, ``cache``,
``model`` and ``probe``.

``probe`` is the adapter's one addition to the engine's forward: the sampler's
input scores are copied into a static buffer the adapter owns, inside whatever
is captured, so that every replay leaves the scores of the step behind for the
model report.
"""

from __future__ import annotations

import collections
import contextlib
import copy
import dataclasses
import gc
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping

from graphcheck.engines.hf_cb import faults as cb_faults
from graphcheck.engines.hf_cb.capabilities import CAPABILITIES, cb_options
from graphcheck.engines.hf_cb.model import build_model
from graphcheck.engines.hf_cb.versions import Shim, UnsupportedVersion, installed
from graphcheck.engines.packed import Runner, Sizes
from graphcheck.model_report import ModelStep
from graphcheck.schedule import CacheReport, Schedule, ScheduledRun
from graphcheck.state import CACHE, BufferState, EngineState
from graphcheck.step_result import RequestStep, StepResult


@dataclass(frozen=True)
class StepInfo:
    """How the last step ran (``graphcheck.adapter.StepReport`` and its optional fields)."""

    step: int
    bucket: tuple[int, ...] | None  # the graph key replayed (or captured), None when eager
    used_graph: bool  # a graph that existed before this step was replayed
    captured: bool  # a graph was captured in this step (its outputs came from the capture's warm-up run)
    real_bsz: int
    num_running: int
    real_tokens: int
    padded_tokens: int
    has_prefill: bool
    slots: tuple[tuple[str, int], ...]
    path: str | None = None  # "varlen" or "decode"
    real_sizes: Mapping[str, int] = field(default_factory=dict)
    padded_sizes: Mapping[str, int] = field(default_factory=dict)
    limits: Mapping[str, int] = field(default_factory=dict)
    host_values: Mapping[str, int] = field(default_factory=dict)
    schedule: Schedule | None = None
    graph_sets: int = 1  # independent graph sets (two in async mode: one per IO pair)


@dataclass
class _Launch:
    """A batch launched and not yet reported (async mode reports it one call later)."""

    pair: int  # the IO pair it ran on (always 0 without async batching)
    schedule: Schedule
    states: tuple[Any, ...]  # the engine's RequestState of every run, in batch order
    key: tuple[int, ...] | None
    captured: bool
    needs: dict[str, int]
    real_lengths: dict[str, int]
    pad: tuple[int, int, int, int] | None
    discarded: frozenset[str] = frozenset()  # runs whose result the engine dropped (offloaded in flight)


@dataclass
class KeyedGraph:
    """One captured graph and the host values its capture froze; everything else (``static_inputs``,
    ``stale_inputs()``, ``dead_inputs()``, ``kernel_calls``, ``label``) is the wrapped graph's."""

    graph: Any  # an OpGraph (emulator) or ObservedGraph (GPU)
    host_values: Mapping[str, int]

    def __getattr__(self, name: str) -> Any:
        if name == "graph":
            raise AttributeError(name)
        return getattr(self.graph, name)


@dataclass
class KeyGraphs:
    """The graph of one key (``graphcheck.adapter.CaptureBucket``): CB captures one graph per key."""

    size: tuple[int, ...]
    target: KeyedGraph
    draft: None = None


class Engine:
    """``--engine hf-cb``: see the module docstring."""

    capabilities = CAPABILITIES

    def __init__(self, config: Any, weights: Any, *, device: Any, use_graphs: bool, faults: Any) -> None:
        if getattr(device, "framework", "torch") != "torch":
            raise ValueError(f"hf-cb runs on torch backends (cpu, cuda), not {device.name}")
        import torch
        from transformers import ContinuousBatchingConfig, GenerationConfig

        self.config = config
        self.torch = torch
        self.shim: Shim = installed()
        self.device = device.device
        self.use_graphs = use_graphs
        self.options = cb_options(config)
        self.model = build_model(config, self.device, sliding_window=self.options["sliding_window"])
        # The full-recompute path runs a copy untouched by continuous batching (which switches the
        # model's attention to its paged kernels).
        self._plain = copy.deepcopy(self.model) if use_graphs else None
        self._emulated = use_graphs and not self.device.startswith("cuda")
        self._on_cpu = not self.device.startswith("cuda")
        self.pipelined = bool(self.options["async_batching"])
        if self.pipelined and self._on_cpu and not self.shim.async_on_cpu:
            raise UnsupportedVersion(
                f"transformers {self.shim.version}: async batching runs on CUDA only (on the CPU: 5.23)"
            )
        generation = GenerationConfig(do_sample=False, max_new_tokens=config.max_model_len, eos_token_id=None)
        cb_config = ContinuousBatchingConfig(
            **{self.shim.page_size_arg: self.options["page_size"]},
            num_blocks=self.options["num_blocks"],
            max_batch_tokens=self.options["max_batch_tokens"],
            max_requests_per_batch=config.max_num_seqs,
            use_cuda_graph=use_graphs,
            q_padding_interval_size=self.options["q_padding"],
            kv_padding_interval_size=self.options["kv_padding"],
            allow_block_sharing=False,
            use_async_batching=self.pipelined,
        )
        with self._graph_context():
            self.manager = self.model.init_continuous_batching(
                generation_config=generation, continuous_batching_config=cb_config
            )
            # Resolved graphs are (varlen, decode); the library turns them off without a CUDA device
            # or with an attention mask (sdpa): graphcheck asks for them regardless.
            self.manager.continuous_batching_config.use_cuda_graph = (use_graphs, use_graphs)
            self.processor = self.manager._create_batch_processor()
        self.manager.batch_processor = self.processor
        self.manager.current_batch = 0
        self.io = self.processor.inputs_and_outputs
        self.cache = self.processor.cache
        self.runner_of = self.processor.model_runner
        self.limits = {
            "max_batch_tokens": int(self.cache.max_batch_tokens),
            "max_tokens_read": self.shim.max_tokens_read(self.cache),
            "max_requests_per_batch": int(self.manager.continuous_batching_config.max_requests_per_batch),
        }
        vocab = config.vocab_size
        self.probe = torch.zeros(  # one per IO pair: each pair's graphs write their own
            (self.pairs, self.limits["max_requests_per_batch"], vocab),
            dtype=torch.float32,
            device=self.device,
        )
        self._graphs: dict[tuple[int, ...], KeyGraphs] = {}
        self._specs: dict[str, Any] = {}
        self._states: dict[str, Any] = {}  # request id -> the engine's RequestState, once scheduled
        self._info: StepInfo | None = None
        self._report: dict[str, ModelStep] = {}
        self._in_flight: collections.deque[_Launch] = collections.deque()
        self._pad: tuple[int, int, int, int] | None = None  # (real q, real kv, padded q, padded kv)
        self._captured_key: tuple[int, ...] | None = None
        self._capture_values: dict[str, int] = {}  # host values of the capture under way
        self._observed_inputs: Any = ()  # the capture observer's table of that capture (GPU)
        self._pressure = _Pressure()
        self._instrument()
        self._watch_cache()
        cb_faults.apply(self, tuple(faults))
        if self.shim.cache_rows:  # graphcheck.adapter.StateSnapshots, where the version's cache layout is known
            self.state_snapshot = self._state_snapshot

    # ------------------------------------------------------------------ instrumentation
    def _instrument(self) -> None:
        """Observe padding, sampling and capture on this engine's own objects (nothing global)."""
        runner = self.runner_of
        pad = runner.maybe_pad_inputs
        sample = runner._sample
        capture = runner._capture_graph

        def maybe_pad_inputs(num_q_tokens: int, max_kv_read: int, use_decode_fast_path: bool) -> tuple[int, int]:
            q, kv = pad(num_q_tokens, max_kv_read, use_decode_fast_path)
            self._pad = (num_q_tokens, max_kv_read, q, kv)
            return q, kv

        def probed_sample(scores: Any, output_ids: Any) -> None:
            rows = scores.shape[1]
            self.probe[self._pair()][:rows].copy_(scores[0])
            sample(scores, output_ids)

        def capture_graph(forward_fn: Any, stream: Any, *args: Any) -> None:
            graph_io = self._graph_io(self._pair())
            key = graph_io._get_graph_key()
            self._capture_values = self._host_values(graph_io)
            with self._naming(), _no_collection():
                capture(self._observed(forward_fn), stream, *args)
            self._captured_key = key

        runner.maybe_pad_inputs = maybe_pad_inputs
        runner._sample = probed_sample
        runner._capture_graph = capture_graph

    def _watch_cache(self) -> None:
        """Count, on this engine's own cache and offloading manager, the block allocations that fail and the
        requests evicted while a batch is scheduled (``Schedule.cache``); a version without them reports none."""
        pressure = self._pressure
        offloading = getattr(self.processor, "offloading_manager", None)
        offload = getattr(offloading, "offload_requests", None)
        if offload is None or not self._watch_allocations():
            return
        scheduler = self.processor.scheduler

        def offload_requests() -> Any:
            active = set(scheduler.active_requests)
            done = offload()
            pressure.offloaded += sorted(active - set(scheduler.active_requests))
            return done

        offloading.offload_requests = offload_requests
        pressure.enabled = True

    def _watch_allocations(self) -> bool:
        """Count failed block allocations: ``can_store_request_tokens`` (5.23) or ``allocate_blocks`` (5.17,
        None when it fails); False where the version has neither."""
        failed = self._pressure.failed
        can_store = getattr(self.cache, "can_store_request_tokens", None)
        if can_store is not None:

            def can_store_request_tokens(state: Any, request_len: int, dry_run: bool = False) -> bool:
                fits = can_store(state, request_len, dry_run)
                if not fits and not dry_run:
                    failed.append(state.request_id)
                return fits

            self.cache.can_store_request_tokens = can_store_request_tokens
            return True
        allocate = getattr(self.cache, "allocate_blocks", None)
        if allocate is None:
            return False

        def allocate_blocks(n_blocks: int, request_id: str, allocated_blocks: int) -> Any:
            got = allocate(n_blocks, request_id, allocated_blocks)
            if got is None:
                failed.append(request_id)
            return got

        self.cache.allocate_blocks = allocate_blocks
        return True

    def _cache_report(self, scheduled: set[str]) -> CacheReport | None:
        """The cache once the batch was scheduled (None where the version's cache was not watched)."""
        pressure = self._pressure
        if not pressure.enabled:
            return None
        total, free = self._blocks()
        waiting = tuple(sorted({r for r in pressure.failed if r not in scheduled} | self._held_back(scheduled)))
        report = CacheReport(total, free, len(pressure.failed), waiting, tuple(dict.fromkeys(pressure.offloaded)))
        pressure.clear()
        return report

    def _blocks(self) -> tuple[int, int]:
        """The cache's blocks (sectors, 5.23) in all and free."""
        cache = self.cache
        share = getattr(cache, "compute_free_capacity", None)
        if callable(share):
            total = int(getattr(cache, "num_sectors", 0) or getattr(cache, "num_blocks", 0))
            return total, round(float(share(relative=True)) * total)
        total = int(getattr(cache, "num_blocks", 0))
        count = getattr(cache, "get_num_free_blocks", None)
        return total, int(count()) if callable(count) else total

    def _short_of_margin(self) -> bool:
        """Whether less of the cache is free than the scheduler's safety margin, which then admits no new
        prefill beside others (checked before the batch is scheduled, as the scheduler does)."""
        margin = getattr(self.processor.scheduler, "safety_margin", None)
        total, free = self._blocks()
        return margin is not None and total > 0 and free / total < float(margin)

    def _held_back(self, scheduled: set[str]) -> set[str]:
        """Requests in the waiting queue while the scheduler holds new requests back for the cache (after it
        offloaded one, or with less of the cache free than its safety margin): they wait for blocks, not for
        the token budget."""
        scheduler = self.processor.scheduler
        if not (getattr(scheduler, "block_new_requests", False) or self._pressure.short_of_margin):
            return set()
        return {str(r) for r in getattr(scheduler, "waiting_requests", {}) if r not in scheduled}

    def _observed(self, forward_fn: Any) -> Any:
        """``forward_fn``, observed when it runs inside a real capture (the GPU's static-input table)."""
        if self._emulated:
            return forward_fn
        from graphcheck.emulate import observe_capture

        def forward(*args: Any) -> None:
            if not self.torch.cuda.is_current_stream_capturing():
                forward_fn(*args)
                return
            with observe_capture(self._names(), label="hf-cb graph") as seen:
                forward_fn(*args)
            self._observed_inputs = seen.inputs

        return forward

    @contextlib.contextmanager
    def _naming(self) -> Iterator[None]:
        """Under the emulator, name the static inputs of a capture by attribute path."""
        if not self._emulated:
            yield
            return
        from graphcheck.capture.cuda_emulation import patched
        from graphcheck.emulate import module_paths

        with patched(
            hooks=self.shim.cpu_hooks(),
            names=self._names(),
            module_names=module_paths(self.model, "model"),
            on_freed="keep",
        ):
            yield

    def _graph_context(self) -> contextlib.AbstractContextManager[Any]:
        """What the engine's graph (and stream) calls run inside: the emulator's hooks for this version on
        a CPU, for the graph engine and for an eager engine with async batching (its streams and events)."""
        if not (self._emulated or (self.pipelined and self._on_cpu)):
            return contextlib.nullcontext()
        from graphcheck.capture.cuda_emulation import patched

        return patched(hooks=self.shim.cpu_hooks(), on_freed="keep")

    def _roots(self) -> dict[str, Any]:
        return {
            "cache": self.cache,
            "io": self.io,
            "model": self.model,
            "probe": self.probe,
        }  # cache first: io reaches it too

    def _names(self) -> dict[int, str]:
        """id(tensor) -> attribute path, for the static inputs of a capture."""
        return {id(t): name for name, t in self.buffer_tensors().items()}

    # ------------------------------------------------------------------ the protocol
    def submit(self, spec: Any) -> None:
        self._specs[spec.request_id] = spec
        eos = list(spec.eos_token_ids) or -1
        self.manager.add_request(
            list(spec.prompt), request_id=spec.request_id, max_new_tokens=spec.max_dec_len, eos_token_id=eos
        )

    def abort(self, request_id: str) -> None:
        if request_id in self._specs:
            self.manager.cancel_request(request_id)

    def step(self, t: int, overrides: Mapping[str, int]) -> StepResult:
        """Launch the next batch; report the oldest batch in flight once ``pipeline_depth`` are newer.

        Without async batching the batch launched is the one reported. With it, a
        call launches batch N on one IO pair and then takes in batch N-1's results
        (the engine's own order: its graph carries N-1's sampled tokens into N's
        inputs), so everything a step reports is about the batch before.
        """
        self._report = {}
        with self._graph_context(), self.torch.no_grad():
            self._launch()
            done = self._finish() if len(self._in_flight) > self.pipeline_depth else None
        return self._reported(t, done)

    def drain(self, t: int) -> StepResult:
        """Report the batch still in flight without launching another (``graphcheck.adapter.Pipelined``):
        the engine's own end-of-generation drain (switch back to that batch's IO pair, update it)."""
        self._report = {}
        done = None
        if self._in_flight:
            with self._graph_context(), self.torch.no_grad():
                if self.pipelined:
                    self.io.current_pair = 1 - self.io.current_pair
                done = self._finish()
        return self._reported(t, done)

    @property
    def pipeline_depth(self) -> int:
        """Calls between a batch's launch and its report: 1 with async batching, else 0."""
        return 1 if self.pipelined else 0

    def _launch(self) -> None:
        """Prepare and launch the next batch, when the engine has one (lazily capturing its graph)."""
        self._pad, self._captured_key = None, None
        self._pressure.clear()
        self._pressure.short_of_margin = self._short_of_margin()
        if not self.processor.prepare_next_batch():
            return
        pair = self._pair()
        schedule, states = self._schedule(pair)
        real_lengths = self.shim.key_lengths(self._prepared_io(pair))
        self.manager._generation_step()
        needs = self._host_values(self._graph_io(pair))
        key, captured = self._graph_used(pair)
        self._in_flight.append(_Launch(pair, schedule, states, key, captured, needs, real_lengths, self._pad))

    def _finish(self) -> tuple[_Launch, list[RequestStep]]:
        """Take in the oldest batch in flight: the engine's update, and what it produced per request.

        A request the engine had already finished (or offloaded) when the results
        came in produces nothing: async mode schedules a batch before it knows the
        previous batch stopped anyone, and then skips those runs."""
        done = self._in_flight.popleft()
        before = {id(s): (len(s.generated_tokens), _status(s)) for s in done.states}
        self.processor.update_batch()
        outcomes, discarded = [], set()
        for run, state in zip(done.schedule.runs, done.states):
            produced, status = before[id(state)]
            if status in ("FINISHED", "PENDING"):
                if self._requeued(run.request_id, status):
                    discarded.add(run.request_id)
                continue
            outcomes.append(self._outcome(run, state, produced))
        return dataclasses.replace(done, discarded=frozenset(discarded)), outcomes

    def _requeued(self, request_id: str, status: str) -> bool:
        """Whether a request of a batch in flight was offloaded since (async mode, under cache pressure): the
        engine drops that batch's result for it and runs it again later (restored, or prefilled again)."""
        if status == "PENDING":
            return True
        return request_id in getattr(self.processor.scheduler, "waiting_requests", {})

    def _reported(self, t: int, done: tuple[_Launch, list[RequestStep]] | None) -> StepResult:
        if done is None:
            empty = Schedule((), self.pipeline_depth)
            self._info = StepInfo(t, None, False, False, 0, 0, 0, 0, False, (), schedule=empty)
            return StepResult(t, ())
        launch, outcomes = done
        self._info = self._step_info(t, launch)
        self._report = self._model_report(launch)
        return StepResult(t, tuple(sorted(outcomes, key=lambda r: r.request_id)))

    def _pair(self) -> int:
        """The IO pair the next batch is prepared and computed on (0 without async batching)."""
        return int(self.io.current_pair) if self.pipelined else 0

    def _prepared_io(self, pair: int) -> Any:
        """The IO object a batch is prepared in (async: the host side of its pair)."""
        return self.io.io_pairs[pair].host_io if self.pipelined else self.io

    def _graph_io(self, pair: int) -> Any:
        """The IO object a batch's graphs read and are keyed by (async: the device side of its pair)."""
        return self.io.io_pairs[pair].device_io if self.pipelined else self.io

    @property
    def pairs(self) -> int:
        """IO pairs, each with graphs and static inputs of its own: 2 with async batching, else 1."""
        return 2 if self.pipelined else 1

    def graph_ios(self) -> tuple[Any, ...]:
        """Every IO object that holds graphs and their static inputs."""
        return tuple(self._graph_io(p) for p in range(self.pairs))

    def prepared_ios(self) -> tuple[Any, ...]:
        """Every IO object batches are prepared in (reset per batch)."""
        return tuple(self._prepared_io(p) for p in range(self.pairs))

    def _schedule(self, pair: int) -> tuple[Schedule, tuple[Any, ...]]:
        """Who the batch runs, read right after it was prepared (positions already moved on)."""
        runs, states = [], []
        for future in self._prepared_io(pair).requests_in_batch:
            state = future.state
            rid = state.request_id
            self._states[rid] = state
            states.append(state)
            first = int(state.position_offset) - int(future.query_length)
            runs.append(ScheduledRun(rid, int(future.query_length), first, bool(future.has_new_token)))
        cache = self._cache_report({r.request_id for r in runs})
        return Schedule(tuple(runs), self.pipeline_depth, cache), tuple(states)

    def _host_values(self, io: Any) -> dict[str, int]:
        """The host sizes the batch's kernels were shaped by once its inputs were made (padded): a
        graph replayed for the batch must have been captured with the same."""
        values = {"q": int(io.num_q_tokens), "kv": int(io.max_kv_read), "decode": int(bool(io.use_block_table))}
        values.update({f"k:{name}": int(v) for name, v in self.shim.key_lengths(io).items()})
        return values

    def _stored_graphs(self, pair: int) -> dict[Any, Any]:
        buffer = self._graph_io(pair).graphs
        storage = getattr(buffer, "_storage", None)
        if storage is None:
            storage = getattr(buffer, "graphs", {})
        return dict(storage)

    def _graph_used(self, pair: int) -> tuple[tuple[int, ...] | None, bool]:
        """The key the batch replayed or captured (None: it ran eagerly), and whether it captured; in
        async mode the pair leads the key (each pair has graphs of its own)."""
        if not self.use_graphs:
            return None, False
        lead = (pair,) if self.pipelined else ()
        if self._captured_key is not None:
            key = tuple(int(v) for v in self._captured_key)
            self._keep_graph(pair, key, lead + key)
            return lead + key, True
        graph_io = self._graph_io(pair)
        _, use_graph = self.runner_of._get_forward_fn(use_block_table=graph_io.use_block_table)
        if not use_graph:
            return None, False
        return lead + tuple(int(v) for v in graph_io._get_graph_key()), False

    def _keep_graph(self, pair: int, key: tuple[int, ...], name: tuple[int, ...]) -> None:
        """Register the graph just captured under ``key`` (as ``name``), with the host values its capture froze."""
        stored = self._stored_graphs(pair)
        raw = stored.get(key) or stored.get(tuple(key))
        if self._emulated:
            table = raw.graph
            table.name_inputs(self._names())
        else:
            from graphcheck.capture.capture_observer import ObservedGraph

            table = ObservedGraph(raw, self._observed_inputs, outputs=None, label=f"hf-cb graph {name}")
        self._graphs[name] = KeyGraphs(name, KeyedGraph(table, dict(self._capture_values)))

    def _step_info(self, t: int, launch: _Launch) -> StepInfo:
        runs, needs, key = launch.schedule.runs, launch.needs, launch.key
        real_q = launch.schedule.query_tokens
        path = "decode" if needs["decode"] else "varlen"
        real = {"q": real_q, "kv": launch.pad[1] if launch.pad else 0}
        real.update({f"k:{n}": int(v) for n, v in launch.real_lengths.items()})
        padded = {name: needs[name] for name in real}
        used = key is not None and not launch.captured
        return StepInfo(
            step=t,
            bucket=key,
            used_graph=used,
            captured=launch.captured,
            real_bsz=len(runs),
            num_running=len(runs),
            real_tokens=real_q,
            padded_tokens=needs["q"] if key is not None else real_q,
            has_prefill=any(not r.produces or r.query_tokens > 1 for r in runs),
            slots=tuple((r.request_id, i) for i, r in enumerate(runs)),
            path=path,
            real_sizes=real,
            padded_sizes=padded,
            limits=dict(self.limits),
            host_values=needs,
            schedule=_without(launch.schedule, launch.discarded),
            graph_sets=self.pairs,
        )

    def _outcome(self, run: ScheduledRun, state: Any, produced: int) -> RequestStep:
        tokens = tuple(int(x) for x in state.generated_tokens[produced:])
        spec = self._specs.get(run.request_id)
        return RequestStep(
            run.request_id,
            tokens,
            (),
            spec.seed if spec is not None else 0,
            _generated(state, spec),
            run.first_position + run.query_tokens,
            _status(state) == "FINISHED",
        )

    def _model_report(self, launch: _Launch) -> dict[str, ModelStep]:
        producing = [r.request_id for r in launch.schedule.runs if r.produces]
        if not producing:
            return {}
        rows = self.probe[launch.pair, : len(producing)].detach().to("cpu", self.torch.float64).numpy()
        return {
            rid: ModelStep(rid, rows[i : i + 1].copy())
            for i, rid in enumerate(producing)
            if rid not in launch.discarded
        }

    @property
    def last_step_info(self) -> StepInfo | None:
        return self._info

    @property
    def graphs(self) -> Mapping[tuple[int, ...], KeyGraphs]:
        return self._graphs

    def buffer_tensors(self) -> dict[str, Any]:
        """Every tensor under ``io``, ``cache``, ``model`` and ``probe`` by attribute path; a tensor that
        is a view of an unnamed base also names the base, as ``PATH.<base>`` (graphs read bases)."""
        from graphcheck.emulate import named_tensors

        found: dict[str, Any] = {}
        named: set[int] = set()
        for prefix, root in self._roots().items():
            for name, t in named_tensors(root, prefix, depth=_DEPTH).items():
                if id(t) not in named:
                    named.add(id(t))
                    found[name] = t
        for name, t in list(found.items()):
            base = t._base
            if base is not None and id(base) not in named:
                named.add(id(base))
                found[f"{name}.<base>"] = base
        return found

    def memory_bytes(self) -> int:
        if self.device.startswith("cuda"):
            return int(self.torch.cuda.memory_allocated())
        from graphcheck.capture.base import bytes_held_by

        storages = {
            t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in self.buffer_tensors().values()
        }
        held = bytes_held_by([g.target.graph for g in self._graphs.values()], lambda t: t.untyped_storage().nbytes())
        return sum(storages.values()) + held

    @property
    def runner(self) -> Runner | None:
        if not self.use_graphs:
            return None
        return Runner("emulated torch.cuda" if self._emulated else "cuda")

    @property
    def sizes(self) -> Sizes:
        return Sizes(self.limits["max_requests_per_batch"], self.limits["max_batch_tokens"])

    def _state_snapshot(self, *, during_step: bool = False) -> EngineState:
        """The KV-cache rows of every running request (full-attention layers): the physical token rows
        its positions so far map to, in position order, owned by its place in the scheduler."""
        import numpy as np

        if not self._on_cpu and self.pipelined:  # a batch is in flight on the compute stream
            self.torch.cuda.synchronize()
        running = list(self.processor.scheduler.active_requests.values())
        buffers = []
        names = {id(t): name for name, t in self.buffer_tensors().items()}
        for allocator in self.cache.cache_allocators.values():
            views = getattr(allocator, "_kv_token_views", None)
            if views is None or type(allocator).__name__ != "FullAttentionCacheAllocator":
                continue
            rows, owners = [], []
            for owner, state in enumerate(running):
                length = int(state.position_offset)
                if length and state.request_id in allocator.block_table:
                    found = allocator.get_read_indices(state.request_id, 0, length)
                    rows += found
                    owners += [owner] * len(found)
            index = np.asarray(rows, dtype=np.int64)
            for layer, pair in views.items():
                for kv, view in zip("kv", pair):
                    values = view[self.torch.as_tensor(index, device=view.device)].float().cpu().numpy()
                    name = names.get(id(view), f"cache layer {layer} {kv}")
                    buffers.append(BufferState(name, CACHE, index, values, np.asarray(owners, dtype=np.int64)))
        return EngineState(tuple(buffers))

    def reset(self) -> None:
        """Back to the state after construction, graphs kept (``graphcheck.adapter.Resettable``): the
        batch processor's own reset (scheduler, offloading, static inputs, cache pages) and the
        adapter's bookkeeping. The KV cache's contents stay, as in a server between requests."""
        for queue in (self.manager.input_queue, self.manager.cancel_queue):
            while not queue.empty():
                queue.get_nowait()
        with self._graph_context(), self.torch.no_grad():
            self.processor.reset()
            self.cache.free_all_requests(clear_ledgers=True)
            self.probe.zero_()
        self._specs.clear()
        self._states.clear()
        self._in_flight.clear()
        self._info, self._report = None, {}

    def model_report(self) -> dict[str, ModelStep]:
        return dict(self._report)

    def recompute_scores(self, tokens: tuple[int, ...]) -> Any:
        """The model's scores for the token after ``tokens``: one plain forward over the whole
        sequence, no cache, no batching (the full-recompute path of the lockstep)."""
        torch = self.torch
        model = self._plain if self._plain is not None else self.model
        with torch.no_grad():
            ids = torch.tensor([list(tokens)], dtype=torch.long, device=self.device)
            logits = model(input_ids=ids, use_cache=False).logits[0, -1]
        return logits.float().to("cpu", torch.float64).numpy()


@dataclass
class _Pressure:
    """What the cache went through while the batch under way was scheduled."""

    enabled: bool = False
    short_of_margin: bool = False  # less of the cache free than the scheduler's safety margin
    failed: list[str] = field(default_factory=list)  # a request per failed block allocation
    offloaded: list[str] = field(default_factory=list)  # requests evicted from the cache

    def clear(self) -> None:
        self.failed.clear()
        self.offloaded.clear()


@contextlib.contextmanager
def _no_collection() -> Iterator[None]:
    """No garbage collection while capturing: an earlier engine collected mid-capture resets its
    graphs (``CudaGraphBuffer.__del__``), which a CUDA capture under way does not permit (the process
    aborts in the caching allocator)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


#: How deep buffer names are looked for under each root (the cache's per-layer views sit at depth 5).
_DEPTH = 6


def _without(schedule: Schedule, discarded: frozenset[str]) -> Schedule:
    """``schedule`` as the engine kept it: the runs whose result it dropped left out (their sizes still
    shaped the batch: the padding is judged from the whole launch)."""
    if not discarded:
        return schedule
    runs = tuple(r for r in schedule.runs if r.request_id not in discarded)
    return dataclasses.replace(schedule, runs=runs)


def _generated(state: Any, spec: Any) -> int:
    """Tokens the request generated so far. A request the engine requeued under cache pressure (a soft
    reset: ``create_equivalent_initial_request``) is a new state whose prompt holds the tokens generated
    before and whose ``generated_tokens`` starts empty; counted against the scenario's own prompt, the
    tokens folded into it still count."""
    generated = len(state.generated_tokens)
    initial = getattr(state, "initial_tokens", None)
    if spec is None or initial is None:
        return generated
    return generated + max(0, len(initial) - len(spec.prompt))


def _status(state: Any) -> str:
    return getattr(state.status, "name", str(state.status))


__all__ = ["Engine", "KeyGraphs", "KeyedGraph", "StepInfo"]
