"""The MTP engine: step pipeline and graph policy (decoding-semantics §7).

One step: host planning (admission, reasoning status, accept overrides, KV
blocks) -> pack -> target forward -> sampling params + seed advance -> verify ->
status update -> draft preprocess -> S draft substeps -> draft postprocess ->
one read-back.

Graph policy. At construction, before any request, one graph set is captured
per capture size in descending order, all through one runner. A decode-only
step whose slot high-water mark R fits a capture size replays the graphs of
the smallest size G >= R; a step with a prefill, or with R above every size,
runs eagerly over exactly R slots and the real token counts. In a graph the
only static sizes are G and its token capacity G*(k+1); everything that changes
between replays lives in buffers refreshed in place before the replay, and
outputs are sliced to the real counts outside the graph. ``graph_scope`` picks
the captured region:

* ``forward``: the target forward (and logits) is one graph; the draft
  forward of a substep is a second graph. Packing, sampling, verify, updates
  run eagerly over R slots on the sliced outputs.
* ``forward_sampling``: the target graph also holds sampling-param expansion
  (seed advance), sampling and verify; the draft graph as above.
* ``step``: one graph holds the whole step, packing to draft postprocess.

Draft substeps >= 1: with ``forward`` / ``forward_sampling`` they replay the
same per-bucket draft graph as substep 0 after the substep's 1-token-per-slot
inputs are packed in place (padding rows inert); with ``step`` they are part of
the step graph, packed with a capacity of G tokens. Both are exact.

After capture every graph is replayed once on the idle buffers (FastDeploy's
capture loop replays too), with the accept override forcing every draft
accepted like FastDeploy's dummy run and put back afterwards: all rows are
padding, so this writes only scratch rows and the sink block, and the graphs'
outputs hold real data from then on.

Eager steps are exact-size: after the draft preprocess they read the draft
token counts back (one host sync, like FastDeploy's blocking path); graph
steps never sync mid-step. Every step ends with one packed read-back.

Models (``EngineConfig.model``): ``exact`` runs the integer model of the
reference on the weights the engine is given; ``float32`` / ``bfloat16`` run a
small seeded transformer (``float_model``, weights ``float_weights``) whose
KV caches and hidden-state buffers are in that dtype. Both go through the same
kernels, buffers, graphs and faults; sampling sees float64 scores (the integer
logits / 8, or the float logits). ``model_report()`` reads back what the model
produced in the last step (``graphcheck.model_report``).

Contract. The kernels follow ``config.contract`` (``graphcheck.contract``,
``Engine.contract``): when and how ``infer_seed`` advances, how row seeds are formed
and where NAIVE reads its sampling values (``build_sampling_params``), the eos ban below
``min_tokens`` (``ban_eos``, after ``model_scores``), one eos list per batch (written into
the running slots' ``eos_ids`` rows at admission), the TOPP verify window and the accept_all
eos guard (``verify_drafts``). docs/adapters.md lists each point; under ``default`` the
step runs the kernels it always ran.

Faults (all off unless injected) switch a real path, here or in the kernel this
module hands a keyword flag: ``graphcheck.backends.engine.faults`` lists each
one, the bug it mirrors and the function its switch is in.
"""

from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass
from typing import Any, Callable, Mapping, TypeVar

import numpy as np

from graphcheck.backends.engine import faults as fault
from graphcheck.backends.engine.buffers import BufferSizes, EngineBuffers, allocate_buffers
from graphcheck.backends.engine.forward import draft_forward, target_forward
from graphcheck.backends.engine.memory import engine_memory
from graphcheck.backends.engine.preprocess import DraftPackFaults, pack_draft_inputs, pack_target_inputs
from graphcheck.backends.engine.restore import restore, take_checkpoint
from graphcheck.backends.engine.sampling import (
    EXACT_SCORE_SCALE,
    RowParams,
    SamplingOptions,
    advance_infer_seed,
    ban_eos,
    build_sampling_params,
    model_scores,
    sample_tokens,
    topp_candidates,
)
from graphcheck.backends.engine.scheduler import Request, Scheduler, reasoning_status_at
from graphcheck.backends.engine.state import snapshot_state
from graphcheck.backends.engine.transfer import (
    ADMIT_INT_COLUMNS,
    ADMIT_MAX_DEC_LEN,
    ADMIT_PROMPT_LEN,
    ADMIT_REASONING,
    ADMIT_SEED,
    ADMIT_TOP_K,
    OUT_ACCEPT_NUM,
    OUT_NEXT_TOKENS,
    OUT_SEED,
    OUT_SEQ_LEN,
    OUT_STEP_IDX,
    OUT_STOPPED,
    AdmitBatch,
    admit_slots,
    collect_step_outputs,
    kept_at_release,
    overwrite,
    release_slots,
    snapshot,
    write_block_entries,
    write_slot_values,
)
from graphcheck.backends.engine.update import draft_postprocess, draft_preprocess, draft_update, update_model_status
from graphcheck.backends.engine.verify import VerifyOptions, verify_drafts
from graphcheck.backends.engine.weights import load_weights
from graphcheck.backends.xp import make_ops
from graphcheck.capabilities import EngineCapabilities
from graphcheck.capture.base import iter_tensors, never_holds_tensors
from graphcheck.contract import contract_named
from graphcheck.memory_estimate import NamedEstimate
from graphcheck.model_report import ModelStep
from graphcheck.scenario import MAX_EOS_IDS, EngineConfig, RequestSpec
from graphcheck.state import EngineState
from graphcheck.step_result import RequestStep, StepResult


@dataclass(frozen=True)
class StepInfo:
    """How the last step ran."""

    step: int
    bucket: int | None  # capture size replayed, None when eager
    used_graph: bool
    real_bsz: int  # slot high-water mark R
    num_running: int
    real_tokens: int  # target token rows the step handed on: its running requests' input tokens
    padded_tokens: int  # tokens the target forward processed (bucket * (k+1) in a graph)
    graph_scope: str
    has_prefill: bool = False
    slots: tuple[tuple[str, int], ...] = ()  # (request id, slot) of the requests that ran


@dataclass
class BucketGraphs:
    """The graphs of one capture size.

    ``target``: the target forward (scope forward), plus sampling and verify
    (forward_sampling), or the whole step (step). ``draft``: one draft substep
    (scopes forward / forward_sampling in speculative mode), else None.
    """

    size: int
    target: Any
    draft: Any | None = None

    def all(self) -> list[Any]:
        return [g for g in (self.target, self.draft) if g is not None]


#: Attributes construction sets once and nothing changes later: kept by reset(), never copied.
#: Every other attribute is host state, put back by reset() (``scheduler`` is rebuilt).
_STRUCTURAL = frozenset(
    {
        "config",
        "contract",
        "faults",
        "_draft_pack_faults",
        "device",
        "xp",
        "weights",
        "_score_scale",
        "sizes",
        "buffers",
        "scheduler",
        "k1",
        "num_model_steps",
        "capture_sizes",
        "use_graphs",
        "runner",
        "graphs",
        "capture_order",
        "_pristine",
        "_inert_attrs",
    }
)

_NOTHING = object()


def _region(name: str, fn: Callable[[], Any]) -> Callable[[], Any]:
    fn.__qualname__ = name
    return fn


_Method = TypeVar("_Method", bound=Callable[..., Any])


def _owner_call(method: _Method) -> _Method:
    """Run an engine method inside its graph runner's ``guarding()`` scope, where the poison of
    graphs not yet replayed is enforced (an emulated runner scopes it to its owner, this engine)."""

    @functools.wraps(method)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        guarding = getattr(self.runner, "guarding", None)
        with guarding() if guarding is not None else contextlib.nullcontext():
            return method(self, *args, **kwargs)

    return call  # type: ignore[return-value]


class Engine:
    """Batched, padded, buffer-based MTP decoding engine (see the module docstring)."""

    #: Every config value of the scenario format, per-slot buffers, and every fault of the registry.
    capabilities = EngineCapabilities(faults=tuple(fault.FAULTS.values()))

    #: The optional adapter member the memory gate calls before anything is built: the bytes a
    #: lockstep run's two engines need, summed from the tables they allocate from (``memory``);
    #: named, so that the gate's messages say whose figures they are.
    memory_estimate = NamedEstimate("the built-in engine", engine_memory)

    def __init__(
        self,
        config: EngineConfig,
        weights: Any,
        *,
        device: Any = "cpu",
        use_graphs: bool = True,
        faults: Any = frozenset(),
    ):
        self.config = config
        # The decoding contract the kernels follow (graphcheck.contract; docs/adapters.md).
        self.contract = contract_named(config.contract)
        self.faults = fault.check_faults(faults)
        # Fault switches of pack_draft_inputs (all False in a correct engine); faults are fixed here.
        self._draft_pack_faults = DraftPackFaults(
            padding_writes_kv=self._fault(fault.DRAFT_PADDING_WRITES_KV),
            offsets_cut_short=self._fault(fault.OFFSETS_CUT_SHORT),
        )
        if isinstance(device, str):
            from graphcheck.capture.devices import resolve

            device = resolve(device)
        self.device = device
        self.xp = make_ops(device.framework, device.device)
        # exact: the given (reference) weights; float32 / bfloat16: drawn from config.model_seed.
        self.weights = load_weights(self.xp, config, weights)
        # Sampling sees logits / 8 for the integer model (README §4), a float model's logits as they are.
        self._score_scale = EXACT_SCORE_SCALE if config.model == "exact" else 1.0
        self.sizes = BufferSizes.for_config(
            config, slots_by_max_num_seqs=self._fault(fault.SLOTS_SIZED_BY_MAX_NUM_SEQS)
        )
        self.buffers: EngineBuffers = allocate_buffers(self.xp, config, self.sizes)
        self.scheduler = Scheduler(config)
        self.k1 = config.tokens_per_request
        self.num_model_steps = 0 if config.naive_mode else config.num_model_steps
        self.capture_sizes = tuple(sorted(set(config.capture_sizes), reverse=True))
        self.use_graphs = use_graphs
        self.runner = device.runner_factory() if use_graphs and self.capture_sizes else None
        scope_to_owner = getattr(self.runner, "scope_poison_to_owner", None)
        if scope_to_owner is not None:
            scope_to_owner()  # only this engine reaches its graphs' tensors: see _owner_call
        self.graphs: dict[int, BucketGraphs] = {}
        self.capture_order: list[int] = []  # capture sizes in the order they were captured
        self.last_step_info: StepInfo | None = None
        self._override_host = np.full(self.sizes.slots, -1, dtype=np.int64)
        # Block-table columns the longest running request uses (host side, refreshed every
        # step); 1 while every slot is idle, as during capture. Only the
        # host-max-seq-len-baked fault hands it to a kernel.
        self._span_blocks = 1
        # Per-step device snapshots the engine keeps; stays empty unless the
        # clone-held-per-step fault is on (memory_bytes counts it like any held tensor).
        self.kept_inputs: list[Any] = []
        # What model_report needs of the last step, from the host side: its output rows
        # (an upper bound of the real ones) and the drafts each request proposed.
        self._report_rows = 0
        self._report_drafts: dict[str, int] = {}
        if self.runner is not None:
            self._capture_graphs()
        self._inert_attrs: dict[str, Any] = {}  # memory_bytes' cache (``_tensor_bytes``)
        self._pristine = take_checkpoint(self, [n for n in vars(self) if n not in _STRUCTURAL])

    @_owner_call
    def reset(self) -> None:
        """Return to the exact state right after construction (after capture and the warm replay).

        Every buffer field and weight is bound again to the tensor object it had
        then and its contents are copied back in place (same storage, same
        ``data_ptr``: the graphs froze those addresses); the tensors the graphs own
        whose contents outlive a replay, and their replay counters, are put back
        too; the scheduler is ``Scheduler(config)`` again and every other host-side
        attribute is what construction left (``backends.engine.restore``). The
        graphs themselves are kept. Raises ``EngineNotRestorable`` when a tensor
        bound at construction no longer exists (a fault dropped it): build a new
        engine then.
        """
        restore(self, self._pristine, _STRUCTURAL)
        self.scheduler = Scheduler(self.config)

    # ------------------------------------------------------------------ decoder protocol
    def submit(self, spec: RequestSpec) -> None:
        self.scheduler.submit(spec)

    @_owner_call
    def abort(self, request_id: str) -> None:
        req = self.scheduler.abort(request_id)
        if req is not None:
            self._release([req])

    @_owner_call
    def step(self, t: int, overrides: Mapping[str, int]) -> StepResult:
        sched, cfg = self.scheduler, self.config
        admitted = sched.admit()
        running = sched.running()
        if not running:
            self.last_step_info = StepInfo(t, None, False, 0, 0, 0, 0, cfg.graph_scope)
            self._report_rows, self._report_drafts = 0, {}
            return StepResult(t, ())
        self._admit_on_device(admitted, t)
        self._sync_reasoning(running, t)
        self._write_overrides(running, overrides)
        self._grow_blocks(running)
        self._span_blocks = max(len(r.blocks) for r in running)

        R = sched.high_water()
        real_tokens = sum(r.next_tokens for r in running)
        rows = sum(r.output_rows for r in running)
        self._report_rows = rows
        has_prefill = any(r.is_prefill for r in running)
        bucket = None if has_prefill else self.bucket_for(R)
        if bucket is None:
            self._run_eager(R, real_tokens, rows)
            padded = real_tokens
        else:
            real_tokens = self._run_graphs(bucket, R, real_tokens)
            padded = bucket * self.k1
        self.last_step_info = StepInfo(
            t,
            bucket,
            bucket is not None,
            R,
            len(running),
            real_tokens,
            padded,
            cfg.graph_scope,
            has_prefill,
            tuple((r.request_id, r.slot) for r in running),
        )
        return self._finish_step(t, running, R)

    # ------------------------------------------------------------------ introspection
    def bucket_for(self, real_bsz: int) -> int | None:
        """The smallest captured size >= R, or None (then the step runs eagerly)."""
        if self._fault(fault.PHANTOM_REQUEST_BUCKET):  # a padded request counted as real (vllm-ascend #14510)
            real_bsz += 1
        fits = [s for s in self.graphs if s >= real_bsz]
        return min(fits) if fits else None

    def state_snapshot(self, *, during_step: bool = False) -> EngineState:
        """The meaningful rows of every buffer now (``graphcheck.state``; rules in ``engine.state``).

        ``during_step``: called between the kernels of a step (a kernel trace):
        the rows follow the step under way, and the packed draft inputs are
        included (after a step, an eager engine that proposed nothing has not
        repacked them while a graph engine has, so they are left out then).
        """
        slots = [r.slot for r in self.scheduler.running()]
        if during_step:
            R = self.scheduler.high_water()
        else:
            R = self.last_step_info.real_bsz if self.last_step_info is not None else 0
        return snapshot_state(
            self.xp,
            self.buffers,
            slots,
            R,
            self.config.block_size,
            draft_scratch=during_step,
            kept=kept_at_release(self.contract),
        )

    def model_report(self) -> dict[str, ModelStep]:
        """What the model produced in the last step, per request that ran (``graphcheck.model_report``).

        ``scores``: float64 ``[rows, V]``, the request's output rows in order (packed
        by slot: ``cu_seqlens_out``) as they entered sampling; ``draft_margins``: one
        per draft token it proposed. Read back lazily, in one transfer.
        """
        info = self.last_step_info
        if info is None or not info.slots:
            return {}
        xp, buf, R = self.xp, self.buffers, info.real_bsz
        cu, scores, margins, second = xp.to_host_many(
            [
                buf.cu_seqlens_out[: R + 1],
                buf.step_scores[: self._report_rows],
                buf.draft_margins[:R],
                buf.draft_runners_up[:R],
            ]
        )
        report = {}
        for request_id, slot in info.slots:
            drafts = self._report_drafts.get(request_id, 0)
            report[request_id] = ModelStep(
                request_id,
                scores[int(cu[slot]) : int(cu[slot + 1])].astype(np.float64),
                tuple(float(m) for m in margins[slot, :drafts]),
                tuple(int(i) for i in second[slot, :drafts]),
            )
        return report

    def buffer_tensors(self) -> dict[str, Any]:
        """Buffer name -> the tensor the engine holds now (for Graph.stale_inputs)."""
        named = dict(self.buffers.named_tensors())
        named.update({f"weights.{k}": v for k, v in self.weights.named_tensors().items()})
        return named

    def buffer_names(self) -> dict[int, str]:
        """id(tensor) -> name, for the static-input table of every capture."""
        return {id(t): name for name, t in self.buffer_tensors().items()}

    def memory_bytes(self) -> int:
        """Allocator bytes on a device with statistics, else engine tensors plus graph-held storage."""
        held = self.runner.memory_bytes() if self.runner is not None else 0
        if self.device.device != "cpu":
            return held if self.runner is not None else self._tensor_bytes()
        return self._tensor_bytes() + held

    def _tensor_bytes(self) -> int:
        """Bytes of every tensor the engine holds: all tensors reachable from its attributes.

        Walks the engine's state containers (dataclasses, lists, tuples, dicts:
        buffers, weights, kept_inputs, ...), each tensor object counted once.
        Graphs are opaque here: what they hold is the runner's to count.
        """
        tensor_type = type(self.buffers.ids)

        def is_tensor(obj: Any) -> bool:
            return isinstance(obj, tensor_type)

        inert = self._inert_attrs  # name -> a value found to hold no tensor, ever: skipped while still bound
        state = []
        for name, value in vars(self).items():
            if name in ("_pristine", "_inert_attrs") or inert.get(name, _NOTHING) is value:
                continue  # reset()'s copies are not the engine's
            if never_holds_tensors(value, is_tensor):
                inert[name] = value
            else:
                state.append(value)
        seen = {id(t): t for t in iter_tensors(state, is_tensor)}
        return sum(self.xp.nbytes(t) for t in seen.values())

    def _fault(self, name: str) -> bool:
        """Whether the injected fault ``name`` (a ``graphcheck.backends.engine.faults`` constant) is on."""
        return fault.fault_on(self.faults, name)

    # ------------------------------------------------------------------ host-side planning
    def _admit_on_device(self, admitted: list[Request], t: int) -> None:
        if not admitted:
            return
        L = self.config.max_model_len
        n = len(admitted)
        slots = np.array([r.slot for r in admitted], dtype=np.int64)
        ints = np.zeros((n, ADMIT_INT_COLUMNS), dtype=np.int64)
        floats = np.zeros((n, 2), dtype=np.float64)
        prompts = np.full((n, L), -1, dtype=np.int64)
        eos = np.full((n, MAX_EOS_IDS), -1, dtype=np.int64)
        batch_eos = admitted[-1].spec.eos_token_ids if self.contract.eos_scope == "batch" else None
        for i, req in enumerate(admitted):
            spec = req.spec
            req.reasoning_status = reasoning_status_at(spec, t)
            ints[i, ADMIT_PROMPT_LEN] = len(spec.prompt)
            ints[i, ADMIT_MAX_DEC_LEN] = spec.max_dec_len
            ints[i, ADMIT_SEED] = spec.seed
            ints[i, ADMIT_TOP_K] = self.contract.top_k_of(spec.top_k)
            ints[i, ADMIT_REASONING] = req.reasoning_status
            floats[i] = (spec.top_p, spec.temperature)
            prompts[i, : len(spec.prompt)] = spec.prompt
            own = spec.eos_token_ids if batch_eos is None else batch_eos
            eos[i, : len(own)] = own
        xp = self.xp
        batch = AdmitBatch(
            xp.from_numpy(slots), xp.from_numpy(ints), xp.from_numpy(floats), xp.from_numpy(prompts), xp.from_numpy(eos)
        )
        admit_slots(xp, self.buffers, batch)
        if batch_eos is not None:
            self._share_batch_eos(admitted, eos[-1])

    def _share_batch_eos(self, admitted: list[Request], row: np.ndarray) -> None:
        """eos_scope "batch": one eos list for the whole batch, the last admitted request's.

        Kept in the per-slot ``eos_ids`` rows, so every kernel reads it as before: admission
        writes the list of the last request admitted (FIFO, script order) into the rows of the
        requests it admits and of every request already running. Free slots keep the idle
        value, and a later request finds the list of whoever was admitted last; no other
        buffer is needed.
        """
        new = {r.slot for r in admitted}
        others = [r.slot for r in self.scheduler.running() if r.slot not in new]
        if not others:
            return
        xp = self.xp
        slots = np.array(others, dtype=np.int64)
        rows = np.broadcast_to(row, (len(others), MAX_EOS_IDS))
        write_slot_values(xp, self.buffers.eos_ids, xp.from_numpy(slots), xp.from_numpy(rows))

    def _sync_reasoning(self, running: list[Request], t: int) -> None:
        changed = []
        for req in running:
            status = reasoning_status_at(req.spec, t)
            if status != req.reasoning_status:
                req.reasoning_status = status
                changed.append((req.slot, status))
        if changed:
            xp = self.xp
            slots, values = (np.array(c, dtype=np.int64) for c in zip(*changed))
            write_slot_values(xp, self.buffers.reasoning_status, xp.from_numpy(slots), xp.from_numpy(values))

    def _write_overrides(self, running: list[Request], overrides: Mapping[str, int]) -> None:
        values = np.full(self.sizes.slots, -1, dtype=np.int64)
        for req in running:
            if req.request_id in overrides:
                values[req.slot] = int(overrides[req.request_id])
        if not np.array_equal(values, self._override_host):
            overwrite(self.xp, self.buffers.accept_override, self.xp.from_numpy(values))
            self._override_host = values

    def _grow_blocks(self, running: list[Request]) -> None:
        entries = []
        for req in running:
            # Target positions seq_len .. seq_len+n-1, draft positions up to seq_len+n+S-2.
            for column, block in self.scheduler.grow_blocks(req, self.num_model_steps):
                entries.append((req.slot, column, block))
        if entries:
            xp = self.xp
            slots, cols, blocks = (xp.from_numpy(np.array(c, dtype=np.int64)) for c in zip(*entries))
            write_block_entries(xp, self.buffers.block_tables, slots, cols, blocks)

    def _release(self, requests: list[Request]) -> None:
        if not requests:
            return
        slots = np.array([self.scheduler.release(r) for r in requests], dtype=np.int64)
        release_slots(self.xp, self.buffers, self.xp.from_numpy(slots), kept_at_release(self.contract))
        self._override_host[slots] = -1

    def _finish_step(self, t: int, running: list[Request], R: int) -> StepResult:
        K1, S = self.k1, self.num_model_steps
        out = self.xp.to_host(collect_step_outputs(self.xp, self.buffers, R))
        scalars = 2 * K1
        results, finished = [], []
        for req in running:
            row = out[req.slot]
            accept_num = int(row[scalars + OUT_ACCEPT_NUM])
            stopped = bool(row[scalars + OUT_STOPPED])
            next_tokens = int(row[scalars + OUT_NEXT_TOKENS])
            drafted = S > 0 and not stopped and next_tokens == 1 + S
            req.prefilled = True
            req.seq_len = int(row[scalars + OUT_SEQ_LEN])
            req.next_tokens = next_tokens
            results.append(
                RequestStep(
                    request_id=req.request_id,
                    accept_tokens=tuple(int(x) for x in row[:accept_num]),
                    draft_tokens=tuple(int(x) for x in row[K1 + 1 : K1 + 1 + S]) if drafted else (),
                    infer_seed=int(row[scalars + OUT_SEED]),
                    step_idx=int(row[scalars + OUT_STEP_IDX]),
                    seq_len=req.seq_len,
                    stopped=stopped,
                )
            )
            if stopped:
                finished.append(req)
        self._report_drafts = {r.request_id: len(r.draft_tokens) for r in results}
        self._release(finished)
        return StepResult(t, tuple(sorted(results, key=lambda r: r.request_id)))

    # ------------------------------------------------------------------ the step pipeline
    def _sample_and_verify(self, num_slots: int, num_rows: int, logits: Any, *, graph_step: bool) -> None:
        """Sampling params (and the seed advance), sampling and verify over ``num_rows`` output rows.

        ``graph_step``: this runs on a replayed step (inside the graph, or after
        the replay in scope forward) rather than an eager one.
        """
        xp, buf, cfg = self.xp, self.buffers, self.config
        # naive-seed-frozen: the NAIVE path lost the seed advance (it moved into the MTP-only op);
        # seed-advance-outside-graph: the advance left the op (_run_eager does it, eager steps only).
        frozen = cfg.naive_mode and self._fault(fault.NAIVE_SEED_FROZEN)
        advance = self._advances_seed() and not frozen and not self._fault(fault.SEED_ADVANCE_OUTSIDE_GRAPH)
        sampling = SamplingOptions(
            advance_seed=advance,
            seed_by_row=self._fault(fault.SEED_INDEXED_BY_TOKEN),
            wrap_row_seeds=self.contract.row_seed == "int64_wrap",
            wrap_seed_advance=self.contract.seed_advance_sum == "int64_wrap",
            params_by_row=cfg.naive_mode and self.contract.naive_params == "packed_row",
        )
        params = RowParams(*build_sampling_params(xp, buf, num_slots, num_rows, cfg.seed_increment, sampling))
        scores = model_scores(xp, buf, logits, self._score_scale)
        if self.contract.min_tokens > 0:  # after model_scores: the model report keeps the scores unbanned
            scores = ban_eos(xp, buf, scores, self.contract.min_tokens, self.contract.covering_eos == "uniform")
        if cfg.verify_strategy == "topp" and not cfg.naive_mode:
            tokens, cand_ids, cand_len = topp_candidates(xp, scores, params, cfg.max_candidate_len)
        else:
            greedy = cfg.verify_strategy == "greedy" and not cfg.naive_mode
            tokens, cand_ids, cand_len = sample_tokens(xp, scores, params, greedy), None, None
        verifying = VerifyOptions(
            use_candidates=cand_ids is not None,
            accept_policy=cfg.accept_policy,
            reasoning_rule=not (graph_step and self._fault(fault.REASONING_RULE_SKIPPED_IN_GRAPH)),
            verify_window=self.contract.verify_window,
            window_stored=self.contract.window_second == "stored",
            accept_all_guard=self.contract.accept_all_eos == "replace",
        )
        verify_drafts(xp, buf, tokens, cand_ids, cand_len, num_slots, verifying)

    def _advances_seed(self) -> bool:
        """Whether a running slot's ``infer_seed`` moves on in a step (the contract's ``seed_advance``)."""
        return self.contract.advances_seed(self.config.verify_strategy, self.config.naive_mode)

    def _target_forward(self, num_tokens: int, num_rows: int, tables: Any) -> Any:
        """The target forward over the packed buffers, attending through ``tables``."""
        xp, buf, w = self.xp, self.buffers, self.weights
        span = self._span_blocks if self._fault(fault.HOST_MAX_SEQ_LEN_BAKED) else None  # a host int in the kernel
        return target_forward(xp, w, buf, num_tokens, num_rows, self.config.block_size, tables=tables, span_blocks=span)

    def _attention_tables(self) -> Any:
        """The block tables the target's attention reads: the persistent buffer, updated in place.

        captured-temporary-freed: a metadata builder returns a fresh copy
        instead; whoever does not keep it lets it die (vllm-ascend #12599).
        """
        if self._fault(fault.CAPTURED_TEMPORARY_FREED):
            return snapshot(self.xp, self.buffers.block_tables)
        return self.buffers.block_tables

    def _repack_substep(self, substep: int, *, graph_step: bool) -> bool:
        """Whether draft substep ``substep`` packs its own inputs (always, but for the
        draft-substeps-replay-first fault on graph steps: substeps >= 1 reuse substep 0's)."""
        return substep == 0 or not graph_step or not self._fault(fault.DRAFT_SUBSTEPS_REPLAY_FIRST)

    def _propose(self, num_slots: int, target_hidden: Any, *, exact: bool) -> None:
        """Draft preprocess, S substeps and postprocess as plain kernel calls.

        ``exact`` (eager): token counts are read from the device after the
        preprocess. Otherwise (inside the step graph) substep 0 packs into the
        bucket's token capacity and substeps >= 1 into one row per slot.
        """
        xp, buf, w, S = self.xp, self.buffers, self.weights, self.num_model_steps
        G, bs = num_slots, self.config.block_size
        draft_preprocess(xp, buf, G, S)
        if exact:
            counts = xp.to_host(buf.draft_seq_lens_this_time[:G])
            first, later = int(counts.sum()), int((counts > 0).sum())
        else:
            first, later = G * self.k1, G
        if first > 0:
            for s in range(S):
                T = first if s == 0 else later
                if self._repack_substep(s, graph_step=not exact):
                    pack_draft_inputs(xp, buf, target_hidden, G, T, bs, s == 0, self._draft_pack_faults)
                last_hidden, proposals, margins, second = draft_forward(xp, w, buf, G, T, bs)
                draft_update(xp, buf, last_hidden, proposals, margins, second, G, s)
        draft_postprocess(xp, buf, G, S)

    def _pack_target_eager(self, num_slots: int, num_tokens: int) -> None:
        """The pre-process that runs outside any graph: eager steps, and before a replay in
        scopes forward / forward_sampling (refreshing the graph's inputs in place)."""
        buf = self.buffers
        fresh = pack_target_inputs(
            self.xp,
            buf,
            num_slots,
            num_tokens,
            self.config.block_size,
            fresh_output_offsets=self._fault(fault.REBIND_OUTPUT_OFFSETS),
            stale_padding=self._fault(fault.STALE_PADDING_ROWS),
        )
        if fresh is not None:  # rebind-output-offsets: assigned, not copy_'d (FastDeploy #7864)
            buf.cu_seqlens_out, buf.batch_ids_out = fresh

    def _run_eager(self, R: int, tokens: int, rows: int) -> None:
        xp, buf, cfg = self.xp, self.buffers, self.config
        self._pack_target_eager(R, tokens)
        hidden, logits = self._target_forward(tokens, rows, self._attention_tables())
        self._sample_and_verify(R, rows, logits, graph_step=False)
        if self._fault(fault.SEED_ADVANCE_OUTSIDE_GRAPH) and self._advances_seed():  # host-driven, eager steps only
            advance_infer_seed(xp, buf, R, cfg.seed_increment, self.contract.seed_advance_sum == "int64_wrap")
        update_model_status(xp, buf, R, cfg.naive_mode)
        if not cfg.naive_mode:
            self._propose(R, hidden, exact=True)

    def _run_graphs(self, G: int, R: int, real_tokens: int) -> int:
        """Replay bucket ``G``'s graphs for a step of R slots; returns the target rows handed on.

        Outputs are sliced to ``real_tokens`` (to the padded G*(k+1) under the
        unsliced-graph-output fault); scope step hands nothing out of its graph.
        """
        xp, buf, cfg = self.xp, self.buffers, self.config
        graphs = self.graphs[G]
        if self._fault(fault.CLONE_HELD_PER_STEP):  # a per-step clone the engine keeps (FastDeploy #8061)
            self.kept_inputs.append(snapshot(xp, buf.seq_lens_this_time))
        if cfg.graph_scope == "step":
            graphs.target.replay()
            return real_tokens
        self._pack_target_eager(G, G * self.k1)  # refresh the graph's inputs in place
        graphs.target.replay()
        rows = G * self.k1 if self._fault(fault.UNSLICED_GRAPH_OUTPUT) else real_tokens
        if cfg.graph_scope == "forward":
            hidden, logits = graphs.target.outputs
            hidden = hidden[:rows]
            self._sample_and_verify(R, rows, logits[:rows], graph_step=True)
        else:
            hidden = graphs.target.outputs[0][:rows]
        update_model_status(xp, buf, R, cfg.naive_mode)
        if not cfg.naive_mode:
            self._propose_with_graph(G, R, hidden)
        return rows

    def _propose_with_graph(self, G: int, R: int, target_hidden: Any) -> None:
        xp, buf, S = self.xp, self.buffers, self.num_model_steps
        graph = self.graphs[G].draft
        draft_preprocess(xp, buf, R, S)
        for s in range(S):
            # Substep s >= 1 replays the substep-0 graph with one token per active slot.
            if self._repack_substep(s, graph_step=True):
                pack_draft_inputs(
                    xp, buf, target_hidden, G, G * self.k1, self.config.block_size, s == 0, self._draft_pack_faults
                )
            graph.replay()
            last_hidden, proposals, margins, second = graph.outputs
            draft_update(xp, buf, last_hidden[:R], proposals[:R], margins[:R], second[:R], R, s)
        draft_postprocess(xp, buf, R, S)

    # ------------------------------------------------------------------ capture
    @_owner_call
    def _capture_graphs(self) -> None:
        names = self.buffer_names()
        for size in self.capture_sizes:  # descending, like FastDeploy's capture order
            self.graphs[size] = self._capture_bucket(size, names)
            self.capture_order.append(size)
        self._warm_replay()

    def _capture_bucket(self, size: int, names: dict[int, str]) -> BucketGraphs:
        scope = self.config.graph_scope
        # The attention metadata is built outside the graph, like init_attention_metadata; under
        # captured-temporary-freed it is a copy that dies when this frame returns.
        tables = self._attention_tables()
        target = self.runner.capture(
            _region(f"{scope}[{size}]", lambda: self._target_region(size, tables)), names=names
        )
        draft = None
        if scope != "step" and not self.config.naive_mode:
            draft = self.runner.capture(_region(f"draft[{size}]", lambda: self._draft_region(size)), names=names)
        return BucketGraphs(size, target, draft)

    def _warm_replay(self) -> None:
        """Replay every graph once on the idle buffers, as FastDeploy's capture loop replays its
        decode iterations: every slot is idle, so every row is padding: it writes only scratch
        rows and the sink block, leaves request state untouched, and gives each graph's outputs
        real data from then on.

        The dummy run accepts every draft (FastDeploy's accept_all_drafts) through the
        override buffer, which is put back afterwards (not under warmup-state-leaks).
        """
        xp, buf = self.xp, self.buffers
        accept_all = np.full(self.sizes.slots, self.config.num_speculative_tokens, dtype=np.int64)
        overwrite(xp, buf.accept_override, xp.from_numpy(accept_all))
        for graphs in self.graphs.values():
            for graph in graphs.all():
                graph.replay()
        if not self._fault(fault.WARMUP_STATE_LEAKS):  # the dummy-run value must not reach real steps
            overwrite(xp, buf.accept_override, xp.from_numpy(self._override_host))

    def _region_tokens(self, G: int) -> int:
        """Packed token rows of bucket G's graphs: the static capacity G*(k+1).

        host-sync-in-capture sizes them from the device's seq_lens_this_time
        instead: a host read inside the region, which a capture refuses.
        """
        if self._fault(fault.HOST_SYNC_IN_CAPTURE):
            return max(1, int(self.xp.to_host(self.buffers.seq_lens_this_time)[:G].sum()))
        return G * self.k1

    def _target_region(self, G: int, tables: Any) -> Any:
        xp, buf, cfg = self.xp, self.buffers, self.config
        T = self._region_tokens(G)
        if cfg.graph_scope == "step":
            pack_target_inputs(xp, buf, G, T, cfg.block_size, stale_padding=self._fault(fault.STALE_PADDING_ROWS))
            hidden, logits = self._target_forward(T, T, tables)
            self._sample_and_verify(G, T, logits, graph_step=True)
            update_model_status(xp, buf, G, cfg.naive_mode)
            if not cfg.naive_mode:
                self._propose(G, hidden, exact=False)
            return ()
        hidden, logits = self._target_forward(T, T, tables)
        if cfg.graph_scope == "forward":
            return hidden, logits
        self._sample_and_verify(G, T, logits, graph_step=True)
        return (hidden,)

    def _draft_region(self, G: int) -> Any:
        return draft_forward(self.xp, self.weights, self.buffers, G, G * self.k1, self.config.block_size)
