"""capture.cuda.capturing: the order of a capture's calls, checked on the CPU with a recording stand-in for torch."""

from __future__ import annotations

import contextlib
from types import SimpleNamespace

import pytest

from graphcheck.capture.cuda import capturing


class _Recorder:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def torch(self) -> SimpleNamespace:
        @contextlib.contextmanager
        def stream(s):
            self.calls.append(f"enter {s}")
            try:
                yield
            finally:
                self.calls.append(f"leave {s}")

        cuda = SimpleNamespace(
            stream=stream,
            synchronize=lambda *a: self.calls.append("synchronize"),
            empty_cache=lambda: self.calls.append("empty_cache"),
        )
        return SimpleNamespace(cuda=cuda)

    def graph(self) -> SimpleNamespace:
        return SimpleNamespace(
            capture_begin=lambda pool: self.calls.append(f"begin {pool}"),
            capture_end=lambda: self.calls.append("end"),
        )


def test_capture_runs_on_the_stream_into_the_pool_without_emptying_caches() -> None:
    rec = _Recorder()
    with capturing(rec.torch(), rec.graph(), "pool", "side"):
        rec.calls.append("work")
    assert rec.calls == ["enter side", "begin pool", "work", "end", "leave side"]


def test_a_failing_region_still_ends_the_capture_and_leaves_the_stream() -> None:
    rec = _Recorder()
    with pytest.raises(RuntimeError, match="region"):
        with capturing(rec.torch(), rec.graph(), None, "side"):
            raise RuntimeError("region")
    assert rec.calls == ["enter side", "begin None", "end", "leave side"]
