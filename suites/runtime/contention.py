"""Contention seen per sample: what the process actually got while its clock ran.

A sample taken while another process competed for the CPU is slower for a reason that has nothing
to do with the code: on a 2-core machine a neighbour's job turned a 57 us matmul into 16 ms, and
nothing in the result said so. Around every timed sample (outside its clock) the job reads:

- the process's CPU time, all threads (`getrusage`), and its involuntary context switches: a
  thread the scheduler took off a core it still wanted;
- where the kernel exposes it (`/proc/stat`): the CPU time every task used and the hypervisor's
  steal time on the CPUs the job may run on (its affinity, taken at each reading: `--threads`, a
  cpuset or a scheduler may have narrowed it; inside a container `/proc/stat` lists the host's
  CPUs and the affinity holds host CPU ids, so the two still match), and how many tasks were
  runnable host-wide.

`/proc/stat` counts in clock ticks (10 ms), so the others' and steal shares are taken over a
window at least `WINDOW_S` long around each sample: its neighbours, and for a metric whose samples
are too short, the job's earlier readings over the same CPUs (from its start on); null (unknown)
where even those span under `MIN_SPAN_S`. The others' share is the busy time of the job's CPUs
less the job's own CPU time, per second of window. A sample is marked `contended` when, over its
window, other tasks used at least `OTHERS_MIN_CORES` of the job's CPUs *and* they and the job (its
CPU time over the same window) together filled those CPUs, to within `TICK_MARGIN_CORES` (so a
neighbour on a CPU the job may not use, or beside a job that leaves its CPUs room, marks nothing);
or when the hypervisor stole at least `STEAL_MIN_CORES` of them; or when the sample itself was
pre-empted (an involuntary switch) and got less than half the CPU per second of the undisturbed
samples *and* (where the kernel keeps scheduler statistics, `/proc/<pid>/task/*/schedstat`) its
threads waited on a run queue, runnable but not running, for at least half the time it lost: a
request that slept or blocked also gets little CPU, and one involuntary switch on its way (a worker
thread's, or its own at a tick) would otherwise mark a wait as a pre-emption (a planted 20 ms sleep
was marked so in 4 of 6 processes). The field's `cores` counts the job's CPUs and `cpus` names them. `cpus` is null where
`/proc/stat` has no line for each of them (no per-CPU lines, or a CPU it does not list): the
others are then counted host-wide and judged by the rule from before per-CPU counting (at least
`HOST_OTHERS_MIN_CORES` anywhere, and with the job more than `cores` less `HOST_MARGIN_CORES`).
The numbers stay in the statistics; the marks say which ones to distrust, and the host flags a
run where most samples are marked.

Standard library only: the job runtime imports it beside every framework.
"""

from __future__ import annotations

import bisect
import os
import resource
import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

WINDOW_S = 0.2  # >= 20 clock ticks: the others' share is resolved to about 5 % of a core
LOOKBACK_S = 5.0  # a window never reaches further back than this (a job's imports take about that)
MIN_SPAN_S = 0.05  # 5 ticks: below this the others' share is not resolved at all (recorded as null)
# Other tasks' share of the job's CPUs that marks a sample when those CPUs are full: a quarter
# core. The fair share of one neighbour on one core is half a core exactly, so half a core (the
# host-wide rule's) would mark a coin toss's worth of those samples: measured on this 2-core machine,
# a job and a hog pinned to one core read 0.46 to 0.62 over 0.2 s windows (tick rounding, scheduler
# slices), and 18 to 25 of 30 samples were marked. A quarter core stays far above what daemons and
# kernel threads take of a busy CPU (a few hundredths), and sees a neighbour that takes a third of
# a pinned job's one core; or a third of one core of a parallel job's, whose other threads wait on
# the slowed one at every step.
OTHERS_MIN_CORES = 0.25
# How close to full the job's CPUs must be: the job and the others together above `cores` less
# this. A saturated CPU is busy on every tick, so its busy count is exact but for where the window's
# ends fall between ticks: under one tick per CPU per window, 5 % of a core over the shortest
# window (0.2 s = 20 ticks), and since those fractions are random, about 2 % x sqrt(cores) typical.
# A quarter core keeps saturated CPUs marked through that (even at the worst case up to 5 CPUs) and
# through the job's own slack between samples, and stays well under the 0.4 core a job at one core
# with a neighbour at 0.6 leaves idle on 2 CPUs (1.6 of 2: not marked; 1.75 and over: marked).
TICK_MARGIN_CORES = 0.25
# The rule before per-CPU counting, kept for host-wide (aggregate line) counts only: the others
# busy half a core anywhere, and with the job more than the job's cores less half a core.
HOST_OTHERS_MIN_CORES = 0.5
HOST_MARGIN_CORES = 0.5
STEAL_MIN_CORES = 0.1
PREEMPTED_SHARE = 0.5  # a pre-empted sample that got under half the CPU rate of undisturbed ones
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_STAT = "/proc/stat"
# /proc/stat has a line per CPU and an `intr` line with a count per interrupt: a machine with
# hundreds of CPUs writes tens of kilobytes. The kernel renders the whole file on the first read
# whatever is asked for, so reading it to the end costs only the copy; past this it is not /proc/stat.
_STAT_MAX = 1 << 20


@dataclass(frozen=True)
class Reading:
    at: float  # perf_counter
    cpu_s: float  # this process, every thread, user + system
    switches: int  # involuntary context switches of this process
    busy_s: float | None  # the CPUs in `cpus`, every task: user + nice + system + irq + softirq
    steal_s: float | None  # the CPUs in `cpus`
    runnable: int | None  # tasks runnable right now (procs_running), host-wide, the job's own included
    # The CPUs busy_s and steal_s are summed over: the job's affinity when read, ascending. None:
    # every CPU of the host (the aggregate `cpu` line), where the per-CPU lines could not serve.
    cpus: tuple[int, ...] | None = None
    # (busy s, steal s) of every CPU /proc/stat lists, in the job's first reading only (STARTED):
    # a short first metric's window reaches back to it over the CPUs of an affinity narrowed since
    # (`--threads` pins the job after the runtime is imported, before the framework is).
    per_cpu: Mapping[int, tuple[float, float]] | None = field(default=None, compare=False, repr=False)
    # Seconds this process's threads have waited on a run queue (schedstat's run_delay, summed over
    # its threads); None where the kernel does not say (not Linux, no schedstats).
    delay_s: float | None = None

    def over(self, cpus: tuple[int, ...]) -> Reading | None:
        """This reading summed over `cpus`, where its per-CPU counts hold each of them; else None."""
        if self.per_cpu is None or any(cpu not in self.per_cpu for cpu in cpus):
            return None
        busy = sum(self.per_cpu[cpu][0] for cpu in cpus)
        return replace(self, busy_s=busy, steal_s=sum(self.per_cpu[cpu][1] for cpu in cpus), cpus=cpus, per_cpu=None)


def _affinity() -> set[int] | None:
    try:
        return os.sched_getaffinity(0)
    except (AttributeError, OSError):  # not Linux
        return None


_allowed: tuple[set[int], tuple[int, ...], frozenset[bytes]] | None = None  # the last affinity seen


def _wanted(allowed: set[int]) -> tuple[tuple[int, ...], frozenset[bytes]]:
    """The affinity as an ascending tuple and as /proc/stat line names; one tuple per affinity,
    shared by every reading while the affinity holds."""
    global _allowed
    if _allowed is None or _allowed[0] != allowed:
        ordered = tuple(sorted(allowed))
        _allowed = (allowed, ordered, frozenset(b"cpu%d" % cpu for cpu in ordered))
    return _allowed[1], _allowed[2]


def _ticks(rest: bytes) -> tuple[int, int] | None:
    """(busy, steal) ticks of a cpu line's fields: user nice system idle iowait irq softirq steal ..."""
    fields = rest.split()
    if len(fields) < 8:
        return None
    try:
        user, nice, system, _, _, irq, softirq, steal = (int(f) for f in fields[:8])
    except ValueError:
        return None
    return user + nice + system + irq + softirq, steal


def _read_stat() -> bytes | None:
    try:
        with open(_STAT, "rb", buffering=0) as handle:
            chunks = []
            size = 0
            while size < _STAT_MAX:
                chunk = handle.read(_STAT_MAX - size)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
    except OSError:
        return None
    return b"".join(chunks)


def _proc_stat(
    allowed: set[int] | None, every_cpu: dict[int, tuple[float, float]] | None = None
) -> tuple[float, float, int | None, tuple[int, ...] | None] | None:
    """(busy s, steal s, runnable, CPUs counted) from /proc/stat, summed over the CPUs in `allowed`;
    `every_cpu`, when given, is filled with each listed CPU's (busy s, steal s).

    Falls back to the aggregate `cpu` line (CPUs counted: None, every CPU of the host) when there
    is no affinity, the file has no per-CPU lines, or the affinity names a CPU it does not list."""
    text = _read_stat()
    if text is None:
        return None
    cpus, names = _wanted(allowed) if allowed else ((), frozenset[bytes]())
    aggregate: tuple[int, int] | None = None
    listed = 0
    rests: list[bytes] = []  # the affinity's lines, parsed below unless the aggregate line serves
    lines = text.split(b"\n") if names or every_cpu is not None else text.split(b"\n", 1)[:1]
    for line in lines:  # a line per CPU, and a few more
        if not line.startswith(b"cpu"):
            break  # the cpu lines come first, together
        name, _, rest = line.partition(b" ")
        if name == b"cpu":
            aggregate = _ticks(rest)
            continue
        listed += 1
        if name in names:
            rests.append(rest)
        if every_cpu is not None and name[3:].isdigit() and (ticks := _ticks(rest)) is not None:
            every_cpu[int(name[3:])] = (ticks[0] / _TICK, ticks[1] / _TICK)
    runnable = None
    at = text.find(b"\nprocs_running ")  # after the `intr` line: past 8 KiB on a big machine
    if at >= 0:
        end = text.find(b"\n", at + 1)
        value = text[at + len(b"\nprocs_running ") : end if end >= 0 else len(text)].strip()
        runnable = int(value) if value.isdigit() else None
    if names and len(rests) == len(cpus):
        if listed == len(cpus) and aggregate is not None:
            # Every CPU listed is the job's (not pinned): the aggregate line sums them, read at once
            # (on 512 CPUs that saves a millisecond a reading). It also holds the frozen counts of CPUs
            # taken offline, which a difference cancels; a CPU brought online mid-job changes the set.
            return aggregate[0] / _TICK, aggregate[1] / _TICK, runnable, cpus
        each = [_ticks(rest) for rest in rests]
        if all(ticks is not None for ticks in each):
            busy = sum(ticks[0] for ticks in each if ticks is not None)
            steal = sum(ticks[1] for ticks in each if ticks is not None)
            return busy / _TICK, steal / _TICK, runnable, cpus
    # No per-CPU lines, a CPU of the affinity not listed (or unreadable), or no affinity: host-wide.
    if aggregate is None:
        return None
    return aggregate[0] / _TICK, aggregate[1] / _TICK, runnable, None


def _run_delay() -> float | None:
    """The summed run-queue wait of this process's threads (`/proc/self/task/*/schedstat`, its second
    field, in ns); None where unreadable. A thread that exited since the last reading takes its wait
    with it: a sample's difference is floored at 0, never negative."""
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return None
    total, read_any = 0, False
    for tid in tasks:
        try:
            with open(f"/proc/self/task/{tid}/schedstat", "rb") as f:
                fields = f.read(256).split()
        except OSError:  # the thread exited between the listing and the read
            continue
        if len(fields) >= 2 and fields[1].isdigit():
            total, read_any = total + int(fields[1]), True
    return total / 1e9 if read_any else None


def read(before: bool, clock: Any = time.perf_counter, every_cpu: bool = False) -> Reading:
    """One reading; `before` a sample reads its own counters last and after one first, so the
    cost of reading `/proc/stat` never lands in the CPU time a sample is charged with. The CPUs
    counted are the job's affinity at this reading; `every_cpu` keeps each CPU's counts too."""
    per_cpu: dict[int, tuple[float, float]] | None = {} if every_cpu else None
    found = _proc_stat(_affinity(), per_cpu) if before else None
    delay = _run_delay() if before else None
    usage = resource.getrusage(resource.RUSAGE_SELF)
    at = clock()
    if not before:
        delay = _run_delay()
        found = _proc_stat(_affinity(), per_cpu)
    return Reading(
        at=at,
        cpu_s=usage.ru_utime + usage.ru_stime,
        switches=usage.ru_nivcsw,
        delay_s=delay,
        busy_s=found[0] if found else None,
        steal_s=found[1] if found else None,
        runnable=found[2] if found else None,
        cpus=found[3] if found else None,
        per_cpu=per_cpu or None,
    )


def _difference(start: float | None, end: float | None) -> float | None:
    return None if start is None or end is None else max(0.0, end - start)


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
    cpu = [max(0.0, after[i].cpu_s - before[i].cpu_s) for i in range(n)]
    switches = [max(0, after[i].switches - before[i].switches) for i in range(n)]
    delays = [_difference(before[i].delay_s, after[i].delay_s) for i in range(n)]
    # Counts over other CPUs (another affinity, or the whole host) do not subtract: each sample's
    # window is drawn from the readings over the same CPUs as its own last one.
    # A reading that kept every CPU's counts (the job's first) joins each of those too, summed anew.
    timelines: dict[tuple[int, ...] | None, tuple[list[Reading], list[float]]] = {}
    counted_sets = {r.cpus for r in after}
    for r in sorted([*past, *before, *after], key=lambda r: r.at):
        for each in [r, *(r.over(cpus) for cpus in counted_sets if cpus not in (None, r.cpus))]:
            if each is not None:
                line, times = timelines.setdefault(each.cpus, ([], []))
                line.append(each)
                times.append(each.at)
    others: list[float | None] = []
    steal: list[float | None] = []
    own_rate: list[float] = []  # the job's CPU time per second over the same window
    for i in range(n):
        timeline, times = timelines[after[i].cpus]
        lo, hi = _window(times, before[i].at, after[i].at)
        b0, b1 = timeline[lo], timeline[hi]
        span = b1.at - b0.at
        # Under MIN_SPAN_S the tick counters cannot resolve a share: unknown, not zero.
        if span < MIN_SPAN_S or b0.busy_s is None or b1.busy_s is None or b0.steal_s is None or b1.steal_s is None:
            others.append(None)
            steal.append(None)
            own_rate.append(0.0)
            continue
        # The job's CPU time counts every thread of the process: one running outside the CPUs
        # counted (started before the affinity narrowed) makes the others' share too low, never too high.
        own = b1.cpu_s - b0.cpu_s
        others.append(round(max(0.0, (b1.busy_s - b0.busy_s - own) / span), 3))
        steal.append(round(max(0.0, (b1.steal_s - b0.steal_s) / span), 3))
        own_rate.append(max(0.0, own / span))
    rates = [cpu[i] / walls[i] if walls[i] > 0 else 0.0 for i in range(n)]
    calm = [rates[i] for i in range(n) if switches[i] == 0]
    typical = statistics.median(calm) if calm else None
    usable = usable_cores()
    contended = []
    for i in range(n):
        busy, stole, counted = others[i], steal[i], after[i].cpus
        if counted is not None:
            # Counted on the job's CPUs: crowded when the others took at least OTHERS_MIN_CORES of
            # them and, with the job, filled them (within the ticks' resolution) over the same window.
            crowded = (
                busy is not None and busy >= OTHERS_MIN_CORES and own_rate[i] + busy > len(counted) - TICK_MARGIN_CORES
            )
        else:
            # Host-wide counts (no per-CPU lines): the others may be on any CPU, the rule as before.
            crowded = (
                busy is not None and busy >= HOST_OTHERS_MIN_CORES and rates[i] + busy > usable - HOST_MARGIN_CORES
            )
        stolen = stole is not None and stole >= STEAL_MIN_CORES
        waited = delays[i]
        preempted = (
            switches[i] > 0
            and typical is not None
            and rates[i] < PREEMPTED_SHARE * typical
            # Where the threads' run-queue wait is known, it must account for half the time lost: a
            # sample that slept or blocked lost its time waiting on something, not on a CPU.
            and (waited is None or waited >= PREEMPTED_SHARE * walls[i] * (1 - rates[i] / typical))
        )
        if crowded or stolen or preempted:
            contended.append(i)
    counted = after[-1].cpus if n else None
    cores = len(counted) if counted is not None else usable
    runnable = [r.runnable for r in after]
    found: dict[str, Any] = {}
    if gpu is not None and any(state != (None, None) for state in gpu):
        found["sm_clock_mhz"] = [sm for sm, _ in gpu]
        found["clock_event_reasons"] = [reasons for _, reasons in gpu]
        found["throttled"] = [i for i, (_, reasons) in enumerate(gpu) if throttled(reasons)]
    return found | {
        "cpu_s": [round(c, 9) for c in cpu],
        "wall_s": [round(w, 9) for w in walls],  # the readings' own clock: cpu_s / wall_s is cores busy
        "involuntary_switches": switches,
        "run_delay_s": [None if d is None else round(d, 9) for d in delays]
        if any(d is not None for d in delays)
        else None,
        "others_cores": others if any(o is not None for o in others) else None,
        "steal_cores": steal if any(s is not None for s in steal) else None,
        "runnable": runnable if all(r is not None for r in runnable) else None,
        "cores": cores,
        "cpus": list(counted) if counted is not None else None,
        "window_s": WINDOW_S,
        "contended": contended,
    }


# The job's first reading, taken when the job runtime is imported (before any framework is): a
# first metric whose samples are short reaches back to it for its window.
STARTED = read(before=False, every_cpu=True)
