"""Every renderer of profiles (terminal, report.md, compare, the site's bars) on breakdowns built by hand."""

from __future__ import annotations

import dataclasses
import re
import xml.etree.ElementTree as ET

import pytest

from harness.judge.breakdown import CATEGORIES, Breakdown, Category, Operation
from harness.publish.profile_bars import COLOURS, profile_section, trace_href
from harness.report.palette import FLAG_COLOUR
from harness.report.profile_text import (
    BAR_WIDTH,
    LETTERS,
    differences_sentence,
    profile_markdown,
    render_breakdowns,
    render_profile_comparison,
)

MS = 1e-3
SVG = "{http://www.w3.org/2000/svg}"


def breakdown(
    framework: str,
    seconds: dict[str, float],
    unattributed: float = 0.0,
    timed: float | None = None,
    *,
    metric: str = "train-step",
    flag: str | None = None,
    ops: dict[str, list[tuple[str, float]]] | None = None,
    trace: str | None = None,
) -> Breakdown:
    """Categories in ms per step; the step is their sum with the unattributed time, as attribution makes it."""
    step = (sum(seconds.values()) + unattributed) * MS
    categories = tuple(
        Category(
            key,
            seconds.get(key, 0.0) * MS,
            seconds.get(key, 0.0) * MS / step if step else 0.0,
            tuple(Operation(name, s * MS) for name, s in (ops or {}).get(key, [])),
        )
        for key, _ in CATEGORIES
    )
    return Breakdown(
        framework=framework,
        metric=metric,
        device_kind="gpu",
        profiler=f"{framework}-profiler 1.0",
        steps=5,
        step_s=step,
        timed_step_s=None if timed is None else timed * MS,
        categories=categories,
        unattributed_s=unattributed * MS,
        trace=trace or f"{framework}-artifacts/profiles/{metric}.trace.json.gz",
        flag=flag,
    )


FLAX = breakdown(
    "flax",
    {"matmul": 4.0, "elementwise": 3.0, "optimizer": 1.0, "overhead": 0.5},
    0.5,
    8.5,
    ops={"matmul": [("dot.3", 3.0), ("convolution.1", 0.6), ("dot.7", 0.3), ("dot.9", 0.1)]},
)
TORCH = breakdown(
    "pytorch",
    {"matmul": 4.5, "elementwise": 6.0, "optimizer": 1.1, "overhead": 3.0},
    0.4,
    10.0,
    ops={"matmul": [("aten::addmm", 4.0), ("aten::mm", 0.5)], "elementwise": [("aten::" + "x" * 100, 2.0)]},
)


def table_lines(text: str) -> list[str]:
    """The rows of the first table of a terminal rendering (from its header to the profiled step)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("category"))
    end = next(i for i, line in enumerate(lines) if line.startswith("profiled step"))
    return lines[start : end + 1]


def test_table_rows_follow_the_categories_and_skip_zeros() -> None:
    rows = table_lines(render_breakdowns([FLAX, TORCH], baseline="pytorch"))
    names = [re.split(r"\s{2,}", row)[0] for row in rows[2:]]
    assert names == [
        "matrix products and convolutions",
        "other fused/elementwise kernels",
        "optimiser update",
        "framework overhead (Python, dispatch, idle compute)",
        "unattributed",
        "profiled step",
    ]  # attention, reductions, collectives, copies and compilation are zero in both: no row
    header = re.split(r"\s{2,}", rows[0].strip())
    assert header == ["category", "flax", "pytorch (baseline)", "difference flax - pytorch"]
    elementwise = re.split(r"\s{2,}", rows[3].strip())
    assert elementwise == ["other fused/elementwise kernels", "3 ms (33%)", "6 ms (40%)", "-3 ms"]
    step = re.split(r"\s{2,}", rows[-1].strip())
    assert step == ["profiled step", "9 ms", "15 ms", "-6 ms"]


def test_the_first_of_two_is_the_baseline_when_none_is_named() -> None:
    rows = table_lines(render_breakdowns([FLAX, TORCH]))
    assert re.split(r"\s{2,}", rows[0].strip())[-1] == "difference pytorch - flax"
    assert re.split(r"\s{2,}", rows[-1].strip())[-1] == "+6 ms"


def test_bars_are_scaled_to_the_longest_step() -> None:
    text = render_breakdowns([FLAX, TORCH])
    bars = {m.group(1): m.group(2) for m in re.finditer(r"^\s+(\w+)\s+\|([^|]*)\|", text, re.M)}
    torch, flax = bars["pytorch"].rstrip(), bars["flax"].rstrip()
    assert len(torch) == BAR_WIDTH and len(flax) == round(9 / 15 * BAR_WIDTH)
    assert flax.count(LETTERS["matmul"]) == round(4 / 15 * BAR_WIDTH)
    assert torch.count(LETTERS["elementwise"]) == round(6 / 15 * BAR_WIDTH)
    assert torch.index(LETTERS["matmul"]) < torch.index(LETTERS["elementwise"]) < torch.index(LETTERS["overhead"])
    legend = next(line for line in text.splitlines() if line.strip().startswith("M matrix"))
    assert "A attention" not in legend and ". unattributed" in legend


def test_reconciliation_lines_and_the_flag() -> None:
    flagged = dataclasses.replace(TORCH, flag="OVERHEAD: profiled step 50% above the timed one")
    text = render_breakdowns([FLAX, flagged], baseline="flax")
    assert "flax: profiled step 9 ms (5 steps), timed 8.5 ms per step, profiler overhead +6%" in text
    line = next(line for line in text.splitlines() if line.strip().startswith("pytorch: profiled step"))
    assert line.strip().endswith("profiler overhead +50%; OVERHEAD: profiled step 50% above the timed one")
    assert re.search(r"pytorch \*\s", table_lines(text)[0])
    assert "* pytorch: OVERHEAD: profiled step 50% above the timed one" in text  # the footnote
    other = dataclasses.replace(FLAX, flag="UNATTRIBUTED: a third of the step")
    assert "; UNATTRIBUTED: a third of the step" in render_breakdowns([other])


def test_one_framework_without_a_timed_step() -> None:
    alone = dataclasses.replace(FLAX, timed_step_s=None)
    text = render_breakdowns([alone], baseline="pytorch")
    assert "flax: profiled step 9 ms (5 steps), no timed step to reconcile with" in text
    assert "overhead +" not in text and "difference" not in text and "spends" not in text
    assert "flax: flax-artifacts/profiles/train-step.trace.json.gz (flax-profiler 1.0, gpu)" in text
    assert "chrome://tracing" in text and "ui.perfetto.dev" in text


def test_top_operations_are_the_first_three_and_long_names_are_cut() -> None:
    text = render_breakdowns([FLAX, TORCH])
    assert "flax: dot.3 3 ms, convolution.1 600 us, dot.7 300 us" in text and "dot.9" not in text
    long = next(line for line in text.splitlines() if "aten::xxx" in line)
    name = long.split(": ", 1)[1].rsplit(" ", 2)[0]
    assert name.endswith("…") and len(name) == 60


def test_the_differences_name_the_two_largest_moves_above_five_percent() -> None:
    sentence = differences_sentence(TORCH, FLAX)
    assert sentence == (
        "pytorch spends 3 ms/step more in other fused/elementwise kernels and 2.5 ms/step more in framework overhead "
        "(Python, dispatch, idle compute) than flax (profiled steps 15 ms and 9 ms)."
    )
    faster = breakdown("jax", {"matmul": 2.0, "elementwise": 3.2, "optimizer": 1.0, "overhead": 0.5}, 0.5)
    assert differences_sentence(faster, FLAX).startswith("jax spends 2 ms/step less in matrix products")
    assert "elementwise" not in differences_sentence(faster, FLAX)  # 0.2 ms: under 5% of flax's 9 ms
    same = breakdown("jax", {"matmul": 4.1, "elementwise": 3.0, "optimizer": 1.0, "overhead": 0.5}, 0.5)
    assert "differ by no more than 5% of flax's step in any category" in differences_sentence(same, FLAX)


def test_each_metric_gets_its_own_section() -> None:
    eval_step = breakdown("flax", {"matmul": 2.0}, metric="eval-step")
    text = render_breakdowns([FLAX, eval_step, TORCH])
    assert text.index("profile: train-step") < text.index("profile: eval-step")
    section = text[text.index("profile: eval-step") :]
    assert "pytorch" not in section and "2 ms (100%)" in section


HOSTILE = "\x1b[31mevil\x1b[0m|<script>alert(1)</script>|`x`"


def hostile() -> list[Breakdown]:
    return [
        dataclasses.replace(FLAX, framework=HOSTILE, metric="m\x1b]0;title\x07|<b>", trace="../../etc/passwd"),
        dataclasses.replace(
            TORCH,
            metric="m\x1b]0;title\x07|<b>",
            flag="<img src=x onerror=alert(1)>\x1b[2J",
            categories=tuple(
                dataclasses.replace(c, top=(Operation("\x1b[1m<script>op|x</script>\uffff", 0.001),))
                for c in TORCH.categories
            ),
            trace="javascript:alert(1)",
        ),
    ]


def test_terminal_text_carries_no_control_character() -> None:
    for text in (render_breakdowns(hostile()), render_profile_comparison(hostile(), hostile(), ("a\x1b[2J", "b"))):
        assert not re.search("[\x00-\x09\x0b-\x1f\x7f-\x9f]", text)
        assert "\\x1b[31mevil" in text


def test_markdown_keeps_its_columns_and_shows_no_html() -> None:
    text = profile_markdown(hostile())
    assert text.startswith("## Profiles")
    assert "\x1b" not in text
    fenced = False
    for line in text.splitlines():  # outside the bars' code block, no `<` opens HTML
        fenced ^= line.startswith("```")
        assert fenced or line.startswith("```") or not re.search(r"(?<!\\)<", line), line
    rows = [line for line in text.splitlines() if line.startswith("|")]
    assert rows and len({len(re.findall(r"(?<!\\)\|", row)) for row in rows}) == 1  # no pipe from a name opens a cell
    fences = [line for line in text.splitlines() if line.startswith("```")]
    assert fences and all(len(f) >= 3 and set(f) == {"`"} for f in fences)
    assert profile_markdown([]) == ""


def test_a_backtick_in_a_name_cannot_close_the_bars_code_block() -> None:
    text = profile_markdown([dataclasses.replace(FLAX, framework="a````b"), TORCH])
    fences = [line for line in text.splitlines() if set(line) == {"`"}]
    assert fences and all(len(f) == 5 for f in fences)


def test_compare_sets_each_profiled_pair_side_by_side() -> None:
    slower = breakdown(
        "flax",
        {"matmul": 6.0, "elementwise": 3.0, "optimizer": 1.0, "overhead": 1.5},
        0.5,
        10.0,
        flag="CONTENDED: noisy",
    )
    only = breakdown("flax", {"matmul": 1.0}, metric="eval-step")
    text = render_profile_comparison([FLAX, TORCH], [slower, only], ("run 5", "run 6"))
    rows = text.splitlines()
    header = next(line for line in rows if line.startswith("category"))
    assert re.split(r"\s{2,}", header) == ["category", "run 5", "run 6 *", "difference", "change"]
    matmul = next(line for line in rows if line.startswith("matrix products"))
    assert re.split(r"\s{2,}", matmul) == ["matrix products and convolutions", "4 ms", "6 ms", "+2 ms", "+50.0%"]
    assert (
        "flax train-step: moved most from run 5 to run 6: matrix products and convolutions (+2 ms/step, +50.0%), "
        "framework overhead (Python, dispatch, idle compute) (+1 ms/step, +200.0%)" in text
    )
    assert "* run 6: CONTENDED: noisy" in text
    assert "pytorch train-step: profiled in run 5 only" in text
    assert "flax eval-step: profiled in run 6 only" in text
    assert "no profiles in a or b" in render_profile_comparison([], [], ("a", "b"))


def svgs(html: str) -> list[ET.Element]:
    return [ET.fromstring(found) for found in re.findall(r"<svg.*?</svg>", html, re.S)]


def test_the_site_draws_one_bar_per_framework_in_proportion() -> None:
    flagged = dataclasses.replace(TORCH, flag="OVERHEAD: profiled step 50% above the timed one")
    html = str(profile_section([FLAX, flagged]))
    ET.fromstring(html)  # the whole section is well-formed
    (svg,) = svgs(html)
    rects = svg.findall(f"{SVG}rect")
    coloured = [r for r in rects if r.get("fill") in COLOURS.values() and r.find(f"{SVG}title") is not None]
    tips = [r.findtext(f"{SVG}title") for r in coloured]
    assert len(coloured) == 10  # five categories with time in each framework
    assert "flax · matrix products and convolutions · 4 ms/step (44%)" in tips
    widths = {fw: sum(float(r.get("width", 0)) for r, t in zip(coloured, tips, strict=True) if str(t).startswith(fw))
              for fw in ("flax", "pytorch")}  # fmt: skip
    assert widths["pytorch"] == pytest.approx(440, abs=0.5) and widths["flax"] == pytest.approx(440 * 9 / 15, abs=0.5)
    outlines = [r for r in rects if r.get("stroke") == FLAG_COLOUR]
    assert len(outlines) == 1 and outlines[0].get("fill") == "none"
    texts = ["".join(t.itertext()) for t in svg.iter(f"{SVG}text")]
    assert "15 ms/step (FLAGGED)" in texts and "9 ms/step" in texts
    assert "OVERHEAD: profiled step 50% above the timed one" in texts
    legend = [r for r in rects if r.get("width") == "12"]
    assert [r.get("fill") for r in legend] == [COLOURS[k] for k in ("matmul", "elementwise", "optimizer", "overhead", "unattributed")]  # fmt: skip
    assert "pytorch spends 3 ms/step more in other fused/elementwise kernels" in html
    assert html.count('href="flax-artifacts/profiles/train-step.trace.json.gz"') == 1


def test_the_site_escapes_every_name_and_links_only_plain_paths() -> None:
    html = str(profile_section(hostile()))
    ET.fromstring(html)
    assert len(svgs(html)) == 1
    assert "<script" not in html and "<img" not in html and "<b>" not in html and "\x1b" not in html
    assert "&lt;script&gt;" in html and "\\x1b[31mevil" in html
    assert "<a " not in html  # neither trace is a plain path inside the run folder
    assert "../../etc/passwd" in html and "javascript:alert(1)" in html  # shown, as text
    assert str(profile_section([])) == ""
    unlinked = str(profile_section([FLAX], trace_base=None))
    assert "<a " not in unlinked and "flax-artifacts/profiles/train-step.trace.json.gz" in unlinked
    assert 'href="runs/7/flax-artifacts/' in str(profile_section([FLAX], trace_base="runs/7/"))


@pytest.mark.parametrize(
    "path",
    ["../x", "a/../b", "/etc/passwd", "http://x/y", "javascript:alert(1)", "a b", "a\\b", "./a", "a//b", "a?b", ""],
)
def test_a_trace_path_that_is_not_plain_is_not_linked(path: str) -> None:
    assert trace_href(path) is None


def test_a_plain_trace_path_is_linked() -> None:
    assert trace_href("flax-artifacts/profiles/train-step.trace.json.gz") == (
        "flax-artifacts/profiles/train-step.trace.json.gz"
    )


def test_a_zero_or_broken_step_draws_no_bar_and_no_error() -> None:
    empty = breakdown("numpy", {}, 0.0, 1.0)  # a zero step: no share, no length
    broken = dataclasses.replace(FLAX, step_s=float("nan"))
    for group in ([empty], [empty, broken]):
        (svg,) = svgs(str(profile_section(group)))
        assert not [r for r in svg.findall(f"{SVG}rect") if r.get("width") not in ("12",)]
    assert "|" + " " * BAR_WIDTH + "|" in render_breakdowns([empty])
