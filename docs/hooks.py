"""A MkDocs hook of graphcheck's documentation site: links that leave docs/ become source paths.

The pages are also read on their own, in the repository, where a link such as
``[adapter.py](../graphcheck/adapter.py)`` opens the file. The site holds only docs/, so there
such a link would be a broken one (and ``mkdocs build --strict`` fails on broken links, as it
should for links between pages). Before a page is rendered, each link whose target leaves docs/
is replaced by the target's path as code, so the reader still learns where to look;
tests/test_docs_links.py checks that those targets exist in the repository.
"""

from __future__ import annotations

import re
from typing import Any

_OUTSIDE = re.compile(r"\[(?P<text>[^\]\n]*)\]\((?P<target>\.\./[^)\s#]*)(?:#[^)\s]*)?\)")
_FENCE = re.compile(r"^```.*?^```[^\n]*$", re.M | re.S)


def outside_links_as_paths(markdown: str) -> str:
    """Every ``[text](../path)`` outside code blocks as ``text (`path`)``, or ``path`` when text names it."""

    def path(match: re.Match[str]) -> str:
        text, target = match.group("text"), match.group("target")[3:].rstrip("/") or "."
        if text.strip("`") == target or text.strip("`").endswith(target):
            return f"`{target}`"
        return f"{text} (`{target}`)"

    pieces, last = [], 0
    for fence in _FENCE.finditer(markdown):
        pieces += [_OUTSIDE.sub(path, markdown[last : fence.start()]), fence.group(0)]
        last = fence.end()
    return "".join([*pieces, _OUTSIDE.sub(path, markdown[last:])])


def on_page_markdown(markdown: str, **_: Any) -> str:
    return outside_links_as_paths(markdown)
