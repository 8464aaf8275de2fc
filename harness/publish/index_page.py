"""index.html: the suites, every run, the version bisects, and the folders that were left out (and why)."""

from __future__ import annotations

from harness.publish import labels
from harness.publish.bisect_page import INDEX_HEADERS, index_row
from harness.publish.collect import Catalogue
from harness.publish.flags import FlagBook
from harness.publish.names import run_file, suite_file
from harness.publish.page import Markup, join, lines, link, page, table, tag


def _flag_cell(count: int) -> str:
    return f"{count} flagged" if count else "none"


def _runs_cell(total: int, measured: int) -> str:
    return str(total) if measured == total else f"{total} ({total - measured} without numbers)"


def index_page(catalogue: Catalogue, book: FlagBook, source: str, generated: str) -> str:
    suites = catalogue.suites()
    suite_rows, suite_classes = [], []
    for number, (name, runs) in enumerate(suites.items()):
        flagged = sum(book.count(entry) for entry in runs)
        measured = [entry for entry in runs if entry.measured]  # a run without numbers is never "the last run"
        suite_rows.append(
            [
                link(suite_file(number), name, class_="suite-link"),
                _runs_cell(len(runs), len(measured)),
                measured[0].started_text if measured else "no run measured anything",
                measured[-1].started_text if measured else "-",
                _flag_cell(flagged),
            ]
        )
        suite_classes.append("flagged" if flagged else "")
    run_rows, run_classes = [], []
    for entry in catalogue.runs:
        count = book.count(entry)
        run_rows.append(
            [
                link(run_file(entry.key), entry.run_id),
                entry.folder,
                entry.suite,
                entry.started_text,
                labels.machines(entry.run),
                labels.jobs(entry.run),
                _flag_cell(count),
            ]
        )
        run_classes.append("flagged" if count else "")
    body: list[Markup] = [
        tag("h1", "Benchmark results"),
        tag("p", f"{len(catalogue.runs)} runs of {len(suites)} suites from {source}, published {generated}."),
        tag("h2", "Suites"),
        tag(
            "p",
            "Each suite's page has every run over time per metric, per framework, machine or framework version, "
            "with intervals, and a comparison of any two runs.",
        ),
        table(
            ["suite", "runs", "first run", "last run", "flags"], suite_rows, suite_classes, id="suites", class_="data"
        ),
        tag("h2", "Runs"),
        table(
            ["run", "folder", "suite", "started", "machine", "jobs", "flags"],
            run_rows,
            run_classes,
            id="runs",
            class_="data",
        ),
    ]
    if catalogue.bisects:
        body += [
            tag("h2", "Version bisects"),
            tag(
                "p",
                "Each `harness bisect` ran one suite's metric under consecutive versions of one package; its page has "
                "the per-version and per-round medians, each consecutive pair's ratio, interval, p and verdict, and "
                "the lock hash per version.",
            ),
            table(INDEX_HEADERS, [index_row(entry) for entry in catalogue.bisects], id="bisects", class_="data"),
        ]
    if catalogue.skipped:
        body += [
            tag("h2", "Folders not published"),
            tag("p", "These folders under the results folder could not be read as runs:"),
            lines(catalogue.skipped, class_="skipped"),
        ]
    body.append(
        tag(
            "footer",
            join(
                [
                    "Written by `harness publish`. Charts: uPlot 1.6.32 (MIT, ",
                    link("uPlot.LICENSE.txt", "licence"),
                    ").",
                ]
            ),
        )
    )
    return page("Benchmark results", join(body))
