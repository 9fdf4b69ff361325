"""Op-level graph emulation: record every aten op of a captured region, replay them as a CUDA graph would.

The kernel-level emulator (:mod:`.emulated`) records ``@kernel`` calls, so it
only serves code written for it. This one records below any engine: a torch
dispatch mode sees every aten op a region issues, whatever Python issued it
(an ``nn.Module`` forward, a sampler, a transformers helper), and records the
op with its tensor arguments by identity and every other argument by value.
That is what a CUDA capture does with kernels, and it gives the same traps:

* **frozen addresses**: replay re-issues each op on the storages captured. A
  tensor the engine rebinds afterwards is not seen; a value copied into a
  captured storage is.
* **frozen host values**: Python scalars, sizes and ``.item()`` results taken
  before capture are op arguments, recorded by value.
* **graph outputs keep their storage**: each replay writes a tensor the capture
  allocated in place, so the engine's reference to it sees the new values.
  Until the first replay those tensors hold poison (NaN, a sentinel), and a read
  raises :class:`~.base.PoisonedTensorError`: a real capture leaves them
  uninitialised.
* **capture runs nothing observable**: the ops run once while recording (the
  region's Python needs their results), then every pre-existing storage they
  wrote is put back, and so are the random generators. Each replay draws fresh
  random numbers, as a CUDA graph's generator offset advances per replay.
* **host syncs refused**: ``.item()``, ``bool(t)``, ``.tolist()``, ``.cpu()``,
  ``nonzero`` and other data-dependent shapes raise
  :class:`~.base.HostSyncInCapture` naming the op and the engine's source line.
* **freed inputs**: a storage the engine let go of after capture is detected
  when a replay would read it (:class:`FreedInputRead`, or, for a runner that
  checks bindings itself, kept readable as GPU memory is until reused).
* **shared pools**: a graph captured into the pool of earlier graphs may be
  placed on their blocks that no live tensor holds (their intermediates, outputs
  the engine dropped), exactly what CUDA's allocator may do; replaying the
  earlier graph then overwrites the later one's tensors there.

Each recorded op keeps its :class:`~.sites.OpSite` (the ``nn.Module`` path, the
kernel, the engine's source line), so a trace of a replay names the module and
the op where two engines part. :class:`OpGraphRunner` puts this behind the
:class:`~.base.GraphRunner` interface for graphcheck's own engine; the
``torch.cuda`` API on top of it is :mod:`.cuda_emulation`.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import threading
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping

from . import kernels
from .base import CaptureError, Graph, GraphRunner, HostSyncInCapture, StaticInput, bytes_held_by
from .capture_state import CaptureState
from .sites import OpSite, user_frame
from .torch_ops import (
    TorchOps,
    _host_sync_reason,
    _op_info,
    _op_tensors,
    _storage_key,
    _written_tensors,
    forwarding_mode,
)
from .warmup import region_label

#: What reading a capture's own storage before the graph's first replay does (``OpGraph``).
UNREPLAYED_READS = ("raise", "uninitialised")


class FreedInputRead(CaptureError):
    """A replay would read a storage the engine freed after capture (on a GPU: reused memory)."""


#: Ops that wrap data Python made (``torch.tensor([...])``) into the graph: a constant baked into it.
_CONSTANT_OPS = frozenset({"aten::lift_fresh", "aten::lift_fresh_copy"})

#: Ops with a data-dependent result size beyond the kernel emulator's list (torch tags them).
_EXTRA_SYNC_OPS = frozenset({"aten::bincount", "aten::item"})


def _sync_reason(func: Any, args: tuple, kwargs: dict) -> str | None:
    """Why an op cannot be captured because it needs device data on the host, or None."""
    reason = _host_sync_reason(func, args, kwargs) if _op_info(func).may_sync else None
    if reason is None and func._schema.name in _EXTRA_SYNC_OPS:
        reason = f"op {func} has a data-dependent output size"
    if reason is None and func._schema.name == "aten::one_hot" and (args[1] if len(args) > 1 else -1) < 0:
        reason = f"op {func} without num_classes has a data-dependent output size"
    return reason


@dataclass
class OpRecord:
    """One recorded aten op: the overload, its arguments as replay issues them, its captured results."""

    func: Any
    args: tuple
    kwargs: dict
    result: Any
    site: OpSite
    is_view: bool

    @property
    def name(self) -> str:
        return str(self.func)  # "aten.add.Tensor"


# --------------------------------------------------------------------------- pools


@dataclass(eq=False)
class _Block:
    """A storage some graph of a pool allocated; free for a later capture once nothing but graphcheck's
    own aliases holds it (the engine's tensors and views on it are gone, as CUDA's allocator sees it)."""

    tensor: Any  # an alias over the whole storage, kept by the pool
    nbytes: int
    claimed: bool = False  # taken by the capture under way


class GraphPool:
    """The memory pool of graphs captured together (``torch.cuda.graph(g, pool=...)``).

    CUDA's allocator may hand a capture any block of its pool that no live
    tensor uses: the intermediates of the pool's earlier graphs and the outputs
    the engine dropped. :meth:`place` does the same on the CPU, smallest fitting
    block first, so the aliasing a shared pool allows, and only that, happens.
    A block is in use while any tensor other than graphcheck's own aliases holds
    its storage (a view of a dropped tensor keeps it, as it keeps the memory on a
    GPU): the storage's reference count says so, less the aliases the graphs
    made of it (:func:`_note_alias`).
    """

    _ids = itertools.count(1)

    def __init__(self) -> None:
        self.id = next(self._ids)
        self._blocks: dict[int, _Block] = {}  # storage key -> block
        self._sizes: list[tuple[int, int]] = []  # (nbytes, storage key) of every block, sorted
        self._lock = threading.RLock()

    def place(self, t: Any, ops: TorchOps) -> None:
        """Move fresh tensor ``t`` (sole user of its storage, offset 0) onto a free block, if one fits."""
        need = t.untyped_storage().nbytes()
        with self._lock:
            block = self._first_free(need)
            if block is None:
                return
            block.claimed = True
        with ops.bookkeeping():
            storage = block.tensor.untyped_storage()
            seat = ops.torch.empty(0, dtype=t.dtype).set_(storage, 0, t.size(), t.stride())
            seat.copy_(t)
            t.set_(storage, 0, t.size(), t.stride())

    def _first_free(self, need: int) -> _Block | None:
        for _, key in self._sizes[bisect.bisect_left(self._sizes, (need, -1)) :]:
            block = self._blocks[key]
            if not block.claimed and self._unused(key, block):
                return block
        return None

    def _unused(self, key: int, block: _Block) -> bool:
        return not _held_outside(key, block.tensor)

    def owns(self, key: int) -> bool:
        """Whether storage ``key`` is a block of this pool (the pool keeps it while it lives)."""
        with self._lock:
            return key in self._blocks

    def adopt(self, key: int, alias: Any) -> None:
        """Record that a capture allocated the storage of ``alias`` (key ``key``): a block of this pool."""
        with self._lock:
            block = self._blocks.get(key)
            if block is None:
                block = self._blocks[key] = _Block(alias, alias.untyped_storage().nbytes())
                bisect.insort(self._sizes, (block.nbytes, key))
            block.claimed = False

    def release(self, keys: set[int]) -> None:
        """Unclaim blocks a failed capture took."""
        with self._lock:
            for key in keys:
                block = self._blocks.get(key)
                if block is not None:
                    block.claimed = False


def _storage_users(t: Any) -> int:
    """How many tensors (and storage objects) hold ``t``'s storage, not counting this call's own."""
    import torch

    storage = t.untyped_storage()
    return int(torch._C._storage_Use_Count(storage._cdata)) - 1


#: Storage key -> the tensors graphcheck's graphs made over that storage (their records' aliases).
_ALIASES: dict[int, list[weakref.ref]] = {}
_aliases_lock = threading.Lock()


def _note_alias(key: int, alias: Any) -> None:
    with _aliases_lock:
        refs = _ALIASES.setdefault(key, [])
        refs[:] = [r for r in refs if r() is not None]
        refs.append(weakref.ref(alias))


def _held_outside(key: int, ours: Any) -> bool:
    """Whether anything but graphcheck's own aliases (``ours`` among them) holds storage ``key``: the
    engine's tensors and views of it, as CUDA's allocator counts a block in use."""
    with _aliases_lock:
        live = [a for a in (r() for r in _ALIASES.get(key, ())) if a is not None]
    extra = 0 if any(a is ours for a in live) else 1
    count = len(live) + extra
    del live
    return _storage_users(ours) > count


# --------------------------------------------------------------------------- recording


def _lazy_torch() -> Any:
    import torch

    return torch


class OpCapture:
    """One op-level capture, opened with :meth:`begin` and closed with :meth:`end` on one thread.

    ``names`` maps ``id(tensor)`` to the engine's name for it (the static-input
    table's names); ``module_names`` maps ``id(module)`` to its path, for sites;
    ``pool`` is the :class:`GraphPool` it allocates from; ``sites=False`` skips
    the source-line lookup per op (faster; localisation then names modules and ops only).
    """

    def __init__(
        self,
        label: str,
        *,
        names: Mapping[int, str] | None = None,
        module_names: Mapping[int, str] | None = None,
        pool: GraphPool | None = None,
        sites: bool = True,
    ) -> None:
        self.label = label
        self.ops = TorchOps()
        self.torch = self.ops.torch
        self.pool = pool if pool is not None else GraphPool()
        self.state = CaptureState(label, check_escapes=True)  # makes the host-read methods refuse
        self.records: list[OpRecord] = []
        self.kernel: str | None = None  # set by OpGraphRunner's kernel observer
        self._names = dict(names or {})
        self._module_names = dict(module_names or {})
        self._modules: list[str] = []
        self._sites = sites
        self._snapshots: dict[int, Any] = {}
        self._generators: dict[int, tuple[Any, Any]] = {}
        self._inputs: dict[int, Any] = {}  # id(root) -> root, pre-existing tensors the ops touched, in order
        self._input_names: dict[int, str | None] = {}
        self._made: list[Any] = []  # tensors the ops allocated (strong until end)
        self._claimed: set[int] = set()
        self._constants: set[int] = set()  # storage keys of constants (see _CONSTANT_OPS)
        self._stack: Any = None
        self.failed: BaseException | None = None

    # ------------------------------------------------------------------ open / close
    def begin(self) -> None:
        torch = self.torch
        self._generators[id(torch.random.default_generator)] = (
            torch.random.default_generator,
            torch.random.get_rng_state(),
        )
        hooks = _module_hooks(self)
        stack = [self.ops.capturing(self.state), hooks, forwarding_mode(self.record)]
        entered = []
        try:
            for cm in stack:
                cm.__enter__()
                entered.append(cm)
        except BaseException:
            for cm in reversed(entered):
                cm.__exit__(None, None, None)
            raise
        self._stack = entered

    def end(self, error: BaseException | None = None) -> None:
        """Close the capture and undo its side effects (also after ``error``, which is kept in ``failed``)."""
        stack, self._stack = self._stack, None
        for cm in reversed(stack or []):
            cm.__exit__(None, None, None)
        self.failed = error
        with self.ops.bookkeeping():
            for snap in self._snapshots.values():
                self.ops.restore(snap)
            for gen, state in self._generators.values():
                gen.set_state(state)
        if error is not None:
            self.pool.release(self._claimed)

    # ------------------------------------------------------------------ the dispatch body
    def record(self, func: Any, args: tuple, kwargs: dict) -> Any:
        torch, ops = self.torch, self.ops
        reason = _sync_reason(func, args, kwargs)
        site = self._site()
        if reason:
            raise HostSyncInCapture(f"{reason} {site.location()}; not allowed inside graph capture ({self.label})")
        info = _op_info(func)
        inputs = _op_tensors(args, torch.Tensor) + (_op_tensors(kwargs.values(), torch.Tensor) if kwargs else [])
        in_keys = {_storage_key(t) for t in inputs}
        region = self.state.region
        if info.name in _CONSTANT_OPS:  # torch.tensor(data) in the region: a constant the graph keeps
            for t in inputs:
                region.storages.add(_storage_key(t))
                self._constants.add(_storage_key(t))
        for t in inputs:
            if _storage_key(t) not in region.storages:
                self._note_input(t)
        if info.written:
            for t in _written_tensors(info, args, kwargs, torch.Tensor):
                key = _storage_key(t)
                if key not in region.storages and key not in self._snapshots:
                    self._snapshots[key] = ops.snapshot(t)
        if torch.Tag.nondeterministic_seeded in func.tags:
            self._save_generators(args, kwargs)
        out = func(*args, **kwargs)
        in_ids = {id(t) for t in inputs}
        fresh = [t for t in _op_tensors(out, torch.Tensor) if id(t) not in in_ids]
        fresh_keys = [_storage_key(t) for t in fresh]
        for t, key in zip(fresh, fresh_keys):
            region.objects.add(id(t))
            if key in in_keys:
                continue  # a view of an input
            if not info.is_view and t.storage_offset() == 0 and fresh_keys.count(key) == 1:
                self.pool.place(t, ops)
                key = _storage_key(t)
                self._claimed.add(key)
            region.storages.add(key)
            self._made.append(t)
        frozen = _freeze((args, kwargs))
        # An op whose schema only *may* alias (``aten.to``, ``contiguous``, ``reshape``) made a copy when
        # any result is on a fresh storage: replay must run it again, as a view is not.
        aliased = bool(info.is_view) and all(key in in_keys for key in fresh_keys)
        self.records.append(OpRecord(func, frozen[0], frozen[1], out, site, aliased))
        return out

    def _site(self) -> OpSite:
        module = self._modules[-1] if self._modules else None
        if not self._sites:
            return OpSite(module=module, kernel=self.kernel)
        file, line, function = user_frame(3)
        return OpSite(module, self.kernel, file, line, function)

    def _note_input(self, t: Any) -> None:
        base = t._base
        root = base if base is not None and id(base) not in self.state.region.objects else t
        if id(root) in self._inputs:
            return
        self._inputs[id(root)] = root
        # The root is what the table records (its address, its shape), so its own name comes first.
        self._input_names[id(root)] = self._names.get(id(root), self._names.get(id(t)))

    def _save_generators(self, args: tuple, kwargs: dict) -> None:
        for value in list(args) + list(kwargs.values()):
            if isinstance(value, self.torch.Generator) and id(value) not in self._generators:
                self._generators[id(value)] = (value, value.get_state())

    # ------------------------------------------------------------------ module paths
    def enter_module(self, module: Any) -> None:
        name = self._module_names.get(id(module))
        if name is None:
            parent = self._modules[-1] if self._modules else None
            name = f"{parent}.{type(module).__name__}" if parent else type(module).__name__
        self._modules.append(name)

    def leave_module(self) -> None:
        if self._modules:
            self._modules.pop()

    # ------------------------------------------------------------------ the graph
    def finish(self, outputs: Any = None, *, on_freed: str = "raise", on_unreplayed: str = "raise") -> OpGraph:
        """The graph of what was recorded (after :meth:`end` without error)."""
        if self.failed is not None:
            raise CaptureError(f"{self.label}: the capture failed and holds no graph") from self.failed
        return OpGraph(self, outputs, on_freed, on_unreplayed)


def _freeze(obj: Any) -> Any:
    """Host values copied (lists of sizes, ...), tensors and everything else kept by identity."""
    if isinstance(obj, list):
        return [_freeze(x) for x in obj]
    if isinstance(obj, tuple):
        return tuple(_freeze(x) for x in obj)
    if isinstance(obj, dict):
        return {k: _freeze(v) for k, v in obj.items()}
    return obj


class _module_hooks:
    """Global ``nn.Module`` forward hooks keeping the capture's module stack (only when torch.nn is loaded)."""

    def __init__(self, capture: OpCapture) -> None:
        self.capture = capture
        self.handles: list[Any] = []

    def __enter__(self) -> None:
        import sys

        if "torch.nn" not in sys.modules:
            return
        from torch.nn.modules import module as nn_module

        capture = self.capture
        owner = threading.get_ident()

        def pre(module: Any, _args: Any) -> None:
            if threading.get_ident() == owner:
                capture.enter_module(module)

        def post(module: Any, _args: Any, _out: Any) -> None:
            if threading.get_ident() == owner:
                capture.leave_module()

        self.handles.append(nn_module.register_module_forward_pre_hook(pre))
        try:
            self.handles.append(nn_module.register_module_forward_hook(post, always_call=True))
        except TypeError:  # torch before always_call
            self.handles.append(nn_module.register_module_forward_hook(post))

    def __exit__(self, *exc: object) -> None:
        for handle in self.handles:
            handle.remove()
        self.handles.clear()


class OpGraph(Graph):
    """A recorded op list on frozen storages; see the module docstring.

    ``on_freed``: what a replay does when a static input's storage was freed by
    the engine: ``"raise"`` (:class:`FreedInputRead`) or ``"keep"`` (replay the
    kept storage, for a runner whose owner checks :meth:`dead_inputs` itself).
    ``on_unreplayed``: what reading a storage the capture allocated does before the
    first replay: ``"raise"`` (:class:`~.base.PoisonedTensorError`) or
    ``"uninitialised"`` (the read sees the poison values, as a GPU read sees
    whatever the memory held: for engines that run eager code between graph
    segments during capture and discard what a capture-time run computed).
    """

    counters = ("replays",)
    _ops: TorchOps
    _records: list[OpRecord] | None  # None once reset

    def __init__(self, capture: OpCapture, outputs: Any, on_freed: str, on_unreplayed: str = "raise") -> None:
        if on_freed not in ("raise", "keep"):
            raise ValueError(f"on_freed must be 'raise' or 'keep', not {on_freed!r}")
        if on_unreplayed not in UNREPLAYED_READS:
            raise ValueError(f"on_unreplayed must be one of {', '.join(UNREPLAYED_READS)}, not {on_unreplayed!r}")
        ops = self._ops = capture.ops
        self.label = capture.label
        self.outputs = outputs
        self.pool = capture.pool
        self.on_freed = on_freed
        self.replays = 0
        roots = list(capture._inputs.values())
        self.static_inputs = tuple(
            StaticInput(capture._input_names[id(r)], id(r), r.data_ptr(), tuple(r.shape), ops.dtype_name(r))
            for r in roots
        )
        self._root_refs = tuple(weakref.ref(r) for r in roots)
        aliases: dict[int, Any] = {}
        owned: dict[int, Any] = {}
        constants: dict[int, Any] = {}
        region = capture.state.region

        def alias(t: Any) -> Any:
            a = aliases.get(id(t))
            if a is None:
                a = aliases[id(t)] = ops.alias(t)
                key = _storage_key(t)
                _note_alias(key, a)
                if key in capture._constants:
                    constants.setdefault(key, a)
                elif key in region.storages:
                    owned.setdefault(key, a)
            return a

        with ops.bookkeeping():
            self._records = [
                OpRecord(
                    r.func, _swap(r.args, alias), _swap(r.kwargs, alias), _swap(r.result, alias), r.site, r.is_view
                )
                for r in capture.records
            ]
            self._input_aliases = [alias(r) for r in roots]
            for t in capture._made:
                alias(t)
            for a in owned.values():
                ops.poison(a)
        for t in capture._made:
            self.pool.adopt(_storage_key(t), owned[_storage_key(t)])
        self._owned = list(owned.values())
        self._constants = list(constants.values())
        self._token = ops.mark_poisoned(self._owned, self.label) if self._owned else None
        if self._token is not None and on_unreplayed == "uninitialised":
            ops.scope_poison(self._token)  # poisoned values stay; only an owner's guarding() scope raises
        capture._made.clear()
        capture._inputs.clear()
        capture.records = []

    # ------------------------------------------------------------------ replay
    def replay(self) -> None:
        if self._records is None:
            raise CaptureError(f"{self.label} was reset; capture it again before replaying")
        dead = self.dead_inputs()
        if dead and self.on_freed == "raise":
            inp = dead[0]
            raise FreedInputRead(
                f"replay of {self.label} reads a storage the engine freed after capture: "
                f"{inp.name or 'an unnamed tensor'} {inp.shape} {inp.dtype} at {inp.data_ptr:#x} "
                "(a GPU graph would read whatever reused that memory; keep captured inputs alive)"
            )
        if self._token is not None:
            token, self._token = self._token, None
            self._ops.clear_poison(token)
        if self._owned and self._ops.any_poisoned():
            # A storage of a shared pool may carry a later capture's poison (it sits on this graph's
            # block, and graphs are captured lazily, after this one's first replay too): this replay
            # writes it, so all of this graph's storages are lifted, not one token's.
            self._ops.clear_poison_of(self._owned)
        tracer = kernels.current_tracer()
        for record in self._records:
            if record.is_view:
                continue  # a view of a frozen storage is the captured view
            if tracer is None:
                fresh = record.func(*record.args, **record.kwargs)
            else:
                fresh = tracer.trace_call(op_call(record), record.args, record.kwargs, graph=self.label)
            self._store(record, fresh)
        self.replays += 1

    def _store(self, record: OpRecord, fresh: Any) -> None:
        torch = self._ops.torch
        old = _op_tensors(record.result, torch.Tensor)
        new = _op_tensors(fresh, torch.Tensor)
        for o, n in zip(old, new):
            if n is o or (_storage_key(n) == _storage_key(o) and n.data_ptr() == o.data_ptr()):
                continue
            if n.shape != o.shape:
                raise CaptureError(
                    f"{record.site.describe(record.name)} returned shape {tuple(n.shape)} on replay but "
                    f"{tuple(o.shape)} at capture ({self.label}; dynamic shapes do not replay)"
                )
            o.copy_(n)

    def reset(self) -> None:
        """Drop the recording (``CUDAGraph.reset``); the storages go back to the pool with it."""
        if self._token is not None:
            self._ops.clear_poison(self._token)
            self._token = None
        self._records = None
        self._owned = []
        self._input_aliases = []

    # ------------------------------------------------------------------ what it holds
    def name_inputs(self, names: Mapping[int, str]) -> None:
        """Name the static inputs still unnamed from ``names`` (``id(tensor) -> name``, the engine's buffer map).

        Only inputs whose tensor is still alive: a temporary the capture read is gone by now, and
        its ``id`` may already belong to one of the engine's buffers."""
        self.static_inputs = tuple(
            inp
            if inp.name is not None or inp.tensor_id not in names or self._root_refs[i]() is None
            else dataclasses.replace(inp, name=names[inp.tensor_id])
            for i, inp in enumerate(self.static_inputs)
        )

    @property
    def records(self) -> list[OpRecord]:
        """The recorded ops in replay order (views included: replay skips them)."""
        return list(self._records or [])

    def kernel_calls(self) -> list[tuple[Callable[..., Any], tuple, dict]]:
        """``(call, args, kwargs)`` of each op a replay issues, named as a kernel trace names them
        (:func:`op_call`): localisation finds the first op that reads a stale static input here."""
        return [(op_call(r), r.args, r.kwargs) for r in self._records or [] if not r.is_view]

    def persistent_tensors(self) -> list[Any]:
        """Every storage the capture allocated: a replay writes them, and ops that write part of one
        leave the rest from the last replay."""
        return list(self._owned) + super().persistent_tensors()

    def held_storages(self) -> dict[int, Any]:
        """Storage key -> a tensor on it, for memory this graph alone keeps alive."""
        held = {_storage_key(t): t for t in self._owned + self._constants}
        for i, a in enumerate(self._input_aliases):
            if not self._input_alive(i):
                held[_storage_key(a)] = a
        return held

    def _input_alive(self, i: int) -> bool:
        """Whether static input ``i``'s memory is still there: the engine holds its storage (any tensor or
        view of it: a dropped object whose storage lives on is no freed input, on a GPU or here), or it is
        a block of this graph's pool (an earlier graph's output, which the pool keeps: graphs captured in
        segments read each other's)."""
        if self._root_refs[i]() is not None:
            return True
        if i >= len(self._input_aliases):  # reset: the graph holds nothing any more
            return False
        alias = self._input_aliases[i]
        key = _storage_key(alias)
        return self.pool.owns(key) or _held_outside(key, alias)


def _storage_nbytes(t: Any) -> int:
    return t.untyped_storage().nbytes()


def _swap(obj: Any, alias: Callable[[Any], Any]) -> Any:
    torch = _lazy_torch()
    if isinstance(obj, torch.Tensor):
        return alias(obj)
    if isinstance(obj, list):
        return [_swap(x, alias) for x in obj]
    if isinstance(obj, tuple):
        return tuple(_swap(x, alias) for x in obj)
    if isinstance(obj, dict):
        return {k: _swap(v, alias) for k, v in obj.items()}
    return obj


def op_call(record: OpRecord) -> Callable[..., Any]:
    """``record``'s op as a callable a kernel trace can name: qualname ``module/op``, source from its site."""

    def call(*args: Any, **kwargs: Any) -> Any:
        return record.func(*args, **kwargs)

    where = record.site.module or record.site.kernel
    call.__qualname__ = call.__name__ = f"{where}/{record.name}" if where else record.name
    call.__graphcheck_site__ = record.site  # type: ignore[attr-defined]
    return call


# --------------------------------------------------------------------------- the runner


class _KernelNamer:
    """Kernel observer during an op-level capture: names the ``@kernel`` each op runs in and refuses host syncs."""

    def __init__(self, capture: OpCapture) -> None:
        self.capture = capture

    def run_kernel(self, fn: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
        self.capture.kernel = getattr(fn, "__qualname__", repr(fn))
        try:
            return kernels.launch(fn, args, kwargs)
        finally:
            self.capture.kernel = None

    def on_host_sync(self, what: str) -> None:
        raise HostSyncInCapture(f"host sync '{what}' inside graph capture ({self.capture.label})")


class OpGraphRunner(GraphRunner):
    """A :class:`GraphRunner` on the op-level emulator: graphcheck's own engine captured as any engine is.

    All captures share one pool, as :class:`~.cuda.CudaGraphRunner`'s do. A
    freed static input is kept readable (the engine's checks report it from
    :meth:`~.base.Graph.dead_inputs`), as the kernel-level emulator keeps it.
    """

    name = "emulated-ops"

    def __init__(self, *, sites: bool = True) -> None:
        self._pool = GraphPool()
        self._count = itertools.count(1)
        self._graphs: weakref.WeakSet[OpGraph] = weakref.WeakSet()
        self._sites = sites

    def capture(self, fn: Callable[[], Any], *, names: Mapping[int, str] | None = None) -> OpGraph:
        capture = OpCapture(region_label(next(self._count), fn), names=names, pool=self._pool, sites=self._sites)
        capture.begin()
        try:
            with kernels.observing(_KernelNamer(capture)):
                outputs = fn()
        except BaseException as exc:
            capture.end(exc)
            raise
        capture.end()
        graph = capture.finish(outputs, on_freed="keep")
        self._graphs.add(graph)
        return graph

    def memory_bytes(self) -> int:
        """Bytes of storage held alive by this runner's graphs (deduplicated)."""
        return bytes_held_by(list(self._graphs), _storage_nbytes)

    def synchronize(self) -> None:
        """CPU work is synchronous."""


def iter_records(graphs: Iterator[OpGraph]) -> Iterator[OpRecord]:
    """Every op of ``graphs`` in replay order."""
    for graph in graphs:
        yield from graph.records
