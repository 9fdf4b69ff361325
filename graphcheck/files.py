"""Writing report files: atomically (a reader never sees a half-written file), whatever the text holds.

A Python ``str`` can hold what UTF-8 cannot encode: lone surrogates, as
``os.fsdecode`` or the ``surrogateescape`` error handler leave them in names
read from a disk or a pipe. Encoding such text raised mid-write and once left
a 0-byte ``index.html``. Every report file therefore goes through
:func:`write_atomic`: the text is made encodable first (:func:`safe_text`),
written to a temporary file in the same folder and moved over the target with
``os.replace``, so the target is either the old file or the complete new one.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
from contextvars import ContextVar
from pathlib import Path
from typing import Iterator

_SURROGATE = re.compile("[\ud800-\udfff]")

#: The files written whole inside the innermost :func:`ledger`; None outside one.
_WRITTEN: ContextVar[list[Path] | None] = ContextVar("graphcheck_written", default=None)


@contextlib.contextmanager
def ledger() -> Iterator[list[Path]]:
    """The list of files :func:`write_atomic` completes while the body runs, in order (what a verdict
    line names when a full disk stopped the rest)."""
    written: list[Path] = []
    token = _WRITTEN.set(written)
    try:
        yield written
    finally:
        _WRITTEN.reset(token)


def safe_text(text: str) -> str:
    """``text`` with every surrogate code point written as the 6 characters ``\\udXXX``.

    The result always encodes as UTF-8. In HTML, Markdown or XML text the
    reader sees the escape; inside a JSON string literal it *is* the JSON
    escape, so ``json.loads`` gives back the very same string.
    """
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def encode(text: str) -> bytes:
    """``text`` as UTF-8 bytes; never raises (see :func:`safe_text`)."""
    return safe_text(text).encode("utf-8", "replace")


def write_atomic(path: Path | str, data: str | bytes) -> Path:
    """Write ``data`` (text is encoded with :func:`encode`) to ``path`` atomically.

    The bytes go to a uniquely named temporary file beside ``path`` (created
    with the usual permissions, 0666 less the umask), are flushed to disk and
    then renamed over ``path``. On any failure the temporary file is removed
    and ``path`` keeps what it held before. Only where the folder refuses new
    files but ``path`` itself is writable (a ``--junit`` file somebody else's
    folder holds) is ``path`` overwritten in place instead.
    """
    path = Path(path)
    payload = encode(data) if isinstance(data, str) else bytes(data)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(tmp, flags, 0o666)
    except PermissionError:
        if not (path.is_file() and os.access(path, os.W_OK)):
            raise
        path.write_bytes(payload)
        _record(path)
        return path
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _record(path)
    return path


def _record(path: Path) -> None:
    written = _WRITTEN.get()
    if written is not None:
        written.append(path)


__all__ = ["encode", "ledger", "safe_text", "write_atomic"]
