"""Headless figures for reports (matplotlib, an optional host extra: `pip install .[report]`)."""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.core.errors import HarnessError
from harness.core.safe_files import real_folder, write_bytes_atomic
from harness.judge.assessment import Assessment
from harness.report import palette, pictures
from harness.report import picture_figures as pictured
from harness.report.pictures import wide
from harness.store.plan import get_suite
from harness.store.run_folder import Run
from harness.text.escape import plain, plot_label


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")  # no display on servers and in CI
        import matplotlib.pyplot as plt
    except ImportError:
        raise HarnessError("figures need matplotlib: pip install 'fw-harness[report]' (or --no-figures)") from None
    return plt


def _grouped_bars(
    ax: Any, names: list[str], frameworks: list[str], value: Any, err: Any = None, style: Any = None
) -> None:
    width = 0.8 / max(len(frameworks), 1)
    shown: list[float] = []
    for i, fw in enumerate(frameworks):
        xs, ys, lo, hi = [], [], [], []
        for j, name in enumerate(names):
            v = value(fw, name)
            if v is None:
                continue
            xs.append(j + (i - (len(frameworks) - 1) / 2) * width)
            ys.append(v)
            if err is not None:
                low, high = err(fw, name)
                lo.append(max(v - low, 0.0))
                hi.append(max(high - v, 0.0))
        if xs:
            extra = style(i, fw) if style is not None else {"color": palette.colour(fw)}
            ax.bar(xs, ys, width, label=plot_label(fw), yerr=[lo, hi] if err is not None else None, capsize=3, **extra)
            shown += ys
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels([plot_label(n) for n in names], rotation=30, ha="right")
    positive = [v for v in shown if v > 0]
    if positive and wide(positive):  # the jit suite spans four decades
        ax.set_yscale("log")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")


@dataclass(frozen=True)
class Figure:
    path: Path
    alt: str  # what the picture shows, in a sentence (plain text: the medium escapes it)


def _save(plt: Any, fig: Any, path: Path, alt: str) -> Figure:
    """PNG bytes replace the file in one rename: a link planted at `path` is replaced, not written through."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=120)
    write_bytes_atomic(path, buffer.getvalue())
    plt.close(fig)
    return Figure(path, alt)


def write_figures(judged: Assessment, folder: Path) -> list[Figure]:
    """Every figure of a run: steady and first-call bars, then the pictures (report/pictures.py)."""
    plt = _pyplot()
    real_folder(folder)
    run = judged.run
    suite = get_suite(str(run.summary.get("suite"))).name  # the registry's name: file names come from it
    return _bars(plt, run, folder, suite) + _pictures(plt, judged, folder, suite)


def _names(items: list[str]) -> str:
    return ", ".join(plain(i) for i in items)


def _pictures(plt: Any, judged: Assessment, folder: Path, suite: str) -> list[Figure]:
    made: list[Figure] = []

    def save(fig: Any, name: str, alt: str) -> None:
        made.append(_save(plt, fig, folder / f"{suite}-{name}.png", alt))

    flags = pictures.flag_reasons(judged)
    curves = pictures.learning_curves(judged)
    if curves is not None:
        target = f"; target {curves.measure.show(curves.target)}" if curves.target is not None else ""
        save(pictured.learning_curves_figure(plt, curves), "learning-curves",
             f"learning curves: {curves.measure.name} and train loss against cumulative training time for "
             f"{_names(curves.frameworks)}{target}")  # fmt: skip
    roof = pictures.roofline(judged, flags)
    if roof is not None:
        save(pictured.roofline_figure(plt, roof), "roofline",
             f"roofline: achieved FLOP/s against arithmetic intensity for {len(roof.points)} measurements, under "
             f"{len(roof.roofs)} ceilings ({_names([r.label for r in roof.roofs]) or 'none known'})")  # fmt: skip
    for i, timeline in enumerate(pictures.timelines(judged, flags)):
        # numbered, not named: a metric's name comes from a result file and never becomes a path
        marked = sum(len(s.marks) for s in timeline.series)
        save(pictured.timeline_figure(plt, timeline, suite), f"timeline-{i + 1}",
             f"sample timeline of {plain(timeline.metric)}: every steady sample in order for "
             f"{_names([s.framework for s in timeline.series])}, {marked} marked; "
             + plain(pictured.timeline_caption(timeline)))  # fmt: skip
    return made


def _bars(plt: Any, run: Run, folder: Path, suite: str) -> list[Figure]:
    frameworks = [fw for fw, r in run.results.items() if r["status"] == "ok"]
    found = {(fw, m["name"]): m for fw in frameworks for m in run.results[fw]["metrics"] if m["kind"] == "time"}
    names = list(dict.fromkeys(name for _, name in found))
    if not names:
        return []

    def median(fw: str, name: str) -> float | None:
        m = found.get((fw, name))
        return m["stats"]["median"] if m else None

    def quartiles(fw: str, name: str) -> tuple[float, float]:
        s = found[(fw, name)]["stats"]
        return s["q1"], s["q3"]

    fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(names) * max(len(frameworks), 1) / 2), 4.5))
    _grouped_bars(ax, names, frameworks, median, quartiles)
    ax.set(ylabel="steady time per call (s), bars: median, whiskers: IQR", title=f"{suite}: steady state")
    fig.tight_layout()
    alt = f"steady time per call, median with IQR whiskers, per metric for {_names(frameworks)}"
    steady = _save(plt, fig, folder / f"{suite}-steady.png", alt)

    # First call next to steady so compile cost is visible: two bars per framework and metric.
    series = [f"{fw} {kind}" for fw in frameworks for kind in ("first call", "steady")]

    def look(i: int, label: str) -> dict[str, Any]:
        # one colour per framework; the first call hatched and pale next to its steady bar
        colour = palette.colour(label.split(" ", 1)[0])
        if label.endswith("first call"):
            return {"color": colour, "alpha": 0.45, "hatch": "//", "edgecolor": colour}
        return {"color": colour}

    def either(label: str, name: str) -> float | None:
        fw, kind = label.split(" ", 1)
        m = found.get((fw, name))
        if m is None:
            return None
        return m.get("first_call") if kind == "first call" else m["stats"]["median"]

    fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(names) * len(series) / 3), 4.5))
    _grouped_bars(ax, names, series, either, style=look)
    ax.set(ylabel="time (s)", title=f"{suite}: first call (trace/compile + run) vs steady")
    fig.tight_layout()
    alt = f"first call (hatched) against the steady median, per metric for {_names(frameworks)}"
    return [steady, _save(plt, fig, folder / f"{suite}-first-vs-steady.png", alt)]
