"""graphcheck: finds device-graph capture bugs in speculative (MTP) decoding engines.

Everything lives under this one import name: the harness here, the NumPy
reference as ``graphcheck.reference``, the engine and graph runners as
``graphcheck.backends`` and the suites as ``graphcheck.suites``. In the
repository those three are top-level folders beside ``graphcheck/``; an
installed graphcheck maps them under it (pyproject.toml, ``package-dir``).
"""

from importlib import import_module as _import_module
from pathlib import Path as _Path
from typing import Any as _Any

__version__ = "0.1.0"

#: What users import from ``graphcheck`` itself, and where it lives. Loaded on first use, so
#: ``import graphcheck`` stays cheap and imports no framework.
_PUBLIC = {
    # the vocabulary: scenarios and their validation
    "Scenario": "graphcheck.scenario",
    "EngineConfig": "graphcheck.scenario",
    "RequestSpec": "graphcheck.scenario",
    "AcceptOverride": "graphcheck.scenario",
    "ReasoningChange": "graphcheck.scenario",
    "StepResult": "graphcheck.step_result",
    "ScenarioError": "graphcheck.scenario",
    "load_scenario": "graphcheck.scenario",
    # drawing scenarios
    "scenarios": "graphcheck.strategies",
    "Suite": "graphcheck.search.suite_registry",
    # checking them
    "resolve": "graphcheck.capture.devices",
    "Checker": "graphcheck.check.checker",
    "check_scenario": "graphcheck.check.checker",
    "ScenarioDiverged": "graphcheck.check.checker",
    "resolve_engine": "graphcheck.check.engines",
    "EngineChoice": "graphcheck.check.engines",
    "CheckOutcome": "graphcheck.check.records",
    "Divergence": "graphcheck.check.diff",
    # checking your own engine
    "EngineAdapter": "graphcheck.adapter",
    "EngineFactory": "graphcheck.adapter",
    "StateSnapshots": "graphcheck.adapter",
    "EngineCapabilities": "graphcheck.capabilities",
    "Fault": "graphcheck.capabilities",
    "EngineState": "graphcheck.state",
    "BufferState": "graphcheck.state",
    "Localisation": "graphcheck.check.records",
    # errors
    "GraphcheckError": "graphcheck.errors",
    "InputError": "graphcheck.errors",
    "BackendUnavailableError": "graphcheck.errors",
    "ResourceError": "graphcheck.errors",
    "EngineError": "graphcheck.errors",
    "DivergenceError": "graphcheck.errors",
    "EngineOutOfMemory": "graphcheck.check.records",
}

__all__ = ["__version__", *_PUBLIC]


def __getattr__(name: str) -> _Any:
    if name in _PUBLIC:
        value = getattr(_import_module(_PUBLIC[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'graphcheck' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PUBLIC))


#: The folders that install as graphcheck.<name>, top-level folders of a source checkout.
MAPPED_PACKAGES = ("reference", "backends", "suites")


class _CheckoutFolders:
    """A meta path finder for a source checkout: ``graphcheck.<name>`` is ``<root>/<name>``, for exactly
    the ``MAPPED_PACKAGES``; their submodules are then found through their ``__path__`` as usual.

    Nothing else under ``<root>`` becomes part of graphcheck (no ``graphcheck.tests``, no
    ``graphcheck.graphcheck``), so every module has one name.
    """

    def __init__(self, root: _Path) -> None:
        self.root = root
        self.folders = {f"{__name__}.{name}": root / name for name in MAPPED_PACKAGES}

    def find_spec(self, fullname: str, path: _Any = None, target: _Any = None) -> _Any:
        folder = self.folders.get(fullname)
        if folder is None:
            return None
        from importlib.util import spec_from_file_location

        return spec_from_file_location(fullname, folder / "__init__.py", submodule_search_locations=[str(folder)])


def _find_checkout_packages() -> None:
    """Run from a source checkout (PYTHONPATH, or an editable install): find graphcheck.reference & co. beside us.

    Puts a :class:`_CheckoutFolders` first on ``sys.meta_path`` (ahead of any other install's
    finder), so ``graphcheck.reference`` is ``<root>/reference``, the module an installed
    graphcheck maps there. Only when those folders are there and not already installed inside
    this package; once per checkout.
    """
    import sys

    here = _Path(__file__).resolve().parent
    root = here.parent
    if all((root / name / "__init__.py").is_file() and not (here / name).exists() for name in MAPPED_PACKAGES):
        sys.meta_path[:] = [f for f in sys.meta_path if type(f).__name__ != _CheckoutFolders.__name__]
        sys.meta_path.insert(0, _CheckoutFolders(root))


_find_checkout_packages()
