"""RECOMPILED: the framework compiled inside the clock of a steady sample (a retrace per call)."""

from __future__ import annotations

from collections.abc import Iterator

from harness.judge.guards.base import Evidence, Guard, Hit, Planted, indices, time_metrics
from suites.contract.marks import COMPILED

REASON = "compiled in the steady state"  # the start of the exclusion reason of a retracing metric


class Recompiled(Guard):
    name = "steady"
    word = "RECOMPILED"
    reads = ("metrics[].marks.compiled",)
    heading = "RECOMPILED - the framework compiled inside the clock of steady samples"
    catches = "recompiled (the framework compiled inside the clock of a steady sample)"
    order = 30
    planted = (
        Planted("retrace", "a jitted product with a static argument that changes every call (a compile per call)",
                "jax", "numpy"),
        Planted("retrace", "a torch.compile'd product specialised on an int that changes every call", "pytorch",
                "numpy"),
        Planted("retrace_epochs", "a training loop whose steady epochs each retrace (a new static argument)",
                "jax", "numpy"),
        Planted("growing_cache", "a jitted decode step whose KV cache grows by concatenation (a new shape, a "
                "compile per token)", "jax", "numpy"),
    )  # fmt: skip

    def hits(self, evidence: Evidence) -> Iterator[Hit]:
        for fw, _, m in time_metrics(evidence.run):
            n = len(m["samples"])
            # A compilation inside a steady sample is the code's doing, not the machine's: one is enough.
            if not (marked := indices((m.get("marks") or {}).get(COMPILED), n)):
                continue
            k = len(marked)
            yield Hit(
                (fw, m["name"]),
                f"{REASON} ({k}/{n} samples)",
                f"{k} of {n} steady samples compiled (a retrace per call); they time the compiler",
                f"{k} of {n} samples compiled (a retrace per call: a new shape, dtype or static argument); "
                "they time the compiler, not the work; excluded from ratios",
                (k, n),
            )


GUARD = Recompiled()
