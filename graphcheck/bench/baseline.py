"""Reading a fuzz baseline for ``graphcheck bench --baseline FILE``.

FILE is the ``summary.json`` of an earlier ``graphcheck bench`` run, or what
``benchmarks/fuzz_baseline.py`` writes for a checkout that has no fuzz benchmark
(both keep the figures under ``fuzz.rows``). The row taken is the one of that
checkout's default fuzz path: ``pooled``, else ``baseline``, else ``fresh``. Only
rows with per-suite figures can be compared suite for suite, so one without them
is refused.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from graphcheck.bench.run import FuzzRow
from graphcheck.errors import InputError

#: Rows in order of preference: the default fuzz path of the checkout that wrote the file.
_DEFAULT_MODES = ("pooled", "baseline", "fresh")


def read_baseline(path: Path) -> tuple[FuzzRow, str]:
    """The baseline row of ``path`` and a line naming where it came from; InputError when unusable."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"--baseline {path}: cannot read it ({exc.strerror or exc})") from None
    except ValueError as exc:
        raise InputError(f"--baseline {path}: not JSON ({exc})") from None
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
        examples = _number(figures.get("examples") if isinstance(figures, dict) else None, f"{where}, suite {name}")
        seconds = _number(figures.get("seconds"), f"{where}, suite {name}")
        suites.append((str(name), int(examples), float(seconds)))
    return FuzzRow(
        "baseline",
        sum(n for _, n, _ in suites),
        int(_number(raw.get("configs", 0), where)),
        int(_number(raw.get("steps", 0), where)),
        sum(s for _, _, s in suites),
        int(_number(raw.get("per_config", 1), where)),
        tuple(suites),
    )


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise InputError(f"{where}: expected a non-negative number, got {value!r:.60}")
    return float(value)


__all__ = ["read_baseline"]
