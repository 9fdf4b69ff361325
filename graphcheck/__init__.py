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
    "resolve": "graphcheck.backends.devices",
    "check_scenario": "graphcheck.check.lockstep",
    "LockstepRunner": "graphcheck.check.runner",
    "ScenarioDiverged": "graphcheck.check.runner",
    "CheckOutcome": "graphcheck.check.records",
    "Divergence": "graphcheck.check.diff",
    # checking your own engine
    "EngineAdapter": "graphcheck.adapter",
    "EngineFactory": "graphcheck.adapter",
    "StateSnapshots": "graphcheck.adapter",
    "EngineState": "graphcheck.state",
    "BufferState": "graphcheck.state",
    "Localisation": "graphcheck.check.records",
    # errors
    "GraphcheckError": "graphcheck.errors",
    "InputError": "graphcheck.errors",
    "BackendUnavailableError": "graphcheck.errors",
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


def _find_checkout_packages() -> None:
    """Run from a source checkout (PYTHONPATH, no install): find graphcheck.reference & co. beside us.

    Adds the checkout's root to this package's ``__path__``, so ``graphcheck.reference``
    is ``<root>/reference``, the module an installed graphcheck maps there. Only
    when those folders are there and not already installed inside this package.
    """
    here = _Path(__file__).resolve().parent
    root = here.parent
    if all((root / name / "__init__.py").is_file() and not (here / name).exists() for name in MAPPED_PACKAGES):
        __path__.append(str(root))  # noqa: F821  (a package's __path__)


_find_checkout_packages()
