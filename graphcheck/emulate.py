"""CUDA-graph semantics for engines that capture with ``torch.cuda`` directly.

Two tools for an unmodified PyTorch engine:

* :func:`cuda_graphs` runs its capture code on a machine without a GPU:
  inside it ``torch.cuda.CUDAGraph``, ``torch.cuda.graph``,
  ``graph_pool_handle``, ``is_current_stream_capturing``, streams, events and
  ``synchronize`` are stand-ins over graphcheck's op-level emulator, and the
  engine's tensors live on the CPU. Replay re-issues every recorded aten op on
  the storages captured, so the bugs a CUDA graph has (rebound or freed inputs,
  frozen host values, stale padding, capture-time side effects, host syncs,
  frozen random numbers, pool aliasing) show on the CPU as they would on a GPU.
* :func:`observe_capture` runs inside a *real* capture on a GPU and returns the
  static-input table: every pre-existing storage the captured ops read or write.

Example::

    import torch, graphcheck.emulate as emulate

    with emulate.cuda_graphs():
        x = torch.zeros(4)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            y = x * 2
        x.copy_(torch.arange(4.0))
        g.replay()          # y == [0, 2, 4, 6]
        g.graph.static_inputs   # the row for x

Importing this module imports no framework; torch is loaded on first use.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Iterator, Mapping

if TYPE_CHECKING:
    from graphcheck.capture.capture_observer import GraphInput

__all__ = ["GraphInput", "cuda_graphs", "module_paths", "named_tensors", "observe_capture", "tensor_paths"]


@contextmanager
def cuda_graphs(
    *,
    hooks: Mapping[str, Any] | None = None,
    modules: tuple[Any, ...] = (),
    names: Mapping[int, str] | None = None,
    module_names: Mapping[int, str] | None = None,
    on_freed: str = "raise",
    sites: bool = True,
    on_unreplayed: str = "raise",
) -> Iterator[Any]:
    """Emulate ``torch.cuda``'s graph API on the CPU for the duration (process wide, re-entrant).

    Yields the stand-ins as one object shaped like ``torch.cuda`` (``CUDAGraph``,
    ``graph``, ``Stream``, ``MemPool``, ...), for engines that reach their
    device module through a helper.

    ``hooks``: ``{"module:attribute": replacement}`` patched for the duration,
    for engines whose graph helpers do not call ``torch.cuda`` by name
    (transformers' ``accelerator_graph_*`` functions). ``modules``: modules that
    imported ``torch.cuda``'s objects themselves (``from torch.cuda import
    CUDAGraph``); their copies are swapped too. ``names`` (``id(tensor) ->
    name``) and ``module_names`` (``id(module) -> path``, see
    :func:`module_paths`) name static inputs and op sites. ``on_freed``:
    ``"raise"`` makes a replay that would read a storage freed after capture
    raise ``FreedInputRead``; ``"keep"`` replays the kept memory (for a harness
    that checks ``graph.dead_inputs()`` itself). ``sites=False`` skips the
    per-op source-line lookup (faster capture; sites then name modules only).
    ``on_unreplayed``: ``"raise"`` makes a read of a tensor a capture allocated,
    before that graph's first replay, raise ``PoisonedTensorError``;
    ``"uninitialised"`` lets it read the poison values, as a GPU read of memory
    no kernel wrote yet does (for an engine that runs eager code between graph
    segments while it captures, and discards what a capture-time run computed).
    """
    from graphcheck.capture import cuda_emulation

    with cuda_emulation.patched(
        hooks=hooks,
        modules=modules,
        names=names,
        module_names=module_names,
        on_freed=on_freed,
        sites=sites,
        on_unreplayed=on_unreplayed,
    ) as module:
        yield module


def observe_capture(names: Mapping[int, str] | None = None, *, label: str = "observed capture") -> Any:
    """A context manager to enter inside a real ``torch.cuda.graph`` capture.

    ``with observe_capture(names) as seen:`` ... then ``seen.inputs`` is a tuple
    of :class:`GraphInput` rows (name, tensor id, pointer, shape, dtype, weak
    reference, whether the graph writes it), one per pre-existing storage the
    captured ops touched. A host sync in the region raises graphcheck's
    ``HostSyncInCapture`` before it reaches the device.
    """
    from graphcheck.capture.capture_observer import CaptureObserver

    return CaptureObserver(names, label=label)


def __getattr__(name: str) -> Any:
    if name == "GraphInput":
        from graphcheck.capture.capture_observer import GraphInput

        return GraphInput
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def module_paths(root: Any, prefix: str = "") -> dict[int, str]:
    """``id(module) -> path`` for ``root`` and every submodule (``named_modules``), for op sites."""
    return {
        id(m): (f"{prefix}.{n}" if prefix and n else n or prefix or type(root).__name__)
        for n, m in root.named_modules()
    }


def tensor_paths(root: Any, prefix: str = "", *, depth: int = 4) -> dict[int, str]:
    """``id(tensor) -> attribute path`` of every tensor reachable from ``root``, for static-input names.

    Walks ``nn.Module`` parameters and buffers by their names, then object
    attributes, lists, tuples and dicts up to ``depth`` levels; the first path
    found for a tensor wins (:func:`named_tensors`, inverted).
    """
    return {id(t): path for path, t in named_tensors(root, prefix, depth=depth).items()}


def named_tensors(root: Any, prefix: str = "", *, depth: int = 4) -> dict[str, Any]:
    """``attribute path -> tensor`` for every tensor reachable from ``root``, each under the first
    path found (the walk of :func:`tensor_paths`): an adapter's ``buffer_tensors()``."""
    found: dict[str, Any] = {}
    named: set[int] = set()
    seen: set[int] = set()

    def add(path: str, t: Any) -> None:
        if id(t) not in named:
            named.add(id(t))
            found[path] = t

    def walk(obj: Any, path: str, level: int) -> None:
        if id(obj) in seen or level > depth:
            return
        seen.add(id(obj))
        if _is_tensor(obj):
            add(path, obj)
            return
        if hasattr(obj, "named_parameters") and hasattr(obj, "named_buffers"):
            for name, t in list(obj.named_parameters()) + list(obj.named_buffers()):
                add(_join(path, name), t)
        if isinstance(obj, dict):
            items = [(str(k), v) for k, v in obj.items()]
        elif isinstance(obj, (list, tuple)):
            items = [(f"[{i}]", v) for i, v in enumerate(obj)]
        elif hasattr(obj, "__dict__") and not isinstance(obj, type):
            items = [(k, v) for k, v in vars(obj).items() if not k.startswith("__")]
        else:
            return
        for key, value in items:
            walk(value, path + key if key.startswith("[") else _join(path, key), level + 1)

    walk(root, prefix, 0)
    return found


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _is_tensor(obj: Any) -> bool:
    return hasattr(obj, "data_ptr") and hasattr(obj, "untyped_storage") and not isinstance(obj, type)
