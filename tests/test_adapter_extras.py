"""An engine's optional members, typed and read in one place (graphcheck.adapter's *_extras functions)."""

from __future__ import annotations

import dataclasses
import typing
from types import SimpleNamespace

import pytest

from graphcheck.adapter import (
    REPORT_FIELDS,
    EngineExtras,
    FactoryExtras,
    GraphExtras,
    ReportExtras,
    SchedulingStepReport,
    StepReport,
    engine_extras,
    factory_extras,
    graph_extras,
    report_extras,
)
from graphcheck.capabilities import EngineCapabilities
from graphcheck.memory_estimate import MemoryEstimate, NamedEstimate
from graphcheck.schedule import Schedule


def test_the_eight_optional_report_fields_are_typed_members_of_a_protocol() -> None:
    assert REPORT_FIELDS == (
        "schedule",
        "path",
        "real_sizes",
        "padded_sizes",
        "limits",
        "host_values",
        "captured",
        "graph_sets",
    )
    hints = typing.get_type_hints(ReportExtras)
    assert set(hints) == set(REPORT_FIELDS) and hints["captured"] is bool and hints["graph_sets"] is int
    required = {n for n in dir(StepReport) if not n.startswith("_")}
    optional = {n for n in dir(SchedulingStepReport) if not n.startswith("_")} - required
    assert optional == set(REPORT_FIELDS), "SchedulingStepReport declares exactly the optional fields"


def test_a_report_without_optional_fields_reads_as_the_defaults() -> None:
    assert report_extras(None) == ReportExtras()
    plain = SimpleNamespace(bucket=1, used_graph=True)  # a StepReport of the required fields only
    assert report_extras(plain) == ReportExtras(
        schedule=None,
        path=None,
        real_sizes={},
        padded_sizes={},
        limits=None,
        host_values=None,
        captured=False,
        graph_sets=1,
    )


def test_a_report_with_every_optional_field_reads_each_once() -> None:
    schedule = Schedule(runs=())
    info = SimpleNamespace(
        schedule=schedule,
        path="decode",
        real_sizes={"tokens": 3},
        padded_sizes={"tokens": 4},
        limits={"max_tokens": 8},
        host_values={"q": 4},
        captured=1,
        graph_sets=2,
    )
    found = report_extras(info)
    assert found.schedule is schedule and found.path == "decode" and found.graph_sets == 2
    assert found.real_sizes == {"tokens": 3} and found.padded_sizes == {"tokens": 4}
    assert found.limits == {"max_tokens": 8} and found.host_values == {"q": 4}
    assert found.captured is True  # its truth value
    info.real_sizes = {"tokens": 5}  # a copy: the record does not follow the engine's later changes
    assert found.real_sizes == {"tokens": 3}
    assert report_extras(SimpleNamespace(real_sizes=None, padded_sizes=None)).real_sizes == {}
    with pytest.raises(dataclasses.FrozenInstanceError):
        found.path = "other"  # type: ignore[misc]


class _Bare:
    sizes = SimpleNamespace(slots=4)


class _Full:
    sizes = SimpleNamespace(slots=4, tokens=32)
    pipeline_depth = 1
    model_report = "not callable"  # a non-callable member is not the optional method

    def state_snapshot(self, *, during_step: bool = False):
        return "state"

    def reset(self) -> None:
        pass

    def recompute_scores(self, tokens):
        return tokens


def test_an_engine_s_optional_members_read_once_into_a_record() -> None:
    assert engine_extras(_Bare()) == EngineExtras()
    assert not engine_extras(_Bare()).snapshots and not engine_extras(_Bare()).resettable
    engine = _Full()
    found = engine_extras(engine, sizes=True)
    assert found.snapshots and found.resettable and found.model_report is None
    assert found.state_snapshot is not None and found.state_snapshot(during_step=True) == "state"
    assert found.recompute_scores is not None and found.recompute_scores((1, 2)) == (1, 2)
    assert found.pipeline_depth == 1 and found.tokens == 32
    assert engine_extras(engine).tokens is None  # sizes are read only when asked


def test_a_factory_s_and_a_graph_s_optional_members() -> None:
    caps = EngineCapabilities()

    class Factory:
        capabilities = caps

        @staticmethod
        def memory_estimate(config, requests):
            return None

    assert factory_extras(object()) == FactoryExtras()
    assert factory_extras(object()).declared() == EngineCapabilities()
    found = factory_extras(Factory, capabilities=True)
    assert found.capabilities is caps and found.declared() is caps and found.memory_estimate is not None
    assert factory_extras(Factory).capabilities is None  # read only when asked
    assert factory_extras(SimpleNamespace(capabilities="not capabilities"), capabilities=True).declared() == caps
    assert factory_extras(Factory).estimate_owner is None  # an unnamed estimate


def test_a_named_estimate_says_whose_figures_it_gives() -> None:
    figures = MemoryEstimate(weights=1, buffers=2, graphs=3, working_set=4)
    named = NamedEstimate("engine X", lambda config, requests: figures)
    found = factory_extras(SimpleNamespace(memory_estimate=named))
    assert found.memory_estimate is named and found.estimate_owner == "engine X"
    assert named(None) is figures  # called as the estimate it wraps, requests () by default
    assert graph_extras(object()) == GraphExtras(host_values=None, kernel_calls=None, label="a graph")
    graph = SimpleNamespace(host_values={"q": 4}, label="target[4]", kernel_calls=list)
    assert graph_extras(graph) == GraphExtras({"q": 4}, list, "target[4]")


def test_the_built_in_engine_has_the_optional_engine_members_and_none_of_the_report_fields() -> None:
    pytest.importorskip("torch")
    from graphcheck.capture.devices import resolve
    from graphcheck.check.engines import builtin_factory
    from graphcheck.reference import make_weights
    from graphcheck.search.builtin import demo_scenario

    scenario = demo_scenario(num_steps=2)
    engine = builtin_factory()(
        scenario.config, make_weights(scenario.config), device=resolve("cpu"), use_graphs=False, faults=()
    )
    found = engine_extras(engine, sizes=True)
    assert found.snapshots and found.resettable and found.model_report is not None and found.pipeline_depth == 0
    assert factory_extras(builtin_factory()).memory_estimate is not None
    assert factory_extras(builtin_factory()).estimate_owner == "the built-in engine"
    assert report_extras(engine.last_step_info) == ReportExtras()


def _optional_member_names() -> set[str]:
    records = (ReportExtras, EngineExtras, FactoryExtras, GraphExtras)
    return {f.name for record in records for f in dataclasses.fields(record)} | {"drain"}


def test_graphcheck_check_reads_no_optional_member_but_through_the_records() -> None:
    """graphcheck/check/ probes no optional engine, factory, report or graph member with getattr /
    hasattr: graphcheck.adapter's *_extras functions read them, once, into typed records."""
    import ast
    from pathlib import Path

    names = _optional_member_names()
    root = Path(__file__).resolve().parent.parent / "graphcheck" / "check"
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
                continue
            if node.func.id in ("getattr", "hasattr") and len(node.args) > 1:
                name = node.args[1]
                if isinstance(name, ast.Constant) and name.value in names:
                    found.append(f"{path.name}:{node.lineno} {node.func.id}(..., {name.value!r})")
    assert not found, found
