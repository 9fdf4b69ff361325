"""Scripted hostile engines: wrappers of the built-in engine that exit, raise what is not an Exception,
break the adapter protocol or hang, at a chosen point, as an untrusted engine could.

``make_hostile(root)`` writes the package ``gc_hostile`` (and ``gc_hostile_exit_at_import``, whose import
calls ``sys.exit(0)``) under ``root``; put ``root`` on ``sys.path`` / ``PYTHONPATH`` and name an engine
as ``gc_hostile:NAME``. Each misbehaves from step ``AT`` on (1: the first step runs clean, so the
engines are built and captured first).
"""

from __future__ import annotations

from pathlib import Path

HOSTILE = "gc_hostile"
EXIT_AT_IMPORT = "gc_hostile_exit_at_import"

SOURCE = '''
"""Hostile engines for graphcheck's containment tests."""

import sys
import threading

from graphcheck.backends.engine import Engine
from graphcheck.capabilities import EngineCapabilities

AT = 1


class Wrapper:
    """Delegates every member of the adapter protocol to the built-in engine it wraps."""

    capabilities = EngineCapabilities()

    def __init__(self, config, weights, *, device, use_graphs, faults):
        self.inner = Engine(config, weights, device=device, use_graphs=use_graphs, faults=faults)
        self.use_graphs = use_graphs

    def submit(self, spec):
        self.inner.submit(spec)

    def abort(self, request_id):
        self.inner.abort(request_id)

    def step(self, t, overrides):
        if t >= AT and self.use_graphs:
            return self.misbehave(t, overrides)
        return self.inner.step(t, overrides)

    def misbehave(self, t, overrides):
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


class ExitZero(Wrapper):
    def misbehave(self, t, overrides):
        sys.exit(0)


class ExitMessage(Wrapper):
    def misbehave(self, t, overrides):
        raise SystemExit("the engine gives up")


class ExitBidi(Wrapper):
    def misbehave(self, t, overrides):
        raise SystemExit("evil\\u202etxt.exe\\n::error::forged")


class OwnKeyboardInterrupt(Wrapper):
    def misbehave(self, t, overrides):
        raise KeyboardInterrupt


class OwnBaseException(Wrapper):
    def misbehave(self, t, overrides):
        class Escape(BaseException):
            pass

        raise Escape("not an Exception")


def exit_in_factory(config, weights, *, device, use_graphs, faults):
    sys.exit(3)


class StepReturnsNone(Wrapper):
    def misbehave(self, t, overrides):
        self.inner.step(t, overrides)
        return None


class StepReturnsDict(Wrapper):
    def misbehave(self, t, overrides):
        self.inner.step(t, overrides)
        return {"step": t}


class BreaksLater(Wrapper):
    """Keeps the protocol for its first scenarios, then returns a dict from step(): a breach mid-run
    (counted per process, so each -j worker's engine breaks it after as many scenarios)."""

    steps = 0

    def misbehave(self, t, overrides):
        BreaksLater.steps += 1
        result = self.inner.step(t, overrides)
        return {"step": t} if BreaksLater.steps > 40 else result


class MemoryRaises(Wrapper):
    def memory_bytes(self):
        if self.use_graphs:
            raise RuntimeError("cannot count")
        return self.inner.memory_bytes()


class SizesRaise(Wrapper):
    @property
    def sizes(self):
        raise RuntimeError("no sizes")


class EstimateAsText(Wrapper):
    @staticmethod
    def memory_estimate(config, requests):
        return "big"


class MemoryAsText(Wrapper):
    def memory_bytes(self):
        return "lots"


class UndeclaredBucket(Wrapper):
    @property
    def last_step_info(self):
        info = self.inner.last_step_info
        if info is not None and info.used_graph:
            import dataclasses

            return dataclasses.replace(info, bucket=999)
        return info


class _RaisingCapabilities:
    """A factory object whose capabilities raise."""

    @property
    def capabilities(self):
        raise RuntimeError("no capabilities today")

    def __call__(self, config, weights, *, device, use_graphs, faults):
        return Wrapper(config, weights, device=device, use_graphs=use_graphs, faults=faults)


raising_capabilities = _RaisingCapabilities()


def __getattr__(name):
    if name == "Dynamic":
        raise RuntimeError("the module cannot say")
    raise AttributeError(name)


def returns_none(config, weights, *, device, use_graphs, faults):
    return None


class Hangs(Wrapper):
    def misbehave(self, t, overrides):
        threading.Event().wait()


class HangsOutsidePython(Wrapper):
    """Hangs where no signal handler can run, as a C++ op would: every signal to this thread is blocked."""

    def misbehave(self, t, overrides):
        import signal

        signal.pthread_sigmask(signal.SIG_BLOCK, set(signal.Signals))
        threading.Event().wait()


class HangsInReset(Wrapper):
    def reset(self):
        threading.Event().wait()
'''

EXIT_SOURCE = """
import sys

sys.exit(0)
"""


def make_hostile(root: Path) -> Path:
    """Write the packages under ``root``; returns ``root``."""
    package = root / HOSTILE
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text(SOURCE, encoding="utf-8")
    (root / f"{EXIT_AT_IMPORT}.py").write_text(EXIT_SOURCE, encoding="utf-8")
    return root
