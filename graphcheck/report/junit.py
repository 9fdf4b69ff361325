"""junit.xml: one <testsuite name="graphcheck">: one <testcase> per fuzzed suite, then one per other outcome.

A fuzzed suite's testcase (classname ``graphcheck.<backend>.suites``, named after
the suite) carries its examples and steps in ``<properties>`` and
``<system-out>``, and a ``<failure>`` with the shrunk scenario's divergences when
its search found one; that scenario's outcome is not listed again. Every other
outcome (the built-in demo scenarios, a replayed file) is a testcase of its own
(classname ``graphcheck.<backend>``), with a ``<failure>`` when it diverged.
"""

from __future__ import annotations

import re
import socket
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Sequence

from graphcheck.check.records import CheckOutcome
from graphcheck.display import shown
from graphcheck.files import safe_text, write_atomic
from graphcheck.report.model import SHRINK_STATES, RunInfo, pair_suites
from graphcheck.search.result import SuiteResult

#: Characters XML 1.0 does not allow, even escaped (C0 controls bar tab/newline/CR, U+FFFE/F);
#: surrogates, which it does not allow either, are written as ``\\udXXX`` first (files.safe_text).
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")

#: The failure body lists at most this many divergences.
MAX_LISTED = 200


def xml_text(text: str) -> str:
    """``text`` without the characters XML cannot carry (ElementTree escapes the rest), and with every
    other hidden code point (a bidi control, say) as a visible escape: a CI's test view shows it raw."""
    return _NOT_XML.sub("\ufffd", shown(safe_text(str(text)), keep="\n\t"))


def case_name(outcome: CheckOutcome, index: int) -> str:
    return outcome.scenario.name or f"scenario-{index}"


def failure_text(outcome: CheckOutcome) -> str:
    """The failure's body: every failing divergence's headline (the first followed by ``where: ...``, where
    it began, when localised), crash and capture tracebacks, then the ambiguous mismatches."""
    lines = [d.headline() for d in outcome.failures[:MAX_LISTED]]
    if lines and outcome.localisation is not None:
        lines.insert(1, f"where: {outcome.localisation.headline()}")
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
        classname=xml_text(f"graphcheck.{outcome.backend}"),
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


def _suite_case(parent: ET.Element, run: SuiteResult, outcome: CheckOutcome | None, run_info: RunInfo) -> bool:
    """One fuzzed suite's testcase (``outcome``: its reported one); returns whether it failed."""
    scenario = outcome.scenario.name if outcome is not None else None
    case = ET.SubElement(
        parent,
        "testcase",
        classname=xml_text(f"graphcheck.{run_info.backend}.suites"),
        name=xml_text(run.name),
        time=f"{run.elapsed_s:.3f}",
    )
    props = ET.SubElement(case, "properties")
    values = {
        "examples": str(run.examples),
        "steps": str(run.steps),
        "first_failure_at": "" if run.first_failure_at is None else str(run.first_failure_at),
        "shrink": run.shrink_state,
        "scenario": scenario or "",
    }
    for name, value in values.items():
        ET.SubElement(props, "property", name=name, value=xml_text(value))
    first = outcome.first if outcome is not None else None
    failed = first is not None or not run.clean
    if outcome is not None and first is not None:
        failure = ET.SubElement(case, "failure", message=xml_text(first.headline()), type=first.kind)
        failure.text = xml_text(f"{_shrink_line(run, scenario)}\n\n{failure_text(outcome)}")
    elif not run.clean:
        failure = ET.SubElement(case, "failure", message=xml_text(run.headline or "divergence"), type="divergence")
        why = (
            "It did not diverge when checked again."
            if outcome is not None
            else "It is not in this report (a smaller one of the same suite is, or the search kept none)."
        )
        failure.text = xml_text(f"{_shrink_line(run, scenario)}\n{why}")
    text = suite_summary(run, scenario)
    if outcome is not None and first is None and outcome.ambiguous:
        text += "\n\n" + failure_text(outcome)
    out = ET.SubElement(case, "system-out")
    out.text = xml_text(text)
    return failed


def _shrink_line(run: SuiteResult, scenario: str | None) -> str:
    shrink = run.shrink_state
    named = f"scenario {scenario}" if scenario else "the scenario"
    return f"{named}: {shrink} ({SHRINK_STATES.get(shrink, shrink)})"


def suite_summary(run: SuiteResult, scenario: str | None = None) -> str:
    """One line about a fuzzed suite: scenarios checked, steps, seconds, where it first failed, the shrink
    state and ``scenario``, the name of its reported outcome's scenario."""
    text = f"suite {run.name}: {run.examples} scenarios, {run.steps} steps, {run.elapsed_s:.3f} s, "
    text += "clean" if run.clean else "divergence"
    if run.first_failure_at is not None:
        text += f", first failure at example {run.first_failure_at}"
    if run.shrink_state != "-":
        text += f", {run.shrink_state}"
    if scenario:
        text += f", scenario {scenario}"
    return text


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
        "engine": run_info.engine,
    }
    if run_info.emulator != "kernel":
        values["emulator"] = run_info.emulator
    for name, value in values.items():
        ET.SubElement(props, "property", name=name, value=xml_text(value))


def junit_tree(
    outcomes: Sequence[CheckOutcome], run_info: RunInfo, suites: Sequence[SuiteResult] = ()
) -> ET.ElementTree:
    pairing = pair_suites(suites, outcomes)
    suite = ET.Element(
        "testsuite",
        name="graphcheck",
        tests=str(len(pairing.pairs) + len(pairing.rest)),
        failures="0",
        errors="0",
        skipped="0",
        time=f"{run_info.elapsed_s:.3f}",
        timestamp=xml_text(run_info.started_at),
        hostname=xml_text(socket.gethostname()),
    )
    _properties(suite, run_info)
    failures = 0
    for run, index in pairing.pairs:
        failures += _suite_case(suite, run, None if index is None else outcomes[index], run_info)
    for index in pairing.rest:
        _testcase(suite, outcomes[index], index)
        failures += not outcomes[index].clean
    suite.set("failures", str(failures))
    return ET.ElementTree(suite)


def write_junit(
    outcomes: Sequence[CheckOutcome], path: Path, run_info: RunInfo, *, suites: Sequence[SuiteResult] = ()
) -> Path:
    """Write junit.xml for CI (also behind ``graphcheck run --junit FILE``), atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tree = junit_tree(outcomes, run_info, suites)
    ET.indent(tree)
    return write_atomic(path, ET.tostring(tree.getroot(), encoding="utf-8", xml_declaration=True) + b"\n")
