"""Two runs measured in one session, round by round (`harness ab`): how their summaries say so.

Each side's summary carries `interleaved: {"side": "baseline" | "candidate", "partner": <the other
run's id>}`. Two runs are taken as one interleaved session only when each names the other and they
are different sides: a compare of such a pair needs no allowance for run-to-run drift (both sides
saw the same drift, round by round), which is what lets it see a change smaller than that drift.
The field is read back from disk, so it is validated like the rest of a summary.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.schema import AB_SIDES as SIDES
from harness.schema import interleaved_problem as problem

__all__ = ["SIDES", "partners", "problem", "record", "session_label"]


def record(side: str, partner: str) -> dict[str, Any]:
    return {"interleaved": {"side": side, "partner": partner}}


def partners(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """True when summaries `a` and `b` are the two sides of one interleaved session."""
    x, y = a.get("interleaved"), b.get("interleaved")
    if problem(x) is not None or problem(y) is not None:
        return False
    assert isinstance(x, dict) and isinstance(y, dict)
    return (
        x["partner"] == b.get("run_id")
        and y["partner"] == a.get("run_id")
        and x["side"] != y["side"]
        and a.get("run_id") != b.get("run_id")
    )


def session_label(value: Any) -> str | None:
    """`interleaved: the baseline side of one session with run <id> (harness ab)`, None if absent or malformed."""
    if value is None or problem(value) is not None:
        return None
    return f"interleaved: the {value['side']} side of one session with run {value['partner']} (harness ab)"
