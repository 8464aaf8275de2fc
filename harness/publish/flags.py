"""The flags of every (framework, metric) of a run, in words, from the harness's own verdicts.

A flag is a reason not to trust a number as a normal point: a guard (judge/guards/: its sync escaped
the clock, its steady samples compiled, it kept more cores busy than `--threads` allows, its rate is
above the device's peak, most of its samples were contended, ...) raised on it, or its framework is not
comparable (failed the agreement gate, the precision probe measured other arithmetic, other
like-for-like settings). A run most of whose samples the machine disturbed carries a flag of its own. The site shows every flag next to its number and
draws a flagged number apart from the normal points, never as one of them.
"""

from __future__ import annotations

from collections.abc import Mapping

from harness.core.statistics import Summary
from harness.judge.assessment import Assessment
from harness.judge.verdicts import Verdicts
from harness.publish.collect import PublishedRun
from harness.text.escape import plain

Key = tuple[str, str]  # (framework, metric) as the result file names them; the texts are made inert
RUN_KEY: Key = ("", "")  # flags of the run as a whole (most of its samples disturbed)

NOT_COMPARABLE_WORD = "NOT COMPARABLE"
RUN_FLAGGED_WORD = "RUN FLAGGED"


def run_flags(judged: Assessment) -> dict[Key, list[str]]:
    """(framework, metric) -> its flags, each one line starting with its word in capitals: one per hit
    of every registered guard (judge/guards/), in the registry's order, then the frameworks that are
    not comparable; RUN_KEY holds the run's own flag when the machine disturbed most of its samples."""
    flags: dict[Key, list[str]] = {}
    for guard, hits in judged.guard_hits():
        for hit in hits:
            flags.setdefault(hit.key, []).append(f"{guard.word}: {hit.flag}")
    for fw, why in judged.not_comparable.items():
        result = judged.run.results[fw]
        for metric in result["metrics"] if result["status"] == "ok" else []:
            flags.setdefault((fw, metric["name"]), []).append(f"{NOT_COMPARABLE_WORD} (†): {why}")
    if judged.crowded:
        flags.setdefault(RUN_KEY, []).append(f"{RUN_FLAGGED_WORD}: {judged.crowded}")
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
    """Each run's assessment, flags, notes and statistics, worked out once (the gate, the lint and the
    bootstrap are not free) and reused by every page that shows the run: its own page, its suite's
    history and each comparison."""

    def __init__(self, verdicts: Verdicts) -> None:
        self.verdicts = verdicts
        self._flags: dict[int, dict[Key, list[str]]] = {}
        self._notes: dict[int, dict[Key, list[str]]] = {}
        self._statistics: dict[tuple[int, str, str], Summary] = {}

    def remember(self, found: Mapping[tuple[int, str, str], Summary]) -> None:
        """Statistics a worker process worked out (publish/workers.py), by (run key, framework, metric)."""
        self._statistics.update(found)

    def statistics(self, entry: PublishedRun, framework: str, metric: str) -> Summary:
        """A metric's median, interval and spread: `Assessment.summary`, here or in a worker."""
        found = self._statistics.get((entry.key, framework, metric))
        return found if found is not None else self.assessment(entry).summary(framework, metric)

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
        return sum(len(found) for found in self.flags(entry).values())
