"""State shared by a runner's kernel observer and the framework's op hooks during one capture."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Iterator

from .base import Region


class CaptureState:
    """Shared by the kernel observer and the framework's op hook during one capture."""

    def __init__(self, label: str, *, check_escapes: bool) -> None:
        self.label = label
        self.region = Region()
        self.check_escapes = check_escapes
        self.kernel: str | None = None  # name of the kernel running now
        self.kernel_storages: set[int] = set()  # storages the running kernel may touch
        # Called with each tensor an op is about to write, by frameworks whose op hook sees
        # writes (``FrameworkOps.tracks_writes``): the recorder saves the storage then.
        self.before_write: Callable[[Any], None] | None = None

    @contextmanager
    def in_kernel(self, name: str, storages: set[int]) -> Iterator[None]:
        self.kernel, self.kernel_storages = name, storages
        try:
            yield
        finally:
            self.kernel, self.kernel_storages = None, set()
