"""UNFAIR: a framework ran with other like-for-like settings than the baseline (`training.fairness`:
a convolution algorithm search, how batches are copied from the host): cuDNN's autotuned
convolutions against untuned XLA ones are not a framework difference."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from harness.core.stack_facts import STACKS
from harness.judge.guards.base import Evidence, Guard
from harness.store.run_folder import Run

# Like-for-like settings (`training.fairness`, written by suites/runtime): setting -> true/false, a
# word ("async", "bfloat16"), or null where the setting does not apply on this device. Read from
# disk, so checked here before use: a field that is not a small object of such values is ignored
# and named in `run.problems` (the run then fails), never half trusted.
Setting = bool | str | None
MAX_FAIRNESS_SETTINGS = 32  # a suite writes three; a few dozen is no longer a list of knobs
_SETTING_NAME = re.compile(r"[a-z][a-z0-9_]{0,59}")
# A value is shown in every medium's "not comparable" line: a word with nothing to escape.
_SETTING_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,39}")


def fairness_settings(result: Mapping[str, Any]) -> tuple[dict[str, Setting], str | None]:
    """(setting -> value, why the field was ignored) of one result; ({}, None) without the field."""
    training = result.get("training")
    found = training.get("fairness") if isinstance(training, dict) else None
    if found is None:
        return {}, None
    if not isinstance(found, dict):
        return {}, "expected an object"
    if len(found) > MAX_FAIRNESS_SETTINGS:
        return {}, f"{len(found)} settings is more than the {MAX_FAIRNESS_SETTINGS} a result may hold"
    for key, value in found.items():
        if not isinstance(key, str) or not _SETTING_NAME.fullmatch(key):
            return {}, "a setting name is not lower-case letters, digits and '_'"
        if not (value is None or isinstance(value, bool) or isinstance(value, str) and _SETTING_WORD.fullmatch(value)):
            return {}, f"{key}: expected true, false, null or a short word"
    return dict(found), None


def _word(value: Setting) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def _called(key: str, stacks: tuple[str, str]) -> str:
    """' (cuDNN benchmark vs XLA autotuning)': the setting's name in both stacks, when known."""
    # What the setting is called in each stack (its declaration), so the reason names the knob to turn.
    mine, theirs = (STACKS[s].setting_names.get(key) if s in STACKS else None for s in stacks)
    if mine is None or theirs is None:
        return ""
    return f" ({mine})" if mine == theirs else f" ({mine} vs {theirs})"


def mismatches(run: Run) -> dict[str, str]:
    """framework -> the like-for-like settings it ran with that differ from the baseline's (ok jobs;
    a setting one side leaves null does not apply there and compares with anything)."""
    settings: dict[str, dict[str, Setting]] = {}
    for fw, result in run.results.items():
        if result["status"] != "ok":
            continue
        settings[fw], problem = fairness_settings(result)
        if problem is not None:
            note = f"{fw}: training.fairness ignored ({problem})"
            if note not in run.problems:  # assessing a run twice must not say it twice
                run.problems.append(note)
    if (reference := settings.get(run.baseline)) is None:
        return {}
    found: dict[str, str] = {}
    for fw, mine in settings.items():
        if fw == run.baseline:
            continue
        stacks = (run.results[fw]["stack"], run.results[run.baseline]["stack"])
        differing = [
            f"{key} {_word(mine[key])} in {fw}, {_word(reference[key])} in {run.baseline}{_called(key, stacks)}"
            for key in sorted(mine.keys() & reference.keys())
            if mine[key] is not None and reference[key] is not None and mine[key] != reference[key]
        ]
        if differing:
            found[fw] = "unfair: " + "; ".join(differing)
    return found


class Fairness(Guard):
    name = "fairness"
    word = "NOT COMPARABLE"
    reads = ("training.fairness",)
    heading = "not comparable: like-for-like settings differ from the baseline's"
    catches = "like-for-like settings differ from the baseline's (training.fairness)"
    order = 70
    scope = "framework"

    def frameworks(self, evidence: Evidence) -> Mapping[str, str]:
        return mismatches(evidence.run)


GUARD = Fairness()
