"""The ``--seeds`` catalog's index.html: one self-contained page (``catalog_seeds.html.j2``), a column per seed."""

from __future__ import annotations

import functools

import jinja2

from graphcheck.catalog.seeds import SeedsResult
from graphcheck.report.catalog_model import CatalogInfo
from graphcheck.report.html import environment

TEMPLATE = "catalog_seeds.html.j2"


@functools.cache
def _page() -> jinja2.Template:
    """The seeds catalog's template, compiled once a process."""
    env = environment()
    env.filters["percent"] = lambda rate: f"{100 * rate:.0f}%"
    env.filters["maybe"] = lambda value, fmt="{:g}": "—" if value is None else fmt.format(value)
    env.filters["seeds"] = lambda seeds: ", ".join(map(str, seeds)) or "—"
    return env.get_template(TEMPLATE)


def render_seeds_catalog(result: SeedsResult, info: CatalogInfo) -> str:
    return _page().render(result=result, summary=result.summary, info=info)


__all__ = ["render_seeds_catalog"]
