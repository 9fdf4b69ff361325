"""The repository's Markdown stands on its own: every relative link resolves inside it.

Users of graphcheck get the repository and nothing else, so a Markdown file
must not point at files outside it (the design notes under ``shared/`` are not
part of the repository), every relative link ``[text](path)`` or
``[text](path#anchor)`` must name a file or folder that exists (an anchor into
a Markdown file must name one of its headings), and every bug class number
that ``graphcheck faults`` prints must have its heading in docs/bug-classes.md.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterator

import pytest

from graphcheck.backends.engine.faults import FAULTS, NUM_BUG_CLASSES

ROOT = Path(__file__).resolve().parent.parent
BUG_CLASSES = ROOT / "docs" / "bug-classes.md"

#: Folders that are not the repository's own Markdown: environments, generated output, caches.
SKIPPED_DIRS = {
    ".venv",
    ".git",
    "reports",
    ".hypothesis",
    ".pytest_cache",
    ".mypy_cache",
    ".benchmarks",
    "__pycache__",
    "build",
    "dist",
    ".whl",
    "node_modules",
}

#: Files every run must find, so a broken search cannot pass by finding nothing.
EXPECTED = {
    "README.md",
    "docs/index.md",
    "docs/running.md",
    "docs/checks.md",
    "docs/adapters.md",
    "docs/bug-classes.md",
    "docs/decoding-semantics.md",
    "suites/README.md",
    "reference/README.md",
    "examples/pytest-project/README.md",
}

_FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.M | re.S)
_CODE_SPAN = re.compile(r"`[^`\n]+`")
_LINK = re.compile(r"(?<!\\)\[(?P<text>(?:[^\[\]]|\[[^\[\]]*\])*)\]\((?P<target>[^()\s]+)(?:\s+\"[^\"]*\")?\)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$", re.M)
_CLASS_HEADING = re.compile(r"^##\s+(\d+)\.\s+\S", re.M)
#: References to files outside the repository: the shared design folder, or its spec pages.
_OUTSIDE = re.compile(r"shared/spec|\.\./shared|(?<![\w./-])spec/[\w-]+\.md")


def _walk(folder: Path) -> Iterator[Path]:
    for path in sorted(folder.iterdir()):
        if path.is_dir():
            if (
                path.name not in SKIPPED_DIRS
                and not path.name.endswith(".egg-info")
                and not path.name.startswith(".venv")
            ):
                yield from _walk(path)
        elif path.suffix == ".md":
            yield path


def markdown_files() -> list[Path]:
    return list(_walk(ROOT))


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _prose(text: str) -> str:
    """The text with fenced code blocks blanked out (line numbers kept)."""
    return _FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)


def links(text: str) -> Iterator[tuple[int, str]]:
    """(line, target) of every inline Markdown link outside code blocks and code spans."""
    prose = _CODE_SPAN.sub(lambda m: "`" + " " * (len(m.group(0)) - 2) + "`", _prose(text))
    for match in _LINK.finditer(prose):
        yield prose.count("\n", 0, match.start()) + 1, match.group("target")


def _is_external(target: str) -> bool:
    return bool(re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target)) or target.startswith("//")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: markup dropped, lower case, punctuation dropped, spaces to '-'."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = text.replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading anchor of a Markdown file (repeated headings get -1, -2, ... like GitHub)."""
    seen: dict[str, int] = {}
    found = set()
    for match in _HEADING.finditer(_prose(path.read_text(encoding="utf-8"))):
        base = slug(match.group(2))
        n = seen.get(base, 0)
        seen[base] = n + 1
        found.add(base if n == 0 else f"{base}-{n}")
    return found


def test_markdown_files_are_found():
    found = {_rel(p) for p in markdown_files()}
    missing = sorted(EXPECTED - found)
    assert not missing, f"Markdown files not found: {missing}"
    assert not [f for f in found if f.startswith(("reports/", ".venv/"))]


@pytest.mark.parametrize("path", markdown_files(), ids=_rel)
def test_relative_links_resolve_inside_the_repository(path: Path):
    broken = []
    for line, target in links(path.read_text(encoding="utf-8")):
        if _is_external(target):
            continue
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path.resolve()
        where = f"{_rel(path)}:{line}: ({target})"
        if file_part.startswith("/"):
            broken.append(f"{where} is an absolute path")
        elif dest != ROOT and ROOT not in dest.parents:
            broken.append(f"{where} points outside the repository")
        elif not dest.exists():
            broken.append(f"{where} does not exist")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{where}: no heading with anchor #{anchor} in {_rel(dest)}")
    assert not broken, "broken links:\n" + "\n".join(broken)


@pytest.mark.parametrize("path", markdown_files(), ids=_rel)
def test_no_reference_to_the_shared_folder(path: Path):
    hits = [
        f"{_rel(path)}:{n}: {line.strip()}"
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if _OUTSIDE.search(line)
    ]
    assert not hits, "references to files outside the repository (link to docs/ instead):\n" + "\n".join(hits)


def _class_sections() -> dict[int, str]:
    """Bug class number -> the text of its section in docs/bug-classes.md."""
    assert BUG_CLASSES.is_file(), "docs/bug-classes.md is missing"
    text = BUG_CLASSES.read_text(encoding="utf-8")
    heads = list(_CLASS_HEADING.finditer(text))
    sections = {}
    for i, head in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(text)
        nxt = re.search(r"^## ", text[head.end() : end], re.M)  # a later unnumbered section ends it too
        sections[int(head.group(1))] = text[head.start() : head.end() + nxt.start() if nxt else end]
    return sections


def test_every_fault_class_has_a_heading():
    sections = _class_sections()
    missing = sorted({f.bug_class for f in FAULTS.values()} - sections.keys())
    assert not missing, f"bug classes of FAULTS without a '## N. ...' heading in docs/bug-classes.md: {missing}"


def test_bug_class_headings_are_numbered_1_to_n():
    assert sorted(_class_sections()) == list(range(1, NUM_BUG_CLASSES + 1))


def test_each_fault_is_listed_under_its_class():
    sections = _class_sections()
    misplaced = [
        f"{name} (class {fault.bug_class})"
        for name, fault in FAULTS.items()
        if f"`{name}`" not in sections.get(fault.bug_class, "")
    ]
    assert not misplaced, f"faults not named in their class's section of docs/bug-classes.md: {misplaced}"


def test_the_link_finder_itself(tmp_path: Path):
    text = (
        "See [a](docs/x.md#some-part), [`b`](../y/) and [c](https://example.org).\n"
        "```python\nx = a[0](1)  # [not](a-link.md)\n```\n"
        "`[text](inline-code.md)` is code; [d](#local) is a link.\n"
    )
    assert [t for _, t in links(text)] == ["docs/x.md#some-part", "../y/", "https://example.org", "#local"]
    assert [line for line, _ in links(text)] == [1, 1, 1, 5]
    assert slug("3. Stale padding rows") == "3-stale-padding-rows"
    assert slug("5.3 Verify [§3.2] (speculative mode)") == "53-verify-32-speculative-mode"
    assert slug("8. Where FastDeploy's ops differ") == "8-where-fastdeploys-ops-differ"
    page = tmp_path / "p.md"
    page.write_text("# Top\n## Part\n## Part\n```\n# not a heading\n```\n", encoding="utf-8")
    assert anchors(page) == {"top", "part", "part-1"}
    assert _OUTSIDE.search("see `shared/spec/bug-classes.md`") and _OUTSIDE.search("(../shared/x)")
    assert _OUTSIDE.search("numbers of `spec/bug-classes.md`")
    assert not _OUTSIDE.search("docs/bug-classes.md, fastdeploy/spec_decode/mtp.py, one shared pool")
