"""suite-N.html: every run of one suite over time, per metric, and the picker for a comparison.

The tables are plain HTML written here; the charts are drawn by site.js from the same points,
embedded as JSON. A flagged point is drawn as a red ring in a series of its own whose legend says
FLAGGED, and its row in the table names each flag: it is never a normal point.
"""

from __future__ import annotations

from typing import Any

from harness.judge.history import ChangePoint
from harness.publish import labels
from harness.publish.collect import PublishedRun
from harness.publish.flags import FlagBook
from harness.publish.history import MetricHistory, flags_of
from harness.publish.names import INDEX, run_file
from harness.publish.page import Markup, join, lines, link, page, table, tag
from harness.report import palette
from harness.text.escape import plain
from harness.text.numbers import fmt_ratio

SERIES_BY = (("framework", "framework"), ("machine", "framework on each machine"), ("version", "framework version"))


def _tick(entry: PublishedRun, position: int) -> str:
    return entry.started.strftime("%m-%d %H:%M") if entry.started else f"run {position + 1}"


Changes = dict[tuple[str, str], list[ChangePoint]]  # (metric name, workload.series_key) -> its change points


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
        found = (changes or {}).get((history.name, history.series_key), [])
        scale, _ = history.scale()
        points = [
            {
                "x": p.position,
                "framework": plain(p.framework),
                "colour": palette.colour(p.framework),  # the framework's colour in every picture
                "machine": labels.machine(p.result),
                "version": labels.version(p.result),
                "y": p.median / scale,
                "lo": p.statistics.ci_low / scale,
                "hi": p.statistics.ci_high / scale,
                "text": history.point_text(p),
                "flags": flags_of(p, runs, book)[0],
            }
            for p in history.points
        ]
        marks = [{"x": c.after.position, "worse": c.worse, "text": change_text(c)} for c in found]
        metrics.append({"title": history.title, "axis": history.axis_label(), "points": points, "changes": marks})
    return {
        "runs": [
            {"tick": _tick(e, i), "title": f"{e.run_id} ({e.started_text})", "file": run_file(e.key)}
            for i, e in enumerate(runs)
        ],
        "metrics": metrics,
        "pairs": pairs,
    }


def _selected(chosen: bool) -> dict[str, str]:
    return {"selected": "selected"} if chosen else {}


def _picker(runs: list[PublishedRun]) -> Markup:
    def select(element_id: str, chosen: int) -> Markup:
        options = [
            tag("option", f"{i + 1}: {e.run_id} ({e.started_text})", value=str(i), **_selected(i == chosen))
            for i, e in enumerate(runs)
        ]
        return tag("select", join(options), id=element_id)

    return join(
        [
            tag("h2", "Compare two runs"),
            tag(
                "p",
                "The verdicts of `harness compare`: per framework and metric the ratio B/A with its interval, "
                "a Mann-Whitney test on the rounds' medians, Holm-corrected across the rows, and flagged metrics "
                "excluded. A is always the earlier run.",
            ),
            tag(
                "div",
                join(
                    [
                        tag("label", join(["A ", select("run-a", max(len(runs) - 2, 0))])),
                        tag("label", join(["B ", select("run-b", len(runs) - 1)])),
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
                entry.started_text,
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
                plain(p.framework),
                labels.version(p.result),
                labels.machine(p.result),
                history.point_text(p),
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
            "samples allow less, the table says what it covers). Red rings are FLAGGED numbers (escaped sync, "
            "implausible rate, or a framework that is not comparable): drawn apart, never as normal points; the "
            "table names each flag. Dashed vertical lines are change points (`harness history`): where a "
            "framework's level shifted, between the two runs they separate.",
        ),
        tag("div", series, class_="picker"),
        join(
            _metric_section(i, h, (changes or {}).get((h.name, h.series_key), []), runs, book)
            for i, h in enumerate(histories)
        ),
    ]
    if bisects:
        body += [
            tag("h2", "Version bisects"),
            lines([link(href, label) for href, label in bisects], class_="bisects"),
        ]
    return page(f"suite {suite}", join(body), data=chart_data(runs, histories, pairs, book, changes), charts=True)
