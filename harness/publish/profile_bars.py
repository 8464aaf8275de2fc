"""The run page's profiles: per metric, one stacked bar per framework of where its steady step goes.

Inline SVG drawn here (no script: the page's policy allows its own files only, and presentation
attributes are not styles), each category one fixed colour on every page, red kept for flags as in
report/palette.py. The numbers and sentences are report/profile_text.py's, so the site and the
terminal say the same thing; every text from a run file is placed through page.py's escaping.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from harness.judge.breakdown import UNATTRIBUTED, Breakdown
from harness.publish.page import Markup, join, lines, link, table, tag
from harness.report.palette import FLAG_COLOUR
from harness.report.profile_text import (
    ROWS,
    TOP_OPS,
    TRACE_HINT,
    Group,
    baseline_of,
    by_metric,
    differences_sentence,
    finite,
    label,
    op_name,
    reconciliation,
    share_of,
    share_text,
)
from harness.text.escape import plain
from harness.text.numbers import fmt_time

# Tableau-10 less its red (flags only) and grey (unattributed), and one dark indigo: all read on the
# site's white; a thin white line between segments keeps neighbours apart.
COLOURS = {
    "matmul": "#1f77b4",
    "attention": "#ff7f0e",
    "elementwise": "#2ca02c",
    "reduction": "#9467bd",
    "optimizer": "#8c564b",
    "collective": "#e377c2",
    "copy": "#17becf",
    "compile": "#bcbd22",
    "overhead": "#393b79",
    UNATTRIBUTED: "#b0b0b0",
}
WIDTH, LEFT, BAR, HEIGHT, GAP = 800, 170, 440, 20, 14  # px: the picture, the names, the longest bar, a bar, between
NAME_MAX, FLAG_MAX = 22, 110  # characters shown inside the picture; the full text is in its tooltip or below it
# A trace linked from the page: a plain relative path inside the run folder (no scheme, no `..`, no query).
_PLAIN_PATH = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*(/[A-Za-z0-9_][A-Za-z0-9._-]*)*")


def _text(value: object, limit: int | None = None) -> str:
    """One line for the picture: controls visible, and the two characters XML forbids that `plain` keeps."""
    text = plain(value).replace("\ufffe", "\\ufffe").replace("\uffff", "\\uffff")
    return text if limit is None or len(text) <= limit else text[: limit - 1] + "…"


def _rects(b: Breakdown, y: int, scale: float) -> tuple[Markup, float]:
    """One framework's bar: a rect per category with time, each with its tooltip; and where it ends."""
    parts, x = [], float(LEFT)
    for key in ROWS:
        width = finite(b.seconds(key)) / scale * BAR if scale > 0 else 0.0
        if width <= 0:
            continue
        tip = f"{_text(b.framework)} · {label(key)} · {fmt_time(b.seconds(key))}/step ({share_text(share_of(b, key))})"
        box = {"x": f"{x:.1f}", "y": str(y), "width": f"{width:.1f}", "height": str(HEIGHT)}
        parts.append(tag("rect", tag("title", tip), fill=COLOURS[key], stroke="#ffffff", stroke_width="0.5", **box))
        x += width
    return join(parts), x


def _bars(metric: str, group: Group) -> Markup:
    scale = max(finite(b.step_s) for b in group.values())
    parts, y = [], 8
    for b in group.values():
        name = tag("text", join([tag("title", _text(b.framework)), _text(b.framework, NAME_MAX)]),
                    x=str(LEFT - 8), y=str(y + 15), text_anchor="end")  # fmt: skip
        rects, end = _rects(b, y, scale)
        parts += [name, rects]
        if b.flag:
            outline = {"x": str(LEFT - 2), "y": str(y - 2), "width": f"{end - LEFT + 4:.1f}", "height": str(HEIGHT + 4)}
            parts.append(tag("rect", fill="none", stroke=FLAG_COLOUR, stroke_width="2", **outline))
        step = f"{fmt_time(b.step_s)}/step" + (" (FLAGGED)" if b.flag else "")
        parts.append(tag("text", step, x=f"{end + 6:.1f}", y=str(y + 15)))
        y += HEIGHT
        if b.flag:
            flag = _text(b.flag, FLAG_MAX)
            parts.append(tag("text", flag, x=str(LEFT), y=str(y + 16), fill=FLAG_COLOUR, font_size="12"))
            y += 18
        y += GAP
    shown = [key for key in ROWS if any(finite(b.seconds(key)) > 0 for b in group.values())]
    for i, key in enumerate(shown):  # the legend: two columns under the bars
        lx, ly = 10 + (i % 2) * (WIDTH // 2), y + (i // 2) * 18
        swatch = tag("rect", x=str(lx), y=str(ly), width="12", height="12", fill=COLOURS[key])
        parts += [swatch, tag("text", label(key), x=str(lx + 18), y=str(ly + 11), font_size="12")]
    height = y + ((len(shown) + 1) // 2) * 18 + 8
    names = ", ".join(_text(fw) for fw in group)
    alt = f"{_text(metric)}: time per profiled step by category, one bar per framework ({names})"
    return tag(
        "svg",
        join([tag("title", alt), *parts]),
        xmlns="http://www.w3.org/2000/svg",
        width=str(WIDTH),
        height=str(height),
        viewBox=f"0 0 {WIDTH} {height}",
        role="img",
        aria_label=alt,
        class_="profile-bars",
        font_family="system-ui, sans-serif",
        font_size="13",
    )


def _operations(group: Group) -> Markup:
    rows = []
    for b in group.values():
        for category in b.categories:
            if category.share <= 0:
                continue
            for op in category.top[:TOP_OPS]:
                name = tag("span", _text(op_name(op.name)), title=_text(op.name))
                rows.append([_text(b.framework), label(category.key), name, f"{fmt_time(op.seconds)}/step"])
    if not rows:
        return Markup("")
    return table(["framework", "category", "operation", "time"], rows, class_="data profile-ops")


def trace_href(path: str) -> str | None:
    """The trace as a link relative to the page, or None where it is not a plain path inside the run folder."""
    if _PLAIN_PATH.fullmatch(path) is None or any(part in (".", "..") for part in path.split("/")):
        return None
    return path


def _traces(group: Group, prefix: str | None) -> Markup:
    found = []
    for b in group.values():
        href = trace_href(b.trace)
        shown = link(prefix + href, _text(b.trace)) if prefix is not None and href is not None else _text(b.trace)
        found.append(join([_text(f"{b.framework}: "), shown, _text(f" ({b.profiler}, {b.device_kind})")]))
    return join([tag("p", f"Traces ({TRACE_HINT}):"), lines(found, class_="traces")])


def _metric(metric: str, group: Group, baseline: str | None, trace_base: str | None) -> Markup:
    base = baseline_of(list(group), baseline)
    # A flag's full words are in its reconciliation line under the picture (the picture cuts them at FLAG_MAX).
    words = [_text(reconciliation(b)) for b in group.values()]
    words += [_text(differences_sentence(b, group[base])) for fw, b in group.items() if base is not None and fw != base]
    figure = tag("figure", join([_bars(metric, group), tag("figcaption", lines(words))]), class_="picture profile")
    return join([tag("h3", _text(metric)), figure, _operations(group), _traces(group, trace_base)])


def profile_section(
    breakdowns: Sequence[Breakdown], baseline: str | None = None, trace_base: str | None = ""
) -> Markup:
    """The run page's Profiles section; nothing for a run without profiles.

    `trace_base`: the page's own prefix to the run folder, put before each trace's path (`""`: the page
    sits in the run folder); None shows the paths without links (the traces are not beside the page)."""
    if not breakdowns:
        return Markup("")
    read = (
        "Each bar is one framework's median profiled step (the profiler on), split by what its operations were "
        "attributed to; the longest step spans the full width, so the bars compare in length. A bar outlined in "
        "red is FLAGGED: its shares cannot be stood behind, and the words under the picture say why."
    )
    metrics = [_metric(m, group, baseline, trace_base) for m, group in by_metric(breakdowns).items()]
    content = join([tag("h2", "Profiles: where the step's time goes"), tag("p", read), *metrics])
    return tag("section", content, id="profiles", class_="pictures")
