"""What an engine's exception becomes in a lockstep run: a finding, the machine's limit, or the run's end.

* :class:`FailureLog` writes an engine failure into the outcome: a ``capture`` or
  ``crash`` divergence with its traceback and the engine's innermost frame
  (:func:`engine_frame`), an engine that tried to end graphcheck (``EngineAborted``: the
  run's engine error) or one that hung (``EngineHung``);
* :func:`is_out_of_memory` tells an allocation failure, which :func:`out_of_memory` turns
  into ``EngineOutOfMemory``: the machine's limit, never a divergence.
"""

from __future__ import annotations

import traceback
from pathlib import Path
from typing import Any

from graphcheck.check.boundary import EngineAborted
from graphcheck.check.diff import Divergence
from graphcheck.check.records import CheckOutcome, EngineOutOfMemory
from graphcheck.check.watchdog import EngineHung
from graphcheck.memory_estimate import DEFAULT_MAX_ENGINE_BYTES, MAX_ENGINE_MEMORY_ENV, MemoryEstimate, format_bytes

#: Exception type names (anywhere in the MRO) that are allocation failures: torch.OutOfMemoryError
#: (torch.cuda.OutOfMemoryError is the same class) and its device variants.
_OOM_TYPE_NAMES = frozenset({"OutOfMemoryError", "ResourceExhaustedError"})
#: Lower-case message fragments of allocation failures: torch's CPU allocator ("can't allocate
#: memory"), CUDA / NPU / XPU ("out of memory", CUBLAS_STATUS_ALLOC_FAILED), paddle
#: ("(ResourceExhausted) Fail to alloc memory"), C++ std::bad_alloc.
_OOM_MESSAGES = (
    "out of memory",
    "can't allocate memory",
    "cannot allocate memory",
    "could not allocate",
    "failed to allocate",
    "fail to alloc",
    "alloc_failed",
    "std::bad_alloc",
    "resourceexhausted",
    "memory allocation failed",
)


def is_out_of_memory(exc: BaseException | None) -> bool:
    """Whether ``exc``, or an exception it was raised from or while handling, is an allocation failure.

    MemoryError (NumPy's and Paddle's allocation errors are MemoryErrors), torch's
    OutOfMemoryError, or a RuntimeError (or any other) whose message says the allocator
    could not allocate.
    """
    for _ in range(8):  # a bounded walk of __cause__ / __context__
        if exc is None:
            return False
        if isinstance(exc, MemoryError) or any(c.__name__ in _OOM_TYPE_NAMES for c in type(exc).__mro__):
            return True
        try:
            text = str(exc)[:4000].lower()
        except Exception:
            text = ""
        if any(fragment in text for fragment in _OOM_MESSAGES):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def out_of_memory(found: MemoryEstimate | None, where: str, exc: BaseException) -> EngineOutOfMemory:
    """The EngineOutOfMemory of an allocation failure ``exc`` in ``where``, with the gate's estimate ``found``."""
    estimate = found.total if found is not None else None
    try:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    except Exception:
        first = ""
    first = first if len(first) <= 200 else first[:197] + "..."
    known = (
        f"the engine's estimate for this scenario is {format_bytes(estimate)}"
        if estimate is not None
        else "the engine gives no memory estimate"
    )
    message = (
        f"out of memory in {where}: {type(exc).__name__}: {first} ({known}; the memory gate "
        f"rejects estimates above {MAX_ENGINE_MEMORY_ENV}, default {format_bytes(DEFAULT_MAX_ENGINE_BYTES)}). "
        "Not a divergence of the engine"
    )
    detail = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return EngineOutOfMemory(message, estimate_bytes=estimate, where=where, detail=detail)


#: Libraries whose frames are never the engine's own code.
_LIBRARIES = frozenset({"torch", "torch_npu", "paddle", "numpy", "hypothesis", "_pytest", "pluggy", "importlib"})


def _harness_dirs() -> tuple[str, ...]:
    """Folders of the harness, the graph runners and what engines declare machinery (the built-in
    engine's array facade: ``graphcheck.capture.sites.add_machinery``): not the engine's own code."""
    from graphcheck.capture.sites import machinery_folders

    folders = (Path(__file__).resolve().parent, *(Path(p).resolve() for p in machinery_folders()))
    return tuple(str(p) for p in folders)


def engine_frame(exc: BaseException) -> tuple[str, str, int] | None:
    """(function, file, line) of the innermost frame of ``exc``'s traceback in the engine's own code."""
    harness = _harness_dirs()
    found = None
    for frame in traceback.extract_tb(exc.__traceback__):
        path = Path(frame.filename).resolve()
        if str(path).startswith(harness) or _LIBRARIES & set(path.parts) or not path.suffix == ".py":
            continue
        found = (frame.name, frame.filename, frame.lineno or 0)
    return found


class FailureLog:
    """Writes the engine's failures into ``outcome`` (``backend``: asked for a lost device after one)."""

    def __init__(self, outcome: CheckOutcome, backend: Any) -> None:
        self.outcome = outcome
        self.backend = backend
        self.emulated = bool(getattr(backend, "emulated", False))

    def failed(self, kind: str, t: int, where: str, exc: BaseException) -> None:
        """A ``capture`` or ``crash`` divergence at step ``t``: the engine raised ``exc`` in ``where``."""
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        if self.outcome.raised_at is None:
            self.outcome.raised_at = engine_frame(exc)
        self.outcome.divergences.append(
            Divergence(kind, t, where, "engine", None, f"{type(exc).__name__}: {exc}", detail=text)
        )
        probe = getattr(self.backend, "device_error", None)
        if not self.emulated and callable(probe):
            self.outcome.device_error = probe()

    def aborted(self, t: int, aborted: EngineAborted) -> None:
        """The engine raised what would end graphcheck: the run's engine error, reported as a crash at ``t``."""
        self.outcome.engine_error = f"{aborted.error} in {aborted.where}"
        if self.outcome.raised_at is None:
            self.outcome.raised_at = engine_frame(aborted.original)
        self.outcome.divergences.append(
            Divergence("crash", t, aborted.where, "engine", None, aborted.error, detail=aborted.detail)
        )

    def hung(self, t: int, hung: EngineHung) -> None:
        """A call into the engine ran past the hang limit: a ``hang`` finding at ``t`` (its engines dropped)."""
        self.outcome.hung = str(hung)
        self.outcome.divergences.append(
            Divergence(
                "hang", t, hung.where, "engine", f"done within {hung.limit_s:g} s", "still running", detail=str(hung)
            )
        )


__all__ = ["FailureLog", "engine_frame", "is_out_of_memory", "out_of_memory"]
