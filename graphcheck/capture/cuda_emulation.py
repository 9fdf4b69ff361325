"""``torch.cuda``'s graph API on the CPU, driving the op-level emulator (:mod:`.op_graphs`).

:func:`patched` swaps the graph, stream and synchronisation entry points of
``torch.cuda`` for the stand-ins here while it is active, so an engine's
unmodified capture code (``torch.cuda.CUDAGraph()``, ``with torch.cuda.graph(g,
pool=..., stream=...)``, ``g.replay()``) runs on CPU tensors with CUDA graph
semantics. :data:`module` is the same stand-ins as one object shaped like
``torch.cuda``, for engines that reach their device module through a helper
(``torch.get_device_module()``, transformers' ``accelerator_graph_*``
functions): point the helper at it with ``hooks``.

Streams are bookkeeping only (CPU work is synchronous), but the rules of a
capture hold: synchronising the device or the capturing stream inside a
capture is an error, as ``cudaStreamSynchronize`` is during capture, and
``is_current_stream_capturing()`` is true exactly between ``capture_begin``
and ``capture_end`` on the capturing thread.
"""

from __future__ import annotations

import importlib
import itertools
import sys
import threading
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any, Iterator, Mapping

from .base import CaptureError
from .op_graphs import GraphPool, OpCapture, OpGraph
from .sites import here


class _Tls(threading.local):
    def __init__(self) -> None:
        self.capture: OpCapture | None = None
        self.stream: EmulatedStream | None = None


_tls = _Tls()
_settings = SimpleNamespace(on_freed="raise", on_unreplayed="raise", names={}, module_names={}, sites=True)
_labels = itertools.count(1)


def active() -> bool:
    """Whether :func:`patched` is in force (torch.cuda's graph API is the emulator's)."""
    return _depth > 0


def capturing() -> bool:
    """Whether an emulated capture is under way on this thread."""
    return _tls.capture is not None


def _refuse_in_capture(what: str) -> None:
    if _tls.capture is not None:
        raise CaptureError(
            f"{what} at {here(2)} inside graph capture ({_tls.capture.label}): "
            "a CUDA stream that is capturing cannot be synchronised"
        )


class PoolHandle:
    """What ``graph_pool_handle()`` and ``CUDAGraph.pool()`` return: a token naming a :class:`GraphPool`."""

    def __init__(self, pool: GraphPool | None = None) -> None:
        self.pool = pool if pool is not None else GraphPool()

    def __repr__(self) -> str:
        return f"PoolHandle({self.pool.id})"


def _pool_of(pool: Any) -> GraphPool:
    if pool is None:
        return GraphPool()  # a private pool, as a capture without pool= gets
    if isinstance(pool, PoolHandle):
        return pool.pool
    if isinstance(pool, EmulatedMemPool):
        return pool.id.pool
    raise CaptureError(
        f"pool={pool!r} is not a pool handle of the emulated CUDA graphs (graph_pool_handle(), g.pool())"
    )


class EmulatedCUDAGraph:
    """``torch.cuda.CUDAGraph`` on the op-level emulator.

    Beyond torch's API, :attr:`graph` is the :class:`~.op_graphs.OpGraph` once
    captured: its ``static_inputs``, ``dead_inputs()`` and ``records`` are what
    an adapter audits.
    """

    def __init__(self, keep_graph: bool = False) -> None:
        self.graph: OpGraph | None = None
        self._pool: GraphPool | None = None
        self._capture: OpCapture | None = None

    def capture_begin(self, pool: Any = None, capture_error_mode: str = "global") -> None:
        if _tls.capture is not None:
            raise CaptureError(f"capture_begin at {here()} while {_tls.capture.label} is being captured on this thread")
        if self.graph is not None:
            raise CaptureError("this CUDAGraph already holds a captured graph; reset() it before capturing again")
        self._pool = _pool_of(pool)
        label = f"cuda graph #{next(_labels)} (captured at {here()})"
        capture = OpCapture(
            label,
            names=_settings.names,
            module_names=_settings.module_names,
            pool=self._pool,
            sites=_settings.sites,
        )
        capture.begin()
        self._capture = _tls.capture = capture

    def capture_end(self) -> None:
        self._close(None)

    def _close(self, error: BaseException | None) -> None:
        capture = self._capture
        if capture is None:
            raise CaptureError("capture_end without capture_begin")
        self._capture = _tls.capture = None
        capture.end(error)
        if error is None:
            self.graph = capture.finish(None, on_freed=_settings.on_freed, on_unreplayed=_settings.on_unreplayed)

    def replay(self) -> None:
        if self.graph is None:
            raise CaptureError("replay() of a CUDAGraph that holds no captured graph")
        if _tls.capture is not None:
            raise CaptureError(f"replay of {self.graph.label} inside the capture of {_tls.capture.label}")
        self.graph.replay()

    def reset(self) -> None:
        if self.graph is not None and sys.meta_path is not None:  # not at interpreter exit (engines' __del__)
            self.graph.reset()
        self.graph = None

    def pool(self) -> PoolHandle:
        if self._pool is None:
            raise CaptureError("pool() of a CUDAGraph that was never captured")
        return PoolHandle(self._pool)

    def instantiate(self) -> None:
        """Nothing to do: an emulated graph is ready once captured."""

    def enable_debug_mode(self) -> None:
        """Accepted for compatibility; :attr:`graph` already exposes the recording."""

    def debug_dump(self, path: str) -> None:
        with open(path, "w", encoding="utf-8") as out:
            for record in self.graph.records if self.graph is not None else []:
                out.write(record.site.describe(record.name) + "\n")


class graph:
    """``torch.cuda.graph(cuda_graph, pool=None, stream=None, capture_error_mode="global")``."""

    def __init__(
        self, cuda_graph: EmulatedCUDAGraph, pool: Any = None, stream: Any = None, capture_error_mode: str = "global"
    ) -> None:
        if not isinstance(cuda_graph, EmulatedCUDAGraph):
            raise CaptureError(
                f"torch.cuda.graph was given a {type(cuda_graph).__name__}; inside graphcheck.emulate.cuda_graphs() "
                "create graphs with torch.cuda.CUDAGraph() (it is the emulated one there)"
            )
        self.cuda_graph, self.pool = cuda_graph, pool
        self._stream = stream_context(stream if stream is not None else EmulatedStream())

    def __enter__(self) -> None:
        self._stream.__enter__()
        try:
            self.cuda_graph.capture_begin(self.pool)
        except BaseException:
            self._stream.__exit__(None, None, None)
            raise

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            self.cuda_graph._close(exc)
        finally:
            self._stream.__exit__(None, None, None)


def graph_pool_handle() -> PoolHandle:
    return PoolHandle()


def is_current_stream_capturing() -> bool:
    return _tls.capture is not None


class EmulatedEvent:
    """``torch.cuda.Event``: CPU work is done when issued, so every event has completed."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False) -> None:
        self.recorded = False

    def record(self, stream: Any = None) -> None:
        self.recorded = True

    def wait(self, stream: Any = None) -> None:
        pass

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        _refuse_in_capture("Event.synchronize()")

    def elapsed_time(self, end_event: Any) -> float:
        return 0.0


class EmulatedStream:
    """``torch.cuda.Stream``: ordering only (CPU work is synchronous)."""

    _ids = itertools.count(1)

    def __init__(self, device: Any = None, priority: int = 0, **_: Any) -> None:
        self.device = device
        self.priority = priority
        self.cuda_stream = next(self._ids)

    def wait_stream(self, stream: Any) -> None:
        pass

    def wait_event(self, event: Any) -> None:
        pass

    def record_event(self, event: Any = None) -> EmulatedEvent:
        event = event if event is not None else EmulatedEvent()
        event.record(self)
        return event

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        _refuse_in_capture("Stream.synchronize()")

    def __enter__(self) -> EmulatedStream:
        self._ctx = stream_context(self)
        self._ctx.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._ctx.__exit__(None, None, None)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, EmulatedStream) and other.cuda_stream == self.cuda_stream

    def __hash__(self) -> int:
        return hash(self.cuda_stream)


_DEFAULT_STREAM = EmulatedStream()


class stream_context:
    """``torch.cuda.stream(s)`` / ``torch.cuda.StreamContext``: makes ``s`` the thread's current stream."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self._previous: EmulatedStream | None = None

    def __enter__(self) -> Any:
        self._previous = _tls.stream
        if self.stream is not None:
            _tls.stream = self.stream
        return self.stream

    def __exit__(self, *exc: object) -> None:
        _tls.stream = self._previous


def current_stream(device: Any = None) -> EmulatedStream:
    return _tls.stream if _tls.stream is not None else _DEFAULT_STREAM


def default_stream(device: Any = None) -> EmulatedStream:
    return _DEFAULT_STREAM


def set_stream(stream: Any) -> None:
    _tls.stream = stream


def synchronize(device: Any = None) -> None:
    _refuse_in_capture("torch.cuda.synchronize()")


def empty_cache() -> None:
    """Nothing cached on the CPU."""


class EmulatedMemPool:
    """``torch.cuda.MemPool``: ``.id`` is a pool handle that ``torch.cuda.graph(pool=...)`` accepts."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.id = PoolHandle()


@contextmanager
def use_mem_pool(pool: Any, device: Any = None) -> Iterator[None]:
    """CPU allocations do not come from a device pool: a no-op scope."""
    yield


#: The stand-ins as one object shaped like ``torch.cuda`` (``__name__`` ends in "cuda", as helpers check).
module = SimpleNamespace(
    __name__="graphcheck.emulate.cuda",
    CUDAGraph=EmulatedCUDAGraph,
    graph=graph,
    graph_pool_handle=graph_pool_handle,
    is_current_stream_capturing=is_current_stream_capturing,
    Stream=EmulatedStream,
    Event=EmulatedEvent,
    stream=stream_context,
    StreamContext=stream_context,
    current_stream=current_stream,
    default_stream=default_stream,
    set_stream=set_stream,
    synchronize=synchronize,
    empty_cache=empty_cache,
    MemPool=EmulatedMemPool,
    use_mem_pool=use_mem_pool,
)

#: torch.cuda attribute -> stand-in (also patched in torch.cuda.graphs / torch.cuda.streams where defined).
_PATCHED = {
    "CUDAGraph": EmulatedCUDAGraph,
    "graph": graph,
    "graph_pool_handle": graph_pool_handle,
    "is_current_stream_capturing": is_current_stream_capturing,
    "Stream": EmulatedStream,
    "Event": EmulatedEvent,
    "stream": stream_context,
    "StreamContext": stream_context,
    "current_stream": current_stream,
    "default_stream": default_stream,
    "set_stream": set_stream,
    "synchronize": synchronize,
    "empty_cache": empty_cache,
    "MemPool": EmulatedMemPool,
    "use_mem_pool": use_mem_pool,
}
_lock = threading.Lock()
_depth = 0
_saved: list[tuple[Any, str, Any]] = []


def _resolve_target(path: str) -> tuple[Any, str]:
    """``"pkg.mod:attr"``, ``"pkg.mod:Class.attr"`` or ``"pkg.mod.attr"`` -> (holder object, attribute name)."""
    if ":" in path:
        module_name, attr = path.split(":", 1)
    else:
        module_name, _, attr = path.rpartition(".")
    if not module_name or not attr:
        raise CaptureError(f"hook {path!r} is not 'module:attribute'")
    try:
        holder: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise CaptureError(f"hook {path!r}: cannot import {module_name}: {exc}") from exc
    *owners, attr = attr.split(".")
    for owner in owners:
        holder = getattr(holder, owner, None)
        if holder is None:
            raise CaptureError(f"hook {path!r}: {module_name} has no {owner}")
    return holder, attr


@contextmanager
def patched(
    *,
    hooks: Mapping[str, Any] | None = None,
    modules: tuple[Any, ...] = (),
    names: Mapping[int, str] | None = None,
    module_names: Mapping[int, str] | None = None,
    on_freed: str = "raise",
    sites: bool = True,
    on_unreplayed: str = "raise",
) -> Iterator[Any]:
    """Install the stand-ins for the duration (process wide, re-entrant); yields :data:`module`.

    ``hooks`` maps ``"module:attribute"`` to a replacement (an engine's own
    graph helpers); ``modules`` are modules (or names) that imported torch.cuda's
    objects themselves (``from torch.cuda import CUDAGraph``): every attribute of
    theirs that is one of torch's originals is swapped too. ``names`` and
    ``module_names`` name tensors and modules in static-input tables and op sites.
    """
    import torch
    import torch.cuda.graphs
    import torch.cuda.streams

    global _depth
    targets: list[tuple[Any, str, Any]] = []
    originals = {name: getattr(torch.cuda, name) for name in _PATCHED if hasattr(torch.cuda, name)}
    for holder in (torch.cuda, torch.cuda.graphs, torch.cuda.streams):
        for name, replacement in _PATCHED.items():
            if name in originals and getattr(holder, name, None) is originals[name]:
                targets.append((holder, name, replacement))
    by_original = {id(obj): _PATCHED[name] for name, obj in originals.items()}
    for mod in modules:
        mod = importlib.import_module(mod) if isinstance(mod, str) else mod
        for attr, value in list(vars(mod).items()):
            if id(value) in by_original:
                targets.append((mod, attr, by_original[id(value)]))
    for path, replacement in (hooks or {}).items():
        holder, attr = _resolve_target(path)
        targets.append((holder, attr, replacement))
    previous = (_settings.on_freed, _settings.on_unreplayed, _settings.names, _settings.module_names, _settings.sites)
    with _lock:
        for holder, attr, replacement in targets:
            _saved.append((holder, attr, getattr(holder, attr, None)))
            setattr(holder, attr, replacement)
        _depth += 1
        mine = len(targets)
    _settings.on_freed, _settings.on_unreplayed, _settings.sites = on_freed, on_unreplayed, sites
    _settings.names, _settings.module_names = dict(names or {}), dict(module_names or {})
    try:
        yield module
    finally:
        _settings.on_freed, _settings.on_unreplayed, _settings.names, _settings.module_names, _settings.sites = previous
        with _lock:
            for _ in range(mine):
                holder, attr, original = _saved.pop()
                setattr(holder, attr, original)
            _depth -= 1
