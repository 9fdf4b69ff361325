"""An engine seen through the boundary: every member read and every call goes through ``boundary.call``,
and every value it returns is checked against what the adapter protocol promises (``promises``).

``build_guarded(label, factory, ...)`` builds an engine wrapped in :class:`GuardedEngine`; the lockstep
run only ever holds those, so a ``sys.exit`` in any member of the protocol (a step, a property, a
reset) and a broken promise (a step that returns None) are dealt with in one place instead of at
every call site. The step report an engine returns is wrapped too (:class:`Guarded`): its properties
are engine code.
"""

from __future__ import annotations

from typing import Any, Callable

from graphcheck.check.boundary import call
from graphcheck.check.promises import EngineProtocolError, kept


class Guarded:
    """``target`` (an object the engine returned) with every attribute read inside the boundary."""

    __slots__ = ("_target", "_label")

    def __init__(self, target: Any, label: str) -> None:
        object.__setattr__(self, "_target", target)
        object.__setattr__(self, "_label", label)

    @property
    def unguarded(self) -> Any:
        """The object itself (for tools that must see its real type, such as a kernel trace)."""
        return self._target

    def __getattr__(self, name: str) -> Any:
        return call(name, getattr, self._target, name)

    def __setattr__(self, name: str, value: Any) -> None:
        call(name, setattr, self._target, name, value)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({type(self._target).__name__})"


class GuardedEngine(Guarded):
    """An engine: each member read inside the boundary, each value (a method's result) checked."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        value = call(name, getattr, self._target, name)
        if callable(value) and not isinstance(value, type):
            return _GuardedMethod(self._label, name, value)
        value = call(name, kept, self._label, name, value)
        return Guarded(value, self._label) if name == "last_step_info" and value is not None else value


class _GuardedMethod:
    __slots__ = ("_label", "_name", "_method")

    def __init__(self, label: str, name: str, method: Callable[..., Any]) -> None:
        self._label, self._name, self._method = label, name, method

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        where = f"{self._name}()"
        return call(where, kept, self._label, self._name, call(where, self._method, *args, **kwargs))

    def __getattr__(self, name: str) -> Any:  # a callable value that is not a method (a runner object, say)
        return call(f"{self._name}.{name}", getattr, self._method, name)


def engine_type(engine: Any) -> str:
    """The class name of the engine ``engine`` is, or wraps."""
    inner = engine.unguarded if isinstance(engine, Guarded) else engine
    return type(inner).__name__


def build_guarded(label: str, factory: Any, *args: Any, **kwargs: Any) -> GuardedEngine:
    """``factory(*args, **kwargs)`` inside the boundary, wrapped; a factory that returns None breaks the protocol."""
    engine = call("the engine factory", factory, *args, **kwargs)
    if engine is None:
        raise EngineProtocolError(label, "the engine factory", "returned None, expected an engine")
    return GuardedEngine(engine, label)


__all__ = ["Guarded", "GuardedEngine", "build_guarded", "engine_type"]
