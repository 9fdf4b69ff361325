"""junit.xml: one <testsuite name="graphcheck">, one <testcase> per outcome, a <failure> when it diverged."""

from __future__ import annotations

import re
import socket
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Sequence

from graphcheck.records import CheckOutcome
from graphcheck.report.model import RunInfo

#: Characters XML 1.0 does not allow, even escaped (C0 controls bar tab/newline/CR, surrogates, U+FFFE/F).
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")

#: The failure body lists at most this many divergences.
MAX_LISTED = 200


def xml_text(text: str) -> str:
    """``text`` without the characters XML cannot carry (ElementTree escapes the rest)."""
    return _NOT_XML.sub("\ufffd", text)


def case_name(outcome: CheckOutcome, index: int) -> str:
    return outcome.scenario.name or f"scenario-{index}"


def failure_text(outcome: CheckOutcome) -> str:
    lines = [d.headline() for d in outcome.failures[:MAX_LISTED]]
    if len(outcome.failures) > MAX_LISTED:
        lines.append(f"... {len(outcome.failures) - MAX_LISTED} more divergences (see divergences.json)")
    for div in outcome.failures[:MAX_LISTED]:
        if div.detail and div.kind in ("crash", "capture"):
            lines += ["", f"--- {div.kind} at step {div.step} ---", div.detail]
    if outcome.ambiguous:
        lines += ["", f"{len(outcome.ambiguous)} ambiguous mismatch(es), reported but not failing:"]
        lines += [d.headline() for d in outcome.ambiguous[:MAX_LISTED]]
    return "\n".join(lines)


def _testcase(suite: ET.Element, outcome: CheckOutcome, index: int) -> None:
    case = ET.SubElement(
        suite,
        "testcase",
        classname=f"graphcheck.{outcome.backend}",
        name=xml_text(case_name(outcome, index)),
        time=f"{outcome.elapsed_s:.3f}",
    )
    first = outcome.first
    if first is not None:
        failure = ET.SubElement(case, "failure", message=xml_text(first.headline()), type=first.kind)
        failure.text = xml_text(failure_text(outcome))
    elif outcome.ambiguous:
        out = ET.SubElement(case, "system-out")
        out.text = xml_text(failure_text(outcome))


def _properties(suite: ET.Element, run_info: RunInfo) -> None:
    props = ET.SubElement(suite, "properties")
    values = {
        "run_id": run_info.run_id,
        "backend": run_info.backend,
        "runner": run_info.runner,
        "emulate": str(run_info.emulate).lower(),
        "seed": "" if run_info.seed is None else str(run_info.seed),
        "profile": run_info.profile,
        "version": run_info.version,
        "faults": ",".join(run_info.faults),
    }
    for name, value in values.items():
        ET.SubElement(props, "property", name=name, value=xml_text(value))


def junit_tree(outcomes: Sequence[CheckOutcome], run_info: RunInfo) -> ET.ElementTree:
    suite = ET.Element(
        "testsuite",
        name="graphcheck",
        tests=str(len(outcomes)),
        failures=str(sum(not o.clean for o in outcomes)),
        errors="0",
        skipped="0",
        time=f"{run_info.elapsed_s:.3f}",
        timestamp=run_info.started_at,
        hostname=xml_text(socket.gethostname()),
    )
    _properties(suite, run_info)
    for index, outcome in enumerate(outcomes):
        _testcase(suite, outcome, index)
    return ET.ElementTree(suite)


def write_junit(outcomes: Sequence[CheckOutcome], path: Path, run_info: RunInfo) -> Path:
    """Write junit.xml for CI (also behind ``graphcheck run --junit FILE``)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tree = junit_tree(outcomes, run_info)
    ET.indent(tree)
    tree.write(path, encoding="utf-8", xml_declaration=True)
    return path
