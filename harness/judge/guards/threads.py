"""THREADS: the job kept more cores busy than `--threads` allows (it undid its core limit)."""

from __future__ import annotations

from collections.abc import Iterator

from harness.judge.guards.base import Evidence, Guard, Hit, Planted, time_metrics

REASON = "more cores than --threads allows"  # the start of the exclusion reason of such a metric
# The job is pinned to `--threads` cores (suites/contract/settings.py pin_cores), so its CPU time per
# second cannot exceed that while the pin holds: above it by this much, the job undid its limit
# (a widened affinity). The slack covers the kernel's CPU accounting; under MIN_WALL_S of samples
# the quotient is not read at all.
THREADS_SLACK_CORES = 0.25
MIN_WALL_S = 0.05


class Threads(Guard):
    name = "threads"
    word = "THREADS"
    reads = ("settings.threads", "metrics[].contention.cpu_s", "metrics[].contention.wall_s")
    heading = "THREADS - the job kept more cores busy than --threads allows"
    catches = "more cores busy than --threads allows (CPU time per second of the samples)"
    order = 40
    timing = True
    # N = 1024: samples of tens of ms, long enough for the CPU time per second to be read.
    planted = (
        Planted("extra_threads",
                "the job's core limit undone (affinity widened, torch.set_num_threads) under --threads 1",
                "pytorch", "numpy", devices=("cpu",), threads=1, params=("n=1024",), cores=2),
    )  # fmt: skip

    def hits(self, evidence: Evidence) -> Iterator[Hit]:
        """Time metrics whose process kept more cores busy, on average over its samples, than the
        `--threads` it ran under (recorded in the result's settings)."""
        for fw, result, m in time_metrics(evidence.run):
            allowed = (result.get("settings") or {}).get("threads")
            seen = m.get("contention")
            if not isinstance(allowed, int) or isinstance(allowed, bool) or allowed < 1 or not isinstance(seen, dict):
                continue
            # The schema holds both lists to one finite, non-negative value per sample.
            cpu, wall = seen.get("cpu_s") or [], seen.get("wall_s") or []
            if sum(wall) < MIN_WALL_S or (busy := sum(cpu) / sum(wall)) <= allowed + THREADS_SLACK_CORES:
                continue
            yield Hit(
                (fw, m["name"]),
                f"{REASON} ({busy:.2f} cores busy, --threads {allowed})",
                f"{busy:.2f} cores busy under --threads {allowed} (the job undid its core limit)",
                f"{busy:.2f} cores busy over its samples under --threads {allowed} (the job undid its core "
                "limit: a widened affinity); not comparable with the others; excluded from ratios",
                (busy, allowed),
            )


GUARD = Threads()
