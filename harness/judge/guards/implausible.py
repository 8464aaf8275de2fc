"""IMPLAUSIBLE: a rate above what the device can physically do (judge/plausibility.py lints the rates)."""

from __future__ import annotations

from collections.abc import Iterator

from harness.judge.guards.base import Evidence, Guard, Hit, Planted
from harness.judge.plausibility import IMPLAUSIBLE
from harness.text.numbers import fmt_giga


class Implausible(Guard):
    name = "plausible"
    word = "IMPLAUSIBLE"
    reads = ("metrics[].flops", "metrics[].bytes", "metrics[].dtype", "metrics[].stats.median", "device")
    heading = IMPLAUSIBLE
    catches = "implausible rate (above the device's peak)"
    order = 20
    timing = True
    planted = (
        Planted("memoised", "the product cached after the first call", "numpy", "jax", devices=("cpu",)),
        Planted("memoised", "the product cached after the first call", "pytorch", "jax"),
        Planted("dead_code", "a jitted product whose result is never used (XLA deletes it)", "jax", "numpy"),
        Planted("inflated_flops", "a FLOP count inflated to twice what the device can do in the time measured",
                "pytorch", "numpy"),
    )  # fmt: skip

    def hits(self, evidence: Evidence) -> Iterator[Hit]:
        for f in evidence.findings:
            if f.plausible:
                continue
            word = "FLOP/s" if f.quantity == "flops" else "bandwidth"
            sync_note = "" if f.synchronised else " (recorded as NOT synchronised)"
            limit = f"{fmt_giga(f.ceiling or 0)} {f.unit} ({f.basis})"
            yield Hit(
                (f.framework, f.metric),
                f"implausible {word} (above device peak)",
                f"{fmt_giga(f.achieved)} {f.unit} is above the limit {limit}; {IMPLAUSIBLE}",
                f"{fmt_giga(f.achieved)} {f.unit} exceeds the limit {limit}{sync_note}; excluded from ratios",
                (f.achieved, f.ceiling or 0.0),
            )


GUARD = Implausible()
