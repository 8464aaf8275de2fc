"""The words of a profile: where each framework's steady step goes, side by side (terminal and report.md).

Formatting only: the breakdowns were attributed on the host (judge/attribution.py) and every number
here is read off them. The tables and sentences are built from raw values and escaped when placed,
the way report/table.py does: each line or cell goes through the one escaper for its medium.
The site draws the same breakdowns (publish/profile_bars.py) with the helpers below.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence

from harness.judge.assessment import Assessment
from harness.judge.breakdown import CATEGORIES, LABELS, UNATTRIBUTED, Breakdown
from harness.text import escape
from harness.text.numbers import fmt_share, fmt_time

ROWS = (*(key for key, _ in CATEGORIES), UNATTRIBUTED)  # every medium's order
LETTERS = dict(zip(ROWS, "MAEROCHKF.", strict=True))  # the terminal bars: one letter per category
BAR_WIDTH = 50  # characters of the longest profiled step
OP_NAME_MAX = 60
TOP_OPS = 3
MOVE_FLOOR = 0.05  # a category "moves" when it differs by more than this share of the baseline's step
TRACE_HINT = "open in Perfetto (ui.perfetto.dev) or chrome://tracing"
Group = dict[str, Breakdown]  # one metric's breakdowns by framework, in the order the run lists them


def label(key: str) -> str:
    return LABELS.get(key, key)


def finite(value: float) -> float:
    """A length to draw: a NaN, an infinity or a negative time draws nothing."""
    return value if math.isfinite(value) and value > 0 else 0.0


def by_metric(breakdowns: Sequence[Breakdown]) -> dict[str, Group]:
    """Metric -> framework -> breakdown, in first-seen order; a repeated pair keeps its first."""
    groups: dict[str, Group] = {}
    for b in breakdowns:
        groups.setdefault(b.metric, {}).setdefault(b.framework, b)
    return groups


def baseline_of(frameworks: Sequence[str], baseline: str | None) -> str | None:
    """The framework the others are measured against: the run's baseline, else the first of two."""
    if len(frameworks) >= 2 and baseline in frameworks:
        return baseline
    return frameworks[0] if len(frameworks) == 2 else None


def share_of(b: Breakdown, key: str) -> float:
    if key != UNATTRIBUTED:
        return next((c.share for c in b.categories if c.key == key), 0.0)
    return b.unattributed_s / b.step_s if b.step_s > 0 else 0.0


def share_text(share: float) -> str:
    return "<1%" if 0 < share < 0.005 else fmt_share(share)


def signed_time(seconds: float, scale_from: float) -> str:
    sign = "+" if seconds > 0 else "-" if seconds < 0 else ""
    return sign + fmt_time(abs(seconds), scale_from=scale_from)


def op_name(name: str) -> str:
    """Cut before escaping, so no escape sequence is cut in half."""
    return name if len(name) <= OP_NAME_MAX else name[: OP_NAME_MAX - 1] + "…"


def reconciliation(b: Breakdown) -> str:
    """`flax: profiled step 12.3 ms (5 steps), timed 11.9 ms per step, profiler overhead +3%`."""
    text = f"{b.framework}: profiled step {fmt_time(b.step_s)} ({'1 step' if b.steps == 1 else f'{b.steps} steps'})"
    overhead = b.overhead
    if b.timed_step_s is None or overhead is None:
        text += ", no timed step to reconcile with"
    else:
        text += f", timed {fmt_time(b.timed_step_s)} per step, profiler overhead {overhead:+.0%}"
    return text + (f"; {b.flag}" if b.flag else "")


def moves(b: Breakdown, base: Breakdown, floor: float = MOVE_FLOOR) -> list[tuple[str, float]]:
    """The two categories (unattributed included) that differ most from the baseline's, each by more
    than `floor` of the baseline's step: (key, b's seconds minus the baseline's)."""
    found = [(key, b.seconds(key) - base.seconds(key)) for key in ROWS]
    big = [(key, d) for key, d in found if abs(d) > floor * base.step_s and math.isfinite(d)]
    return sorted(big, key=lambda kd: -abs(kd[1]))[:2]


def differences_sentence(b: Breakdown, base: Breakdown) -> str:
    """`flax spends 3.2 ms/step more in attention and 1.1 ms/step less in reductions ... than pytorch.`"""
    found = moves(b, base)
    steps = f"(profiled steps {fmt_time(b.step_s)} and {fmt_time(base.step_s)})"
    if not found:
        return (
            f"{b.framework} and {base.framework} {steps} differ by no more than {fmt_share(MOVE_FLOOR)} of "
            f"{base.framework}'s step in any category."
        )
    said = [f"{fmt_time(abs(d))}/step {'more' if d > 0 else 'less'} in {label(key)}" for key, d in found]
    return f"{b.framework} spends {' and '.join(said)} than {base.framework} {steps}."


def _header(b: Breakdown, base: str | None) -> str:
    return b.framework + (" (baseline)" if b.framework == base else "") + (" *" if b.flag else "")


def breakdown_table(group: Group, base: str | None) -> tuple[list[str], list[list[str]]]:
    """Rows: the categories with time in any framework, then the profiled step; one column per
    framework (`4.10 ms (35%)`), and one difference column per framework against the baseline."""
    scale = max((finite(b.step_s) for b in group.values()), default=0.0)
    others = [fw for fw in group if base is not None and fw != base]
    headers = ["category", *(_header(b, base) for b in group.values())]
    headers += [f"difference {fw} - {base}" for fw in others]
    rows = []
    for key in ROWS:
        if all(b.seconds(key) == 0 for b in group.values()):
            continue
        cells = [f"{fmt_time(b.seconds(key), scale)} ({share_text(share_of(b, key))})" for b in group.values()]
        diffs = [signed_time(group[fw].seconds(key) - group[str(base)].seconds(key), scale) for fw in others]
        rows.append([label(key), *cells, *diffs])
    steps = [fmt_time(b.step_s, scale) for b in group.values()]
    diffs = [signed_time(group[fw].step_s - group[str(base)].step_s, scale) for fw in others]
    rows.append(["profiled step", *steps, *diffs])
    return headers, rows


def _bar(b: Breakdown, scale: float) -> str:
    """The letters of one bar: each category its share of BAR_WIDTH (largest remainders), the longest step full."""
    if scale <= 0:
        return ""
    exact = {key: finite(b.seconds(key)) / scale * BAR_WIDTH for key in ROWS}
    width = min(BAR_WIDTH, round(sum(exact.values())))
    counts = {key: math.floor(x) for key, x in exact.items()}
    for key in sorted(ROWS, key=lambda k: counts[k] - exact[k])[: max(0, width - sum(counts.values()))]:
        counts[key] += 1
    return "".join(LETTERS[key] * counts[key] for key in ROWS)


def bar_lines(group: Group) -> list[str]:
    """The bars, one per framework, then their legend; plain text (for a terminal or a code block)."""
    scale = max((finite(b.step_s) for b in group.values()), default=0.0)
    names = {fw: escape.plain(fw)[:24] for fw in group}
    pad = max(len(n) for n in names.values())
    lines = [f"  {names[fw]:<{pad}} |{_bar(b, scale):<{BAR_WIDTH}}| {fmt_time(b.step_s)}" for fw, b in group.items()]
    shown = [key for key in ROWS if any(finite(b.seconds(key)) > 0 for b in group.values())]
    return lines + ["  " + ", ".join(f"{LETTERS[key]} {label(key)}" for key in shown)]


def top_operations(group: Group) -> list[tuple[str, list[str]]]:
    """(category label, [`flax: dot.3 4.10 ms, fusion.2 1.00 ms`, ...]) for each category with time."""
    found = []
    for key, _ in CATEGORIES:
        said = []
        for b in group.values():
            category = next((c for c in b.categories if c.key == key), None)
            if category is None or category.share <= 0 or not category.top:
                continue
            ops = ", ".join(f"{op_name(op.name)} {fmt_time(op.seconds)}" for op in category.top[:TOP_OPS])
            said.append(f"{b.framework}: {ops}")
        if said:
            found.append((label(key), said))
    return found


def _fence(lines: Sequence[str]) -> str:
    """A code fence longer than any run of backticks inside (CommonMark), so no name can close it."""
    longest = max((len(run) for line in lines for run in re.findall("`+", line)), default=0)
    return "`" * max(3, longest + 1)


def _metric_section(metric: str, group: Group, baseline: str | None, tablefmt: str) -> list[str]:
    markdown = tablefmt == "github"
    esc: Callable[[str], str] = escape.for_tablefmt(tablefmt)

    def title(text: str) -> list[str]:
        return ["", f"#### {esc(text)}" if markdown else esc(text)]

    def item(text: str) -> str:
        return f"- {esc(text)}" if markdown else "  " + esc(text)

    base = baseline_of(list(group), baseline)
    head = f"profile: {metric} (time per profiled step, share of that step)"
    parts = ["", f"### {esc(f'{metric}: where the step goes')}" if markdown else esc(head), ""]
    headers, rows = breakdown_table(group, base)
    parts += [escape.table(rows, headers, tablefmt), ""]  # a blank line ends a Markdown table
    flagged = [b for b in group.values() if b.flag]
    parts += [esc(f"* {b.framework}: {b.flag} (its shares may not be the timed program's)")
              for b in flagged]  # fmt: skip
    bars = bar_lines(group)
    parts += title(f"bars ({BAR_WIDTH} characters = the longest profiled step)")
    parts += [_fence(bars), *bars, _fence(bars)] if markdown else bars
    parts += title("profiled against timed")
    parts += [item(reconciliation(b)) for b in group.values()]
    parts += [item(f"{b.framework}: {note}") for b in group.values() for note in b.notes]
    tops = top_operations(group)
    if tops:
        parts += title("top operations (time per profiled step)")
        for name, said in tops:
            parts += [item(name)] + ["  " + item(s) for s in said]
    if base is not None:
        parts += title("differences")
        parts += [item(differences_sentence(b, group[base])) for fw, b in group.items() if fw != base]
    parts += title(f"traces (relative to the run folder; {TRACE_HINT})")
    parts += [item(f"{b.framework}: {b.trace} ({b.profiler}, {b.device_kind})") for b in group.values()]
    return parts


def _render(breakdowns: Sequence[Breakdown], baseline: str | None, tablefmt: str) -> list[str]:
    groups = by_metric(breakdowns).items()
    return [line for metric, group in groups for line in _metric_section(metric, group, baseline, tablefmt)]


def render_breakdowns(breakdowns: Sequence[Breakdown], baseline: str | None = None) -> str:
    """One run's profiles for the terminal, metric by metric."""
    if not breakdowns:
        return "no profiles in this run (`harness run --profile` records them)"
    return "\n".join(_render(breakdowns, baseline, "simple")).strip("\n")


def profile_markdown(breakdowns: Sequence[Breakdown], baseline: str | None = None) -> str:
    """The same for report.md, under its own heading; nothing when the run has no profiles."""
    if not breakdowns:
        return ""
    return "\n".join(["## Profiles: where the step's time goes", *_render(breakdowns, baseline, "github"), ""])


def _change(a: float, b: float) -> str:
    if a > 0:
        return f"{(b - a) / a:+.1%}"
    return "new" if b > 0 else ""


def _pair_section(before: Breakdown, after: Breakdown, names: tuple[str, str]) -> list[str]:
    scale = max(finite(before.step_s), finite(after.step_s))
    marked = [f"{n} *" if b.flag else n for n, b in zip(names, (before, after), strict=True)]
    rows = []
    for key in (*ROWS, "step"):
        a, b = (x.step_s if key == "step" else x.seconds(key) for x in (before, after))
        if key != "step" and a == 0 and b == 0:
            continue
        name = "profiled step" if key == "step" else label(key)
        rows.append([name, fmt_time(a, scale), fmt_time(b, scale), signed_time(b - a, scale), _change(a, b)])
    headers = ["category", *marked, "difference", "change"]
    found = moves(after, before)
    said = ", ".join(f"{label(k)} ({signed_time(d, scale)}/step, {_change(before.seconds(k), after.seconds(k))})"
                     for k, d in found)  # fmt: skip
    head = f"{before.framework} {before.metric}"
    sentence = (
        f"{head}: moved most from {names[0]} to {names[1]}: {said}"
        if found
        else f"{head}: no category moved by more than {fmt_share(MOVE_FLOOR)} of {names[0]}'s step"
    )
    flags = [f"* {n}: {b.flag}" for n, b in zip(names, (before, after), strict=True) if b.flag]
    return ["", escape.plain(f"{head} (time per profiled step)"), escape.table(rows, headers, "simple")] + [
        escape.plain(line) for line in (sentence, *flags)
    ]


def render_profile_comparison(before: Sequence[Breakdown], after: Sequence[Breakdown], names: tuple[str, str]) -> str:
    """`harness compare A B --profile`: each (framework, metric) profiled in both runs, category by category."""
    a: dict[tuple[str, str], Breakdown] = {}
    b: dict[tuple[str, str], Breakdown] = {}
    for found, side in ((a, before), (b, after)):
        for x in side:
            found.setdefault((x.framework, x.metric), x)  # a repeated pair keeps its first
    order = list(dict.fromkeys([*a, *b]))
    if not order:
        return escape.plain(f"no profiles in {names[0]} or {names[1]} (`harness run --profile` records them)")
    parts = [escape.plain(f"profiles: {names[0]} against {names[1]}")]
    for key in order:
        if key in a and key in b:
            parts += _pair_section(a[key], b[key], names)
        else:
            where = names[0] if key in a else names[1]
            parts += ["", escape.plain(f"{key[0]} {key[1]}: profiled in {where} only, nothing to set beside it")]
    return "\n".join(parts)


def profile_text(judged: Assessment) -> str:
    """What `run --profile` and `show --profile` print after the table: the breakdowns, then one line
    per profile that could not be attributed."""
    lines = [render_breakdowns(judged.breakdowns, judged.run.baseline)]
    lines += [escape.plain(problem) for problem in judged.profile_problems]
    return "\n".join(lines)
