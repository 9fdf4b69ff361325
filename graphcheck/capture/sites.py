"""Where in the engine's Python an op was issued: the first frame outside the frameworks and this package.

An op-level capture records thousands of aten ops; a person reading "the op
that first diverged" or "the host sync that broke the capture" needs the line
of *their* code that issued it, and the ``nn.Module`` it ran under. This module
finds the line (:func:`user_frame`); the module path comes from the recorder's
module hooks. Frames in torch, paddle, ``contextlib``, graphcheck's capture
package and the folders an engine declares as machinery (:func:`add_machinery`: the
built-in engine's ``backends/xp`` array shims) are skipped: they are the machinery
between the engine and the op.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
from dataclasses import dataclass
from types import FrameType


@dataclass(frozen=True)
class OpSite:
    """Where one recorded op came from.

    ``module``: the ``nn.Module`` path it ran under ("model.layers.1.self_attn"),
    ``kernel``: the ``@kernel`` function it ran in (graphcheck's own engine),
    ``file``/``line``/``function``: the innermost frame of the engine's code.
    """

    module: str | None = None
    kernel: str | None = None
    file: str | None = None
    line: int | None = None
    function: str | None = None

    def where(self) -> str:
        """``file:line in function``, or ``unknown source`` where no frame was outside the machinery."""
        if self.file is None:
            return "unknown source"
        return f"{self.file}:{self.line} in {self.function}"

    def describe(self, op: str) -> str:
        """One line for messages: ``aten.add.Tensor under model.layers.1 in kernel k at file:line in f``."""
        return f"{op} {self.location()}"

    def location(self) -> str:
        """``under model.layers.1 in kernel k at file:line in f`` (the parts that are known)."""
        parts = []
        if self.module:
            parts.append(f"under {self.module}")
        if self.kernel:
            parts.append(f"in kernel {self.kernel}")
        parts.append(f"at {self.where()}")
        return " ".join(parts)


#: Folders an engine declared as machinery (:func:`add_machinery`), each ending in the path separator.
_DECLARED: list[str] = []


def add_machinery(folder: str) -> None:
    """Declare ``folder`` machinery: its frames are skipped as this package's are, and a crash's engine
    frame is never in it. For an engine's own shims between its code and the framework (the built-in
    engine's array facade, ``backends/xp``: the line that matters is the engine's call of
    ``xp.copy_(dst, src)``, not the facade's). The capture package never imports an engine: the
    engine declares its folder when it is imported."""
    path = os.path.join(os.path.abspath(folder), "")
    if path not in _DECLARED:
        _DECLARED.append(path)
        _machinery_dirs.cache_clear()
        _is_machinery.cache_clear()


def machinery_folders() -> tuple[str, ...]:
    """This package's folder and those declared with :func:`add_machinery`."""
    return (os.path.join(os.path.dirname(os.path.abspath(__file__)), ""), *_DECLARED)


@functools.cache
def _machinery_dirs() -> tuple[str, ...]:
    """Folders whose frames are machinery, not the engine's code."""
    dirs = [*machinery_folders(), os.path.abspath(contextlib.__file__)]
    for name in ("torch", "paddle"):
        file = getattr(sys.modules.get(name), "__file__", None)
        if file:
            dirs.append(os.path.dirname(os.path.abspath(file)) + os.sep)
    return tuple(dirs)


@functools.lru_cache(maxsize=4096)
def _is_machinery(filename: str) -> bool:
    path = os.path.abspath(filename)
    return path.startswith(_machinery_dirs()) or filename.startswith("<frozen")


def user_frame(skip: int = 1) -> tuple[str | None, int | None, str | None]:
    """(file, line, function) of the innermost frame outside the machinery, ``skip`` frames up from the caller."""
    frame: FrameType | None = sys._getframe(skip)
    while frame is not None and _is_machinery(frame.f_code.co_filename):
        frame = frame.f_back
    if frame is None:
        return None, None, None
    code = frame.f_code
    return code.co_filename, frame.f_lineno, getattr(code, "co_qualname", code.co_name)


def here(skip: int = 1) -> str:
    """:func:`user_frame` as ``file:line in function`` (for error messages)."""
    file, line, function = user_frame(skip + 1)
    return OpSite(file=file, line=line, function=function).where()
