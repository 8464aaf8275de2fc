"""Contention seen per sample (suites/runtime/contention.py) and what the host makes of it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from harness.assessment import assess, run_exit_code
from harness.report.table import render
from harness.rounds import pool
from harness.run_folder import load_run
from harness.schema import InvalidResult, validate
from suites.runtime import contention
from suites.runtime.contention import Reading
from tests.factories import metric, result, write_run
from tests.test_nvml import FakeClock, _gpu_context, fake_pynvml


def readings(
    walls: list[float], cpu_rate: float, others: float, steal: float = 0.0, switches: int = 0
) -> tuple[list[Reading], list[Reading]]:
    """Back-to-back samples: the job ran `cpu_rate` cores, other tasks `others`, the hypervisor stole `steal`."""
    before, after = [], []
    t = cpu = busy = stolen = 0.0
    n_switches = 0
    for wall in walls:
        before.append(Reading(t, cpu, n_switches, busy, stolen, 2))
        t += wall
        cpu += cpu_rate * wall
        busy += (cpu_rate + others) * wall
        stolen += steal * wall
        n_switches += switches
        after.append(Reading(t, cpu, n_switches, busy, stolen, 3))
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


def test_a_job_beside_a_cpu_hog_has_its_samples_marked_contended() -> None:
    """Real processes: hogs on every usable core while a CPU-bound loop is timed."""
    from suites.runtime.context import Context
    from suites.runtime.registry import all_suites

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
    assert judged.passed and run_exit_code(run, judged) == 0
    text = render(run, judged=judged)
    assert "[contended 1/10]" in text and "CONTENDED" in text and "jax matmul: 8 of 10 samples" in text
    crowded = load_run(write_run(tmp_path / "c", [result("numpy", [_timed("matmul", list(range(9)))])]))
    assert assess(crowded).crowded is not None and "RUN FLAGGED: 9 of 10 samples" in render(crowded)
    assert run_exit_code(crowded) == 1


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
    from harness.compare import compare_runs

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

    comparison = compare_runs(load_run(rounds_run("a", 1.0, set())), load_run(rounds_run("b", 1.0, {2})))
    assert comparison.changes[0].processes == (6, 5)  # round 3 of B measured its neighbour


def test_long_samples_keep_their_own_window_and_short_ones_do_not_reach_into_another_era(two_cores: None) -> None:
    walls = [8.0] * 3  # samples longer than the look-back: each is still its own window
    assert contention.record(*readings(walls, cpu_rate=1.0, others=1.0))["contended"] == [0, 1, 2]
    before, after = readings([0.001] * 5, cpu_rate=1.0, others=1.0)
    ancient = Reading(before[0].at - 600.0, 0.0, 0, 0.0, 0.0, 1)  # ten minutes before: another era
    found = contention.record(before, after, past=[ancient])
    assert found["others_cores"] is None and found["contended"] == []
