"""Test-only: nudge one framework's check values so a test can prove the agreement gate bites.

A suite opts in by adding `suites.contract.perturb_params.PARAMS` to its parameters and reporting
checks through `check`. Both parameters default to "no perturbation"; nobody should set them
outside tests.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from suites.runtime.context import Context


def _nudge(value: Any, amount: float) -> Any:
    if isinstance(value, (list, tuple)):
        return [_nudge(v, amount) for v in value]
    number = float(value)
    # Scaled by max(1, |v|) so a zero (a residual, a difference) moves too.
    return number + amount * max(1.0, abs(number))


def check(ctx: Context, name: str, value: float | Sequence[Any]) -> None:
    """`ctx.check`, with the test-only perturbation applied when it names this framework."""
    amount = float(ctx.params.get("perturb", 0.0))
    if amount and ctx.params.get("perturb_framework") == ctx.framework:
        value = _nudge(value, amount)
        remark = f"TEST ONLY: check values perturbed by {amount:g} (parameter perturb)"
        if remark not in ctx.notes:
            ctx.note(remark)
    ctx.check(name, value)
