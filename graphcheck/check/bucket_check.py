"""The graph engine's bucket choice, judged against a declared padding policy.

For an engine that declares ``EngineCapabilities.buckets`` (``graphcheck.buckets``)
every step that replayed (or captured) a graph is checked three ways:

* **padding**: graphcheck pads the step's real sizes with the policy itself and
  compares with the sizes the engine replayed (``StepReport.padded_sizes``);
* **host values**: the graph replayed was captured with certain host values
  (sizes, flags baked into kernel arguments: ``CapturedGraph.host_values``); the
  step needs its own (``StepReport.host_values``). A difference means the graph's
  key misses a value the capture froze: the step replays a graph made for another
  shape (the class of transformers PR #45323);
* **bounded graphs**: graphs are captured lazily, one per key, so their number
  must stay within what the policy can ask for (:meth:`BucketPolicy.max_graphs`),
  once per graph set the engine keeps (``StepReport.graph_sets``).

A step that ran eagerly is checked too when the policy is ``keyed``: if a graph
of its padded key was captured, the step should have replayed it (a wasted
graph: right tokens, lost speed).

Engines without a declared policy keep graphcheck's own (the smallest capture
size >= R on decode-only steps: ``lockstep.expected_bucket``).
"""

from __future__ import annotations

from typing import Any, Mapping

from graphcheck.adapter import GraphExtras, ReportExtras
from graphcheck.buckets import BucketPolicy, PolicyError
from graphcheck.check.diff import Divergence

PAIR = "policy vs graph engine"


def policy_values(
    config_options: tuple[tuple[str, int], ...], limits: Mapping[str, int] | None, options: tuple[Any, ...] = ()
) -> dict[str, int]:
    """What a policy's named values resolve against: the scenario's engine options (an option it does
    not set takes its first choice from ``options``, the engine's declared ``EngineOption``s), then the
    engine's limits."""
    values = dict(limits or {})
    values.update({o.name: o.choices[0] for o in options})
    values.update(dict(config_options))
    return values


def check_padding(policy: BucketPolicy, step: int, report: ReportExtras, values: Mapping[str, int]) -> list[Divergence]:
    """Policy-padded real sizes vs the sizes the engine replayed, on a step that used a graph."""
    path, real, padded = report.path, report.real_sizes, report.padded_sizes
    try:
        want = policy.padded(path, real, values)
    except (KeyError, PolicyError) as exc:
        detail = str(exc).strip("'\"")
        return [
            Divergence("shape", step, "bucket", PAIR, "a path and real sizes the policy knows", path, detail=detail)
        ]
    found = []
    for dim, size in want.items():
        if padded.get(dim) != size:
            found.append(
                Divergence(
                    "shape",
                    step,
                    f"padded {dim}",
                    PAIR,
                    size,
                    padded.get(dim),
                    detail=f"path {path}: real {dim}={real[dim]} pads to {size} under the engine's declared policy",
                )
            )
    return found


def check_unused_graph(
    policy: BucketPolicy, step: int, report: ReportExtras, graphs: Mapping[Any, Any], values: Mapping[str, int]
) -> list[Divergence]:
    """On a step that ran eagerly: a captured graph of its padded key that it should have replayed."""
    path, real = report.path, report.real_sizes
    if not policy.keyed or path is None or not real:
        return []
    try:
        key = policy.key_of(policy.padded(path, real, values))
    except (KeyError, PolicyError):
        return []
    if key not in graphs:
        return []
    detail = f"path {path}: real sizes {real} pad to {key!r}, whose graph was captured, yet the step ran eagerly"
    return [Divergence("shape", step, "graph dispatch", PAIR, key, None, detail=detail + " (a wasted graph)")]


def check_host_values(step: int, report: ReportExtras, graph: GraphExtras, label: str) -> list[Divergence]:
    """The host values the replayed graph froze at capture vs those this step needs."""
    frozen, needed = graph.host_values, report.host_values
    if not frozen or not needed:
        return []
    found = []
    for name in sorted(set(frozen) | set(needed)):
        if frozen.get(name) != needed.get(name):
            found.append(
                Divergence(
                    "shape",
                    step,
                    f"host value {name}",
                    "graph capture vs replay",
                    needed.get(name),
                    frozen.get(name),
                    detail=f"{label} was captured with {name}={frozen.get(name)!r}; this step needs "
                    f"{needed.get(name)!r}: the graph's key misses a value its capture froze",
                )
            )
    return found


def check_graph_count(
    policy: BucketPolicy, step: int, graphs: int, values: Mapping[str, int], sets: int = 1
) -> list[Divergence]:
    """The number of graphs captured so far vs the most the policy can ask for, times the engine's
    independent graph sets (``StepReport.graph_sets``: two for a double-buffered engine)."""
    try:
        shapes = policy.max_graphs(values)
    except PolicyError:
        return []
    if shapes is None:
        return []
    bound = shapes * max(1, sets)
    if graphs <= bound:
        return []
    per_set = f" in each of {sets} graph sets" if sets > 1 else ""
    detail = f"{graphs} graphs captured; the padding policy has at most {shapes} distinct shapes{per_set}"
    return [Divergence("memory", step, "captured graphs", PAIR, f"<= {bound}", graphs, detail=detail)]


__all__ = ["check_graph_count", "check_host_values", "check_padding", "check_unused_graph", "policy_values"]
