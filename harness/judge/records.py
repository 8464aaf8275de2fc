"""What the two sides of one `harness ab` session recorded about how to judge them, and whether it agrees.

Both sides of a session are written by one `ab` process from one request: the same margin
(`interleaved.margin`) and, for a budgeted session, the same looks (`sequential`). A pair whose two
summaries disagree was edited (or assembled from two sessions): the verdicts are made on the stricter
record (sequential.recorded_alpha, run_folder.session_margin), so neither side's record makes a row
easier to call, but a stricter record silences rows too. Each disagreement is a doubt the gate
reports and never passes over (judge/conclusion.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.core.schema import interleaved_problem, sequential_problem
from harness.store.run_folder import partners
from harness.text.escape import plain


def _recorded(summary: Mapping[str, Any], key: str, field: str) -> Any:
    """`summary[key][field]` where that record is well-formed, else None (absent)."""
    value = summary.get(key)
    check = interleaved_problem if key == "interleaved" else sequential_problem
    if value is None or check(value) is not None:
        return None
    return value.get(field)


def disagreements(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """Each way the two sides of one session recorded different rules for their verdicts, in words;
    [] for runs that are not one session (nothing was recorded for the pair)."""
    if not partners(a, b):
        return []
    found = []
    for key, field, what in (("sequential", "alpha", "alpha"), ("interleaved", "margin", "margin")):
        values = [_recorded(side, key, field) for side in (a, b)]
        if values[0] != values[1]:
            shown = ", ".join(
                f"run {plain(side.get('run_id'))} {'none' if value is None else f'{value:.3g}'}"
                for side, value in zip((a, b), values, strict=True)
            )
            found.append(
                f"the two sides of one session recorded different {what}s ({key}.{field}: {shown}); "
                "a summary was edited: judged by the stricter, rerun the session to trust it"
            )
    return found
