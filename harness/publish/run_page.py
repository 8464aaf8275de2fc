"""run-N.html: one run's flags, its pictures (run_charts.py: learning curves, roofline, an inference
run's throughput and latency tails, sample timelines), jobs, fairness settings and environment, and
the harness's own table."""

from __future__ import annotations

from harness.publish import labels
from harness.publish.collect import PublishedRun
from harness.publish.flags import RUN_KEY, FlagBook
from harness.publish.names import INDEX
from harness.publish.page import Markup, join, lines, link, page, table, tag
from harness.publish.profile_bars import profile_section
from harness.publish.run_charts import chart_data, figures, run_pictures
from harness.report.environment import environment_rows
from harness.report.table import render
from harness.store.run_folder import code_label, session_label
from harness.text.escape import plain

# Fields that must match for numbers to stand side by side (the table's fairness footer checks
# these); everything else the jobs recorded is the environment.
FAIRNESS_PREFIXES = ("settings.", "precision.", "variables.", "device", "backend", "machine.cpu.usable_cores")


def _facts(entry: PublishedRun) -> Markup:
    summary = entry.run.summary
    rows = [
        ["run id", entry.run_id],
        ["folder", entry.folder],
        ["suite", entry.suite],
        ["started", entry.started_text],
        ["backend", plain(summary.get("backend"))],
        ["baseline", plain(entry.run.baseline)],
        ["machine", labels.machines(entry.run)],
        ["versions", labels.versions(entry.run)],
        ["measured code", plain(code_label(summary.get("code")) or "not recorded")],
        ["jobs", labels.jobs(entry.run)],
    ]
    side = session_label(summary.get("interleaved"))
    if side:
        rows.append(["A/B session", plain(side)])
    return table(["", ""], rows, class_="facts")


def _flags(entry: PublishedRun, book: FlagBook) -> Markup:
    found = [
        flag if (fw, metric) == RUN_KEY else f"{plain(fw)} {plain(metric)}: {flag}"
        for (fw, metric), flags in book.flags(entry).items()
        for flag in flags
    ]
    if not found:
        return tag(
            "p",
            "No flags: every number is synchronised, plausible, comparable and measured undisturbed.",
            class_="clean",
        )
    return lines(found, class_="flags")


def _settings(entry: PublishedRun) -> Markup:
    frameworks, rows = environment_rows(entry.run)
    if not frameworks:
        return tag("p", "No job produced numbers, so there is no environment to show.")
    headers = ["field", *(plain(fw) for fw in frameworks), "differs"]
    parts = []
    for title, fairness in (("Fairness settings", True), ("Environment", False)):
        chosen = [row for row in rows if row[0].startswith(FAIRNESS_PREFIXES) == fairness]
        cells = [
            [plain(key), *(plain(v) for v in values), "DIFFERS" if differs else ""] for key, values, differs in chosen
        ]
        classes = ["differs" if differs else "" for _, _, differs in chosen]
        parts += [tag("h2", title), table(headers, cells, classes, class_="data env", id=title.split()[0].lower())]
    return join(parts)


def run_page(entry: PublishedRun, book: FlagBook, suite_href: str) -> str:
    pictures = run_pictures(book.assessment(entry), book.flags(entry))
    body = [
        tag("nav", join([link(INDEX, "all suites"), link(suite_href, f"suite {entry.suite}")], " | ")),
        tag("h1", f"run {entry.run_id}"),
        _facts(entry),
        tag("h2", "Flags"),
        _flags(entry, book),
        figures(pictures),
        profile_section(book.assessment(entry).breakdowns, entry.run.baseline, trace_base=None),
        tag("h2", "The harness's table"),
        tag("pre", render(book.assessment(entry)), class_="harness-table"),
        _settings(entry),
    ]
    if entry.run.problems:
        body += [tag("h2", "Rejected files"), lines([plain(p) for p in entry.run.problems], class_="skipped")]
    charts = not pictures.empty
    return page(f"run {entry.run_id}", join(body), data=chart_data(pictures) if charts else None, charts=charts)
