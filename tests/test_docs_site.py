"""The documentation: the README a newcomer starts from, and the site built from docs/ with MkDocs.

* The site builds with ``mkdocs build --strict``: a broken link between pages, a missing anchor or a
  page left out of the navigation fails the build, so it fails this test. MkDocs and Material for
  MkDocs come with the ``test`` extra (``./dev.sh test`` installs it): where that extra is installed
  and MkDocs is not, this is a failure; only outside the extra does the test skip.
* Every ``graphcheck ...`` command line the README and the pages show (code blocks and code spans)
  is checked against graphcheck's own argument parser, without running anything: the subcommand
  exists, every option it names is one of that subcommand's, a concrete value of an option with
  choices is one of them, a synopsis's ``A|B|C`` lists exactly the choices, and a line without
  placeholders parses. Running them all for real would cost minutes each.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shlex
import struct
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

from graphcheck.cli.parser import build_parser
from graphcheck.errors import InputError

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]
sys.path.insert(0, str(DOCS))
from hooks import outside_links_as_paths  # noqa: E402  (docs/hooks.py: the site build's hook)

del sys.path[0]


def _extra_installed() -> bool:
    """Whether this environment has graphcheck's test extra (its linters are the sign)."""
    return all(importlib.util.find_spec(name) is not None for name in ("ruff", "mypy", "pytest_benchmark"))


def test_the_site_builds_in_strict_mode(tmp_path: Path) -> None:
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None:
        if _extra_installed():
            pytest.fail("the test extra is installed but mkdocs / mkdocs-material are not: pip install -e '.[test]'")
        pytest.skip("mkdocs is not installed (it comes with graphcheck's test extra)")
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    pages = {p.name for p in site.glob("*.html")}
    assert {f"{p.stem}.html" for p in DOCS.glob("*.md")} <= pages
    assert (site / "img" / "divergence-report.png").is_file()
    index = (site / "running.html").read_text(encoding="utf-8")
    assert 'id="exit-codes"' in index  # the headings carry GitHub's anchors


def test_links_that_leave_the_site_become_source_paths() -> None:
    text = (
        "See [the protocol](../graphcheck/adapter.py), [`suites/README.md`](../suites/README.md#x), "
        "[a page](checks.md) and [out](https://example.org).\n```\n[kept](../in/code.py)\n```\n"
    )
    assert outside_links_as_paths(text) == (
        "See the protocol (`graphcheck/adapter.py`), `suites/README.md`, "
        "[a page](checks.md) and [out](https://example.org).\n```\n[kept](../in/code.py)\n```\n"
    )


# -- the README -------------------------------------------------------------------------------------


def test_the_readme_is_a_short_start() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 200
    quick = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    assert re.findall(r"^\./dev\.sh \w+", quick.split("```bash", 1)[1].split("```", 1)[0], re.M) == [
        "./dev.sh run",
        "./dev.sh test",
    ]
    assert "source .venv/bin/activate" in quick and "75 s" in quick
    for heading in ("## The five commands", "## Where reports land", "## Exit codes", "## Documentation"):
        assert heading in readme
    picture = re.search(r"!\[[^\]]*\]\((docs/img/[\w-]+\.png)\)", readme)
    assert picture and picture.group(1) == "docs/img/divergence-report.png"


@pytest.mark.parametrize("name", ["divergence-report.png", "clean-report.png"])
def test_the_screenshots_are_1280_pixels_wide(name: str) -> None:
    data = (DOCS / "img" / name).read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    assert width == 1280 and height >= 1000 and len(data) > 50_000


# -- every command shown ----------------------------------------------------------------------------

_BLOCK = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.M | re.S)
_SPAN = re.compile(r"`([^`\n]+)`")
_PREFIX = re.compile(r"^(?:\$ |\./dev\.sh vllm )")


def commands(text: str) -> Iterator[str]:
    """Each ``graphcheck ...`` command line of a page: a shell block's lines (comments cut), and code spans
    that start with ``graphcheck`` (a synopsis line goes on over the indented ``[...`` lines below it)."""
    lines: list[str] = []
    for kind, block in _BLOCK.findall(text):
        if kind in ("", "bash", "sh", "shell", "console"):
            for line in block.splitlines():
                line = _PREFIX.sub("", line.split(" #", 1)[0].strip())
                if line.startswith("["):
                    if lines and lines[-1].startswith("graphcheck "):
                        lines[-1] += " " + line
                    continue
                lines.append(line)
    lines += _SPAN.findall(_BLOCK.sub("", text))
    for line in lines:
        if line.startswith("graphcheck ") or line == "graphcheck":
            yield line.rstrip()


DOC_COMMANDS = sorted({(page.relative_to(ROOT).as_posix(), c) for page in PAGES for c in commands(page.read_text())})
PARSER = build_parser()
SUBCOMMANDS: dict[str, argparse.ArgumentParser] = next(
    a.choices for a in PARSER._actions if isinstance(a, argparse._SubParsersAction)
)
_PLACEHOLDER = re.compile(r"[<\[\]|]|\.\.\.|^[A-Z_.]+$|^[A-Z]+\.json$|^[a-zA-Z]$")


def test_the_pages_show_commands() -> None:
    shown = {c.split()[1] for _, c in DOC_COMMANDS if len(c.split()) > 1}
    assert {"run", "replay", "doctor", "faults", "catalog", "bench"} <= shown
    assert len(DOC_COMMANDS) > 40


def _options(sub: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return dict(sub._option_string_actions)


@pytest.mark.parametrize(("page", "command"), DOC_COMMANDS, ids=[f"{p}: {c}"[:90] for p, c in DOC_COMMANDS])
def test_a_documented_command_matches_the_parser(page: str, command: str) -> None:
    words = shlex.split(command.replace("<", "'<").replace(">", ">'"))[1:]
    if words in (["--help"], []):
        return
    if _PLACEHOLDER.search(words[0]):  # graphcheck COMMAND --help
        return
    assert words[0] in SUBCOMMANDS, f"{page}: no subcommand {words[0]!r} in `{command}`"
    options = _options(SUBCOMMANDS[words[0]])
    placeholders = False
    for i, word in enumerate(words[1:], 1):
        for bare in word.strip("[]").split("=", 1)[0].split("|"):
            if bare.startswith("-") and bare not in ("-", "--"):
                assert bare in options, f"{page}: `{command}`: {bare} is not an option of graphcheck {words[0]}"
                _check_choices(page, command, options[bare], words[i + 1].strip("[]") if i + 1 < len(words) else "")
        placeholders = placeholders or bool(_PLACEHOLDER.search(word))
    last = options.get(words[-1])
    mention = len(words) == 1 or (last is not None and last.nargs != 0)  # `graphcheck faults --engine`
    if not placeholders and not mention:
        try:
            PARSER.parse_args(words)
        except InputError as err:
            pytest.fail(f"{page}: `{command}` does not parse: {err}")


def _check_choices(page: str, command: str, action: argparse.Action, value: str) -> None:
    """A concrete value is one of the choices; a synopsis's ``A|B|C`` lists exactly them."""
    if not action.choices or not value or value.startswith("-") or _PLACEHOLDER.fullmatch(value.split("|")[0]):
        return
    if "|" in value:
        assert set(value.split("|")) == set(action.choices), f"{page}: `{command}`: {action.dest} lists {value}"
    else:
        assert value in action.choices, f"{page}: `{command}`: {action.dest} {value}"
