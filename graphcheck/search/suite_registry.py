"""Where ``graphcheck run --suite NAME`` finds its suites: graphcheck's own, then plugins'.

A suite is a named scenario strategy plus the bug classes it targets
(:class:`Suite`). graphcheck's own live in the top-level ``suites`` package,
which builds on the harness; the harness finds them by name, as pytest finds
its default plugins, so nothing in ``graphcheck`` imports ``suites`` (the
arrows point down).

Other packages add suites through the ``graphcheck.suites`` entry point group;
the entry point names a ``Suite``, an iterable of them or a mapping of name to
``Suite``::

    [project.entry-points."graphcheck.suites"]
    my-engine = "my_engine_checks.suites:SUITES"

They run after graphcheck's own, in entry point name order. Two suites with
one name are a usage error that names both sources.
"""

from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass
from importlib import metadata
from typing import Any, Callable, Iterable, Mapping

from graphcheck.errors import InputError

ENTRY_POINT_GROUP = "graphcheck.suites"
#: graphcheck's own suites, found by name (``module:attribute``).
BUILTIN_SUITES = "graphcheck.suites:SUITES"


@dataclass(frozen=True)
class Suite:
    """A focused scenario strategy and the bug classes (docs/bug-classes.md numbers) it targets.

    ``requires``: capabilities (``graphcheck.capabilities.REQUIREMENTS``) an engine must
    declare for the suite to mean anything; on an engine without one it is skipped.
    """

    name: str
    description: str  # one line
    strategy: Callable[[], Any]  # () -> SearchStrategy[Scenario]
    bug_classes: tuple[int, ...]
    requires: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        from graphcheck.capabilities import REQUIREMENTS

        unknown = [r for r in self.requires if r not in REQUIREMENTS]
        if unknown:
            raise InputError(
                f"suite {self.name!r} requires unknown capabilities {unknown}; known: {list(REQUIREMENTS)}"
            )


def _load(spec: str) -> Any:
    module, _, attribute = spec.partition(":")
    return getattr(importlib.import_module(module), attribute)


def _as_suites(value: Any, source: str) -> list[Suite]:
    if isinstance(value, Suite):
        return [value]
    if isinstance(value, Mapping):
        value = value.values()
    items = list(value) if isinstance(value, Iterable) else [value]
    if not all(isinstance(s, Suite) for s in items):
        raise InputError(f"suites from {source}: expected a Suite, an iterable of Suites or a mapping of them")
    return items


def collect(sources: Iterable[tuple[str, Any]]) -> dict[str, Suite]:
    """Suites by name, in source order, from ``(source, value)`` pairs; a repeated name is a InputError."""
    found: dict[str, Suite] = {}
    origin: dict[str, str] = {}
    for source, value in sources:
        for suite in _as_suites(value, source):
            if suite.name in found:
                raise InputError(f"suite {suite.name!r} is defined twice: by {origin[suite.name]} and by {source}")
            found[suite.name], origin[suite.name] = suite, source
    return found


def _plugin_sources() -> Iterable[tuple[str, Any]]:
    points = sorted(metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda p: p.name)
    for point in points:
        if point.value == BUILTIN_SUITES:
            continue
        try:
            value = point.load()
        except Exception as err:  # a broken plugin is the user's to fix: say which and why
            raise InputError(f"suites entry point {point.name} ({point.value}) failed to load: {err}") from None
        yield f"entry point {point.name} ({point.value})", value


@functools.cache
def load_suites() -> Mapping[str, Suite]:
    """Every suite ``graphcheck run`` knows, in run order: graphcheck's own, then plugins'."""
    return collect([(BUILTIN_SUITES, _load(BUILTIN_SUITES)), *_plugin_sources()])
