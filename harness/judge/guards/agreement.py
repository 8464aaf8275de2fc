"""NOT COMPARABLE (†): a framework failed the agreement gate, its check values disagree with the
reference's (the gate itself, `evaluate`, is in judge/assessment.py): it computed something else,
so its speed is no comparison."""

from __future__ import annotations

from collections.abc import Mapping

from harness.judge.guards.base import Evidence, Guard, Planted

GATE = "failed the agreement gate"


class Agreement(Guard):
    name = "check"
    word = "NOT COMPARABLE"
    reads = ("checks[].value",)
    heading = "not comparable: failed the agreement gate"
    catches = "failed check against the other frameworks' outputs"
    order = 15
    scope = "framework"
    planted = (
        Planted("float32", "float32 arithmetic under a float64 suite", "pytorch", "numpy"),
        Planted("own_data", "its own random inputs instead of the shared ones", "jax", "numpy"),
        Planted("half_work", "half the rows of the product: less work than the metric claims", "pytorch", "numpy"),
    )  # fmt: skip

    def frameworks(self, evidence: Evidence) -> Mapping[str, str]:
        order = list(evidence.run.results)
        return {fw: GATE for fw in sorted(evidence.failed_checks, key=order.index)}


GUARD = Agreement()
