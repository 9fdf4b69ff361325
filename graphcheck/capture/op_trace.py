"""Eager kernel calls traced op by op, as an op-level graph replays them.

A kernel trace (``graphcheck.check.trace.KernelTrace``) sees one call per
``@kernel`` call an engine makes eagerly, and one call per recorded op when an
:class:`~.op_graphs.OpGraph` replays. To align the two engines of a lockstep
op by op, :class:`OpLevelTracer` wraps the trace: each direct kernel call runs
under a dispatch mode that hands every non-view aten op to the trace as its
own call, named as the replay names it (``kernel/aten.op.overload``, see
:func:`~.op_graphs.op_call`) with the engine's source line as its site. Calls a
graph replays pass through unchanged.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

from . import kernels
from .op_graphs import OpRecord, op_call
from .sites import OpSite, user_frame
from .torch_ops import _op_info, forwarding_mode


def _trace_op(tracer: Any, kernel: str, func: Any, args: tuple, kwargs: dict) -> Any:
    """Inside one traced kernel call: a non-view op reported to ``tracer`` as a call of its own."""
    if _op_info(func).is_view:
        return func(*args, **kwargs)
    file, line, function = user_frame(2)
    site = OpSite(None, kernel, file, line, function)
    result = tracer.trace_call(op_call(OpRecord(func, args, kwargs, None, site, False)), args, kwargs, graph=None)
    calls = getattr(tracer, "calls", None)
    if calls and file is not None:  # "called from": the kernel's line that issued the op
        calls[-1].caller = (function, file, line)
    return result


class OpLevelTracer:
    """A ``KernelTracer`` over ``inner`` that traces direct kernel calls op by op (see the module docstring)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def trace_call(self, fn: Callable[..., Any], args: tuple, kwargs: dict, *, graph: str | None) -> Any:
        if graph is not None:
            return self.inner.trace_call(fn, args, kwargs, graph=graph)
        kernel = getattr(fn, "__qualname__", repr(fn))
        with forwarding_mode(functools.partial(_trace_op, self.inner, kernel)):
            return kernels.run_nested(fn, args, kwargs)
