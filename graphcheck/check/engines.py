"""Which engine a run checks: ``--engine SPEC`` resolved to a factory and what it declares.

SPEC names an engine factory as pytest names plugins:

* ``builtin`` (the default): graphcheck's own MTP engine, ``graphcheck.backends.engine.Engine``;
* the name of an engine that ships with graphcheck (``builtin-torch-cuda``,
  ``hf-cb``, ``vllm``: :data:`SHIPPED`), which resolves whether graphcheck is
  installed or run from a checkout on ``PYTHONPATH`` (no entry points there);
* a name registered under the ``graphcheck.engines`` entry point group by an
  installed package::

      [project.entry-points."graphcheck.engines"]
      my-engine = "my_engine.graphcheck_adapter:MyEngine"

* ``package.module:attribute``: imported directly (the module must be importable:
  installed, or on ``PYTHONPATH``).

The factory is what the adapter protocol calls ``EngineFactory``
(docs/adapters.md): ``factory(config, weights, *, device, use_graphs, faults)``.
It may carry ``capabilities`` (``graphcheck.capabilities.EngineCapabilities``);
without it the engine is taken to support every config value and no faults.

Resolving checks what can be checked without building an engine: that SPEC
imports, names a callable, and (for a class) that the protocol's methods are
there. The members an engine sets in its constructor are checked on the first
engine built (:func:`require_adapter`). Every failure is one
:class:`EngineSpecError` line naming what is missing.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
from dataclasses import dataclass
from importlib import metadata
from typing import Any, ContextManager

from graphcheck.capabilities import EngineCapabilities, check_name, optional_members
from graphcheck.check.boundary import EngineAborted, call, describe
from graphcheck.errors import BackendUnavailableError, InputError

ENTRY_POINT_GROUP = "graphcheck.engines"
BUILTIN = "builtin"
_BUILTIN_TARGET = "graphcheck.backends.engine:Engine"
#: The engines that ship with graphcheck, by name: what pyproject.toml registers as entry points, known
#: here too so that a checkout that was never installed resolves them. Their modules import on use only.
SHIPPED = {
    "builtin-torch-cuda": "graphcheck.engines.torch_cuda:Engine",
    "hf-cb": "graphcheck.engines.hf_cb:Engine",
    "vllm": "graphcheck.engines.vllm:Engine",
}

#: The protocol's methods (graphcheck.adapter.EngineAdapter), checked on a factory class.
ADAPTER_METHODS = ("submit", "abort", "step", "buffer_tensors", "memory_bytes")
#: The protocol's data members, set by an engine's constructor: checked on the first engine built.
ADAPTER_ATTRIBUTES = ("last_step_info", "graphs", "runner", "sizes")


class EngineSpecError(InputError):
    """``--engine SPEC`` does not import, or names no engine the adapter protocol can drive."""


@dataclass(frozen=True)
class EngineChoice:
    """A resolved ``--engine``: the SPEC as given (what reports record), the factory, its capabilities."""

    spec: str
    factory: Any
    capabilities: EngineCapabilities
    source: str  # where the factory came from: "built-in", "entry point NAME (VALUE)", "MODULE:ATTR"

    @property
    def builtin(self) -> bool:
        return self.spec == BUILTIN

    def optional_members(self) -> tuple[str, ...]:
        """The optional adapter members the factory's class defines (an engine may still add others)."""
        return optional_members(self.factory)

    def graphs_on(self, backend: Any) -> ContextManager[Any]:
        """What building and stepping this engine on ``backend`` runs inside.

        An engine that captures with ``torch.cuda`` itself (``graph_api="torch.cuda"``) on a CPU
        backend runs inside ``graphcheck.emulate.cuda_graphs()`` (freed inputs kept readable: the
        lockstep's address audit reports them before a replay); anything else needs nothing.
        """
        if self.capabilities.graph_api != "torch.cuda" or getattr(backend, "device", None) != "cpu":
            return contextlib.nullcontext()
        from graphcheck.capture.cuda_emulation import patched

        return patched(on_freed="keep")

    def __repr__(self) -> str:  # short: Hypothesis and pytest print it
        return f"EngineChoice({self.spec})"


def _import_target(target: str, spec: str) -> Any:
    module_name, _, attribute = target.partition(":")
    if not module_name or not attribute:
        raise EngineSpecError(
            f"--engine {spec}: expected 'builtin', a name registered under {ENTRY_POINT_GROUP!r} "
            "or package.module:attribute"
        )
    try:
        module = call(f"the import of {module_name}", importlib.import_module, module_name)
    except (EngineAborted, BackendUnavailableError):  # a missing framework says so itself (exit 3)
        raise
    except Exception as err:  # the user's module: say why it did not import, in one line
        raise EngineSpecError(f"--engine {spec}: cannot import {module_name}: {type(err).__name__}: {err}") from None
    value: Any = module
    for part in attribute.split("."):
        try:
            value = call(f"the lookup of {attribute}", getattr, value, part)
        except AttributeError:
            raise EngineSpecError(f"--engine {spec}: {module_name} has no attribute {attribute}") from None
        except EngineAborted:
            raise
        except Exception as err:  # a module __getattr__ that raises something else: the engine's, in one line
            raise EngineSpecError(
                f"--engine {spec}: looking up {attribute} in {module_name} raised {describe(err)}"
            ) from None
    return value


def _named(name: str) -> tuple[str, str] | None:
    """(target, source) of an engine name: an installed entry point, else one graphcheck ships; None if neither."""
    found = [p for p in metadata.entry_points(group=ENTRY_POINT_GROUP) if p.name == name]
    if found:
        return found[0].value, f"entry point {name} ({found[0].value})"
    if name in SHIPPED:
        return SHIPPED[name], f"shipped with graphcheck ({SHIPPED[name]})"
    return None


def registered_engines() -> dict[str, str]:
    """Every engine name SPEC takes -> what it names: ``builtin`` first, then the shipped and registered ones."""
    points = {p.name: p.value for p in metadata.entry_points(group=ENTRY_POINT_GROUP) if p.name != BUILTIN}
    named = {**SHIPPED, **points}
    return {BUILTIN: _BUILTIN_TARGET, **{name: named[name] for name in sorted(named)}}


def missing_methods(factory: Any) -> tuple[str, ...]:
    """The protocol methods a factory *class* lacks.

    A factory function, and a class that delegates through ``__getattr__``, are
    checked on the engine they build (:func:`require_adapter`) instead.
    """
    if not inspect.isclass(factory) or hasattr(factory, "__getattr__"):
        return ()
    return tuple(name for name in ADAPTER_METHODS if not callable(getattr(factory, name, None)))


def _capabilities(factory: Any, spec: str) -> EngineCapabilities:
    try:
        declared = call("its capabilities", getattr, factory, "capabilities", None)
    except EngineAborted:
        raise
    except Exception as err:
        raise EngineSpecError(f"--engine {spec}: reading its capabilities raised {describe(err)}") from None
    if declared is None:
        return EngineCapabilities()
    if not isinstance(declared, EngineCapabilities):
        raise EngineSpecError(
            f"--engine {spec}: its capabilities must be a graphcheck.capabilities.EngineCapabilities, "
            f"got {type(declared).__name__}"
        )
    try:  # checked when built; again here, in case the engine changed them since
        for name in (*(f.name for f in declared.faults), *(o.name for o in declared.options)):
            check_name("a fault or option", name)
    except ValueError as err:
        raise EngineSpecError(f"--engine {spec}: its capabilities declare a bad name: {err}") from None
    return declared


def resolve_engine(spec: str | None = None) -> EngineChoice:
    """The engine ``spec`` names (None: ``builtin``); :class:`EngineSpecError` when it cannot be used."""
    spec = BUILTIN if spec is None else spec.strip()  # an empty SPEC is a mistake, not the default
    if not spec or len(spec) > 300 or not spec.isprintable():
        raise EngineSpecError("--engine: expected 'builtin', a registered engine name or package.module:attribute")
    if spec == BUILTIN:
        factory, source = _import_target(_BUILTIN_TARGET, spec), "built-in"
    elif ":" in spec:
        factory, source = _import_target(spec, spec), spec
    else:
        named = _named(spec)
        if named is None:
            known = ", ".join(registered_engines())
            raise EngineSpecError(
                f"--engine {spec}: no engine of that name (shipped or registered under {ENTRY_POINT_GROUP!r}: "
                f"{known}); or name one as package.module:attribute"
            )
        factory, source = _import_target(named[0], spec), named[1]
    return _choice(spec, factory, source, f"--engine {spec}")


def builtin_factory() -> Any:
    """The built-in engine's factory, resolved from its SPEC like any ``--engine`` (what a lockstep run
    or a localisation builds when it is given no factory): graphcheck.check never imports it by name."""
    return resolve_engine(BUILTIN).factory


def engine_from_factory(factory: Any) -> EngineChoice:
    """The EngineChoice of a factory object (the pytest plugin's ``graphcheck_engine_factory`` override).

    Its SPEC is ``module:qualname``, which ``--engine`` resolves back to it when the
    module is importable; the built-in engine's is ``builtin``.
    """
    builtin = resolve_engine(BUILTIN)
    if factory is builtin.factory:
        return builtin
    spec = f"{getattr(factory, '__module__', '?')}:{getattr(factory, '__qualname__', type(factory).__qualname__)}"
    return _choice(spec, factory, spec, f"engine factory {spec}")


def _choice(spec: str, factory: Any, source: str, said: str) -> EngineChoice:
    """The EngineChoice of ``factory`` once it is callable and (a class) has the protocol's methods."""
    if not callable(factory):
        raise EngineSpecError(f"{said}: {source} is a {type(factory).__name__}, not an engine factory")
    missing = missing_methods(factory)
    if missing:
        raise EngineSpecError(
            f"{said}: {getattr(factory, '__qualname__', source)} does not satisfy the engine adapter "
            f"protocol: no method {', '.join(missing)} (docs/adapters.md)"
        )
    wrong = _signature_problem(factory)
    if wrong is not None:
        raise EngineSpecError(
            f"{said}: {source} is not an engine factory: it cannot be called as "
            f"factory(config, weights, *, device, use_graphs, faults) ({wrong})"
        )
    return EngineChoice(spec, factory, _capabilities(factory, spec), source)


def _signature_problem(factory: Any) -> str | None:
    """Why ``factory`` cannot take the factory's arguments; None when it can, or when Python cannot tell."""
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):  # a builtin or C callable without a signature: checked on its first call
        return None
    try:
        signature.bind(None, None, device=None, use_graphs=False, faults=())
    except TypeError as err:
        return str(err)
    return None


def require_adapter(engine: Any, spec: str) -> None:
    """Raise :class:`EngineSpecError` when ``engine``, built by ``--engine spec``, lacks a member of the protocol."""
    missing = [n for n in ADAPTER_METHODS if not callable(getattr(engine, n, None))]
    missing += [n for n in ADAPTER_ATTRIBUTES if not hasattr(engine, n)]
    if missing:
        raise EngineSpecError(
            f"--engine {spec}: the engine it built ({type(engine).__name__}) does not satisfy the engine adapter "
            f"protocol: no member {', '.join(missing)} (docs/adapters.md)"
        )


__all__ = [
    "ADAPTER_ATTRIBUTES",
    "ADAPTER_METHODS",
    "BUILTIN",
    "ENTRY_POINT_GROUP",
    "SHIPPED",
    "EngineChoice",
    "EngineSpecError",
    "builtin_factory",
    "engine_from_factory",
    "missing_methods",
    "registered_engines",
    "require_adapter",
    "resolve_engine",
]
