"""A throwaway package of engines outside the repository, as a user's project would have them.

``make_package(root)`` writes ``gc_thirdparty`` (the engines) and its ``dist-info`` (one
``graphcheck.engines`` entry point) under ``root``; put ``root`` on ``sys.path`` or
``PYTHONPATH`` and ``--engine thirdparty-clean`` / ``--engine gc_thirdparty:Rebinding``
name them. The engines wrap the built-in one through the adapter protocol only, the way an
adapter wraps a real engine: nothing of graphcheck's is patched.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE = "gc_thirdparty"
ENTRY_POINT = "thirdparty-clean"
#: The faults the clean wrapper declares (it passes them on to the engine it wraps).
DECLARED_FAULTS = ("stale-padding-rows", "seed-advance-outside-graph")

SOURCE = '''
"""Engines of a third-party project: wrappers of graphcheck's built-in engine."""

from graphcheck.backends.engine import Engine
from graphcheck.backends.engine.faults import FAULTS
from graphcheck.capabilities import EngineCapabilities


class CleanWrapper:
    """Delegates every member of the adapter protocol to the engine it wraps."""

    capabilities = EngineCapabilities(faults=tuple(FAULTS[name] for name in {faults!r}))

    def __init__(self, config, weights, *, device, use_graphs, faults):
        self.inner = Engine(config, weights, device=device, use_graphs=use_graphs, faults=faults)

    def submit(self, spec):
        self.inner.submit(spec)

    def abort(self, request_id):
        self.inner.abort(request_id)

    def step(self, t, overrides):
        return self.inner.step(t, overrides)

    @property
    def last_step_info(self):
        return self.inner.last_step_info

    @property
    def graphs(self):
        return self.inner.graphs

    @property
    def runner(self):
        return self.inner.runner

    @property
    def sizes(self):
        return self.inner.sizes

    def buffer_tensors(self):
        return self.inner.buffer_tensors()

    def memory_bytes(self):
        return self.inner.memory_bytes()

    def state_snapshot(self, *, during_step=False):
        return self.inner.state_snapshot(during_step=during_step)

    def reset(self):
        self.inner.reset()


class Rebinding(CleanWrapper):
    """After every step, rebinds infer_seed to a copy: a captured graph keeps reading the old storage."""

    capabilities = EngineCapabilities()

    def step(self, t, overrides):
        result = super().step(t, overrides)
        buffers = self.inner.buffers
        buffers.infer_seed = buffers.infer_seed.clone()
        return result


class NoDrafts(CleanWrapper):
    """The same engine, declared without MTP drafts: only NAIVE-mode scenarios apply."""

    capabilities = EngineCapabilities(drafts=False)


class NotAnEngine:
    """Has step but nothing else of the protocol."""

    def step(self, t, overrides):
        return None


def without_graphs(config, weights, *, device, use_graphs, faults):
    """A factory function whose engine lacks the ``graphs`` member."""

    class Partial(CleanWrapper):
        graphs = property(lambda self: (_ for _ in ()).throw(AttributeError("graphs")))

    return Partial(config, weights, device=device, use_graphs=use_graphs, faults=faults)
'''


def make_package(root: Path) -> Path:
    """Write the package and its distribution metadata under ``root``; returns ``root``."""
    package = root / PACKAGE
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text(SOURCE.format(faults=DECLARED_FAULTS), encoding="utf-8")
    info = root / f"{PACKAGE}-0.1.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {PACKAGE}\nVersion: 0.1\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(
        f"[graphcheck.engines]\n{ENTRY_POINT} = {PACKAGE}:CleanWrapper\n", encoding="utf-8"
    )
    return root
