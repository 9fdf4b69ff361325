"""``graphcheck bench``'s parallel rows: ``graphcheck run`` at -j 1 and at -j auto, and the GPU busy sampler.

The sampler runs on a fake reader (no GPU needed); no timed assertions.
"""

from __future__ import annotations

import io
import json
import threading
from pathlib import Path

import pytest
from rich.console import Console

from graphcheck.bench.console import parallel_table
from graphcheck.bench.gpu_busy import BusySampler, gpu_sampler, watched_gpus
from graphcheck.bench.run import BenchSummary, ParallelRow, summarise
from graphcheck.cli import exitcodes, main

from _layers import slow


class _FakeReader:
    """utilization.gpu of two GPUs, sample after sample (None: a failing one); past the last, every one fails."""

    def __init__(self, samples: list[list[float] | None]):
        self.samples, self.calls, self.done = samples, 0, threading.Event()

    def __call__(self) -> list[float]:
        sample = self.samples[self.calls] if self.calls < len(self.samples) else None
        self.calls += 1
        if self.calls >= len(self.samples):
            self.done.set()
        if sample is None:
            raise RuntimeError("nvidia-smi stopped answering")
        return sample


def test_the_sampler_averages_its_samples_in_a_thread() -> None:
    fake = _FakeReader([[10.0, 30.0], None, [50.0, 70.0]])
    with BusySampler(fake, "nvml", interval_s=0.001) as sampler:
        assert fake.done.wait(10)
    reading = sampler.reading()
    assert reading.source == "nvml" and reading.samples == 2  # the failing samples are skipped
    assert reading.fraction == pytest.approx((0.2 + 0.6) / 2)  # per sample the mean over the GPUs


def test_a_sampler_without_a_reader_or_samples_says_unavailable() -> None:
    with BusySampler(None, "unavailable: cpu runs on no GPU") as sampler:
        pass
    assert sampler.reading().fraction is None and sampler.reading().source == "unavailable: cpu runs on no GPU"
    never = BusySampler(lambda: [1.0], "nvml", interval_s=60)
    with never:
        pass  # left before the first sample
    assert never.reading().fraction is None and "gave no sample" in never.reading().source


def test_only_a_real_cuda_backend_is_sampled() -> None:
    for backend, emulated in (("cpu", True), ("cuda", True), ("xpu", False)):
        sampler = gpu_sampler(backend, emulated, {})
        assert sampler.read is None and sampler.source.startswith("unavailable: ")
    assert watched_gpus("0, 2") == ["0", "2"] and watched_gpus("GPU-1a2b") == ["GPU-1a2b"]
    assert watched_gpus(None) is None and watched_gpus("MIG-1/2/3") is None


def _extra(mode: str, workers: int, examples: int, seconds: float, busy: float | None) -> dict:
    return {
        "kind": "parallel",
        "mode": mode,
        "workers": workers,
        "examples": examples,
        "seconds": seconds,
        "plan": "-j auto: 16 workers, 1 GPU with CUDA MPS (one per CPU core)" if mode == "auto" else "",
        "gpu_busy": busy,
        "gpu_busy_source": "nvml" if busy is not None else "unavailable: cpu runs on no GPU",
        "gpu_busy_samples": 120 if busy is not None else 0,
    }


def test_summary_json_has_the_parallel_rows_and_their_ratio() -> None:
    data = {
        "benchmarks": [
            {"extra_info": _extra("auto", 16, 8208, 120.0, 0.6), "stats": {"median": 120.0}},
            {"extra_info": _extra("j1", 1, 513, 62.5, 0.12), "stats": {"median": 62.5}},
        ]
    }
    summary = summarise(data, backend="cuda", device="cuda", overhead_target=2.0)
    assert [r.mode for r in summary.parallel] == ["j1", "auto"]
    doc = json.loads(json.dumps(summary.to_dict()))
    one, auto = doc["parallel"]["rows"]
    assert set(one) == {
        "mode",
        "workers",
        "examples",
        "seconds",
        "plan",
        "gpu_busy",
        "gpu_busy_source",
        "gpu_busy_samples",
        "examples_per_s",
    }
    assert one["examples_per_s"] == pytest.approx(513 / 62.5) and auto["gpu_busy"] == 0.6
    assert doc["parallel"]["speedup"] == pytest.approx((8208 / 120) / (513 / 62.5))
    assert summary.passed, "parallel rows are figures: shown, not judged"


def test_the_parallel_table_shows_the_plan_and_an_unavailable_gpu() -> None:
    rows = [
        ParallelRow(**{k: v for k, v in _extra(m, w, 4, 2.0, None).items() if k != "kind"})
        for m, w in (("j1", 1), ("auto", 2))
    ]
    summary = BenchSummary("cpu", "cpu", "emulated", 3.0, parallel=rows)
    out = io.StringIO()
    Console(file=out, width=300, color_system=None).print(parallel_table(summary))
    text = out.getvalue()
    assert "-j auto: 16 workers" in text and "unavailable: cpu runs on no GPU" in text and "1.00x" in text
    assert BenchSummary("cpu", "cpu", "emulated", 3.0, parallel=[]).to_dict()["parallel"] == {
        "rows": [],
        "speedup": None,
    }


@slow
def test_quick_parallel_bench_on_cpu(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("pytest_benchmark")
    out = tmp_path / "bench"
    code = main(["bench", "--backend", "cpu", "--quick", "--out", str(out), "-k", "parallel"])
    printed = capsys.readouterr().out
    log = (out / "pytest.log").read_text() if (out / "pytest.log").exists() else ""
    assert code == exitcodes.CLEAN, printed + log
    rows = json.loads((out / "summary.json").read_text())["parallel"]["rows"]
    assert [r["mode"] for r in rows] == ["j1", "auto"] and all(r["examples"] >= 1 for r in rows), log
    assert rows[1]["plan"].startswith("-j auto: ") and rows[0]["gpu_busy"] is None
    assert "parallel fuzz" in printed
