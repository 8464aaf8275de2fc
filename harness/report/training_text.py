"""The words a report shows for a training job: its time to target and its dataset.

Formatting only: the target was recorded by the job (runtime/training.py) and pooled over rounds on
the host (harness/judge/time_to_target.py, which records the coverage its interval really has).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.core.statistics import BOOTSTRAP_MIN_N, Interval, median_interval
from harness.text.numbers import fmt_loss, fmt_percent, fmt_time


def target_cell(result: Mapping[str, Any]) -> str | None:
    """The report's time-to-target cell: a number only for a reached target; None without a target.

    A loss target (a language model, whose "epoch" is an interval of optimizer steps) names the
    loss it aimed at: a bare loss has no unit to tell it from anything else in the table."""
    training = result.get("training")
    target = training.get("target") if isinstance(training, dict) else None
    if not isinstance(target, dict):
        return None
    loss = target.get("loss")
    aimed = f"val loss {fmt_loss(loss)} " if isinstance(loss, (int, float)) else ""
    rounds = target.get("rounds")
    if target["status"] != "reached":
        if isinstance(rounds, list) and len(rounds) > 1:
            missed = len(rounds) - int(target.get("reached_rounds", 0))
            return f"{aimed}not reached (in {missed} of {len(rounds)} rounds)"
        if aimed:
            best = target.get("best_loss")
            return aimed + "not reached" + (f" (best {fmt_loss(best)})" if isinstance(best, (int, float)) else "")
        best = target.get("best_accuracy")
        return "not reached" + (f" (best {fmt_percent(best)})" if isinstance(best, (int, float)) else "")
    if aimed:
        text = f"{aimed}reached in {fmt_time(target['seconds'])} ({target['epochs']:g} intervals)"
    else:
        text = f"{fmt_time(target['seconds'])} ({target['epochs']:g} epochs)"
    interval = _seconds_interval(target)
    if interval is not None:
        # The coverage inside the brackets when below 95 % (few seeds), as every interval in a report.
        claimed = f" {interval.claimed}" if interval.claimed else ""
        text += f" [{fmt_time(interval.low)}-{fmt_time(interval.high)}{claimed}] over {len(rounds or [])} seeds"
    return text


def dataset_label(result: Mapping[str, Any]) -> str | None:
    """`data mnist (ylecun/mnist@77f3279092a1, fingerprint 1a0cf8dd697864f8)` for a report's head."""
    dataset = result.get("dataset")
    if not isinstance(dataset, dict) or not isinstance(dataset.get("name"), str):
        return None
    parts = []
    repo, revision = dataset.get("repo"), dataset.get("revision")
    if isinstance(repo, str):
        parts.append(repo + (f"@{revision[:12]}" if isinstance(revision, str) else ""))
    elif isinstance(revision, str):
        parts.append(revision[:40])
    fp = dataset.get("fingerprint")
    if isinstance(fp, str):
        parts.append(f"fingerprint {fp[:16]}")
    return f"data {dataset['name']}" + (f" ({', '.join(parts)})" if parts else "")


def _seconds_interval(target: Mapping[str, Any]) -> Interval | None:
    """The pooled time to target's interval with the coverage it really has; None without one.

    As recorded when the record says its coverage; otherwise (written before it did, a bootstrap
    that claimed 95 % at 3 seeds) worked out again from the rounds' seconds, or none if they are
    not all there."""
    recorded = target.get("seconds_interval")
    if not (isinstance(recorded, list) and len(recorded) == 2):
        return None
    rounds = target.get("rounds")
    rounds = rounds if isinstance(rounds, list) else []
    coverage, low, high = _finite(target.get("seconds_interval_coverage")), _finite(recorded[0]), _finite(recorded[1])
    if coverage is not None and low is not None and high is not None:
        method = "bootstrap" if len(rounds) >= BOOTSTRAP_MIN_N else "order statistics"
        return Interval(low, high, coverage, method)
    seconds = [_finite(r.get("seconds")) if isinstance(r, dict) else None for r in rounds]
    known = [x for x in seconds if x is not None]
    return median_interval(known) if len(known) > 1 and len(known) == len(seconds) else None


def _finite(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
