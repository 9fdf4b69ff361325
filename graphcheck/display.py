"""Text recorded from elsewhere (a suite's name, a fault's, an engine's error), made safe to show.

A name that comes from a plugin, a scenario file or a downloaded report may hold
a newline (which starts a console line of its own: on CI, a forged
``::error::`` annotation), other control characters, bidirectional formatting
characters (U+202E makes the rest of a line read backwards) or lone surrogates
(which cannot be encoded). :func:`one_line` shows each of them as a visible
escape instead (``graphcheck.cli.console.plain`` adds rich's markup escaping on
top); :func:`redacted` hides the password of a URL (a database's), which must
reach no console, report or CI summary. A leaf: standard library only.
"""

from __future__ import annotations

import re
import unicodedata

#: Control, surrogate, line and paragraph separator, and format (bidi, zero-width) code points.
_HIDDEN = ("Cc", "Cs", "Zl", "Zp", "Cf")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _visible(char: str) -> str:
    """``char``, or an escape such as ``\\n`` when it is a control, separator, format or surrogate code point."""
    if unicodedata.category(char) not in _HIDDEN:
        return char
    code = ord(char)
    return _NAMED.get(char) or (
        f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"
    )


def one_line(text: object) -> str:
    """``text`` as one line of printable characters: every hidden code point as a visible escape."""
    return "".join(map(_visible, str(text)))


#: ``scheme://user:password@`` in any text: the password part (a ``--database redis://:PASS@host`` URL).
_CREDENTIALS = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^\s/@:]*):(?P<password>[^\s/@]*)@")


def redacted(text: object) -> str:
    """``text`` with the password of every URL in it replaced by ``***`` (the user name is kept)."""
    return _CREDENTIALS.sub(lambda m: f"{m.group('head')}:***@", str(text))


__all__ = ["one_line", "redacted"]
