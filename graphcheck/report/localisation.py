"""Where a failing outcome first diverged (``CheckOutcome.localisation``), formatted for the report.

``localisation_view`` turns a :class:`~graphcheck.check.records.Localisation`
into display strings: the kernel and its place in the step, the argument and
buffer carrying the difference, the rows with their expected and actual values,
and the kernel's source line. A source line becomes a link where the page can
name one: on GitHub Actions (``GITHUB_SERVER_URL``, ``GITHUB_REPOSITORY`` and
``GITHUB_SHA`` set) a relative path links to the file at the run's commit, an
absolute path links as ``file://``; otherwise it is shown as ``path:line`` text.
Every value is plain text here; the template escapes it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Mapping
from urllib.parse import quote

from graphcheck.check.diff import Divergence
from graphcheck.check.records import Localisation
from graphcheck.report.fmt import show, sources_of

#: Most row indices listed before "… (N rows)".
MAX_ROWS_SHOWN = 16


@dataclass(frozen=True)
class BlobLinks:
    """Where a repository's files can be read at one commit: ``{server}/{repository}/blob/{sha}/{path}#L{line}``."""

    server: str
    repository: str
    sha: str

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> BlobLinks | None:
        """From ``GITHUB_SERVER_URL``, ``GITHUB_REPOSITORY`` and ``GITHUB_SHA``; None unless all three are set
        (and the server is an http(s) URL: the value ends up in an ``href``)."""
        env = os.environ if environ is None else environ
        server = env.get("GITHUB_SERVER_URL", "").strip().rstrip("/")
        repository = env.get("GITHUB_REPOSITORY", "").strip().strip("/")
        sha = env.get("GITHUB_SHA", "").strip()
        if not (server and repository and sha) or not server.lower().startswith(("https://", "http://")):
            return None
        return cls(server, repository, sha)

    def url(self, path: str, line: int | None) -> str:
        anchor = f"#L{line}" if line else ""
        return f"{self.server}/{quote(self.repository)}/blob/{quote(self.sha)}/{quote(path)}{anchor}"


@dataclass(frozen=True)
class SourceLink:
    """A source line: ``text`` is ``path:line``; ``href`` is "" where the page shows it as text only."""

    text: str
    href: str = ""


def is_absolute(path: str) -> bool:
    return PurePosixPath(path).is_absolute() or PureWindowsPath(path).is_absolute()


def source_link(path: str | None, line: int | None, links: BlobLinks | None = None) -> SourceLink | None:
    """``path:line`` with a link: to the commit's file for a relative path (with ``links``),
    ``file://`` for an absolute one; None without a path."""
    if not path:
        return None
    text = f"{path}:{line}" if line else path
    if is_absolute(path):
        try:
            return SourceLink(text, Path(path).as_uri() + (f"#L{line}" if line else ""))
        except ValueError:  # an absolute path of the other system's kind
            return SourceLink(text)
    if links is not None:
        posix = path.replace("\\", "/")
        while posix.startswith("./"):
            posix = posix[2:]
        if posix and ".." not in posix.split("/"):
            return SourceLink(text, links.url(posix, line))
    return SourceLink(text)


@dataclass(frozen=True)
class LocalisationView:
    """One outcome's "Where it first diverged", formatted; "" marks a field the localisation does not have."""

    headline: str
    step: int
    method: str
    reason: str
    kernel: str  # "—" when no kernel could be named
    position: str
    where: str
    argument: str
    buffer: str  # "" when it is the argument itself, or unknown
    rows: str
    expected: str
    actual: str
    expected_source: str
    actual_source: str
    has_values: bool  # expected or actual is known
    slot: str
    request: str
    source: SourceLink | None
    caller: str
    caller_source: SourceLink | None


def _same(a: object, b: object) -> bool:
    try:
        return bool(a == b)
    except Exception:  # numpy arrays of different shapes, or whose == is not one truth value
        return False


def value_sources(loc: Localisation, first: Divergence | None) -> tuple[str, str]:
    """What ``expected`` and ``actual`` are: the first divergence's pair where the localisation carries its
    values (slot hygiene: the idle value vs the engine), else eager vs graph (a kernel trace) or the
    reference vs both engines (``method`` "reference")."""
    if first is not None and _same(loc.expected, first.expected) and _same(loc.actual, first.actual):
        left, right = sources_of(first.pair)
        if (left, right) != ("expected", "actual"):
            return left, right
    if loc.method == "reference":
        return "reference", "eager and graph"
    return "eager", "graph"


def rows_text(rows: tuple[int, ...]) -> str:
    if not rows:
        return ""
    shown = ", ".join(str(r) for r in rows[:MAX_ROWS_SHOWN])
    return shown + (f", … ({len(rows)} rows)" if len(rows) > MAX_ROWS_SHOWN else "")


def localisation_view(
    loc: Localisation, first: Divergence | None = None, links: BlobLinks | None = None
) -> LocalisationView:
    """``loc`` for the page; ``first`` (the outcome's first failing divergence) names what the values compare."""
    left, right = value_sources(loc, first)
    buffer = loc.buffer if loc.buffer and loc.buffer != loc.argument else ""
    return LocalisationView(
        headline=loc.headline(),
        step=loc.step,
        method=loc.method,
        reason=loc.reason,
        kernel=loc.kernel or "—",
        position=loc.position,
        where=loc.where,
        argument=loc.argument or "",
        buffer=buffer,
        rows=rows_text(tuple(loc.rows)),
        expected=show(loc.expected),
        actual=show(loc.actual),
        expected_source=left,
        actual_source=right,
        has_values=loc.expected is not None or loc.actual is not None,
        slot="" if loc.slot is None else str(loc.slot),
        request=loc.request_id or "",
        source=source_link(loc.source_file, loc.source_line, links),
        caller=loc.caller or "",
        caller_source=source_link(loc.caller_file, loc.caller_line, links),
    )


__all__ = [
    "BlobLinks",
    "LocalisationView",
    "SourceLink",
    "localisation_view",
    "rows_text",
    "source_link",
    "value_sources",
]
