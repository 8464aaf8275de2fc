"""The comparison table: one row per metric, one column per framework, checks underneath."""

from __future__ import annotations

from typing import Any

from harness import escape
from harness.gate import CheckRow, evaluate, failing_frameworks
from harness.plausibility import IMPLAUSIBLE, Finding, lint
from harness.runs import Run
from harness.statistics import UNSTABLE_RELATIVE_IQR, bootstrap_ratio_ci
from harness.units import fmt_time, fmt_value

NOT_COMPARABLE = "†"


def _metric_names(run: Run) -> list[str]:
    names: list[str] = []
    for result in run.results.values():
        for metric in _metrics(result).values():  # a failed job's partial metrics have no row
            if metric["name"] not in names:
                names.append(metric["name"])
    return names


def _metrics(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {m["name"]: m for m in result["metrics"]} if result["status"] == "ok" else {}


def _ratio(value: float, base: float | None) -> str:
    if base is None or base == 0:
        return ""
    return f" ({value / base:.2f}x)"


def _sample_ratio(metric: dict[str, Any], base: dict[str, Any] | None) -> str:
    """Ratio of medians to the baseline, with its 95 % bootstrap interval when both have 3+ samples."""
    if base is None or base["stats"]["median"] == 0:
        return ""
    ratio = metric["stats"]["median"] / base["stats"]["median"]
    if metric is base or len(metric["samples"]) < 3 or len(base["samples"]) < 3:
        return f" ({ratio:.2f}x)"
    low, high = bootstrap_ratio_ci(base["samples"], metric["samples"])
    return f" ({ratio:.2f}x [{low:.2f}-{high:.2f}])"


def _steady_cell(metric: dict[str, Any], base: dict[str, Any] | None, implausible: bool) -> str:
    stats = metric["stats"]
    median, iqr = stats["median"], stats["iqr"]
    if stats["n"] == 1:  # one sample has no spread to show
        text = fmt_time(median) if metric["unit"] == "s" else fmt_value(median, metric["unit"])
    elif metric["unit"] == "s":
        text = f"{fmt_time(median)} ±{fmt_time(iqr, scale_from=median).split()[0]}"
    else:
        text = f"{fmt_value(median, metric['unit'])} ±{iqr:.2g}"
    if implausible:
        return f"IMPLAUSIBLE {text}"
    unstable = median and iqr / abs(median) > UNSTABLE_RELATIVE_IQR
    return ("~" if unstable else "") + text + _sample_ratio(metric, base)


def _first_cell(metric: dict[str, Any], base: dict[str, Any] | None) -> str:
    first = metric["first_call"]
    base_first = base["first_call"] if base else None
    return fmt_time(first) + _ratio(first, base_first)


def _rate_cell(metric: dict[str, Any], base: dict[str, Any] | None, finding: Finding | None) -> str:
    rate = metric["flops"] / metric["stats"]["median"] / 1e9
    if finding is not None and not finding.plausible:
        return f"{rate:.4g} > peak {finding.peak / 1e9 if finding.peak else 0:.4g}"
    base_rate = base["flops"] / base["stats"]["median"] / 1e9 if base and base.get("flops") else None
    text = f"{rate:.4g}" + _ratio(rate, base_rate)
    if finding is not None and finding.fraction is not None:
        text += f" {finding.fraction:.0%} of peak"
    return text


def timing_rows(run: Run, flagged: set[str]) -> tuple[list[str], list[list[str]]]:
    frameworks = list(run.results)
    base_metrics = _metrics(run.results[run.baseline]) if run.baseline in run.results else {}
    findings = {(f.framework, f.metric): f for f in lint(run)}
    bad = {key for key, f in findings.items() if not f.plausible}
    headers = ["metric"] + [
        fw + (" (baseline)" if fw == run.baseline else "") + (f" {NOT_COMPARABLE}" if fw in flagged else "")
        for fw in frameworks
    ]
    rows: list[list[str]] = [["status"] + [_status(run.results[fw]) for fw in frameworks]]
    for name in _metric_names(run):
        per_fw = {fw: _metrics(run.results[fw]).get(name) for fw in frameworks}
        base = base_metrics.get(name)
        if (run.baseline, name) in bad:
            base = None  # an implausible baseline cannot anchor ratios
        unit = next(m for m in per_fw.values() if m is not None)["unit"]
        label = name if unit in ("s", "") else f"{name} [{unit}]"
        rows.append([label] + [_steady_cell(m, base, (fw, name) in bad) if m else "-" for fw, m in per_fw.items()])
        if any(m is not None and m.get("first_call") is not None for m in per_fw.values()):
            rows.append(
                [f"{name} (first call)"]
                + [_first_cell(m, base) if m and m.get("first_call") is not None else "-" for m in per_fw.values()]
            )
        if any(m is not None and m.get("flops") for m in per_fw.values()):
            rows.append(
                [f"{name} GFLOP/s"]
                + [
                    _rate_cell(m, base, findings.get((fw, name))) if m and m.get("flops") else "-"
                    for fw, m in per_fw.items()
                ]
            )
    return headers, rows


def _status(result: dict[str, Any]) -> str:
    if result["status"] == "ok":
        return "ok"
    reason = (result.get("reason") or "").splitlines()[0] if result.get("reason") else ""
    if len(reason) > 60:
        reason = reason[:57] + "..."
    return f"{result['status'].upper()}: {reason}"


def _check_value(value: Any) -> str:
    if isinstance(value, list):
        flat = [x for x in value] if not any(isinstance(v, list) for v in value) else []
        return (
            f"[{len(value)} values]" if not flat or len(flat) > 6 else "[" + ", ".join(f"{v:.4g}" for v in flat) + "]"
        )
    return f"{value:.6g}"


def check_rows(run: Run, checks: list[CheckRow]) -> tuple[list[str], list[list[str]]]:
    frameworks = [fw for fw in run.results if run.results[fw]["status"] == "ok"]
    headers = ["check", "tolerance"] + frameworks
    rows = []
    for row in checks:
        cells = [row.name, row.tolerance]
        for fw in frameworks:
            if fw not in row.values:
                cells.append(f"- (FAIL: {row.why[fw]})" if fw in row.why else "-")
                continue
            verdict = "pass" if row.passed.get(fw) else f"FAIL: {row.why.get(fw, '')}"
            diff = row.rel_diff.get(fw) if " vs " in row.tolerance else None
            extra = f", rel diff {diff:.1e}" if diff is not None else ""
            cells.append(f"{_check_value(row.values[fw])} ({verdict}{extra})")
        rows.append(cells)
    return headers, rows


def _differing_settings(run: Run) -> list[str]:
    """Fairness settings that are not the same for every compared framework."""
    seen: dict[str, dict[str, Any]] = {}
    for fw, result in run.results.items():
        if result["status"] != "ok":
            continue
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
    ok = [fw for fw in run.results if run.results[fw]["status"] == "ok"]
    for key, values in seen.items():
        if len(values) != len(ok) or len({repr(v) for v in values.values()}) > 1:
            lines.append(f"  {key}: " + ", ".join(f"{fw}={values.get(fw, 'unset')}" for fw in ok))
    return lines


def render(run: Run, tablefmt: str = "simple") -> str:
    """The whole comparison as text; tablefmt "github" gives Markdown."""
    markdown = tablefmt == "github"

    def title(text: str) -> list[str]:
        return ["", f"### {text}" if markdown else text]

    esc = escape.for_tablefmt(tablefmt)

    def bullet(text: str) -> str:
        return f"- {esc(text.strip())}" if markdown else esc(text)

    checks = evaluate(run)
    flagged = failing_frameworks(checks)
    first = next(iter(run.results.values()), None)
    head = f"suite {run.summary.get('suite')} | run {run.summary.get('run_id')} | backend {run.summary.get('backend')}"
    if first is not None:
        head += f" | device {first['device']} | params " + ", ".join(f"{k}={v}" for k, v in first["params"].items())
    parts = [f"**{esc(head)}**" if markdown else esc(head), ""]
    if run.results:
        headers, rows = timing_rows(run, flagged)
        parts.append(escape.table(rows, headers, tablefmt))
        parts.append("")
        parts.append(
            "cells: median ±IQR of the steady samples, (ratio to "
            f"{run.baseline} [95 % bootstrap interval]); ~ = unstable (IQR > {UNSTABLE_RELATIVE_IQR:.0%} of median); "
            "first call = trace/compile + one run"
        )
    if flagged:
        parts.append(f"{NOT_COMPARABLE} failed the agreement gate: timings kept in the JSON but not comparable")
    bad = [f for f in lint(run) if not f.plausible]
    if bad:
        parts += title(IMPLAUSIBLE)
        for f in bad:
            sync_note = "" if f.synchronised else " (recorded as NOT synchronised)"
            parts.append(
                bullet(
                    f"  {f.framework} {f.metric}: {f.achieved / 1e9:.4g} GFLOP/s exceeds the peak "
                    f"{(f.peak or 0) / 1e9:.4g} GFLOP/s ({f.basis}){sync_note}; excluded from ratios"
                )
            )
    if checks:
        headers, rows = check_rows(run, checks)
        parts += title("checks") + [escape.table(rows, headers, tablefmt)]
    versions = []
    for fw, result in run.results.items():
        v = result["environment"].get("versions", {})
        if v:
            versions.append(bullet(f"  {fw}: " + ", ".join(f"{k} {val}" for k, val in v.items() if val)))
    if versions:
        parts += title("stacks") + versions
    differing = _differing_settings(run)
    if differing:
        parts += title("settings that differ between frameworks") + [bullet(d) for d in differing]
    if run.problems:
        parts += title("rejected files") + [bullet(f"  {p}") for p in run.problems]
    return "\n".join(parts)


def gate_passed(run: Run) -> bool:
    return not failing_frameworks(evaluate(run))
