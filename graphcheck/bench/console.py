"""Console tables of ``graphcheck bench`` (rich)."""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from graphcheck.bench.run import DECODE_MODES, FUZZ_SPEEDUP_TARGET, STARTUP_TARGET_S, BenchSummary, ParallelRow
from graphcheck.check.timings import LockstepTimings, checking_overhead, steps_per_second


def _ms(seconds: float | None) -> str:
    return "" if seconds is None else f"{seconds * 1e3:.3f}"


def decode_table(summary: BenchSummary) -> Table:
    """One row per running count: median ms of eager and of each graph scope, with its speedup."""
    modes = [m for m in DECODE_MODES if any(m in r.median_s for r in summary.decode)]
    table = Table(title=f"decode step, median ms ({summary.backend}, {summary.device})", title_justify="left")
    table.add_column("running", justify="right")
    table.add_column("bucket", justify="right")
    for mode in modes:
        table.add_column(f"{mode} ms" if mode == "eager" else f"{mode} ms (speedup)", justify="right")
    for row in summary.decode:
        cells = [str(row.running), "" if row.bucket is None else str(row.bucket)]
        for mode in modes:
            value = _ms(row.median_s.get(mode))
            speedup = row.speedup(mode) if mode != "eager" else None
            cells.append(f"{value} ({speedup:.2f}x)" if speedup is not None else value)
        table.add_row(*cells)
    return table


def op_graphs_table(summary: BenchSummary) -> Table:
    """One row per op-level benchmark group: median ms of eager and of each replay, against eager."""
    modes = [m for m in ("eager", "graph-kernel", "graph-ops") if any(m in r.median_s for r in summary.op_graphs)]
    table = Table(title="op-level emulator: replay vs eager, median ms (CPU)", title_justify="left")
    table.add_column("group")
    for mode in modes:
        table.add_column(f"{mode} ms" if mode == "eager" else f"{mode} ms (x eager)", justify="right")
    for row in summary.op_graphs:
        cells = [row.group]
        for mode in modes:
            value, ratio = _ms(row.median_s.get(mode)), row.versus_eager(mode) if mode != "eager" else None
            cells.append(f"{value} ({ratio:.2f}x)" if ratio is not None else value)
        table.add_row(*cells)
    return table


def _per_step(seconds: float, t: LockstepTimings) -> str:
    return f"{seconds / t.steps * 1e3:.2f}" if t.steps else ""


def _lockstep_cells(name: str, batch: str, t: LockstepTimings, target: float) -> list[str]:
    overhead, rate = checking_overhead(t), steps_per_second(t)
    colour = "green" if overhead is not None and overhead <= target else "red"
    return [
        name,
        batch,
        str(t.steps),
        "" if rate is None else f"{rate:.1f}",
        _per_step(t.reference, t),
        _per_step(t.eager, t),
        _per_step(t.graph, t),
        _per_step(t.record + t.diff, t),
        "n/a" if overhead is None else f"[{colour}]{overhead:.2f}[/]",
    ]


def lockstep_table(summary: BenchSummary) -> Table:
    """Per scenario and for the whole set: steps/s, ms per step by phase, checking overhead."""
    target = summary.overhead_target
    table = Table(
        title=f"lockstep runner ({summary.backend}, {summary.runner} runner); checking overhead target <= {target:.1f}",
        title_justify="left",
    )
    for column in (
        "scenario",
        "batch",
        "steps",
        "steps/s",
        "reference ms",
        "eager ms",
        "graph ms",
        "record+diff ms",
        "overhead",
    ):
        table.add_column(column, justify="left" if column == "scenario" else "right")
    for row in summary.lockstep:
        table.add_row(*_lockstep_cells(row.scenario, str(row.batch), row.timings, target))
    if summary.lockstep:
        table.add_section()
        table.add_row(*_lockstep_cells("[bold]whole set[/]", "", summary.total, target))
    return table


def fuzz_table(summary: BenchSummary) -> Table:
    """Fuzz throughput per mode (fresh engines per scenario, pooled engines per batch), the
    baseline's (``--baseline``) and the ratios: pooled over fresh (pooling alone), pooled over
    the baseline on the suites both ran (the target)."""
    gain, speedup = summary.fuzz_gain, summary.fuzz_speedup
    judged = (
        f"pooled over --baseline target >= {FUZZ_SPEEDUP_TARGET:.1f}x"
        if summary.baseline
        else "no --baseline: not judged"
    )
    table = Table(title=f"fuzz ({summary.backend}); {judged}", title_justify="left")
    for column in ("mode", "scenarios per config", "configs", "examples", "steps", "seconds", "examples/s", "ratio"):
        table.add_column(column, justify="left" if column == "mode" else "right")
    rows = ([summary.baseline] if summary.baseline is not None else []) + list(summary.fuzz)
    for row in rows:
        rate = row.examples_per_s
        ratio = ""
        if row.mode == "pooled":
            parts = [] if speedup is None else [f"{speedup:.2f}x fresh"]
            if gain is not None:
                colour = "green" if gain.ratio >= FUZZ_SPEEDUP_TARGET else "red"
                parts.append(f"[{colour}]{gain.ratio:.2f}x baseline[/]")
            ratio = ", ".join(parts)
        table.add_row(
            row.mode,
            f"<= {row.per_config}",
            str(row.configs),
            str(row.examples),
            str(row.steps),
            f"{row.seconds:.1f}",
            "" if rate is None else f"{rate:.2f}",
            ratio,
        )
    if gain is not None:
        table.caption = (
            f"baseline {escape(gain.source)}; compared on {len(gain.suites)} suites both ran: "
            f"{gain.baseline_rate:.2f}/s vs {gain.pooled_rate:.2f}/s pooled"
        )
    return table


def _busy(row: ParallelRow) -> str:
    if row.gpu_busy is None:
        return escape(row.gpu_busy_source or "unavailable")
    return f"{row.gpu_busy:.0%} ({escape(row.gpu_busy_source)}, {row.gpu_busy_samples} samples)"


def parallel_table(summary: BenchSummary) -> Table:
    """Aggregate fuzz examples/s of ``graphcheck run`` at ``-j 1`` and at the ``-j auto`` plan, with the
    GPU's busy fraction during each run; the plan's reason as the caption. Shown, not judged."""
    table = Table(title=f"parallel fuzz: graphcheck run at -j 1 and -j auto ({summary.backend})", title_justify="left")
    for column in ("run", "workers", "examples", "seconds", "examples/s", "x -j 1", "GPU busy"):
        table.add_column(column, justify="left" if column in ("run", "GPU busy") else "right")
    speedup = summary.parallel_speedup
    for row in summary.parallel:
        rate = row.examples_per_s
        table.add_row(
            "-j 1" if row.mode == "j1" else f"-j {escape(row.mode)}",
            str(row.workers),
            str(row.examples),
            f"{row.seconds:.1f}",
            "" if rate is None else f"{rate:.2f}",
            f"{speedup:.2f}x" if row.mode == "auto" and speedup is not None else "",
            _busy(row),
        )
    plans = [row.plan for row in summary.parallel if row.plan]
    if plans:
        table.caption = escape(plans[0])
    return table


def startup_table(summary: BenchSummary) -> Table:
    """Process start to the first example of ``graphcheck run`` (judged on the CPU backend only)."""
    judged = f"target <= {STARTUP_TARGET_S:.1f} s" if summary.startup_judged else "judged on the cpu backend only"
    table = Table(title=f"start-up to the first example ({summary.backend}); {judged}", title_justify="left")
    for column in ("seconds (median)", "rounds", "torch.compile modules beyond import torch"):
        table.add_column(column, justify="right")
    row = summary.startup
    if row is not None:
        ok = not summary.startup_judged or row.seconds <= STARTUP_TARGET_S
        colour = "green" if ok else "red"
        table.add_row(f"[{colour}]{row.seconds:.2f}[/]", str(row.rounds), str(row.watched_modules))
    return table


def verdict_line(summary: BenchSummary) -> str:
    if not summary.passed:
        return "[bold red]TARGETS NOT MET[/] " + escape("; ".join(summary.problems))
    met = []
    if summary.overhead is not None:
        met.append(f"checking overhead {summary.overhead:.2f} <= {summary.overhead_target:.1f}")
    gain = summary.fuzz_gain
    if gain is not None:
        met.append(f"pooled fuzzing {gain.ratio:.2f}x the baseline >= {FUZZ_SPEEDUP_TARGET:.1f}x")
    if summary.startup is not None and summary.startup_judged:
        met.append(f"start-up {summary.startup.seconds:.2f} s <= {STARTUP_TARGET_S:.1f} s")
    return "[bold green]TARGETS MET[/] " + "; ".join(met or ["(fuzz figures only: pass --baseline to judge them)"])


__all__ = [
    "decode_table",
    "fuzz_table",
    "lockstep_table",
    "op_graphs_table",
    "parallel_table",
    "startup_table",
    "verdict_line",
]
