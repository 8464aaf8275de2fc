"""ESCAPED: a barrier after the clock found the timed work still running (suites/runtime/syncguard.py)."""

from __future__ import annotations

from collections.abc import Iterator

from harness.judge.guards.base import Evidence, Guard, Hit, Planted, time_metrics
from harness.judge.plausibility import ESCAPED, sync_state
from harness.text.numbers import fmt_time

REASON = "sync escaped"  # the exclusion reason of an escaped metric, in footers and exports


class SyncEscape(Guard):
    name = "sync"
    word = "ESCAPED"
    reads = ("metrics[].sync",)
    heading = ESCAPED
    catches = "sync escaped (a barrier after the clock found the work still running)"
    order = 10
    timing = True
    planted = (
        Planted("unsynchronised", "the clock stops before JAX's asynchronous matmul ends (no block_until_ready)",
                "jax", "numpy"),
        Planted("unsynchronised", "the clock stops before a CUDA matmul ends (no torch.cuda.synchronize)",
                "pytorch", "numpy", devices=("gpu",)),
    )  # fmt: skip

    def hits(self, evidence: Evidence) -> Iterator[Hit]:
        for fw, _, m in time_metrics(evidence.run):
            if sync_state(m) != "escaped":
                continue
            sync = m.get("sync") or {}
            waited, sample = sync.get("excess_median_s", 0.0), sync.get("sample_median_s", 0.0)
            yield Hit(
                (fw, m["name"]),
                REASON,
                ESCAPED,
                f"a barrier after the clock still waited {fmt_time(waited)} (median) behind samples of "
                f"{fmt_time(sample)}; the timed call returned before its work finished; excluded from ratios",
            )


GUARD = SyncEscape()
