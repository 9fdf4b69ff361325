"""Text recorded from elsewhere (a suite's name, a fault's, an engine's error), made safe to show.

A name that comes from a plugin, a scenario file or a downloaded report may hold
a newline (which starts a console line of its own: on CI, a forged
``::error::`` annotation), other control characters, bidirectional formatting
characters (U+202E makes the rest of a line read backwards) or lone surrogates
(which cannot be encoded). :func:`one_line` shows each of them as a visible
escape instead; :func:`redacted` hides the password of a URL (a database's), which must reach no
console, report or CI summary. A leaf: standard library only.
"""

from __future__ import annotations

import re

_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def one_line(text: object) -> str:
    """``text`` as one line of printable characters: controls, bidi characters and surrogates as escapes."""
    return _UNPRINTABLE.sub(lambda m: _NAMED.get(m.group()) or f"\\u{ord(m.group()):04x}", str(text))


#: ``scheme://user:password@`` in any text: the password part (a ``--database redis://:PASS@host`` URL).
_CREDENTIALS = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^\s/@:]*):(?P<password>[^\s/@]*)@")


def redacted(text: object) -> str:
    """``text`` with the password of every URL in it replaced by ``***`` (the user name is kept)."""
    return _CREDENTIALS.sub(lambda m: f"{m.group('head')}:***@", str(text))


__all__ = ["one_line", "redacted"]
