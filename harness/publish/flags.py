"""The flags of every (framework, metric) of a run, in words, from the harness's own verdicts.

A flag is a reason not to trust a number as a normal point: its sync escaped the clock, its steady
samples compiled (a retrace per call), it kept more cores busy than `--threads` allows, its rate is above the device's peak, or its framework is not comparable (failed the agreement gate, or
the precision probe measured other arithmetic). The site shows every flag next to its number and
draws a flagged number apart from the normal points, never as one of them.
"""

from __future__ import annotations

from harness.judge.assessment import Assessment
from harness.judge.plausibility import ESCAPED, IMPLAUSIBLE
from harness.judge.verdicts import Verdicts
from harness.publish.collect import PublishedRun
from harness.text.escape import plain
from harness.text.numbers import fmt_giga

Key = tuple[str, str]  # (framework, metric) as the result file names them; the texts are made inert

ESCAPED_WORD = "ESCAPED"
IMPLAUSIBLE_WORD = "IMPLAUSIBLE"
NOT_COMPARABLE_WORD = "NOT COMPARABLE"
RECOMPILED_WORD = "RECOMPILED"
THREADS_WORD = "THREADS"


def run_flags(judged: Assessment) -> dict[Key, list[str]]:
    """(framework, metric) -> its flags, each one line starting with its word in capitals."""
    flags: dict[Key, list[str]] = {}
    for key in sorted(judged.escaped):
        flags.setdefault(key, []).append(f"{ESCAPED_WORD}: {ESCAPED}")
    for key, (k, n) in sorted(judged.recompiled.items()):
        flags.setdefault(key, []).append(
            f"{RECOMPILED_WORD}: {k} of {n} steady samples compiled (a retrace per call); they time the compiler"
        )
    for key, (busy, allowed) in sorted(judged.over_threads.items()):
        flags.setdefault(key, []).append(
            f"{THREADS_WORD}: {busy:.2f} cores busy under --threads {allowed} (the job undid its core limit)"
        )
    for finding in judged.implausible_findings:
        flags.setdefault((finding.framework, finding.metric), []).append(
            f"{IMPLAUSIBLE_WORD}: {fmt_giga(finding.achieved)} {finding.unit} is above the limit "
            f"{fmt_giga(finding.ceiling or 0)} {finding.unit} ({finding.basis}); {IMPLAUSIBLE}"
        )
    for fw, why in judged.not_comparable.items():
        result = judged.run.results[fw]
        for metric in result["metrics"] if result["status"] == "ok" else []:
            flags.setdefault((fw, metric["name"]), []).append(f"{NOT_COMPARABLE_WORD} (†): {why}")
    return {key: [plain(f) for f in found] for key, found in flags.items()}


def run_notes(judged: Assessment) -> dict[Key, list[str]]:
    """Caveats that leave a number usable but worth a word: a time whose sync was not checked."""
    notes: dict[Key, list[str]] = {}
    for fw, result in judged.run.results.items():
        for metric in result["metrics"] if result["status"] == "ok" else []:
            if metric["kind"] == "time" and judged.sync(fw, metric["name"]) == "unchecked":
                why = (metric.get("sync") or {}).get("why", "no barrier evidence in the result")
                notes.setdefault((fw, metric["name"]), []).append(f"sync not checked: {plain(why)}")
    return notes


class FlagBook:
    """Each run's assessment, flags and notes, worked out once (the gate and the lint are not free)
    and reused by every page that shows the run: its own page, its suite's history and each comparison."""

    def __init__(self, verdicts: Verdicts) -> None:
        self.verdicts = verdicts
        self._flags: dict[int, dict[Key, list[str]]] = {}
        self._notes: dict[int, dict[Key, list[str]]] = {}

    def assessment(self, entry: PublishedRun) -> Assessment:
        return self.verdicts.of(entry.run)

    def flags(self, entry: PublishedRun) -> dict[Key, list[str]]:
        if entry.key not in self._flags:
            self._flags[entry.key] = run_flags(self.assessment(entry))
        return self._flags[entry.key]

    def notes(self, entry: PublishedRun) -> dict[Key, list[str]]:
        if entry.key not in self._notes:
            self._notes[entry.key] = run_notes(self.assessment(entry))
        return self._notes[entry.key]

    def count(self, entry: PublishedRun) -> int:
        """How many flags the run carries in all."""
        return sum(len(found) for found in self.flags(entry).values())
