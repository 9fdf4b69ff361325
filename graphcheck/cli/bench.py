"""``graphcheck bench``: benchmarks/ under pytest-benchmark, and the checking-overhead verdict."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from graphcheck.capture.devices import resolve
from graphcheck.check.engines import resolve_engine
from graphcheck.check.honoured import check_honoured
from graphcheck.cli import exitcodes
from graphcheck.cli.common import claim_run_dir, make_dir
from graphcheck.cli.console import make_console
from graphcheck.display import redacted
from graphcheck.errors import InputError


def bench_command(args: argparse.Namespace) -> int:
    """Run benchmarks/ under pytest-benchmark; exit 0 when the targets are met (the checking overhead;
    with --baseline, the fuzz throughput), else 1."""
    import importlib.util

    from rich.markup import escape

    from graphcheck.bench.baseline import measure_checkout, read_baseline
    from graphcheck.bench.console import (
        decode_table,
        fuzz_table,
        lockstep_table,
        op_graphs_table,
        parallel_table,
        startup_table,
        verdict_line,
    )
    from graphcheck.bench.run import BenchRun, benchmarks_dir, log_tail, run_benchmarks, summarise, write_summary
    from graphcheck.check.timings import overhead_target
    from graphcheck.report import new_run_id

    if not benchmarks_dir().is_dir():
        raise InputError(f"no benchmarks folder at {benchmarks_dir()}: run graphcheck bench from a source checkout")
    if importlib.util.find_spec("pytest_benchmark") is None:
        raise InputError("graphcheck bench needs pytest-benchmark (pip install 'graphcheck[test]')")
    checkout = Path(args.baseline) if args.baseline and Path(args.baseline).is_dir() else None
    # A baseline file is read (and a bad one refused) before anything runs; a checkout is measured first.
    baseline = read_baseline(Path(args.baseline)) if args.baseline and checkout is None else None
    backend = resolve(args.backend, emulate=args.emulate, emulator=args.emulator)
    engine = resolve_engine(args.engine)  # a bad SPEC is exit 2 here, not a failure inside every benchmark
    check_honoured(engine.spec, engine.capabilities, None, backend)
    if args.out:
        run_id, out_dir = new_run_id(), Path(args.out)
        make_dir(out_dir, "folder")
    else:
        run_id, out_dir = claim_run_dir(Path("reports") / "bench")
    console = make_console()
    console.print(
        f"graphcheck bench {run_id}: {backend.description}"
        + ("" if engine.builtin else f", engine {escape(engine.spec)}")
        + (" (quick)" if args.quick else "")
    )
    started = time.perf_counter()
    if checkout is not None:
        console.print(f"measuring the baseline {escape(str(checkout))} first (benchmarks/fuzz_baseline.py)")
        measured = measure_checkout(
            checkout, backend.name, bool(args.emulate), out_dir / "baseline.json", out_dir / "baseline.log"
        )
        baseline = read_baseline(measured)
    rc, data = run_benchmarks(
        BenchRun(
            backend.name,
            bool(args.emulate),
            bool(args.quick),
            out_dir.resolve(),
            args.select,
            engine.spec,
            args.emulator,
        )
    )
    summary = summarise(
        data, backend=backend.name, device=backend.device, overhead_target=overhead_target(backend.device), pytest_rc=rc
    )
    if baseline is not None:
        summary.baseline, summary.baseline_source = baseline
    extra = {
        "run_id": run_id,
        "command": redacted(" ".join(args.argv)),
        "quick": bool(args.quick),
        "engine": engine.spec,
        "elapsed_s": time.perf_counter() - started,
    }
    path = write_summary(summary, out_dir, extra)
    if rc != 0:
        console.print(log_tail(out_dir), markup=False, highlight=False)
    if summary.decode:
        console.print(decode_table(summary))
    if summary.op_graphs:
        console.print(op_graphs_table(summary))
    if summary.lockstep:
        console.print(lockstep_table(summary))
    if summary.fuzz:
        console.print(fuzz_table(summary))
    if summary.parallel:
        console.print(parallel_table(summary))
    if summary.startup is not None:
        console.print(startup_table(summary))
    console.print(verdict_line(summary))
    console.print(f"results: {path} (pytest-benchmark JSON: {out_dir / 'bench.json'}, log: {out_dir / 'pytest.log'})")
    return exitcodes.CLEAN if summary.passed else exitcodes.DIVERGENCE


__all__ = ["bench_command"]
