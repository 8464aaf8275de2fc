"""CONTENDED: most of a number's samples were taken while the machine disturbed them.

Which samples and rounds the machine disturbed is the one rule every verdict filters by (compare, the
noise floor, bisect, the exit status); it lives here, with the guard that applies it first.

A sample is disturbed when the job's runtime marked it `contended` (the CPUs it may use were shared
while its clock ran: suites/runtime/contention.py) or `throttled` for a reason outside the device's
normal loaded state: thermal or hardware slowdown, or a power brake. A GPU under a sustained load runs
at its power cap as a matter of course (NVML's "SW power cap" is set for most of any long matmul on an
H100), and sync boost only ties GPUs together, so those two are recorded but do not disturb a sample:
marking them would mark every honest GPU run.

A round (one process) most of whose samples were disturbed measured its neighbours: its median is left
out of every between-process statistic, in `compare` and in `harness noise` alike, so the allowance a
noise floor grants is built from exactly the evidence a verdict is judged on.
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.core.result_types import Metric
from harness.judge.guards.base import Evidence, Guard, Hit, Key, indices, time_metrics
from harness.store.run_folder import Run

REASON = "contended"  # the start of the exclusion reason of a metric whose samples were mostly contended
# NVML clock-event reasons (suites/runtime/contention.py THROTTLING) that disturb a sample:
# hardware slowdown, thermal (software), thermal (hardware), power brake.
DISTURBING_REASONS = 0x8 | 0x20 | 0x40 | 0x80


def disturbed_samples(metric: Metric) -> frozenset[int]:
    """Indices (into `metric["samples"]`) of the samples the machine disturbed."""
    seen = metric.get("contention")
    if not isinstance(seen, dict):
        return frozenset()
    n = len(metric["samples"])
    found = indices(seen.get("contended"), n)
    reasons = seen.get("clock_event_reasons")
    if isinstance(reasons, list) and len(reasons) == n:
        found |= {
            i
            for i, r in enumerate(reasons)
            if isinstance(r, int) and not isinstance(r, bool) and r & DISTURBING_REASONS
        }
    return frozenset(found)


def mostly_disturbed(disturbed: int, n: int) -> bool:
    """The rule for a metric, a round or a run: most of its samples disturbed."""
    return n > 0 and disturbed * 2 > n


def readings(run: Run) -> dict[Key, tuple[int, int]]:
    """Every ok job's time metric that recorded contention -> (disturbed samples, samples)."""
    return {
        (fw, m["name"]): (len(disturbed_samples(m)), len(m["samples"]))
        for fw, _, m in time_metrics(run)
        if isinstance(m.get("contention"), dict)
    }


class Contended(Guard):
    name = "contended"
    word = "CONTENDED"
    reads = ("metrics[].contention.contended", "metrics[].contention.clock_event_reasons")
    heading = "CONTENDED - most samples were taken while the CPUs were shared or the GPU was slowed"
    catches = "contended (most samples taken while the CPUs the job may use were shared)"
    order = 50
    disturbance = True

    def hits(self, evidence: Evidence) -> Sequence[Hit]:
        found = []
        for key, (k, n) in readings(evidence.run).items():
            # Most samples disturbed: the median itself is the neighbours' doing.
            if mostly_disturbed(k, n):
                found.append(
                    Hit(
                        key,
                        f"{REASON} ({k}/{n} samples)",
                        f"{k} of {n} samples were taken while the CPUs were shared or the GPU slowed; rerun on a "
                        "quiet machine",
                        f"{k} of {n} samples disturbed; the median measures the neighbours as much as the code; "
                        "excluded from ratios and verdicts",
                        (k, n),
                    )
                )
        return found


GUARD = Contended()
