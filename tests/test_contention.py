"""Contention seen per sample (suites/runtime/contention.py) and what the host makes of it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from harness.core.schema import InvalidResult, validate
from harness.execute.rounds import pool
from harness.judge.assessment import DISTURBED, assess, run_exit_code
from harness.report.table import render
from harness.store.run_folder import load_run
from suites.runtime import contention
from suites.runtime.contention import Reading
from tests.factories import metric, result, write_run
from tests.test_nvml import FakeClock, _gpu_context, fake_pynvml


def readings(
    walls: list[float],
    cpu_rate: float,
    others: float,
    steal: float = 0.0,
    switches: int = 0,
    cpus: tuple[int, ...] | None = None,
) -> tuple[list[Reading], list[Reading]]:
    """Back-to-back samples: the job ran `cpu_rate` cores, other tasks `others`, the hypervisor stole `steal`,
    counted over `cpus` (None: host-wide, the aggregate line)."""
    before, after = [], []
    t = cpu = busy = stolen = 0.0
    n_switches = 0
    for wall in walls:
        before.append(Reading(t, cpu, n_switches, busy, stolen, 2, cpus))
        t += wall
        cpu += cpu_rate * wall
        busy += (cpu_rate + others) * wall
        stolen += steal * wall
        n_switches += switches
        after.append(Reading(t, cpu, n_switches, busy, stolen, 3, cpus))
    return before, after


@pytest.fixture
def two_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(contention, "usable_cores", lambda: 2)


def test_a_quiet_machine_marks_nothing_and_a_crowded_one_marks_every_sample(two_cores: None) -> None:
    walls = [0.02] * 30
    quiet = contention.record(*readings(walls, cpu_rate=2.0, others=0.05))
    assert quiet["contended"] == [] and quiet["others_cores"] == [pytest.approx(0.05, abs=0.01)] * 30
    crowded = contention.record(*readings(walls, cpu_rate=1.0, others=1.0))
    assert crowded["contended"] == list(range(30))
    stolen = contention.record(*readings(walls, cpu_rate=2.0, others=0.0, steal=0.3))
    assert stolen["contended"] == list(range(30)) and stolen["steal_cores"][0] == pytest.approx(0.3, abs=0.01)
    assert len(crowded["cpu_s"]) == len(crowded["involuntary_switches"]) == 30


def test_a_neighbour_on_a_big_machine_is_not_contention(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(contention, "usable_cores", lambda: 16)
    walls = [0.02] * 30
    assert contention.record(*readings(walls, cpu_rate=2.0, others=1.0))["contended"] == []


def test_a_pre_empted_sample_is_marked_and_its_calm_neighbours_are_not(two_cores: None) -> None:
    walls = [0.001] * 10  # 10 ms in all: /proc/stat's ticks cannot resolve the others' share
    before, after = readings(walls, cpu_rate=1.0, others=0.0)
    # Sample 4 lost most of its time to the scheduler: 3 involuntary switches, a fifth of the CPU rate.
    after[4] = Reading(after[4].at, before[4].cpu_s + 0.0002, 3, after[4].busy_s, after[4].steal_s, 3)
    found = contention.record(before, after)
    assert found["others_cores"] is None and found["contended"] == [4]


def test_a_sample_that_waited_on_something_else_is_not_a_pre_emption(two_cores: None) -> None:
    """An involuntary switch and a fifth of the CPU rate, as above; where the threads' run-queue wait is
    known it decides: under half the time lost (the request slept or blocked) is no mark, over it is."""
    walls = [0.001] * 10
    before, after = readings(walls, cpu_rate=1.0, others=0.0)
    before = [replace(r, delay_s=0.5) for r in before]
    after = [replace(r, delay_s=0.5) for r in after]

    def slow(i: int, waited: float) -> None:  # 5 ms, 0.2 ms of it on the CPU: 4.8 ms lost
        after[i] = Reading(before[i].at + 0.005, before[i].cpu_s + 0.0002, 1, None, None, 3, delay_s=0.5 + waited)

    slow(2, 0.00005)  # a 4.8 ms sleep: 50 us waiting for a CPU on the way back
    slow(6, 0.0045)  # 4.5 ms of the 4.8 runnable but not running: a pre-emption
    found = contention.record(before, after)
    assert found["contended"] == [6]
    assert found["run_delay_s"][2] == pytest.approx(0.00005) and found["run_delay_s"][0] == 0.0


def test_the_run_queue_wait_is_what_the_kernel_says_a_hog_costs_and_a_sleep_does_not() -> None:
    """Real threads: one CPU shared with a spinning process grows the job's run-queue wait by a share of
    the time; a sleep of the same length grows it by almost nothing."""
    if not os.path.exists("/proc/self/task"):
        pytest.fail("this test needs Linux's /proc (the machines the harness runs jobs on have it)")
    start = contention._run_delay()
    assert start is not None, "no /proc/self/task/*/schedstat: the kernel keeps no scheduler statistics"
    time.sleep(0.1)
    slept = contention._run_delay()
    assert slept is not None and slept - start < 0.02
    cpu = min(os.sched_getaffinity(0))
    mine = os.sched_getaffinity(0)
    hog = subprocess.Popen([sys.executable, "-c", f"import os; os.sched_setaffinity(0, {{{cpu}}})\nwhile True: pass"])
    try:
        os.sched_setaffinity(0, {cpu})
        time.sleep(0.3)  # the hog is spinning on our CPU
        ahead = contention._run_delay()
        end = time.perf_counter() + 0.2
        while time.perf_counter() < end:
            pass
        behind = contention._run_delay()
    finally:
        os.sched_setaffinity(0, mine)
        hog.kill()
        hog.wait()
    assert ahead is not None and behind is not None and behind - ahead > 0.05  # about half of 0.2 s


def test_a_job_beside_a_cpu_hog_has_its_samples_marked_contended() -> None:
    """Real processes: hogs on every usable core while a CPU-bound loop is timed."""
    from suites.contract.registry import all_suites
    from suites.runtime.context import Context

    if not os.path.exists("/proc/stat"):
        pytest.fail("this test needs Linux's /proc/stat (the machines the harness runs jobs on have it)")
    spec = all_suites()["xla"]
    ctx = Context(spec, "numpy", spec.resolve({}), repeat=12, warmup=0, device="cpu", device_kind="cpu",
                  sync=lambda o: None)  # fmt: skip

    def spin() -> int:
        end = time.perf_counter() + 0.02
        n = 0
        while time.perf_counter() < end:
            n += 1
        return n

    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(contention.usable_cores() + 1)]
    try:
        time.sleep(0.3)  # the hogs are running
        ctx.measure("spin", spin)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    spun = ctx.metrics[0]
    seen = spun["contention"]
    assert len(seen["contended"]) >= 10, seen  # 12 samples of 20 ms beside a hog on every core
    assert spun["marks"]["contended"] == seen["contended"]
    assert all(o is not None and o >= contention.OTHERS_MIN_CORES for o in seen["others_cores"])


def _timed(name: str, contended: list[int], n: int = 10) -> dict[str, Any]:
    m = metric(name, [0.01 + 0.0001 * i for i in range(n)])
    m["contention"] = {
        "cpu_s": [0.01] * n, "involuntary_switches": [0] * n, "others_cores": [1.0] * n, "steal_cores": [0.0] * n,
        "runnable": [3] * n, "cores": 2, "window_s": 0.2, "contended": contended,
    }  # fmt: skip
    if contended:
        m["marks"] = {"contended": contended}
    return m


def test_a_metric_mostly_contended_leaves_the_ratios_and_a_run_mostly_contended_exits_1(tmp_path: Path) -> None:
    calm = result("numpy", [_timed("matmul", [1])])
    noisy = result("jax", [_timed("matmul", list(range(8)))])
    run = load_run(write_run(tmp_path / "r", [calm, noisy]))
    judged = assess(run)
    assert judged.contention == {("numpy", "matmul"): (1, 10), ("jax", "matmul"): (8, 10)}
    assert judged.crowded is None and judged.excluded("jax", "matmul") == "contended (8/10 samples)"
    # Most of jax's matmul samples: that metric leaves the ratios; 9 of 20 samples: the run stands.
    assert judged.passed and run_exit_code(judged) == 0
    text = render(judged)
    assert "[contended 1/10]" in text and "CONTENDED" in text and "jax matmul: 8 of 10 samples" in text
    crowded = load_run(write_run(tmp_path / "c", [result("numpy", [_timed("matmul", list(range(9)))])]))
    assert assess(crowded).crowded is not None and "RUN FLAGGED: 9 of 10 samples" in render(assess(crowded))
    assert run_exit_code(assess(crowded)) == DISTURBED  # measured, but the machine disturbed it (exit 3)


def result_problem(doc: dict[str, Any]) -> str | None:
    try:
        validate(doc, "test")
    except InvalidResult as problem:
        return str(problem)
    return None


def test_the_schema_refuses_contention_that_does_not_match_the_samples() -> None:
    doc = result("numpy", [_timed("matmul", [0, 3])])
    assert result_problem(doc) is None
    doc["metrics"][0]["contention"]["cpu_s"] = [0.01] * 9
    assert "contention.cpu_s: expected one value per sample (10)" in (result_problem(doc) or "")
    doc = result("numpy", [_timed("matmul", [3, 0])])
    del doc["metrics"][0]["marks"]
    assert "contention.contended: expected distinct ascending" in (result_problem(doc) or "")


def test_rounds_pool_contention_like_the_samples() -> None:
    docs = [result("numpy", [_timed("matmul", [1])]), result("numpy", [_timed("matmul", [0, 9])])]
    pooled = pool(docs, "r")["metrics"][0]
    seen = pooled["contention"]
    assert seen["contended"] == [1, 10, 19] and len(seen["cpu_s"]) == 20
    assert pooled["marks"]["contended"] == [1, 10, 19] and result_problem(pool(docs, "r")) is None


def test_a_gpu_sample_under_throttling_is_marked_through_nvml() -> None:
    """NVML stand-in: the power cap holds the GPU back during the second and third samples."""
    clock = FakeClock()
    module = fake_pynvml(clock=clock)
    states = iter([0, 0x4, 0x4 | 0x20, 0x1])  # none, power cap, power cap + thermal, idle (not a slowdown)
    module.nvmlDeviceGetCurrentClocksEventReasons = lambda h: next(states)  # type: ignore[attr-defined]
    ctx = _gpu_context(clock, module, repeat=4)

    def call() -> int:
        clock.now += 0.5
        return 1

    ctx.measure("matmul", call)
    timed = next(m for m in ctx.metrics if m["name"] == "matmul")
    seen = timed["contention"]
    assert seen["throttled"] == [1, 2] and timed["marks"]["throttled"] == [1, 2]
    assert seen["sm_clock_mhz"] == [345.0] * 4 and seen["clock_event_reasons"] == [0, 4, 36, 1]
    assert contention.throttled(36) == ["power cap", "thermal (software)"]
    # Drivers before NVML 12.2 have only the old name.
    old = fake_pynvml(clock=clock)
    old.nvmlDeviceGetCurrentClocksThrottleReasons = lambda h: 0x40  # type: ignore[attr-defined]
    ctx = _gpu_context(clock, old, repeat=2)
    ctx.measure("matmul", call)
    assert next(m for m in ctx.metrics if m["name"] == "matmul")["contention"]["throttled"] == [0, 1]


def test_compare_leaves_out_a_round_whose_samples_were_mostly_contended(tmp_path: Path) -> None:
    from harness.judge.compare import compare_runs

    def rounds_run(name: str, level: float, hogged: set[int]) -> Path:
        medians = [level * (1 + 0.002 * k) for k in range(6)]
        samples = [m for m in medians for _ in range(4)]
        m = _timed("matmul", [], n=len(samples))
        m["samples"], m["stats"] = samples, metric("x", samples)["stats"]
        m["round_medians"], m["round_sizes"] = medians, [4] * 6
        m["contention"]["contended"] = [r * 4 + i for r in sorted(hogged) for i in range(3)]  # 3 of 4 samples
        d = result("numpy", [m])
        d["settings"]["rounds"] = 6
        return write_run(tmp_path / name, [d])

    comparison = compare_runs(
        assess(load_run(rounds_run("a", 1.0, set()))), assess(load_run(rounds_run("b", 1.0, {2})))
    )
    assert comparison.changes[0].processes == (6, 5)  # round 3 of B measured its neighbour


def test_long_samples_keep_their_own_window_and_short_ones_do_not_reach_into_another_era(two_cores: None) -> None:
    walls = [8.0] * 3  # samples longer than the look-back: each is still its own window
    assert contention.record(*readings(walls, cpu_rate=1.0, others=1.0))["contended"] == [0, 1, 2]
    before, after = readings([0.001] * 5, cpu_rate=1.0, others=1.0)
    ancient = Reading(before[0].at - 600.0, 0.0, 0, 0.0, 0.0, 1)  # ten minutes before: another era
    found = contention.record(before, after, past=[ancient])
    assert found["others_cores"] is None and found["contended"] == []


# Per-CPU counting: the others are counted on the CPUs the job may use (its affinity), not host-wide.


def stat_text(busy: dict[int, float], steal: dict[int, float] | None = None, runnable: int = 2) -> str:
    """A /proc/stat whose CPUs were busy `busy[cpu]` seconds (all of it user time), in whole ticks."""
    tick = contention._TICK
    rows = {cpu: [int(seconds * tick), 0, 0, 10_000, 0, 0, 0, int((steal or {}).get(cpu, 0.0) * tick), 0, 0]
            for cpu, seconds in busy.items()}  # fmt: skip
    total = [sum(column) for column in zip(*rows.values(), strict=True)]
    lines = [f"cpu  {' '.join(map(str, total))}", *(f"cpu{c} {' '.join(map(str, rows[c]))}" for c in sorted(rows))]
    return "\n".join([*lines, "intr 1000 0 0 3", "ctxt 5000", f"procs_running {runnable}", "procs_blocked 0", ""])


def simulated(
    path: Path, walls: list[float], allowed: set[int] | None, job: dict[int, float], others: dict[int, float]
) -> tuple[list[Reading], list[Reading]]:
    """Back-to-back samples read through `_proc_stat` (its path patched to `path`) from a host of 4 CPUs: the job
    busy `job[cpu]` cores on each CPU, other tasks `others[cpu]`."""
    host = {0, 1, 2, 3} | set(job) | set(others)

    def reading(t: float) -> Reading:
        uptime = {c: 100.0 + (job.get(c, 0.0) + others.get(c, 0.0)) * t for c in host}
        path.write_text(stat_text(uptime))
        found = contention._proc_stat(allowed)
        assert found is not None
        return Reading(t, sum(job.values()) * t, 0, found[0], found[1], found[2], found[3])

    before, after, t = [], [], 0.0
    for wall in walls:
        before.append(reading(t))
        t += wall
        after.append(reading(t))
    return before, after


@pytest.fixture
def stat_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "stat"
    monkeypatch.setattr(contention, "_STAT", str(path))
    return path


def test_a_neighbour_on_a_cpu_the_job_may_not_use_is_not_contention(
    stat_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    walls = [0.02] * 30
    seen = contention.record(*simulated(stat_file, walls, {0}, job={0: 1.0}, others={1: 0.6}))
    assert seen["contended"] == [] and seen["cores"] == 1 and seen["cpus"] == [0]
    assert seen["others_cores"] == [pytest.approx(0.0, abs=0.06)] * 30
    # Counted host-wide (what every reading did before): the neighbour on CPU 1 marked every sample.
    monkeypatch.setattr(contention, "usable_cores", lambda: 1)
    host_wide = contention.record(*simulated(stat_file, walls, None, job={0: 1.0}, others={1: 0.6}))
    assert host_wide["contended"] == list(range(30)) and host_wide["cpus"] is None


def test_a_neighbour_on_the_job_s_own_cpu_is_contention(stat_file: Path) -> None:
    walls = [0.02] * 30
    shared = contention.record(*simulated(stat_file, walls, {0}, job={0: 0.4}, others={0: 0.6}))
    assert shared["contended"] == list(range(30)) and shared["others_cores"][0] == pytest.approx(0.6, abs=0.06)
    # One neighbour's fair share of one core is half of it: every sample, not a coin toss's worth.
    fair = contention.record(*simulated(stat_file, walls, {0}, job={0: 0.5}, others={0: 0.5}))
    assert fair["contended"] == list(range(30))
    # Daemons take a few hundredths of a busy core: nothing.
    daemons = contention.record(*simulated(stat_file, walls, {0}, job={0: 0.95}, others={0: 0.05}))
    assert daemons["contended"] == []


def test_two_cpus_with_room_to_spare_are_not_contention_and_full_ones_are(stat_file: Path) -> None:
    walls = [0.02] * 30
    pair = (0, 1)
    assert contention.record(*readings(walls, cpu_rate=1.0, others=0.6, cpus=pair))["contended"] == []
    assert contention.record(*readings(walls, cpu_rate=2.0, others=0.6, cpus=pair))["contended"] == list(range(30))
    # The same through per-CPU counters: the job on CPU 0, a neighbour at 0.6 on CPU 1 (1.6 of 2 cores) ...
    roomy = contention.record(*simulated(stat_file, walls, {0, 1}, job={0: 1.0}, others={1: 0.6}))
    assert roomy["contended"] == [] and roomy["cores"] == 2 and roomy["cpus"] == [0, 1]
    # ... and a job on both beside it, the two CPUs full.
    full = contention.record(*simulated(stat_file, walls, {0, 1}, job={0: 1.0, 1: 0.4}, others={1: 0.6}))
    assert full["contended"] == list(range(30))


def test_a_job_on_cpus_0_and_2_counts_those_and_only_those(stat_file: Path) -> None:
    walls = [0.02] * 30
    crowd = {1: 1.0, 3: 1.0}  # full CPUs beside the job's, not its own
    apart = contention.record(*simulated(stat_file, walls, {0, 2}, job={0: 1.0}, others={**crowd, 2: 0.6}))
    assert apart["contended"] == [] and apart["cpus"] == [0, 2]
    assert apart["others_cores"] == [pytest.approx(0.6, abs=0.06)] * 30
    full = contention.record(*simulated(stat_file, walls, {0, 2}, job={0: 1.0}, others={**crowd, 2: 1.0}))
    assert full["contended"] == list(range(30))


def test_a_neighbour_on_a_big_machine_is_not_contention_counted_per_cpu() -> None:
    walls = [0.02] * 30
    sixteen = tuple(range(16))
    assert contention.record(*readings(walls, cpu_rate=2.0, others=1.0, cpus=sixteen))["contended"] == []


def parsed(allowed: set[int] | None) -> Any:
    """`_proc_stat`, compared with approximate numbers."""
    return contention._proc_stat(allowed)


def test_proc_stat_is_summed_over_the_allowed_cpus(stat_file: Path) -> None:
    stat_file.write_text(
        "cpu  100 10 20 9000 5 3 4 7 0 0\n"
        "cpu0 10 1 2 2000 1 1 1 1 0 0\n"
        "cpu1 20 2 4 2000 1 0 1 2 0 0\n"
        "cpu2 30 3 6 2500 2 1 1 3 0 0\n"
        "cpu3 40 4 8 2500 1 1 1 1 0 0\n"
        "intr 99 0 0\nctxt 5\nprocs_running 5\nprocs_blocked 0\n"
    )
    tick = contention._TICK
    # CPUs 0 and 2 (not contiguous): user + nice + system + irq + softirq, and steal, of those two lines.
    assert parsed({0, 2}) == (
        pytest.approx((10 + 1 + 2 + 1 + 1 + 30 + 3 + 6 + 1 + 1) / tick),
        pytest.approx(4 / tick),
        5,
        (0, 2),
    )
    assert parsed({3})[3] == (3,)
    # Every CPU listed (a job not pinned): the aggregate line is their sum.
    assert parsed({0, 1, 2, 3}) == (
        pytest.approx((100 + 10 + 20 + 3 + 4) / tick),
        pytest.approx(7 / tick),
        5,
        (0, 1, 2, 3),
    )
    # A CPU /proc/stat does not list, or no affinity: the aggregate line, counted host-wide.
    aggregate = (pytest.approx((100 + 10 + 20 + 3 + 4) / tick), pytest.approx(7 / tick), 5, None)
    assert parsed({0, 7}) == aggregate
    assert parsed(None) == aggregate
    # No per-CPU lines at all (some kernels' containers, emulators): the aggregate line.
    stat_file.write_text("cpu  100 10 20 9000 5 3 4 7 0 0\nintr 99\nprocs_running 2\n")
    assert parsed({0}) == (*aggregate[:2], 2, None)
    stat_file.unlink()
    assert parsed({0}) is None


def test_a_big_machine_s_proc_stat_is_read_past_its_first_8_kib(stat_file: Path) -> None:
    """512 CPUs and an interrupt line of 100 KB: the last CPU's line and procs_running lie far past 8 KiB."""
    text = stat_text({c: float(c) for c in range(512)}, runnable=7)
    stat_file.write_text(text.replace("intr 1000 0 0 3", "intr 1000" + " 12345" * 17_000))
    assert stat_file.stat().st_size > 100_000
    found = contention._proc_stat({511})
    assert found is not None and found[0] == pytest.approx(511.0) and found[2:] == (7, (511,))
    started = time.perf_counter()
    for _ in range(20):
        contention._proc_stat(set(range(512)))
    assert (time.perf_counter() - started) / 20 < 0.02  # a few ms at most, read twice per sample


def test_a_reading_counts_the_cpus_of_the_affinity_it_was_taken_with(
    stat_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stat_file.write_text(stat_text({0: 1.0, 1: 2.0, 2: 4.0}, runnable=3))
    monkeypatch.setattr(contention, "_affinity", lambda: {2, 0})
    taken = contention.read(before=False)
    assert taken.cpus == (0, 2) and taken.busy_s == pytest.approx(5.0) and taken.runnable == 3
    monkeypatch.setattr(contention, "_affinity", lambda: {1})  # the job narrowed itself (--threads)
    assert contention.read(before=True).cpus == (1,)


def test_readings_over_other_cpus_are_not_subtracted_from_one_another() -> None:
    """A job that narrowed its affinity after its first reading: that reading counted other CPUs."""
    before, after = readings([0.001] * 5, cpu_rate=1.0, others=0.0, cpus=(0,))
    wide = Reading(before[0].at - 0.3, 0.0, 0, -50.0, 0.0, 1, (0, 1, 2, 3))  # 0.3 s back: would make a window
    found = contention.record(before, after, past=[wide])
    assert found["others_cores"] is None and found["contended"] == [] and found["cpus"] == [0]
    same = Reading(before[0].at - 0.3, -0.3, 0, -0.3 - 0.3 * 0.6, 0.0, 1, (0,))  # the same CPU, others at 0.6
    found = contention.record(before, after, past=[wide, same])
    assert found["others_cores"] == [pytest.approx(0.6, abs=0.02)] * 5 and found["contended"] == [0, 1, 2, 3, 4]


def test_a_short_first_metric_reaches_back_to_the_job_s_first_reading_over_its_narrowed_cpus() -> None:
    """The job's first reading (STARTED) keeps every CPU's counts: `--threads` narrows the affinity after it."""
    before, after = readings([0.001] * 5, cpu_rate=1.0, others=0.0, cpus=(0,))
    every = {0: (-0.3 - 0.3 * 0.6, 0.0), 1: (50.0, 0.0)}  # CPU 0 0.3 s back: the job at 1.0, others at 0.6
    first = Reading(before[0].at - 0.3, -0.3, 0, 99.0, 0.0, 1, (0, 1), per_cpu=every)
    found = contention.record(before, after, past=[first])
    assert found["others_cores"] == [pytest.approx(0.6, abs=0.02)] * 5 and found["contended"] == [0, 1, 2, 3, 4]
    assert first.over((0, 2)) is None  # a CPU it did not count
    assert contention.STARTED.per_cpu and contention.read(before=False).per_cpu is None  # the first reading only


def test_the_schema_takes_the_cpus_counted_and_results_without_them() -> None:
    doc = result("numpy", [_timed("matmul", [0])])
    seen = doc["metrics"][0]["contention"]
    assert result_problem(doc) is None  # written before per-CPU counting: no `cpus`
    for fine in ([0, 5], None):
        seen["cpus"] = fine
        assert result_problem(doc) is None
    for wrong in ([0], [5, 0], [1, 1]):
        seen["cpus"] = wrong
        assert "contention.cpus: expected the 2 CPUs counted" in (result_problem(doc) or ""), wrong
    seen["cpus"] = ["0", "1"]
    assert result_problem(doc) is not None
