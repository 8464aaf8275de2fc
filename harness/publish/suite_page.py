"""suite-N.html: every run of one suite over time, per metric, and the picker for a comparison.

The tables are plain HTML written here; the charts are drawn by site.js from the same points,
embedded as JSON. A flagged point keeps its framework's colour, ringed in red, in a series of its own
whose legend says FLAGGED, and its row in the table names each flag: it is never a normal point. A
chart's x axis has the runs with a point on it, no empty slot for another workload's run. A run in
which no job produced numbers is listed and labelled, never the picker's default (collect.py).
"""

from __future__ import annotations

from typing import Any

from harness.judge.history import ChangePoint, Point
from harness.publish import labels
from harness.publish.collect import PublishedRun
from harness.publish.flags import FlagBook
from harness.publish.history import MetricHistory, flags_of, variant
from harness.publish.names import INDEX, run_file
from harness.publish.page import Markup, join, lines, link, page, table, tag
from harness.report import palette
from harness.text.escape import plain
from harness.text.numbers import fmt_ratio

SERIES_BY = (("framework", "framework"), ("machine", "framework on each machine"), ("version", "framework version"))


Changes = dict[tuple[str, str], list[ChangePoint]]  # (metric name, workload.series_key) -> its change points


def changes_of(changes: Changes | None, history: MetricHistory) -> list[ChangePoint]:
    """The change points of every series drawn on the chart (one per framework and code path)."""
    found = [c for key in sorted(history.series_keys) for c in (changes or {}).get((history.name, key), [])]
    return sorted(found, key=lambda c: (c.after.position, c.series.framework))


def series_name(point: Point) -> str:
    """`pytorch (eager)`: the framework, with the code path it measured where the metric names one."""
    path = variant(point)
    return plain(f"{point.framework} ({path})" if path else point.framework)


def change_text(c: ChangePoint) -> str:
    """`numpy: 1.15x between run-06 and run-07 (numpy 1.0 -> 2.0)`: one change point in words."""
    what = "; ".join(c.changed) or "nothing recorded differs"
    return plain(
        f"{c.series.framework}: level {fmt_ratio(c.ratio)} ({'worse' if c.worse else 'better'}) between "
        f"{c.before.run_id} and {c.after.run_id} ({what})"
    )


def chart_data(
    runs: list[PublishedRun],
    histories: list[MetricHistory],
    pairs: dict[str, str],
    book: FlagBook,
    changes: Changes | None = None,
) -> dict[str, Any]:
    """What site.js draws: inert strings and finite numbers only (text/html.data_element writes it into the page)."""
    metrics = []
    for history in histories:
        found = changes_of(changes, history)
        scale, _ = history.scale()
        stats = [book.statistics(runs[p.position], p.framework, p.metric) for p in history.points]
        points = [
            {
                "x": p.position,
                "framework": plain(p.framework),
                "series": series_name(p),
                "colour": palette.colour(p.framework),  # the framework's colour in every picture
                "machine": labels.machine(p.result),
                "version": labels.version(p.result),
                "y": p.median / scale,
                "lo": stat.ci_low / scale,
                "hi": stat.ci_high / scale,
                "text": history.point_text(p, stat),
                "flags": flags_of(p, runs, book)[0],
            }
            for p, stat in zip(history.points, stats, strict=True)
        ]
        marks = [{"x": c.after.position, "worse": c.worse, "text": change_text(c)} for c in found]
        metrics.append(
            {
                "title": history.title,
                "axis": history.axis_label(),
                "runs": history.positions,  # the x axis: only the runs with a point here
                "points": points,
                "changes": marks,
            }
        )
    groups = {key: k for k, key in enumerate(dict.fromkeys(e.workload_key for e in runs))}
    return {
        "runs": [
            {
                "tick": e.started.strftime("%m-%d %H:%M") if e.started else f"run {i + 1}",
                "title": f"{e.run_id} ({e.started_text})",
                "file": run_file(e.key),
                "measured": e.measured,  # the picker says why a run without numbers has no comparison
                "workload": groups[e.workload_key],  # runs of different work are never compared
            }
            for i, e in enumerate(runs)
        ],
        "metrics": metrics,
        "pairs": pairs,
    }


def _selected(chosen: bool) -> dict[str, str]:
    return {"selected": "selected"} if chosen else {}


def run_option(position: int, entry: PublishedRun) -> str:
    """`3: <run id> (2024-05-03 12:00:00 UTC)`, or what the run lacks: `(nothing measured: no job ...)`."""
    if entry.measured:
        return f"{position + 1}: {entry.run_id} ({entry.started_text})"
    return f"{position + 1}: {entry.run_id} (nothing measured: {labels.jobs(entry.run)})"


def default_pair(runs: list[PublishedRun]) -> tuple[int, int] | None:
    """(A, B): the newest run that measured something and the newest such run before it, of the same
    workload where there is one; None with fewer than two. A run without numbers is never a default."""
    measured = [i for i, entry in enumerate(runs) if entry.measured]
    if len(measured) < 2:
        return None
    b = measured[-1]
    same = [i for i in measured[:-1] if runs[i].workload_key == runs[b].workload_key]
    return (same or measured[:-1])[-1], b


def _picker(runs: list[PublishedRun]) -> Markup:
    chosen = default_pair(runs)
    if chosen is None:
        return tag("p", "Fewer than two runs measured anything: nothing to compare yet.", class_="no-compare")

    def select(element_id: str, default: int) -> Markup:
        options = [tag("option", run_option(i, e), value=str(i), **_selected(i == default)) for i, e in enumerate(runs)]
        return tag("select", join(options), id=element_id)

    return join(
        [
            tag("h2", "Compare two runs"),
            tag(
                "p",
                "The verdicts of `harness compare`: per framework and metric the ratio B/A with its interval, "
                "a Mann-Whitney test on the rounds' medians, Holm-corrected across the rows, and flagged metrics "
                "excluded. A is always the earlier run. Runs in which no job produced numbers are listed as such "
                "and have no comparison.",
            ),
            tag(
                "div",
                join(
                    [
                        tag("label", join(["A ", select("run-a", chosen[0])])),
                        tag("label", join(["B ", select("run-b", chosen[1])])),
                        tag("button", "Compare", id="compare-go", type="button"),
                    ],
                    " ",
                ),
                class_="picker",
            ),
            tag("p", "", id="compare-message", class_="message"),
        ]
    )


def _runs_table(runs: list[PublishedRun], book: FlagBook, pairs: dict[str, str]) -> Markup:
    rows, classes = [], []
    for i, entry in enumerate(runs):
        count = book.count(entry)
        previous = pairs.get(f"{i - 1}-{i}")
        rows.append(
            [
                str(i + 1),
                link(run_file(entry.key), entry.run_id),
                entry.started_text if entry.measured else f"{entry.started_text}; nothing measured",
                labels.machines(entry.run),
                labels.versions(entry.run),
                labels.jobs(entry.run),
                f"{count} flagged" if count else "none",
                link(previous, "vs previous", class_="vs-previous") if previous else "-",
            ]
        )
        classes.append("flagged" if count else "")
    headers = ["#", "run", "started", "machine", "versions", "jobs", "flags", "comparison"]
    return table(headers, rows, classes, id="suite-runs", class_="data")


def _metric_section(
    number: int, history: MetricHistory, found: list[ChangePoint], runs: list[PublishedRun], book: FlagBook
) -> Markup:
    rows, classes = [], []
    for p in history.points:
        entry = runs[p.position]
        flags, notes = flags_of(p, runs, book)
        rows.append(
            [
                link(run_file(entry.key), f"{p.position + 1}: {entry.run_id}"),
                entry.started_text,
                series_name(p),
                labels.version(p.result),
                labels.machine(p.result),
                history.point_text(p, book.statistics(entry, p.framework, p.metric)),
                str(p.n),
                "; ".join(flags) or "-",
                "; ".join(notes) or "-",
            ]
        )
        classes.append("flagged" if flags else "")
    headers = ["run", "started", "framework", "version", "machine", "median [interval]", "n", "flags", "notes"]
    return tag(
        "section",
        join(
            [
                tag("h2", history.title),
                tag(
                    "details",
                    join(
                        [
                            tag("summary", f"workload: {history.arithmetic}, {plain(history.fields.get('device'))}"),
                            tag("p", history.description),
                        ]
                    ),
                    class_="workload",
                ),
                tag("p", history.axis_label(), class_="axis"),
                tag("div", "", id=f"chart-{number}", class_="chart"),
                lines([f"change point: {change_text(c)}" for c in found], class_="change-points")
                if found
                else tag("p", "No change point in this history.", class_="no-change"),
                table(headers, rows, classes, class_="data points"),
            ]
        ),
        class_="metric",
    )


def suite_page(
    suite: str,
    runs: list[PublishedRun],
    histories: list[MetricHistory],
    book: FlagBook,
    pairs: dict[str, str],
    bisects: list[tuple[str, str]] | None = None,
    changes: Changes | None = None,
) -> str:
    """`bisects`: (page, label) of this suite's version bisects; the page is one of the site's own names."""
    series = tag(
        "label",
        join(
            [
                "Series: ",
                tag("select", join(tag("option", label, value=key) for key, label in SERIES_BY), id="series-by"),
            ]
        ),
    )
    body = [
        tag("nav", link(INDEX, "all suites")),
        tag("h1", f"suite {suite}"),
        _picker(runs) if len(runs) > 1 else tag("p", "One run only: nothing to compare yet."),
        tag("h2", "Runs"),
        _runs_table(runs, book, pairs),
        tag("h2", "Metrics over time"),
        tag(
            "p",
            "Points: the median of the steady samples; whiskers: the 95 % interval of the median (where fewer "
            "samples allow less, the table says what it covers). A red ring around a point (in its framework's "
            "colour) marks a FLAGGED number (escaped sync, implausible rate, or a framework that is not "
            "comparable): drawn apart, never as a normal point; the table names each flag. Dashed vertical "
            "lines are change points (`harness history`): where a framework's level shifted, between the two "
            "runs they separate. A chart's axis has only the runs with a point on it.",
        ),
        tag("div", series, class_="picker"),
        join(_metric_section(i, h, changes_of(changes, h), runs, book) for i, h in enumerate(histories)),
    ]
    if bisects:
        body += [
            tag("h2", "Version bisects"),
            lines([link(href, label) for href, label in bisects], class_="bisects"),
        ]
    return page(f"suite {suite}", join(body), data=chart_data(runs, histories, pairs, book, changes), charts=True)
