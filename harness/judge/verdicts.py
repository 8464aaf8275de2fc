"""The verdicts one command draws on many runs (the site), each worked out once, on first use.

The publish layer only formats: a page asks this book for a run's assessment, two runs'
comparison or a suite's change points, and gets exactly what every other page got.
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.judge.assessment import Assessment, assess
from harness.judge.compare import Comparison
from harness.judge.conclusion import finish
from harness.judge.history import ChangePoint, Series, find_changes, series_of
from harness.store.run_folder import Run


class Verdicts:
    def __init__(self) -> None:
        # Keyed by the run object itself: the book holds each run, so its id stays its own.
        self._judged: dict[int, tuple[Run, Assessment]] = {}
        self._compared: dict[tuple[int, int], Comparison] = {}
        self._series: dict[tuple[int, ...], list[Series]] = {}

    def of(self, run: Run) -> Assessment:
        if id(run) not in self._judged:
            self._judged[id(run)] = (run, assess(run))
        return self._judged[id(run)][1]

    def comparison(self, a: Run, b: Run) -> Comparison:
        """A against B (HarnessError when they are runs of different suites)."""
        key = (id(a), id(b))
        if key not in self._compared:
            # Finished as `harness compare` finishes it: the sequential correction, the noise floor.
            self._compared[key] = finish(self.of(a), self.of(b))
        return self._compared[key]

    def series(self, runs: Sequence[Run]) -> list[Series]:
        """Every series of these runs (one suite, oldest first), worked out once."""
        key = tuple(id(run) for run in runs)
        if key not in self._series:
            self._series[key] = series_of([(run, self.of(run)) for run in runs])
        return self._series[key]

    def change_points(self, runs: Sequence[Run]) -> list[ChangePoint]:
        """Every level shift of every series of these runs."""
        return [shift for series in self.series(runs) for shift in find_changes(series)]
