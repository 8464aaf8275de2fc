"""The pictures of report/pictures.py as matplotlib figures: learning curves, roofline, timelines.

Each builder returns the Figure (tests read the drawn data back from its artists, whose `gid`
names what they hold) and `write_pictures` saves them as PNG. Colours come from palette.py, so
a framework looks the same here and on the site; a flagged framework or metric is drawn dashed
in its own colour with red-edged markers (a red ring around its own shape) and says FLAGGED in the
legend: the flag is a mark on the framework, never a replacement for it, so with every sample flagged
each framework can still be told apart (issue 57).
"""

from __future__ import annotations

import itertools
import math
from typing import Any

from harness.report import palette
from harness.report.pictures import LearningCurves, Roofline, Timeline, wide
from harness.text.escape import plot_label
from harness.text.numbers import fmt_time

MARK_STYLES = {"escaped": "X", "contended": "v", "throttled": "s"}  # a marker shape per mark reason
METRIC_MARKERS = ("o", "s", "^", "D", "P", "*", "v", "<", ">", "h")


FLAG_EDGE = 2.2  # the red ring's width around a flagged framework's own marker


def _flag_text(flags: tuple[str, ...]) -> str:
    return "FLAGGED: " + "; ".join(flags)


def _flag_marks(flagged: bool) -> dict[str, Any]:
    """Marker edges of a line: red and thick when flagged (the face keeps the framework's colour)."""
    return {"mec": palette.FLAG_COLOUR, "mew": FLAG_EDGE} if flagged else {}


def learning_curves_figure(plt: Any, curves: LearningCurves) -> Any:
    fig, (eval_ax, loss_ax) = plt.subplots(1, 2, figsize=(12, 4.6))
    measure = curves.measure  # the left panel: test accuracy, or a language model's validation loss
    banded = {b.framework for b in curves.bands}
    any_evaluated = False
    for fw in curves.frameworks:
        flags = curves.flags.get(fw, ())
        colour = palette.colour(fw)
        style = "--" if flags else "-"
        ring = _flag_marks(bool(flags))
        name = plot_label(fw) + (f" ({_flag_text(flags)})" if flags else "")
        mine = [c for c in curves.curves if c.framework == fw]
        thin = fw in banded  # with rounds, each process is a thin line under the median
        for c in mine:
            times = [p.seconds for p in c.points]
            label = None if thin else name
            width, alpha = (0.8, 0.35) if thin else (2.0, 1.0)
            tested = [(p.seconds, value) for p in c.points if (value := curves.evaluated(p)) is not None]
            if tested:
                any_evaluated = True
                eval_ax.plot(*zip(*tested, strict=True), style, color=colour, lw=width, alpha=alpha, marker="o",
                             ms=3 if thin else 5, label=label, gid=f"{measure.field}:{fw}:{c.process}", **ring)  # fmt: skip
            loss_ax.plot(times, [p.train_loss for p in c.points], style, color=colour, lw=width, alpha=alpha,
                         marker="o", ms=3 if thin else 5, label=label, gid=f"loss:{fw}:{c.process}", **ring)  # fmt: skip
        band = next((b for b in curves.bands if b.framework == fw), None)
        if band is not None:
            label = f"{name}: median of {band.rounds} rounds (band: min-max)"
            lo, mid, hi = zip(*band.loss, strict=True)
            loss_ax.fill_between(band.seconds, lo, hi, color=colour, alpha=0.18, lw=0)
            loss_ax.plot(band.seconds, mid, style, color=colour, lw=2.2, marker="o", ms=5, label=label,
                         gid=f"loss-median:{fw}", **ring)  # fmt: skip
            tested_band = [(s, a) for s, a in zip(band.seconds, curves.spread(band), strict=True) if a is not None]
            if tested_band:
                at, spread = zip(*tested_band, strict=True)
                lo, mid, hi = zip(*spread, strict=True)
                eval_ax.fill_between(at, lo, hi, color=colour, alpha=0.18, lw=0)
                eval_ax.plot(at, mid, style, color=colour, lw=2.2, marker="o", ms=5, label=label,
                             gid=f"{measure.field}-median:{fw}", **ring)  # fmt: skip
    if curves.target is not None:
        eval_ax.axhline(
            curves.target, color="#444444", ls=":", lw=1.2, label=f"target {measure.show(curves.target)}", gid="target"
        )
    if not any_evaluated:
        where = "validation split" if measure.lower_is_better else "test split"
        hint = "" if measure.lower_is_better else "\n(--param curve=true draws this curve)"
        eval_ax.text(0.5, 0.5, f"{where} evaluated only after the last epoch{hint}",
                     ha="center", va="center", transform=eval_ax.transAxes)  # fmt: skip
    suite = plot_label(curves.suite)
    better = " (lower is better)" if measure.lower_is_better else ""
    eval_ax.set(title=f"{suite}: {measure.name} against training time{better}", xlabel="cumulative training time (s), "
                "evaluations excluded", ylabel=measure.axis)  # fmt: skip
    loss_ax.set(title=f"{suite}: train loss against training time",
                xlabel="cumulative training time (s), evaluations excluded", ylabel="mean train loss of the epoch")  # fmt: skip
    # One framework's epoch 1 (its compilation) can outlast another's whole run: a log time axis then.
    log = wide([p.seconds for c in curves.curves for p in c.points])
    for ax in (eval_ax, loss_ax):
        if log:
            ax.set_xscale("log")
            ax.set_xlabel(ax.get_xlabel() + " (log scale)")
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize="small")
    fig.tight_layout()
    return fig


def roofline_figure(plt: Any, roof: Roofline) -> Any:
    fig, ax = plt.subplots(figsize=(9, 5.6))
    xs = [p.intensity for p in roof.points] + [r.ridge for r in roof.roofs if r.ridge and math.isfinite(r.ridge)]
    low, high = min(xs) / 4, max(xs) * 4
    grid = [low * (high / low) ** (i / 200) for i in range(201)]
    for r in roof.roofs:
        measured = r.kind == "measured"
        ax.plot(grid, [r.at(x) / 1e9 for x in grid], "-" if measured else "--", color="#333333" if measured else "#888888",
                lw=1.8 if measured else 1.2, label=plot_label(r.label), gid=f"roof:{r.kind}:{r.dtype}")  # fmt: skip
    metrics = list(dict.fromkeys(p.metric for p in roof.points))
    for p in roof.points:
        marker = METRIC_MARKERS[metrics.index(p.metric) % len(METRIC_MARKERS)]
        label = f"{plot_label(p.framework)} {plot_label(p.metric)}"
        gid = f"point:{p.framework}:{p.metric}"
        if p.flags:  # its own colour and shape, ringed in red
            ax.scatter([p.intensity], [p.rate / 1e9], s=110, marker=marker, color=palette.colour(p.framework),
                       edgecolors=palette.FLAG_COLOUR, linewidths=FLAG_EDGE, zorder=4,
                       label=f"{label}: {_flag_text(p.flags)}", gid=gid)  # fmt: skip
        else:
            ax.scatter([p.intensity], [p.rate / 1e9], s=60, marker=marker, color=palette.colour(p.framework),
                       edgecolors="black", linewidths=0.5, zorder=3, label=label, gid=gid)  # fmt: skip
        ax.annotate(plot_label(p.metric), (p.intensity, p.rate / 1e9), textcoords="offset points", xytext=(6, -10),
                    fontsize="x-small")  # fmt: skip
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(low, high)
    ax.set(title=f"{plot_label(roof.suite)}: roofline (median of the steady samples)",
           xlabel="arithmetic intensity (FLOP per byte, declared FLOPs / declared bytes)",
           ylabel="achieved GFLOP/s")  # fmt: skip
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    if roof.left_out:
        fig.text(0.01, 0.01, "not drawn: " + "; ".join(plot_label(t) for t in roof.left_out)[:300], fontsize="x-small")
    fig.tight_layout()
    return fig


def timeline_figure(plt: Any, timeline: Timeline, suite: str) -> Any:
    fig, (first_ax, ax) = plt.subplots(1, 2, figsize=(12, 4.4), gridspec_kw={"width_ratios": [1, 6]})
    samples: list[float] = []
    firsts: list[float] = []
    drawn_edges: set[float] = set()
    for s in timeline.series:
        colour = palette.colour(s.framework)
        name = plot_label(s.framework)
        xs = list(range(1, len(s.samples) + 1))
        if s.flags:  # dashed in its own colour, each sample ringed in red
            ax.plot(xs, s.samples, "--", color=colour, lw=1, marker="o", ms=6, label=f"{name} ({_flag_text(s.flags)})",
                    gid=f"samples:{s.framework}", **_flag_marks(True))  # fmt: skip
        else:
            ax.plot(
                xs, s.samples, "-", color=colour, lw=1, marker="o", ms=3.5, label=name, gid=f"samples:{s.framework}"
            )
        samples += s.samples
        # Between the last sample of a round and the first of the next (x is the 1-based sample number).
        for edge in [total + 0.5 for total in itertools.accumulate(s.round_sizes[:-1])]:
            if edge not in drawn_edges:
                label = "round boundary (a new process)" if not drawn_edges else None
                ax.axvline(edge, color="#999999", ls="--", lw=0.9, label=label, gid=f"boundary:{edge}")
                drawn_edges.add(edge)
        for reason in timeline.reasons:
            marked = [i for i, reasons in s.marks.items() if reason in reasons]
            if marked:
                ax.scatter([i + 1 for i in marked], [s.samples[i] for i in marked], marker=MARK_STYLES.get(reason, "x"),
                           s=70, color=palette.MARK_COLOUR, zorder=4, label=f"{name} marked {plot_label(reason)}: "
                           f"{plot_label(timeline.reasons[reason])}", gid=f"marked:{s.framework}:{reason}")  # fmt: skip
        if s.first_calls:
            rounds = list(range(1, len(s.first_calls) + 1))
            first_ax.plot(rounds, s.first_calls, "D", color=colour, ms=6, label=name, gid=f"first:{s.framework}")
            firsts += s.first_calls
    for axes, values in ((ax, samples), (first_ax, firsts)):
        if wide(values):
            axes.set_yscale("log")
    title = f"{plot_label(suite)} {plot_label(timeline.metric)}: every steady sample in order"
    ax.set(title=title, xlabel="sample number (in the order taken; rounds one after another)",
           ylabel="time per call (s)")  # fmt: skip
    first_ax.set(title="first calls", xlabel="round", ylabel="time (s): trace/compile + one run")
    most = max((len(s.first_calls) for s in timeline.series), default=1)
    first_ax.set_xticks(range(1, most + 1))
    first_ax.set_xlim(0.5, most + 0.5)
    for a in (ax, first_ax):
        a.grid(alpha=0.3)
    ax.legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return fig


def timeline_caption(timeline: Timeline) -> str:
    """The first calls in words (the figure's left panel), for report.md and the terminal."""
    calls = [(s.framework, ", ".join(fmt_time(v) for v in s.first_calls) or "not recorded") for s in timeline.series]
    return "first calls: " + "; ".join(f"{fw} {each}" for fw, each in calls)
