"""The words a report shows for a training job: its time to target and its dataset.

Formatting only: the target was recorded by the job (runtime/training.py) and pooled over rounds on
the host (harness/judge/time_to_target.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

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
    interval = target.get("seconds_interval")
    if isinstance(interval, list) and len(interval) == 2:
        text += f" [{fmt_time(interval[0])}-{fmt_time(interval[1])}] over {len(rounds or [])} seeds"
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
