"""The terminal text of a bisect: per-version medians, per-pair verdicts, the answer line."""

from __future__ import annotations

from harness.core.statistics import CONFIDENCE
from harness.execute.bisect.run import Outcome
from harness.text.escape import plain, table
from harness.text.numbers import fmt_interval, fmt_p, fmt_ratio, fmt_share, fmt_value


def render(outcome: Outcome) -> str:
    doc = outcome.doc
    unit = outcome.unit
    head = (
        f"bisect of {doc['package']} in the {doc['stack']} stack: {doc['suite']}/{doc['framework']}, "
        f"metric {doc['metric']}, {doc['rounds']} interleaved rounds"
    )
    rows = [
        [
            version,
            doc["locks"][version]["lock_hash"][:12],
            fmt_value(median, unit) if (median := run.median) is not None else "-",
            (", ".join(fmt_value(m, unit) for m in run.round_medians) or "-")
            + (f" ({run.left_out} disturbed, left out)" if run.left_out else ""),
            run.problem or "",
        ]
        for version, run in outcome.runs.items()
    ]
    headers = ["version", "lock", "median", "round medians", "problem"]
    if not any(row[-1] for row in rows):
        headers, rows = headers[:-1], [row[:-1] for row in rows]
    versions = table(rows, headers, "simple")
    pair_rows = []
    for pair in outcome.pairs:
        cells = ["-", "-", "-"]  # no measurement on one side: the verdict says why
        if (change := pair.change) is not None:
            coverage = "" if change.ci_coverage >= CONFIDENCE - 1e-9 else fmt_share(change.ci_coverage)
            interval = fmt_interval(change.ci_low, change.ci_high, coverage)
            cells = [fmt_ratio(change.ratio), interval, f"{fmt_p(change.p_value)} ({fmt_p(change.p_adjusted)})"]
        pair_rows.append([f"{pair.before} -> {pair.after}", *cells, pair.verdict])
    pairs = table(pair_rows, ["change", "ratio", "interval", "p (Holm-adjusted)", "verdict"], "simple")
    return "\n\n".join([plain(head), versions, pairs, plain(doc["answer"]["text"])])
