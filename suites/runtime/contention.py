"""Contention seen per sample: what the process actually got while its clock ran.

A sample taken while another process competed for the CPU is slower for a reason that has nothing
to do with the code: on a 2-core machine a neighbour's job turned a 57 us matmul into 16 ms, and
nothing in the result said so. Around every timed sample (outside its clock) the job reads:

- the process's CPU time, all threads (`getrusage`), and its involuntary context switches: a
  thread the scheduler took off a core it still wanted;
- where the kernel exposes it (`/proc/stat`, host-wide also inside a container): the CPU time
  every other task used, the hypervisor's steal time, and how many tasks were runnable.

`/proc/stat` counts in clock ticks (10 ms), so the others' and steal shares are taken over a
window at least `WINDOW_S` long around each sample: its neighbours, and for a metric whose samples
are too short, the job's earlier readings (from its start on); null (unknown) where even those
span under `MIN_SPAN_S`. A sample is marked
`contended` when, over its window, other tasks used at least `OTHERS_MIN_CORES` of a core *and*
they and the job together asked for more cores than the job may use, or the hypervisor stole at
least `STEAL_MIN_CORES`; or when the sample itself was pre-empted (an involuntary switch) and got
less than half the CPU per second of the undisturbed samples. The numbers stay in the statistics;
the marks say which ones to distrust, and the host flags a run where most samples are marked.

Standard library only: the job runtime imports it beside every framework.
"""

from __future__ import annotations

import bisect
import os
import resource
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

WINDOW_S = 0.2  # >= 20 clock ticks: the others' share is resolved to about 5 % of a core
LOOKBACK_S = 5.0  # a window never reaches further back than this (a job's imports take about that)
MIN_SPAN_S = 0.05  # 5 ticks: below this the others' share is not resolved at all (recorded as null)
OTHERS_MIN_CORES = 0.5  # another task busy half a core or more beside the job
STEAL_MIN_CORES = 0.1
PREEMPTED_SHARE = 0.5  # a pre-empted sample that got under half the CPU rate of undisturbed ones
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_STAT = "/proc/stat"


@dataclass(frozen=True)
class Reading:
    at: float  # perf_counter
    cpu_s: float  # this process, every thread, user + system
    switches: int  # involuntary context switches of this process
    busy_s: float | None  # every CPU, every task: user + nice + system + irq + softirq
    steal_s: float | None
    runnable: int | None  # tasks runnable right now (procs_running), the job's own included


def _proc_stat() -> tuple[float, float, int] | None:
    try:
        with open(_STAT, "rb") as handle:
            text = handle.read(8192).decode("ascii", "replace")
    except OSError:
        return None
    busy = steal = None
    runnable = 0
    for line in text.splitlines():
        fields = line.split()
        if fields and fields[0] == "cpu" and len(fields) >= 9:
            ticks = [int(f) for f in fields[1:9]]
            busy = (ticks[0] + ticks[1] + ticks[2] + ticks[5] + ticks[6]) / _TICK
            steal = ticks[7] / _TICK
        elif fields and fields[0] == "procs_running" and len(fields) == 2:
            runnable = int(fields[1])
    if busy is None or steal is None:
        return None
    return busy, steal, runnable


def read(before: bool, clock: Any = time.perf_counter) -> Reading:
    """One reading; `before` a sample reads its own counters last and after one first, so the
    cost of reading `/proc/stat` never lands in the CPU time a sample is charged with."""
    found = _proc_stat() if before else None
    usage = resource.getrusage(resource.RUSAGE_SELF)
    at = clock()
    if not before:
        found = _proc_stat()
    return Reading(
        at=at,
        cpu_s=usage.ru_utime + usage.ru_stime,
        switches=usage.ru_nivcsw,
        busy_s=found[0] if found else None,
        steal_s=found[1] if found else None,
        runnable=found[2] if found else None,
    )


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _window(times: Sequence[float], start: float, end: float) -> tuple[int, int]:
    """Readings lo, hi (indices into the time-ordered `times`) around [start, end], at least
    WINDOW_S apart where the readings reach that far: centred, then widened backwards."""
    centre = (start + end) / 2
    hi = min(len(times) - 1, max(bisect.bisect_left(times, max(end, centre + WINDOW_S / 2)), 0))
    lo = max(0, bisect.bisect_right(times, min(start, centre - WINDOW_S / 2)) - 1)
    if times[hi] - times[lo] < WINDOW_S:  # the metric's own samples are short: look further back
        lo = max(0, bisect.bisect_right(times, times[hi] - WINDOW_S) - 1)
    # ... but not into another era: a reading older than LOOKBACK_S says nothing about this sample.
    own = min(bisect.bisect_left(times, start), hi)  # the sample's own first reading: always inside
    lo = max(lo, min(bisect.bisect_left(times, times[hi] - LOOKBACK_S), own))
    return lo, hi


# NVML clock-event reasons that hold a GPU below the clocks it would run at (nvmlClocksEventReason*):
# software power cap, hardware slowdown, sync boost, software and hardware thermal, power brake.
# Idle (0x1), application clock setting (0x2) and display clock (0x100) are not a slowdown of work.
THROTTLING = {
    0x4: "power cap",
    0x8: "hardware slowdown",
    0x10: "sync boost",
    0x20: "thermal (software)",
    0x40: "thermal (hardware)",
    0x80: "power brake",
}


def throttled(reasons: int | None) -> list[str]:
    """The throttling reasons set in an NVML reason bitmask, in words."""
    return [] if reasons is None else [word for bit, word in THROTTLING.items() if reasons & bit]


def record(
    before: Sequence[Reading],
    after: Sequence[Reading],
    gpu: Sequence[tuple[float | None, int | None]] | None = None,
    past: Sequence[Reading] = (),
) -> dict[str, Any]:
    """The metric's `contention` field: per sample what the process got, and which were contended.

    The readings' own clock times each sample (a suite's clock may be another); `gpu`: per
    sample, (SM clock MHz, NVML clock-event reasons) read after it (GPU jobs only); `past`: the
    job's earlier readings (its start, earlier metrics), which give a metric whose samples are
    too short for the tick counters a window that reaches back far enough."""
    n = len(after)
    walls = [after[i].at - before[i].at for i in range(n)]
    cores = usable_cores()
    cpu = [max(0.0, after[i].cpu_s - before[i].cpu_s) for i in range(n)]
    switches = [max(0, after[i].switches - before[i].switches) for i in range(n)]
    others: list[float | None] = []
    steal: list[float | None] = []
    timeline = sorted([*past, *before, *after], key=lambda r: r.at)
    times = [r.at for r in timeline]
    for i in range(n):
        lo, hi = _window(times, before[i].at, after[i].at)
        b0, b1 = timeline[lo], timeline[hi]
        span = b1.at - b0.at
        # Under MIN_SPAN_S the tick counters cannot resolve a share: unknown, not zero.
        if span < MIN_SPAN_S or b0.busy_s is None or b1.busy_s is None or b0.steal_s is None or b1.steal_s is None:
            others.append(None)
            steal.append(None)
            continue
        own = b1.cpu_s - b0.cpu_s
        others.append(round(max(0.0, (b1.busy_s - b0.busy_s - own) / span), 3))
        steal.append(round(max(0.0, (b1.steal_s - b0.steal_s) / span), 3))
    rates = [cpu[i] / walls[i] if walls[i] > 0 else 0.0 for i in range(n)]
    calm = [rates[i] for i in range(n) if switches[i] == 0]
    typical = statistics.median(calm) if calm else None
    contended = []
    for i in range(n):
        busy, stole = others[i], steal[i]
        crowded = busy is not None and busy >= OTHERS_MIN_CORES and rates[i] + busy > cores - 0.5
        stolen = stole is not None and stole >= STEAL_MIN_CORES
        preempted = switches[i] > 0 and typical is not None and rates[i] < PREEMPTED_SHARE * typical
        if crowded or stolen or preempted:
            contended.append(i)
    runnable = [r.runnable for r in after]
    found: dict[str, Any] = {}
    if gpu is not None and any(state != (None, None) for state in gpu):
        found["sm_clock_mhz"] = [sm for sm, _ in gpu]
        found["clock_event_reasons"] = [reasons for _, reasons in gpu]
        found["throttled"] = [i for i, (_, reasons) in enumerate(gpu) if throttled(reasons)]
    return found | {
        "cpu_s": [round(c, 9) for c in cpu],
        "involuntary_switches": switches,
        "others_cores": others if any(o is not None for o in others) else None,
        "steal_cores": steal if any(s is not None for s in steal) else None,
        "runnable": runnable if all(r is not None for r in runnable) else None,
        "cores": cores,
        "window_s": WINDOW_S,
        "contended": contended,
    }


# The job's first reading, taken when the job runtime is imported (before any framework is): a
# first metric whose samples are short reaches back to it for its window.
STARTED = read(before=False)
