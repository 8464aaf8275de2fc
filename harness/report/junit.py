"""A comparison as a JUnit XML report: one test case per (framework, metric) verdict.

Every CI system reads JUnit XML, so a regression shows up as a failed check beside the build
instead of a number in a log. A case fails on a significant slowdown (above `--fail-above` when
given) and where one side has no number (a failed, missing or interrupted job: `type="failed"`),
is an error where the machine disturbed most of a side's samples (`type="disturbed"`: measured,
but not on a quiet machine; the command exits 3 for it, as `run` does), is skipped where no
verdict exists for any other reason (excluded metric, too few processes), and passes otherwise;
the message carries the same numbers `harness compare` prints. A case fails by the gate's own rule
(`Change.fails`, which `harness.judge.conclusion.gate` applies), on the finished comparison the terminal printed.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from harness.judge.compare import Change, Comparison
from harness.report.comparison import evidence_lines, p_cell, ratio_cell, value_cell
from harness.text.escape import plain


def skipped(change: Change) -> bool:
    return not change.disturbed and change.failed is None and bool(change.excluded or change.no_verdict)


def _case(parent: ET.Element, suite: str, change: Change, fail_above: float | None) -> None:
    # plain(): names come from result files; control characters are not even legal in XML 1.0.
    case = ET.SubElement(
        parent,
        "testcase",
        classname=plain(f"harness.judge.compare.{suite}.{change.framework}"),
        name=plain(change.metric),
    )
    numbers = (
        f"A {value_cell(change.median_a, plain(change.unit))}, B {value_cell(change.median_b, plain(change.unit))}, "
        f"B/A {ratio_cell(change)}, p {p_cell(change)}: {plain(change.verdict)}"
    )
    if change.failed is not None:
        ET.SubElement(case, "failure", message=plain(change.failed), type="failed").text = numbers
    elif change.disturbed:
        message = f"{plain(change.verdict)}: rerun on a quiet machine"
        ET.SubElement(case, "error", message=message, type="disturbed").text = numbers
    elif skipped(change):
        ET.SubElement(case, "skipped", message=plain(change.verdict))
    elif change.fails(fail_above):
        limit = "" if fail_above is None else f" (above --fail-above {fail_above:g} %)"
        ET.SubElement(case, "failure", message=plain(change.verdict) + limit, type="regression").text = numbers
    ET.SubElement(case, "system-out").text = numbers


def comparison_junit(comparison: Comparison, fail_above: float | None) -> str:
    suite = str(comparison.a.summary.get("suite"))
    a, b = comparison.a.summary.get("run_id"), comparison.b.summary.get("run_id")
    cases = comparison.changes
    counts = {
        "tests": str(len(cases)),
        "failures": str(sum(1 for c in cases if not c.disturbed and not skipped(c) and c.fails(fail_above))),
        "errors": str(sum(1 for c in cases if c.disturbed and c.failed is None)),
    }
    root = ET.Element("testsuites", {"name": "harness compare", **counts})
    skips = str(sum(1 for c in cases if skipped(c)))
    group = ET.SubElement(root, "testsuite", {"name": plain(f"compare {a} {b} ({suite})"), **counts, "skipped": skips})
    properties = ET.SubElement(group, "properties")
    for name, value in (("run_a", a), ("run_b", b), ("suite", suite)):
        ET.SubElement(properties, "property", name=name, value=plain(value))
    for change in cases:
        _case(group, suite, change, fail_above)
    ET.SubElement(group, "system-out").text = "\n".join(plain(line) for line in evidence_lines(comparison))
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
