"""How often ``graphcheck run``'s arguments climb back up to ``graphcheck.cli`` (issue 45): a dev measurement.

The figure is the sum of two counts, taken while ``graphcheck run`` runs in this process:

- call edges: distinct (caller, callee) pairs, the caller a function of a ``graphcheck`` module below
  ``graphcheck.cli`` and the callee a function defined in ``graphcheck.cli`` (hooks, callbacks and
  lambdas the command line handed down included), seen by ``sys.setprofile``;
- attribute reads: distinct (function, attribute) pairs, the function below ``graphcheck.cli``, that read
  an attribute of the ``argparse.Namespace`` the parser made, or of an object of a class defined in
  ``graphcheck.cli`` (the command line's run plan, say): both are watched.

Each scenario below is run and the union over them is counted: clean and diverging, ``-j 1`` and
``-j 2`` (the parent process only: the workers receive no namespace and import no command line).
Run from the repository root, with the checkout to measure first on ``sys.path``::

    .venv/bin/python tools/arg_walk.py            # the figure, and every edge and read
    PYTHONPATH=/tmp/base .venv/bin/python tools/arg_walk.py   # another checkout (run from its root)
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import tempfile
from pathlib import Path
from typing import Any

CLI = "graphcheck.cli"
SCENARIOS = {
    "clean -j 1": ["--suite", "padding"],
    "diverging -j 1": ["--suite", "padding", "--inject", "stale-padding-rows"],
    "clean -j 2": ["--suite", "padding", "-j", "2"],
    "diverging -j 2": ["--suite", "padding", "--inject", "stale-padding-rows", "-j", "2"],
}


def _below_cli(module: str) -> bool:
    return module.startswith("graphcheck") and not (module == CLI or module.startswith(CLI + "."))


def _in_cli(module: str) -> bool:
    return module == CLI or module.startswith(CLI + ".")


def _name(frame: Any) -> str:
    return f"{frame.f_globals.get('__name__', '?')}:{frame.f_code.co_qualname}"


READS: set[tuple[str, str]] = set()


def _watch(cls: type) -> None:
    """Record every read of an attribute of a ``cls`` object from a function below graphcheck.cli."""
    original = cls.__getattribute__

    def __getattribute__(self: Any, attr: str) -> Any:
        if not attr.startswith("__"):
            frame = sys._getframe(1)
            if _below_cli(frame.f_globals.get("__name__", "")):
                READS.add((_name(frame), f"{cls.__name__}.{attr}"))
        return original(self, attr)

    cls.__getattribute__ = __getattribute__  # type: ignore[method-assign]


class _Watched(argparse.Namespace):
    """The parser's namespace, watched."""


_watch(_Watched)


def _watch_cli_classes() -> None:
    """Watch every class defined in a module of graphcheck.cli (imported: the run and replay commands)."""
    import importlib
    import inspect

    for name in ("graphcheck.cli.run", "graphcheck.cli.replay", "graphcheck.cli.common", "graphcheck.cli.progress"):
        importlib.import_module(name)
    for name, module in list(sys.modules.items()):
        if not _in_cli(name) or module is None:
            continue
        for cls in vars(module).values():
            if inspect.isclass(cls) and cls.__module__ == name and not issubclass(cls, BaseException):
                _watch(cls)


def measure(extra: list[str]) -> tuple[set[tuple[str, str]], int]:
    """Run ``graphcheck run`` once under the profiler: the call edges into graphcheck.cli, and the exit code."""
    import graphcheck.cli as cli

    edges: set[tuple[str, str]] = set()

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event != "call" or frame.f_back is None:
            return
        if _in_cli(frame.f_globals.get("__name__", "")) and _below_cli(frame.f_back.f_globals.get("__name__", "")):
            edges.add((_name(frame.f_back), _name(frame)))

    build = cli.build_parser

    def watched_parser() -> Any:
        parser = build()
        parse = parser.parse_args
        parser.parse_args = lambda argv=None, ns=None: _Watched(**vars(parse(argv, ns)))  # type: ignore[method-assign]
        return parser

    out = io.StringIO()
    with tempfile.TemporaryDirectory() as tmp:
        argv = ["run", "--database", "none", "--examples", "1", "--steps", "3", "--report-dir", tmp, *extra]
        cli.build_parser = watched_parser
        sys.setprofile(profile)
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
                code = cli.main(argv)
        finally:
            sys.setprofile(None)
            cli.build_parser = build
    if code not in (0, 1):
        print(out.getvalue()[-2000:])
    return edges, code


def main() -> int:
    sys.path.insert(0, str(Path.cwd()))  # the checkout this runs in, not the one the venv points at
    import graphcheck

    _watch_cli_classes()

    print(f"graphcheck from {Path(graphcheck.__file__).parent}")
    edges: set[tuple[str, str]] = set()
    for name, extra in SCENARIOS.items():
        found, code = measure(extra)
        print(f"  {name}: exit {code}, {len(found)} call edges into {CLI}")
        edges |= found
    for caller, callee in sorted(edges):
        print(f"  call  {caller} -> {callee}")
    for where, attr in sorted(READS):
        print(f"  read  {where} reads {attr}")
    total = len(edges) + len(READS)
    print(f"climbs back to {CLI}: {total} ({len(edges)} call edges, {len(READS)} attribute reads)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
