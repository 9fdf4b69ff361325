"""Every module of graphcheck under its one name: the harness and the three folders mapped under it."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
#: The checkout's top-level folders that are graphcheck.reference, graphcheck.backends and graphcheck.suites.
MAPPED = ("reference", "backends", "suites")
#: Optional frameworks and extras: a module that cannot import without one that is missing is skipped.
OPTIONAL = frozenset({"torch", "paddle", "torch_npu", "redis", "pytest", "pytest_benchmark", "xdist", "vllm"})


def module_names() -> list[str]:
    """graphcheck.* found by pkgutil in the checkout's folders (``__main__`` modules left out: they run)."""
    names = ["graphcheck", *(f"graphcheck.{m}" for m in MAPPED)]
    for folder, prefix in (("graphcheck", "graphcheck."), *((m, f"graphcheck.{m}.") for m in MAPPED)):
        names += [info.name for info in pkgutil.walk_packages([str(ROOT / folder)], prefix)]
    return [n for n in names if n.rpartition(".")[2] != "__main__"]


def import_all() -> tuple[dict[str, ModuleType], dict[str, str]]:
    """Import every module: (name -> module, name -> the missing optional module it needed)."""
    modules: dict[str, ModuleType] = {}
    skipped: dict[str, str] = {}
    for name in module_names():
        try:
            modules[name] = importlib.import_module(name)
        except ModuleNotFoundError as err:
            if (err.name or "").split(".")[0] not in OPTIONAL:
                raise
            skipped[name] = err.name or ""
    return modules, skipped
