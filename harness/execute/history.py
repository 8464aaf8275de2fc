"""`harness history RESULTS --suite S`: the suite's runs judged, every series they form (those the
command asked for), and where each changed level; cli/history.py reads the folder and prints."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from pathlib import Path

from harness.core.errors import HarnessError
from harness.judge.assessment import assess
from harness.judge.history import ChangePoint, Series, find_changes, series_of
from harness.store.run_folder import Run
from harness.text.escape import plain


def history_series(
    runs: Sequence[Run],
    *,
    suite: str,
    seen: Collection[str],
    results_dir: Path,
    framework: str | None,
    metric: str | None,
) -> list[Series]:
    """The series of `runs` (one suite's, oldest first) that --framework and --metric pick; refused in
    one line when the folder holds no run of the suite (`seen`: the suites it does hold) or no series
    matches."""
    if not runs:
        known = sorted(seen)
        raise HarnessError(
            f"no runs of suite {plain(suite)!r} in {plain(results_dir)}"
            + (f" (it has {', '.join(plain(k) for k in known)})" if known else "")
            + "; run `harness run --suite SUITE` first, or name another --suite"
        )
    series = [
        s
        for s in series_of([(run, assess(run)) for run in runs])
        if (framework is None or s.framework == framework) and (metric is None or s.metric == metric)
    ]
    if not series:
        asked = [f"{option} {plain(value)!r}" for option, value in (("--framework", framework), ("--metric", metric))]
        named = [text for text, value in zip(asked, (framework, metric), strict=True) if value is not None]
        if named:
            raise HarnessError(
                f"no series matches {' '.join(named)} in suite {plain(suite)}; leave them out to see all"
            )
        raise HarnessError(
            f"the runs of suite {plain(suite)} hold no measured metric (every job failed or was skipped); "
            "`harness show RUN` says why"
        )
    return series


def change_points(series: Sequence[Series], tick: Callable[[int], None]) -> list[ChangePoint]:
    """Every level shift of every series; `tick` is told once per series, with their number (a long
    history's search grows faster than its length, so the command shows it working)."""
    changes: list[ChangePoint] = []
    for s in series:
        tick(len(series))
        changes += find_changes(s)
    return changes
