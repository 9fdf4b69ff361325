"""Text recorded from elsewhere (a suite's name, a fault's, an engine's error), made safe to show.

A name that comes from a plugin, a scenario file or a downloaded report may hold
a newline (which starts a console line of its own: on CI, a forged
``::error::`` annotation), other control characters, bidirectional formatting
characters (U+202E makes the rest of a line read backwards) or lone surrogates
(which cannot be encoded). :func:`shown` shows each of them as a visible
escape instead: :func:`one_line` for the console (``graphcheck.cli.console.plain``
adds rich's markup escaping on top), the HTML reports with the line breaks kept
(``graphcheck.report.html``; autoescaping adds HTML's); :func:`redacted` hides the password of a URL (a database's), which must
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


def shown(text: object, keep: str = "") -> str:
    """``text`` with every hidden code point (control, separator, format, surrogate) as a visible escape,
    but those in ``keep``; an escape is ASCII letters, digits and a backslash, so markup escaping after it
    is not needed and not undone."""
    return "".join(char if char in keep else _visible(char) for char in str(text))


def one_line(text: object) -> str:
    """``text`` as one line of printable characters: every hidden code point as a visible escape."""
    return shown(text)


#: ``scheme://user:password@`` in any text: the password part (a ``--database redis://:PASS@host`` URL),
#: up to the *last* ``@`` of the word (an unencoded ``@``, ``/`` or ``?`` in a password is part of it: better
#: to hide too much than to show the rest of a password).
_CREDENTIALS = re.compile(r"""(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^\s/@:]*):(?P<password>[^\s"'<>]*)@""")
#: A secret in a query string or fragment: ``?password=...``, ``&token=...`` (any case).
_QUERY_SECRET = re.compile(
    r"(?P<head>[?&;#](?:password|passwd|pwd|pass|secret|token|access_token|auth|api_key|apikey|key)=)[^&;#\s]*",
    re.IGNORECASE,
)


def redacted(text: object) -> str:
    """``text`` with the password of every URL in it, and every secret of a query string, replaced by
    ``***`` (the user name is kept)."""
    text = _CREDENTIALS.sub(lambda m: f"{m.group('head')}:***@", str(text))
    return _QUERY_SECRET.sub(lambda m: f"{m.group('head')}***", text)


__all__ = ["one_line", "redacted", "shown"]
