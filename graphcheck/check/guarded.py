"""An engine seen through the boundary: every member read and every call goes through ``boundary.call``.

``guard_factory(factory)`` builds engines wrapped in :class:`GuardedEngine`; the lockstep run only
ever holds those, so a ``sys.exit`` in any member of the adapter protocol (a step, a property, a
reset) is contained in one place instead of at every call site.
"""

from __future__ import annotations

from typing import Any, Callable

from graphcheck.check.boundary import call


class GuardedEngine:
    """``engine`` with every attribute read, and every call of a method read, inside the boundary."""

    __slots__ = ("_engine",)

    def __init__(self, engine: Any) -> None:
        object.__setattr__(self, "_engine", engine)

    @property
    def unguarded(self) -> Any:
        """The engine itself (for tools that must see its real object, such as a kernel trace)."""
        return self._engine

    def __getattr__(self, name: str) -> Any:
        value = call(name, getattr, self._engine, name)
        if callable(value) and not isinstance(value, type):
            return _GuardedMethod(name, value)
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        call(name, setattr, self._engine, name, value)

    def __repr__(self) -> str:
        return f"GuardedEngine({type(self._engine).__name__})"


class _GuardedMethod:
    __slots__ = ("_name", "_method")

    def __init__(self, name: str, method: Callable[..., Any]) -> None:
        self._name, self._method = name, method

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return call(f"{self._name}()", self._method, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:  # a callable value that is not a method (a runner object, say)
        return call(f"{self._name}.{name}", getattr, self._method, name)


def engine_type(engine: Any) -> str:
    """The class name of the engine ``engine`` is, or wraps."""
    inner = engine.unguarded if isinstance(engine, GuardedEngine) else engine
    return type(inner).__name__


def build_guarded(factory: Any, *args: Any, **kwargs: Any) -> GuardedEngine:
    """``factory(*args, **kwargs)`` inside the boundary, wrapped."""
    return GuardedEngine(call("the engine factory", factory, *args, **kwargs))


__all__ = ["GuardedEngine", "build_guarded", "engine_type"]
