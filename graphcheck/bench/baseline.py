"""The fuzz baseline of ``graphcheck bench --baseline FILE|DIR``.

DIR is a graphcheck checkout (an older commit, say): :func:`measure_checkout` runs
``benchmarks/fuzz_baseline.py`` on it first, in the same run and on the same machine
as the benchmarks it is compared with. FILE is the ``summary.json`` of an earlier
``graphcheck bench`` run, or what ``benchmarks/fuzz_baseline.py`` wrote before
(both keep the figures under ``fuzz.rows``). The row taken is the one of that
checkout's default fuzz path: ``pooled``, else ``baseline``, else ``fresh``. Only
rows with per-suite figures can be compared suite for suite, so one without them
is refused.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from graphcheck.bench.run import FuzzRow
from graphcheck.display import one_line
from graphcheck.errors import InputError
from graphcheck.scenario import read_regular_file

#: Rows in order of preference: the default fuzz path of the checkout that wrote the file.
_DEFAULT_MODES = ("pooled", "baseline", "fresh")


def measure_checkout(checkout: Path, backend: str, emulate: bool, out: Path, log: Path) -> Path:
    """Run ``benchmarks/fuzz_baseline.py`` with ``checkout`` first on PYTHONPATH; the JSON it wrote.

    InputError when ``checkout`` holds no graphcheck package or the measurement fails (its
    output is in ``log``)."""
    if not (checkout / "graphcheck" / "__init__.py").is_file():
        raise InputError(f"--baseline {checkout}: a folder, but not a graphcheck checkout (no graphcheck/__init__.py)")
    script = Path(__file__).resolve().parents[2] / "benchmarks" / "fuzz_baseline.py"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    env["PYTHONPATH"] = str(checkout.resolve()) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("OMP_NUM_THREADS", "1")
    out = out.resolve()  # the script runs in the checkout
    command = [
        sys.executable,
        str(script),
        "--out",
        str(out),
        "--backend",
        backend,
        *(["--emulate"] if emulate else []),
    ]
    with open(log, "w", encoding="utf-8") as handle:
        rc = subprocess.call(command, cwd=checkout, env=env, stdout=handle, stderr=subprocess.STDOUT)
    if rc != 0 or not out.is_file():
        raise InputError(f"--baseline {checkout}: measuring it failed (exit {rc}; see {log})")
    return out


def read_baseline(path: Path) -> tuple[FuzzRow, str]:
    """The baseline row of ``path`` and a line naming where it came from; InputError when unusable."""
    try:  # a regular file of bounded size: never a FIFO (a hang) or /dev/zero (memory without end)
        data = json.loads(read_regular_file(path, _MAX_BASELINE_BYTES), parse_int=_bounded_int)
    except OSError as exc:
        raise InputError(f"--baseline {path}: cannot read it ({exc.strerror or exc})") from None
    except RecursionError:
        raise InputError(f"--baseline {path}: not JSON (nested too deeply)") from None
    except ValueError as exc:  # not UTF-8, not JSON, an integer too long
        raise InputError(f"--baseline {path}: not JSON ({one_line(str(exc))[:200]})") from None
    rows = data.get("fuzz", {}).get("rows") if isinstance(data, dict) and isinstance(data.get("fuzz"), dict) else None
    if not isinstance(rows, list):
        raise InputError(
            f"--baseline {path}: no fuzz.rows (a graphcheck bench summary.json, or benchmarks/fuzz_baseline.py's output)"
        )
    by_mode = {row.get("mode"): row for row in rows if isinstance(row, dict)}
    mode = next((m for m in _DEFAULT_MODES if m in by_mode), None)
    if mode is None:
        raise InputError(f"--baseline {path}: no fuzz row of mode {', '.join(_DEFAULT_MODES)}")
    row = _row(by_mode[mode], f"--baseline {path}: fuzz row {mode!r}")
    source = data.get("source") or data.get("command") or ""
    return row, f"{path} ({mode}{': ' + str(source) if source else ''})"


def _row(raw: dict[str, Any], where: str) -> FuzzRow:
    per_suite = raw.get("per_suite")
    if not isinstance(per_suite, dict) or not per_suite:
        raise InputError(f"{where} has no per-suite figures (bench it again with this graphcheck)")
    suites = []
    for name, figures in per_suite.items():
        examples = _number(
            figures.get("examples") if isinstance(figures, dict) else None, f"{where}, suite {name!r:.60}"
        )
        seconds = _number(figures.get("seconds"), f"{where}, suite {name!r:.60}")
        suites.append((one_line(str(name))[:100], int(examples), float(seconds)))
    return FuzzRow(
        "baseline",
        sum(n for _, n, _ in suites),
        int(_number(raw.get("configs", 0), where)),
        int(_number(raw.get("steps", 0), where)),
        sum(s for _, _, s in suites),
        int(_number(raw.get("per_config", 1), where)),
        tuple(suites),
    )


#: The largest baseline file read: a bench summary is a few KiB.
_MAX_BASELINE_BYTES = 4 * 2**20
#: The largest figure a baseline may hold: far above any count or seconds a bench measures.
_MAX_FIGURE = 10**15


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > 18:
        raise ValueError(f"an integer of {len(text)} digits")
    return int(text)


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InputError(f"{where}: expected a non-negative number, got {one_line(repr(value))[:60]}")
    if not 0 <= value <= _MAX_FIGURE:
        raise InputError(f"{where}: expected a number in [0, {_MAX_FIGURE}], got {one_line(repr(value))[:60]}")
    return float(value)


__all__ = ["measure_checkout", "read_baseline"]
