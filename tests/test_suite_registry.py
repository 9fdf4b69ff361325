"""Suites are found by name and through the ``graphcheck.suites`` entry point group.

graphcheck's own come first, in their order; a plugin's suite then runs from
``graphcheck run --suite NAME`` like a built-in one. A clash of names, a value
that is not made of Suites, or an entry point that fails to load is one usage
error (exit 2) that names the source.
"""

from __future__ import annotations

import json
from importlib import metadata
from pathlib import Path
from typing import Callable, Iterator

import pytest

from graphcheck.cli import exitcodes, main
from graphcheck.errors import InputError
from graphcheck.search import suite_registry
from graphcheck.search.suite_registry import ENTRY_POINT_GROUP, Suite, collect, load_suites

PLUGIN = """
from hypothesis import strategies as st
from graphcheck.search.builtin import demo_scenario
from graphcheck.search.suite_registry import Suite

def _tiny():
    return st.sampled_from([demo_scenario(num_steps=3), demo_scenario(naive_mode=True, num_steps=3)])

SUITES = {"tiny": Suite("tiny", "two short demo scenarios", _tiny, (8,))}
CLASH = [Suite("padding", "a second padding suite", _tiny, (3,))]
NOT_SUITES = ["padding"]
"""


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], None]]:
    """``plugin(value)``: load_suites sees one entry point ``graphcheck_tiny_suites:value`` (or a broken one)."""
    (tmp_path / "graphcheck_tiny_suites.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))

    def install(value: str) -> None:
        point = metadata.EntryPoint(name="tiny-plugin", value=value, group=ENTRY_POINT_GROUP)
        monkeypatch.setattr(
            suite_registry.metadata, "entry_points", lambda group: [point] if group == ENTRY_POINT_GROUP else []
        )
        load_suites.cache_clear()

    yield install
    load_suites.cache_clear()


def test_builtin_suites_come_in_their_order() -> None:
    from graphcheck.suites import SUITES

    assert list(load_suites()) == list(SUITES) and list(SUITES)[-1] == "all"
    assert all(isinstance(s, Suite) for s in load_suites().values())


def test_collect_accepts_a_suite_an_iterable_or_a_mapping_and_rejects_clashes() -> None:
    a, b, c = (Suite(n, n, lambda: None, ()) for n in "abc")
    assert list(collect([("x", a), ("y", [b]), ("z", {"c": c})])) == ["a", "b", "c"]
    with pytest.raises(InputError, match="'a' is defined twice: by x and by y"):
        collect([("x", a), ("y", (a,))])
    with pytest.raises(InputError, match="suites from y: expected a Suite"):
        collect([("y", 42)])


def test_a_plugin_suite_runs_from_the_command_line(plugin, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plugin("graphcheck_tiny_suites:SUITES")
    assert list(load_suites())[-1] == "tiny"
    code = main(
        [
            "run",
            "--suite",
            "tiny",
            "--examples",
            "2",
            "--steps",
            "3",
            "--database",
            "none",
            "--quiet",
            "--report-dir",
            str(tmp_path / "reports"),
        ]
    )
    out = capsys.readouterr().out
    assert code == exitcodes.CLEAN, out
    assert "suite tiny" in out
    (run_dir,) = (tmp_path / "reports").iterdir()
    (fuzzed,) = json.loads((run_dir / "fuzz.json").read_text())["suites"]
    assert fuzzed["suite"] == "tiny" and fuzzed["examples"] >= 1


def test_a_plugin_suite_finds_a_fault(plugin, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plugin("graphcheck_tiny_suites:SUITES")
    code = main(
        [
            "run",
            "--suite",
            "tiny",
            "--examples",
            "2",
            "--steps",
            "3",
            "--database",
            "none",
            "--quiet",
            "--inject",
            "naive-seed-frozen",
            "--report-dir",
            str(tmp_path),
        ]
    )
    assert code == exitcodes.DIVERGENCE, capsys.readouterr().out


@pytest.mark.parametrize(
    "value, words",
    [
        (
            "graphcheck_tiny_suites:CLASH",
            "'padding' is defined twice: by graphcheck.suites:SUITES and by entry point tiny-plugin",
        ),
        ("graphcheck_tiny_suites:NOT_SUITES", "expected a Suite"),
        ("graphcheck_tiny_suites:MISSING", "entry point tiny-plugin (graphcheck_tiny_suites:MISSING) failed to load"),
        ("no_such_module_anywhere:SUITES", "failed to load"),
    ],
)
def test_a_bad_plugin_is_one_usage_error(
    plugin, value: str, words: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plugin(value)
    assert main(["run", "--suite", "padding", "--report-dir", str(tmp_path)]) == exitcodes.USAGE
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err
