"""The example database: where failing scenarios are kept between runs, processes and machines.

``graphcheck run --database SPEC`` (else ``$GRAPHCHECK_DATABASE``, else
``.hypothesis/graphcheck`` under the current directory) names it:

- ``none``: no database; every run is purely its seed's.
- a directory path: Hypothesis's ``DirectoryBasedExampleDatabase``; safe to share between
  processes of one machine (its writes are atomic renames).
- ``redis://host:port/db`` (also ``rediss://``, ``unix://``): Hypothesis's
  ``RedisExampleDatabase`` over the ``redis`` client (``pip install 'graphcheck[redis]'``),
  for workers on several machines.

Hypothesis saves every failing example (and its shrunk form) under the key of
the search that found it and, in its reuse phase, replays the saved ones first
on the next search with that key, so a fault found once is found again at the
first example, by any process that shares the database. ``database_key`` builds
that key from what decides whether a scenario fails: the suite, the backend and
the injected faults. Scenarios (engine config included) are what is stored.
"""

from __future__ import annotations

import errno
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Literal

from hypothesis.database import DirectoryBasedExampleDatabase, ExampleDatabase

from graphcheck.display import redacted
from graphcheck.errors import InputError

ENV_VAR = "GRAPHCHECK_DATABASE"
DEFAULT_DIRECTORY = Path(".hypothesis") / "graphcheck"
REDIS_SCHEMES = ("redis://", "rediss://", "unix://")
#: bumped when a stored example would mean a different scenario (a strategy's draw order changed)
KEY_VERSION = "v1"

Kind = Literal["none", "directory", "redis"]


@dataclass(frozen=True)
class DatabaseSpec:
    """A parsed ``--database`` value: what kind of database, and where."""

    kind: Kind
    location: str = ""  # an absolute directory path or a redis URL; "" for none

    @classmethod
    def parse(cls, text: str | None) -> DatabaseSpec:
        """``text`` from the command line; None falls back to $GRAPHCHECK_DATABASE, then the default."""
        if text is None:
            text = os.environ.get(ENV_VAR) or str(DEFAULT_DIRECTORY)
        text = text.strip()
        if not text:
            raise InputError("--database must be a directory, a redis:// URL or 'none'")
        if text.lower() == "none":
            return cls("none")
        if text.startswith(REDIS_SCHEMES):
            return cls("redis", text)
        if "://" in text:
            raise InputError(
                f"--database {redacted(text)}: unknown scheme; use a directory, redis://host:port/db or 'none'"
            )
        return cls("directory", str(Path(text).expanduser().resolve()))

    @property
    def shown(self) -> str:
        """``location`` as consoles, reports and summaries show it: a URL's password as ``***``."""
        return redacted(self.location)

    def describe(self) -> str:
        return "no example database" if self.kind == "none" else f"example database {self.shown}"

    def open(self) -> ExampleDatabase | None:
        """The Hypothesis database; a Redis server is pinged, so a bad URL fails here, once."""
        if self.kind == "none":
            return None
        if self.kind == "directory":
            _check_writable_directory(Path(self.location))
            return SurvivingDatabase(_CheckedDirectory(self.location), self.describe())
        return SurvivingDatabase(_open_redis(self.location), self.describe())


def _check_writable_directory(path: Path) -> None:
    """Create ``path`` and write a file in it: Hypothesis would otherwise drop every save silently."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".graphcheck-probe-"):
            pass
    except OSError as err:
        raise InputError(f"--database {path}: cannot write there ({err.strerror or err})") from None


def _open_redis(url: str) -> ExampleDatabase:
    try:
        import redis
        from hypothesis.extra.redis import RedisExampleDatabase
    except ImportError:
        raise InputError(
            f"--database {redacted(url)} needs the redis client: pip install 'graphcheck[redis]'"
        ) from None
    try:
        client = redis.Redis.from_url(url)
        client.ping()
    except (ValueError, redis.RedisError) as err:
        raise InputError(f"--database {redacted(url)}: cannot reach the Redis server: {redacted(err)}") from None
    return RedisExampleDatabase(client)


def database_key(suite: str, checker: Any) -> bytes:
    """The key failing examples of ``suite`` are saved under, for a ``graphcheck.check.checker.Checker``.

    Readable on purpose (a Redis ``KEYS`` listing names the search), and
    independent of the seed, so every worker of a parallel run, whatever its
    seed, replays what any other found. It holds what decides whether a scenario
    fails: the suite, the backend, the injected faults, a non-default setup and
    an engine other than the built-in one (whose key keeps its earlier form, so
    databases filled before engines were named stay valid). A clean search
    replays and then drops examples that no longer fail, so runs with other
    faults get other keys.
    """
    backend = checker.backend
    emulate = "+emulate" if getattr(backend, "emulated", False) and backend.name != "cpu" else ""
    parts: tuple[str, ...] = (
        "graphcheck",
        KEY_VERSION,
        f"suite={suite}",
        f"backend={backend.name}{emulate}",
        "faults=" + (",".join(sorted(checker.faults)) or "none"),
    )
    label = checker.setup.label()
    if label:  # a non-default --model / --contract / --oracle: its own examples
        parts += tuple(label.split())
    if not checker.engine.builtin:
        parts += (f"engine={checker.engine.spec}",)
    return ":".join(parts).encode()


class KeyedDatabase(ExampleDatabase):
    """``inner`` seen through a key prefix: Hypothesis's key ``k`` is stored as ``prefix + b"/" + k``.

    Every search runs the same ``@given`` function, so Hypothesis derives the
    same key for all of them; the prefix (``database_key``) keeps each search's
    examples apart, through nothing but the public database interface.
    """

    def __init__(self, inner: ExampleDatabase, prefix: bytes) -> None:
        super().__init__()
        self.inner = inner
        self.prefix = prefix + b"/"

    def __repr__(self) -> str:
        return f"KeyedDatabase({self.inner!r}, {self.prefix!r})"

    def save(self, key: bytes, value: bytes) -> None:
        self.inner.save(self.prefix + key, value)

    def fetch(self, key: bytes) -> Iterable[bytes]:
        yield from self.inner.fetch(self.prefix + key)

    def delete(self, key: bytes, value: bytes) -> None:
        self.inner.delete(self.prefix + key, value)

    def move(self, src: bytes, dest: bytes, value: bytes) -> None:
        self.inner.move(self.prefix + src, self.prefix + dest, value)


class _CheckedDirectory(DirectoryBasedExampleDatabase):
    """A directory database whose failed save says so: Hypothesis's swallows the OSError of a full
    disk, and the example is lost without a word."""

    def save(self, key: bytes, value: bytes) -> None:
        super().save(key, value)
        if not self._value_path(key, value).exists():
            raise OSError(errno.EIO, "the example was not written (is the disk full or read-only?)")


class SurvivingDatabase(ExampleDatabase):
    """``inner``, whose failures never end a run: a Redis server that goes away mid-run, a directory on
    a full disk. Each failing call is skipped (a save is lost, a fetch finds nothing) and the first
    one is reported once on stderr; the search, its findings and its report go on. Hypothesis itself
    would either raise (Redis: a traceback, the divergence being saved lost) or drop saves silently
    (a full disk)."""

    def __init__(self, inner: ExampleDatabase, label: str) -> None:
        super().__init__()
        self.inner, self.label = inner, label
        self.failed: str | None = None  # the first failure, once one happened

    def __repr__(self) -> str:
        return f"SurvivingDatabase({self.inner!r})"

    def _failure(self, action: str, err: BaseException) -> None:
        if self.failed is None:
            self.failed = f"{type(err).__name__}: {redacted(err)}"[:300]
            print(
                f"graphcheck: warning: the {self.label} failed to {action} ({self.failed}); the run goes on "
                "without it, and what it finds is still reported",
                file=sys.stderr,
            )

    def save(self, key: bytes, value: bytes) -> None:
        try:
            self.inner.save(key, value)
        except Exception as err:
            self._failure("save an example", err)

    def fetch(self, key: bytes) -> Iterable[bytes]:
        try:
            found = list(self.inner.fetch(key))
        except Exception as err:
            self._failure("fetch examples", err)
            return
        yield from found

    def delete(self, key: bytes, value: bytes) -> None:
        try:
            self.inner.delete(key, value)
        except Exception as err:
            self._failure("delete an example", err)

    def move(self, src: bytes, dest: bytes, value: bytes) -> None:
        try:
            self.inner.move(src, dest, value)
        except Exception as err:
            self._failure("move an example", err)
