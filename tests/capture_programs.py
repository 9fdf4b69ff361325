"""Small capture programs written against plain ``torch.cuda`` graphs, one per bug class the emulator claims.

Each program takes a :class:`Env` and returns its observables as plain data
(lists of numbers, booleans, exception class names). The same program runs on
a GPU with real CUDA graphs (``Env("cuda")``) and on the CPU inside
``graphcheck.emulate.cuda_graphs()`` (``Env("cpu")``); the differential test
asserts both give the same observables. Values are small integers in float32,
exact on both devices.

The only thing a program asks of its environment beyond torch is
:meth:`Env.capture` (``torch.cuda.graph`` plus, on a GPU, the capture observer,
so static inputs are seen the same way on both) and :meth:`Env.inputs`.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Iterator

import torch

import graphcheck.emulate as emulate


class Env:
    """Where a program runs: ``"cuda"`` (real graphs) or ``"cpu"`` (inside ``cuda_graphs()``)."""

    def __init__(self, device: str) -> None:
        self.device = device
        self._tables: dict[int, tuple] = {}

    def tensor(self, values: list[float]) -> torch.Tensor:
        return torch.tensor(values, dtype=torch.float32, device=self.device)

    @contextmanager
    def capture(self, g: Any, *, pool: Any = None, names: dict[int, str] | None = None) -> Iterator[None]:
        """``torch.cuda.graph(g, pool=pool)``; on a GPU with the capture observer inside it."""
        if self.device == "cpu":
            with emulate.cuda_graphs(names=names):
                with torch.cuda.graph(g, pool=pool):
                    yield
            self._tables[id(g)] = g.graph.static_inputs, g.graph
            return
        with torch.cuda.graph(g, pool=pool):
            with emulate.observe_capture(names) as seen:
                yield
        self._tables[id(g)] = seen.inputs, None

    def inputs(self, g: Any) -> list[tuple[str | None, bool]]:
        """(name, alive) of each static input of ``g``, sorted by name."""
        rows, graph = self._tables[id(g)]
        if graph is not None:  # emulated: liveness from the graph's own weak references
            dead = {inp.tensor_id for inp in graph.dead_inputs()}
            return sorted(((r.name, r.tensor_id not in dead) for r in rows), key=str)
        return sorted(((r.name, r.alive()) for r in rows), key=str)

    def sync(self) -> None:
        if self.device == "cuda":
            torch.cuda.synchronize()


def _values(t: torch.Tensor) -> list[float]:
    return [float(v) for v in t.detach().cpu().tolist()]


def rebound_input(env: Env) -> dict[str, Any]:
    """A buffer rebound after capture is not seen; one updated in place is."""

    class State:
        pass

    s = State()
    s.x = env.tensor([1, 2, 3, 4])
    g = torch.cuda.CUDAGraph()
    with env.capture(g, names={id(s.x): "x"}):
        y = s.x * 2
    old = s.x
    s.x = env.tensor([10, 20, 30, 40])  # rebound: the graph still reads `old`
    g.replay()
    env.sync()
    after_rebind = _values(y)
    old.copy_(env.tensor([5, 6, 7, 8]))  # in place: seen
    g.replay()
    env.sync()
    return {"after_rebind": after_rebind, "after_copy": _values(y), "inputs": env.inputs(g)}


def freed_input(env: Env) -> dict[str, Any]:
    """A temporary the graph reads dies after capture: the static-input table says so."""
    keep = env.tensor([1, 1, 1, 1])
    tmp = env.tensor([1, 2, 3, 4])
    g = torch.cuda.CUDAGraph()
    with env.capture(g, names={id(tmp): "tmp", id(keep): "keep"}):
        y = tmp + keep
    before = env.inputs(g)
    del tmp
    return {"before": before, "after": env.inputs(g), "out_shape": list(y.shape)}


def frozen_host_scalar(env: Env) -> dict[str, Any]:
    """Python scalars and sizes read before capture are baked in."""
    x = env.tensor([1, 2, 3, 4, 5, 6])
    lengths = env.tensor([1, 2])
    n = int(lengths.sum().item())  # 3, read before capture
    scale = 2.0
    g = torch.cuda.CUDAGraph()
    with env.capture(g):
        y = x[:n] * scale
    scale = 3.0  # noqa: F841 - the graph keeps 2.0
    lengths.copy_(env.tensor([2, 2]))  # n would be 4 now; the graph keeps 3
    x.copy_(env.tensor([2, 2, 2, 2, 2, 2]))
    g.replay()
    env.sync()
    return {"y": _values(y), "shape": list(y.shape)}


def stale_padding(env: Env) -> dict[str, Any]:
    """A bucket graph over 4 rows: a batch of 2 leaves rows 2..3 with the previous step's values."""
    buf = env.tensor([0, 0, 0, 0])
    g = torch.cuda.CUDAGraph()
    with env.capture(g, names={id(buf): "buf"}):
        out = buf * 10 + 1
    buf.copy_(env.tensor([1, 2, 3, 4]))  # step 1: batch of 4
    g.replay()
    env.sync()
    step1 = _values(out)
    buf[:2].copy_(env.tensor([7, 8]))  # step 2: batch of 2, padding rows not cleared
    g.replay()
    env.sync()
    return {"step1": step1, "step2": _values(out)}


def capture_side_effect(env: Env) -> dict[str, Any]:
    """Capture runs no kernel: an in-place update in the region happens only on replay."""
    counter = env.tensor([0, 0])
    g = torch.cuda.CUDAGraph()
    with env.capture(g):
        counter.add_(1)
    env.sync()
    after_capture = _values(counter)
    g.replay()
    g.replay()
    env.sync()
    return {"after_capture": after_capture, "after_two_replays": _values(counter)}


def outputs_keep_storage(env: Env) -> dict[str, Any]:
    """Tensors the capture allocated are the graph's outputs: same address, new values per replay."""
    x = env.tensor([1, 2])
    g = torch.cuda.CUDAGraph()
    with env.capture(g):
        y = x + 1
    ptr = y.data_ptr()
    g.replay()
    env.sync()
    first = _values(y)
    x.copy_(env.tensor([5, 6]))
    g.replay()
    env.sync()
    return {"first": first, "second": _values(y), "same_address": y.data_ptr() == ptr}


def host_sync(env: Env) -> dict[str, Any]:
    """``.item()`` and ``nonzero`` inside a capture are refused."""
    x = env.tensor([1, 0, 3])
    outcomes = {}
    for name, body in (("item", lambda: x.sum().item()), ("nonzero", lambda: torch.nonzero(x))):
        g = torch.cuda.CUDAGraph()
        try:
            with env.capture(g):
                body()
            outcomes[name] = "captured"
        except Exception as exc:  # the observable is which error
            outcomes[name] = type(exc).__name__
    return outcomes


def rng(env: Env) -> dict[str, Any]:
    """Each replay draws fresh numbers; capture leaves the eager stream where it was."""
    torch.manual_seed(0)
    reference = _values(torch.rand(4, device=env.device))
    torch.manual_seed(0)
    g = torch.cuda.CUDAGraph()
    with env.capture(g):
        r = torch.rand(4, device=env.device)
    after_capture = _values(torch.rand(4, device=env.device))
    g.replay()
    env.sync()
    first = _values(r)
    g.replay()
    env.sync()
    second = _values(r)
    return {
        "capture_leaves_stream": after_capture == reference,
        "replays_differ": first != second,
        "in_unit_interval": all(0.0 <= v < 1.0 for v in first + second),
    }


def shared_pool(env: Env) -> dict[str, Any]:
    """Two graphs in one pool: the second may sit on the first's freed intermediate."""
    n = 1024  # 4 KiB: a whole allocator block on the GPU
    x = torch.full((n,), 1.0, device=env.device)
    g1 = torch.cuda.CUDAGraph()
    with env.capture(g1):
        h = x * 2  # an intermediate, freed at the end of the capture
        out1 = h + 1
        del h
    g2 = torch.cuda.CUDAGraph()
    with env.capture(g2, pool=g1.pool()):
        out2 = x * 5
    g2.replay()
    env.sync()
    before = float(out2[0])
    g1.replay()  # writes its intermediate: on out2's block if the pool placed it there
    env.sync()
    return {"out2_before": before, "out2_after": float(out2[0]), "out1": float(out1[0])}


def private_pools(env: Env) -> dict[str, Any]:
    """Without a shared pool the graphs never alias."""
    n = 1024
    x = torch.full((n,), 1.0, device=env.device)
    g1 = torch.cuda.CUDAGraph()
    with env.capture(g1):
        h = x * 2
        out1 = h + 1
        del h
    g2 = torch.cuda.CUDAGraph()
    with env.capture(g2):
        out2 = x * 5
    g2.replay()
    g1.replay()
    env.sync()
    return {"out2": float(out2[0]), "out1": float(out1[0])}


PROGRAMS: dict[str, Callable[[Env], dict[str, Any]]] = {
    fn.__name__: fn
    for fn in (
        rebound_input,
        freed_input,
        frozen_host_scalar,
        stale_padding,
        capture_side_effect,
        outputs_keep_storage,
        host_sync,
        rng,
        shared_pool,
        private_pools,
    )
}


def run_on_cpu(name: str) -> dict[str, Any]:
    """Program ``name`` on the CPU inside the emulator."""
    with emulate.cuda_graphs():
        return PROGRAMS[name](Env("cpu"))
