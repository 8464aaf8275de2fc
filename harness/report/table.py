"""The comparison table: one row per metric, one column per framework, checks underneath."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from harness.core.result_types import Metric, Result
from harness.core.statistics import BOOTSTRAP_MIN_N, UNSTABLE_RELATIVE_IQR
from harness.judge.assessment import Assessment, Ratio
from harness.judge.plausibility import Finding
from harness.report import inference_text, parallel_text, training_text
from harness.store.run_folder import Run, code_label, session_label
from harness.text import escape
from harness.text.numbers import (
    fmt_check_value,
    fmt_giga,
    fmt_interval,
    fmt_ratio,
    fmt_rel_diff,
    fmt_share,
    fmt_time,
    fmt_value,
)

NOT_COMPARABLE = "†"


def _metrics(result: Result) -> dict[str, Metric]:
    return {m["name"]: m for m in result["metrics"]} if result["status"] == "ok" else {}


def _ratio_text(ratio: Ratio | None) -> str:
    """The assessment's ratio to the baseline, with its interval when it has one (95 % unless its
    coverage is printed inside the brackets: small samples)."""
    if ratio is None:
        return ""
    if ratio.interval is None:
        return f" ({fmt_ratio(ratio.value)})"
    interval = ratio.interval
    return f" ({fmt_ratio(ratio.value)} {fmt_interval(interval.low, interval.high, interval.claimed)})"


def _steady_cell(judged: Assessment, fw: str, metric: Metric) -> str:
    key = (fw, metric["name"])
    stats = metric["stats"]
    median, iqr = stats["median"], stats["iqr"]
    if stats["n"] == 1:  # one sample has no spread to show
        text = fmt_time(median) if metric["unit"] == "s" else fmt_value(median, metric["unit"])
    elif metric["unit"] == "s":
        text = f"{fmt_time(median)} ±{fmt_time(iqr, scale_from=median).split()[0]}"
    else:
        text = f"{fmt_value(median, metric['unit'])} ±{fmt_value(iqr, '')}"
    contended = judged.contention.get(key)
    if contended is not None and contended[0]:
        text += f" [contended {contended[0]}/{contended[1]}]"
    if key in judged.exclusions:
        return f"{judged.flag_word(*key) or 'EXCLUDED'} {text}"
    unstable = judged.summary(*key).unstable
    return ("~" if unstable else "") + text + (_ratio_text(judged.ratio(*key)) or _no_ratio(judged, fw, metric))


def _no_ratio(judged: Assessment, fw: str, metric: Metric) -> str:
    """Why a number with no flag of its own has no ratio, where the reason is the baseline's: its
    metric was flagged (a contended baseline takes every ratio of that row with it), or it has none."""
    baseline = judged.run.baseline
    if fw == baseline or not (judged.comparable(fw) and judged.comparable(baseline)):
        return ""  # the baseline's own cell, or a dagger that says why already
    flagged = judged.excluded(baseline, metric["name"])
    if flagged is not None:
        return f" (no ratio: {baseline} {judged.flag_word(baseline, metric['name']) or flagged})"
    base = judged.run.results.get(baseline)
    if base is not None and not any(m["name"] == metric["name"] for m in _metrics(base).values()):
        return f" (no ratio: {baseline} has no {metric['name']})"
    return ""


def _plain_ratio(ratio: float | None) -> str:
    return "" if ratio is None else f" ({fmt_ratio(ratio)})"


def _first_cell(judged: Assessment, fw: str, metric: Metric) -> str:
    first = metric.get("first_call")
    if first is None:
        return "-"
    return fmt_time(first) + _plain_ratio(judged.plain_ratio(fw, metric["name"], "first_call"))


def _rate_cell(judged: Assessment, finding: Finding, excluded: str | None) -> str:
    rate = fmt_giga(finding.achieved)
    if not finding.plausible:
        return f"{rate} > limit {fmt_giga(finding.ceiling or 0)}"
    if excluded is not None:
        return f"({rate}: {excluded})"
    text = rate + _plain_ratio(judged.plain_ratio(finding.framework, finding.metric, finding.quantity))
    # "% of achievable" above 100 % comes flagged, and a missing ceiling or GPU peak says why.
    shares = [share for share in (finding.peak_text, finding.achievable_text) if share]
    return text + (" " + ", ".join(shares) if shares else "")


def timing_rows(judged: Assessment) -> tuple[list[str], list[list[str]]]:
    """The comparison rows; a framework that is not comparable gets no ratios and a dagger."""
    run = judged.run
    flagged = judged.not_comparable
    frameworks = list(run.results)
    excluded = judged.exclusions
    headers = ["metric"] + [
        fw + (" (baseline)" if fw == run.baseline else "") + (f" {NOT_COMPARABLE}" if fw in flagged else "")
        for fw in frameworks
    ]
    rows: list[list[str]] = [["status"] + [_status(run.results[fw]) for fw in frameworks]]
    # Metrics of the jobs that produced numbers (a failed job's partial metrics are not shown).
    for name in dict.fromkeys(name for result in run.results.values() for name in _metrics(result)):
        per_fw = {fw: _metrics(run.results[fw]).get(name) for fw in frameworks}
        unit = next(m for m in per_fw.values() if m is not None)["unit"]
        label = name if unit in ("s", "") else f"{name} [{unit}]"
        # The same parameter can mean different code paths (variant=default: flax jit, pytorch eager).
        variants = {
            fw: m.get("variant") for fw, m in per_fw.items() if m is not None and isinstance(m.get("variant"), str)
        }
        if variants:
            label += " (" + ", ".join(f"{fw} {v}" for fw, v in variants.items()) + ")"
        rows.append([label] + [_steady_cell(judged, fw, m) if m else "-" for fw, m in per_fw.items()])
        if any(m is not None and m.get("first_call") is not None for m in per_fw.values()):
            rows.append(
                [f"{name} (first call)"] + [_first_cell(judged, fw, m) if m else "-" for fw, m in per_fw.items()]
            )
        shown = _bound_quantities(judged, frameworks, name)
        for quantity, unit_label in (("flops", "GFLOP/s"), ("bytes", "GB/s")):
            cells = {fw: judged.finding(fw, name, quantity) for fw in frameworks}
            if not any(cells.values()) or quantity not in shown:
                continue
            rows.append(
                [f"{name} {unit_label}"]
                + [_rate_cell(judged, f, excluded.get((fw, name))) if f else "-" for fw, f in cells.items()]
            )
    return headers, rows


def _interval_basis(run: Run) -> str:
    """What the ratio intervals rest on: processes (rounds), or the samples within one process."""
    rounds = max((r["settings"].get("rounds") or 1 for r in run.results.values()), default=1)
    if rounds >= 2:
        return f"intervals: from the {rounds} round medians per framework (one observation per process)"
    return (
        "intervals: within one process (its samples; they show how steady it was, not how the frameworks differ: "
        "`--rounds 4` or more gives intervals between processes)"
    )


def _bound_quantities(judged: Assessment, frameworks: list[str], name: str) -> set[str]:
    """Which rate rows a metric gets: a metric that declares FLOPs and bytes shows the one whose
    ceiling binds (its intensity against the ridge of the ceilings measured here, as on the
    roofline); both when no ceilings were measured, or when either rate is implausible."""
    for fw in frameworks:
        compute, memory = judged.finding(fw, name, "flops"), judged.finding(fw, name, "bytes")
        if compute is None or memory is None:
            continue
        if not (compute.plausible and memory.plausible) or not (compute.achievable and memory.achievable):
            return {"flops", "bytes"}
        intensity = compute.achieved / memory.achieved
        return {"flops"} if intensity >= compute.achievable / memory.achievable else {"bytes"}
    return {"flops", "bytes"}


def _status(result: Result) -> str:
    if result["status"] == "ok":
        return "ok"
    reason = (result.get("reason") or "").splitlines()[0] if result.get("reason") else ""
    if len(reason) > 60:
        reason = reason[:57] + "..."
    return f"{result['status'].upper()}: {reason}"


def check_rows(judged: Assessment) -> tuple[list[str], list[list[str]]]:
    run = judged.run
    frameworks = [fw for fw in run.results if run.results[fw]["status"] == "ok"]
    headers = ["check", "tolerance"] + frameworks
    rows = []
    for row in judged.checks:
        cells = [row.name, row.tolerance]
        for fw in frameworks:
            if fw not in row.values:
                cells.append(f"- (FAIL: {row.why[fw]})" if fw in row.why else "-")
                continue
            verdict = "pass" if row.passed.get(fw) else f"FAIL: {row.why.get(fw, '')}"
            diff = row.rel_diff.get(fw) if " vs " in row.tolerance else None
            extra = f", rel diff {fmt_rel_diff(diff)}" if diff is not None else ""
            cells.append(f"{fmt_check_value(row.values[fw])} ({verdict}{extra})")
        rows.append(cells)
    return headers, rows


def _differing_settings(run: Run) -> list[str]:
    """Fairness settings that are not the same for every compared framework."""
    seen: dict[str, dict[str, Any]] = {}
    ok = [fw for fw in run.results if run.results[fw]["status"] == "ok"]
    for fw in ok:
        result = run.results[fw]
        env = result["environment"]
        precision = env.get("precision") or {}
        flat = {
            "threads": result["settings"].get("threads"),
            "device": result["device"],
            # What each framework reported back after configuration (adapters' `configure`).
            "compute threads": precision.get("compute_threads"),
            "float32 matmul": precision.get("float32_matmul"),
            "usable cores": ((env.get("machine") or {}).get("cpu") or {}).get("usable_cores"),
        }
        flat.update({f"env {k}": v for k, v in env.get("variables", {}).items()})
        for key, value in flat.items():
            seen.setdefault(key, {})[fw] = value
    lines = []
    for key, values in seen.items():
        if len(values) != len(ok) or len({repr(v) for v in values.values()}) > 1:
            lines.append(f"  {key}: " + ", ".join(f"{fw}={values.get(fw, 'unset')}" for fw in ok))
    return lines


def render(judged: Assessment, tablefmt: str = "simple") -> str:
    """The whole comparison as text; tablefmt "github" gives Markdown."""
    run = judged.run
    markdown = tablefmt == "github"

    def title(text: str) -> list[str]:
        return ["", f"### {text}" if markdown else text]

    esc = escape.for_tablefmt(tablefmt)

    def section(heading: str, items: list[str]) -> list[str]:
        """A footer section: its heading and one bullet per item; nothing when there are no items."""
        return title(heading) + [f"- {esc(item.strip())}" if markdown else esc(item) for item in items] if items else []

    first = next(iter(run.results.values()), None)
    head = f"suite {run.summary.get('suite')} | run {run.summary.get('run_id')} | backend {run.summary.get('backend')}"
    if first is not None:
        head += f" | device {first['device']} | params " + ", ".join(f"{k}={v}" for k, v in first["params"].items())
        precision = first["settings"].get("precision")
        if isinstance(precision, str) and precision != "fp32":  # fp32 is the comparison default
            head += f" | precision {precision} (requested)"
        data = training_text.dataset_label(first) if first["dataset"] is not None else None  # training suites
        if data:
            head += f" | {data}"
    parts = [f"**{esc(head)}**" if markdown else esc(head), ""]
    if run.results:
        headers, rows = timing_rows(judged)
        parts.append(escape.table(rows, headers, tablefmt))
        # Training suites only (`training` is null elsewhere): the time each framework took to reach the target.
        trained = any(result["training"] is not None for result in run.results.values())
        targets = {fw: training_text.target_cell(result) for fw, result in run.results.items()} if trained else {}
        if any(t is not None for t in targets.values()):
            rows = [[fw, t or "no target set"] for fw, t in targets.items()]
            # A language model aims at a validation loss (training.target.loss) instead of an accuracy.
            losses = any("loss" in ((r["training"] or {}).get("target") or {}) for r in run.results.values())
            what = "validation loss" if losses else "accuracy"
            parts += title(f"target {what}: training time to reach it (evaluation excluded)")
            parts.append(escape.table(rows, ["framework", "time to target"], tablefmt))
        parts.append("")
        parts.append(
            "cells: median ±IQR of the steady samples, (ratio to "
            f"{run.baseline} [95 % interval; with under {BOOTSTRAP_MIN_N} observations a side, the order-statistic "
            f"range and the % it really covers]); ~ = unstable (IQR > {fmt_share(UNSTABLE_RELATIVE_IQR)} of median); "
            "first call = trace/compile + one run"
            + (
                "; time to target = the median over the seeds [its interval, 95 % unless the % it really "
                "covers is printed inside the brackets (few seeds)]"
                if any(t is not None for t in targets.values())
                else ""
            )
        )
        parts.append(_interval_basis(run))
    for fw, result in run.results.items():
        wanted = result["settings"].get("precision")
        got = judged.precision(fw)
        if isinstance(wanted, str) and got and any(c != wanted for c in got.values()):
            found = ", ".join(f"{op} {c}" for op, c in got.items())
            parts.append(f"{fw}: {wanted} requested, the precision probe measured {found} (what the numbers are)")
    for fw, why in judged.not_comparable.items():
        parts.append(f"{NOT_COMPARABLE} {fw}: {why}; timings kept in the JSON but not comparable (no ratios)")
    parts += _integrity_lines(judged, section)
    if judged.checks:
        headers, rows = check_rows(judged)
        parts += title("checks") + [escape.table(rows, headers, tablefmt)]
    if judged.parallel is not None:  # data-parallel runs only
        parts += parallel_text.parallel_section(judged, tablefmt)
    if judged.inference is not None:  # inference runs only
        parts += inference_text.inference_section(judged, tablefmt)
    versions = []
    for fw, result in run.results.items():
        v = result["environment"].get("versions", {})
        named = ", ".join(f"{k} {val}" for k, val in v.items() if val) if isinstance(v, dict) else ""
        if named:  # a framework with no version recorded is no line: a heading over nothing says nothing
            versions.append(f"  {fw}: {named}")
    labels = (code_label(run.summary.get("code")), session_label(run.summary.get("interleaved")))
    parts += section("stacks", versions + [f"  {label}" for label in labels if label])
    cold = [f"  {line}" for line in cold_path_lines(run)]
    parts += section("cold path (before the first call; first calls are in the table)", cold)
    parts += section("settings that differ between frameworks", _differing_settings(run))
    parts += section("rejected files", [f"  {p}" for p in run.problems])
    return "\n".join(parts)


COLD_PARTS = (("import_s", "import"), ("device_init_s", "device init"), ("precision_probe_s", "precision probe"))


def cold_path_lines(run: Run) -> list[str]:
    """Per framework: import, device initialisation, the precision probe, and container start."""
    lines = []
    for fw, result in run.results.items():
        env = result["environment"]
        cold: dict[str, Any] = env["cold_path"] if isinstance(env.get("cold_path"), dict) else {}
        launch: dict[str, Any] = env["launch"] if isinstance(env.get("launch"), dict) else {}
        parts = [
            f"{label} {fmt_time(float(cold[key]))}"
            for key, label in COLD_PARTS
            if isinstance(cold.get(key), (int, float)) and not isinstance(cold.get(key), bool)
        ]
        start = launch.get("container_start_s")
        if isinstance(start, (int, float)) and not isinstance(start, bool):
            parts.insert(0, f"container start {fmt_time(float(start))}")
        if parts:
            cache = result["settings"].get("cache")
            notes = [f"compiler caches {cache}"] if cache else []
            process = env.get("process")
            if isinstance(process, dict) and process.get("start") in ("forked", "mixed"):
                # The import was paid once by the server each round's job was forked from.
                notes.append("import once, in the fork server the rounds' jobs were forked from")
            lines.append(f"{fw}: " + ", ".join(parts) + (f" ({'; '.join(notes)})" if notes else ""))
    return lines


def _integrity_lines(judged: Assessment, section: Callable[[str, list[str]], list[str]]) -> list[str]:
    """Footer sections for every guard raised (judge/guards/), contended and throttled samples, unchecked
    syncs and suite warnings; `section(heading, items)` writes one (nothing for no items)."""
    run = judged.run
    lines: list[str] = []
    for guard, hits in judged.guard_hits():  # each guard's own section, in the registry's order
        lines += section(guard.heading, [f"  {fw} {name}: {hit.footer}" for hit in hits for fw, name in [hit.key]])
    # Contended samples below the guard's rule (most of a metric's): kept in the statistics, said here.
    contended = [(key, k, n) for key, (k, n) in judged.contention.items() if k and key not in judged.disturbed]
    lines += section(
        "contended samples (the CPU was shared while the clock ran; kept in the statistics)",
        [f"  {fw} {name}: {k} of {n} samples" for (fw, name), k, n in contended],
    )
    if judged.crowded:  # the run as a whole, under its own heading: there may be no sample list above it
        lines += section("run flagged", [f"  RUN FLAGGED: {judged.crowded}"])
    throttled = [
        f"  {fw} {m['name']}: {len(found)} of {len(m['samples'])} samples"
        for fw, result in run.results.items()
        for m in _metrics(result).values()
        if (found := (m.get("contention") or {}).get("throttled"))
    ]
    lines += section("throttled samples (NVML: the GPU was held below its clocks; kept in the statistics)", throttled)
    unchecked = [
        f"  {fw} {m['name']}: {(m.get('sync') or {}).get('why', 'no barrier evidence in the result')}"
        for fw, result in run.results.items()
        for m in _metrics(result).values()
        if m["kind"] == "time" and judged.sync(fw, m["name"]) == "unchecked"
    ]
    lines += section("sync not checked", unchecked)
    warnings = [
        f"  {fw} {m['name']}: {w}"
        for fw, result in run.results.items()
        for m in _metrics(result).values()
        for w in (m.get("warnings") or [])
        if isinstance(w, str)
    ]
    lines += section("warnings", warnings)
    return lines
