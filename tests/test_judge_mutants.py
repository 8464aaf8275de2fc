"""Behaviour the judging code promises that no other test pinned: each test here kills a mutant that
`python benchmarks/mutate_judge.py` found surviving the judging tests (issue 56). Everything goes
through the public judgment (assess, compare_runs, the noise floor, the history, the JUnit report),
never through a guard's own function, so the tests hold while the guards move between modules.
"""

from __future__ import annotations

import json
import math
import random
import re
import statistics
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from harness.core.statistics import ALPHA
from harness.judge import change_points, noise_floor, sequential, time_to_target
from harness.judge.assessment import OVER_THREADS, RECOMPILED, assess
from harness.judge.compare import ROUNDS, Change, Comparison, compare_runs, family
from harness.judge.history import find_changes, series_of
from harness.judge.plausibility import Finding
from harness.judge.verdicts import Verdicts
from harness.publish.collect import PublishedRun
from harness.publish.compare_page import compare_page
from harness.publish.flags import FlagBook, run_notes
from harness.report.junit import comparison_junit
from harness.store.run_folder import Run, interleaved_record, load_run
from harness.text.numbers import fmt_share
from tests.factories import metric, result, write_run
from tests.test_ab import partner
from tests.test_noise_floor import rounds_run
from tests.test_verdict_gates import levels, rounds_doc


def run_of(path: Path, *docs: dict[str, Any]) -> Run:
    return load_run(write_run(path, list(docs)))


def with_rounds(m: dict[str, Any], medians: list[float]) -> dict[str, Any]:
    """`m` as if pooled from interleaved rounds with these medians (one process each)."""
    m["round_medians"] = medians
    return m


def compared(tmp_path: Path, a: dict[str, Any], b: dict[str, Any]) -> Comparison:
    return compare_runs(assess(run_of(tmp_path / "a", a)), assess(run_of(tmp_path / "b", b)))


def throughput(medians: list[float]) -> dict[str, Any]:
    """A higher-is-better metric (a training loop's tokens per second) from rounds at these medians."""
    m = with_rounds(metric("tokens_per_s", list(medians)), medians)
    m.update(kind="value", unit="tokens/s", better="higher", first_call=None)
    return m


# ---------------------------------------------------------------------------------------------
# compare: the direction of a higher-is-better metric, and the JUnit gate.


def test_a_throughput_drop_reads_worse_by_how_much_longer_the_work_takes(tmp_path: Path) -> None:
    """Tokens/s 100 -> 80 is 25 % worse (the same work takes 1/0.8 = 1.25 times as long), never "better";
    100 -> 125 is 20 % better. The JUnit gate fails the drop (a failure, not an error) and passes the rise."""
    before = result("numpy", [throughput([100.0] * 8)])
    drop_cmp = compared(tmp_path / "drop", before, result("numpy", [throughput([80.0] * 8)]))
    [drop] = drop_cmp.changes
    assert drop.significant and math.isclose(drop.ratio, 0.8)
    assert math.isclose(drop.slowdown, 0.25) and drop.verdict == "25.0% worse"
    rise_cmp = compared(tmp_path / "rise", before, result("numpy", [throughput([125.0] * 8)]))
    [rise] = rise_cmp.changes
    assert rise.significant and math.isclose(rise.slowdown, -0.2) and rise.verdict == "20.0% better"
    failed = ET.fromstring(comparison_junit(drop_cmp, None))
    assert (failed.get("failures"), failed.get("errors")) == ("1", "0")
    passed = ET.fromstring(comparison_junit(rise_cmp, None))
    assert (passed.get("failures"), passed.get("errors")) == ("0", "0")


def test_junit_never_fails_a_slowdown_that_is_not_significant(tmp_path: Path) -> None:
    """A 1 % slowdown inside the rounds' spread is "not significant": the JUnit case passes, with or
    without --fail-above 0."""
    medians = [1.00, 1.03, 0.97, 1.02, 0.98, 1.01]
    a = result("numpy", [with_rounds(metric("matmul", medians), medians)])
    slower = [x * 1.01 for x in medians]
    b = result("numpy", [with_rounds(metric("matmul", slower), slower)])
    comparison = compared(tmp_path, a, b)
    [row] = comparison.changes
    assert row.tested and row.no_verdict is None and row.slowdown > 0 and not row.significant
    for fail_above in (None, 0.0):
        report = ET.fromstring(comparison_junit(comparison, fail_above))
        assert (report.get("failures"), report.get("errors")) == ("0", "0") and not list(report.iter("failure"))


# ---------------------------------------------------------------------------------------------
# assess: ratios, disturbances, the core limit, steady compiles, plausibility at the limit.


def test_a_framework_that_failed_the_gate_and_a_metric_one_side_lacks_get_no_ratio(tmp_path: Path) -> None:
    """Only comparable frameworks get a ratio to the baseline; a metric only one of them measured gets
    none either (and judging it does not crash)."""
    wrong = result("jax", [metric("matmul", [0.5, 0.5, 0.5])])
    wrong["checks"][0]["value"] = 1.0  # the residual above its limit: jax fails the agreement gate
    judged = assess(run_of(tmp_path / "gate", result("numpy", [metric("matmul", [1.0, 1.0, 1.0])]), wrong))
    assert not judged.comparable("jax") and judged.comparable("numpy")
    assert judged.ratio("jax", "matmul") is None and judged.ratio("numpy", "matmul") is not None
    numpy = result("numpy", [metric("matmul", [1.0, 1.0, 1.0]), metric("only_numpy", [2.0, 2.0, 2.0])])
    jax = result("jax", [metric("matmul", [0.5, 0.5, 0.5]), metric("only_jax", [3.0, 3.0, 3.0])])
    judged = assess(run_of(tmp_path / "lacks", numpy, jax))
    assert judged.ratio("jax", "only_jax") is None and judged.ratio("jax", "only_numpy") is None
    ratio = judged.ratio("jax", "matmul")
    assert ratio is not None and ratio.value == 0.5


def reasons_metric(name: str, reasons: list[int]) -> dict[str, Any]:
    """A time metric whose samples the GPU's clock-event `reasons` (NVML bits) accompanied, one each."""
    n = len(reasons)
    m = metric(name, [0.01] * n)
    m["contention"] = {
        "cpu_s": [0.01] * n, "involuntary_switches": [0] * n, "cores": 2, "window_s": 0.2, "contended": [],
        "clock_event_reasons": reasons,
    }  # fmt: skip
    return m


def test_thermal_and_hardware_slowdowns_disturb_a_sample_and_the_power_cap_does_not(tmp_path: Path) -> None:
    """NVML's hardware slowdown (0x8), software and hardware thermal (0x20, 0x40) and the power brake
    (0x80) disturb a sample; the power cap (0x4, held through most of any long GPU load), sync boost
    (0x10), idle (0x1), application (0x2) and display clocks (0x100) do not. Most samples decide: 6 of
    10, or the one sample of a single-sample metric, but not 5 of 10 or 3 of 10."""
    disturbing, normal = (0x8, 0x20, 0x40, 0x80), (0x1, 0x2, 0x4, 0x10, 0x100)
    metrics = [reasons_metric(f"r{bit:x}", [bit] * 10) for bit in (*disturbing, *normal)]
    metrics += [reasons_metric("half", [0x40] * 5 + [0] * 5), reasons_metric("six", [0x40] * 6 + [0] * 4)]
    metrics += [reasons_metric("three", [0x40] * 3 + [0] * 7), reasons_metric("single", [0x40])]
    judged = assess(run_of(tmp_path, result("numpy", metrics)))
    assert {m for _, m in judged.disturbed} == {*(f"r{bit:x}" for bit in disturbing), "six", "single"}
    assert judged.contention[("numpy", "r4")] == (0, 10) and judged.contention[("numpy", "three")] == (3, 10)


def threads_metric(name: str, cores_busy: float, wall: float = 0.01, n: int = 10) -> dict[str, Any]:
    m = metric(name, [wall] * n)
    m["contention"] = {
        "cpu_s": [wall * cores_busy] * n, "wall_s": [wall] * n, "involuntary_switches": [0] * n, "cores": 4,
        "window_s": 0.2, "contended": [],
    }  # fmt: skip
    return m


def test_a_job_pinned_to_one_core_may_use_a_quarter_core_more_and_no_more(tmp_path: Path) -> None:
    """--threads 1: 1.2 cores busy is the kernel's accounting, 1.3 is a widened affinity (the slack is
    0.25 core); under 0.05 s of samples in all the quotient is not read."""
    doc = result("numpy", [threads_metric("calm", 1.2), threads_metric("wide", 1.3),
                           threads_metric("short", 3.0, wall=0.004), threads_metric("enough", 1.5, wall=0.006)])  # fmt: skip
    doc["settings"]["threads"] = 1
    judged = assess(run_of(tmp_path, doc))
    assert judged.excluded("numpy", "calm") is None and judged.excluded("numpy", "short") is None
    for name in ("wide", "enough"):  # 0.06 s of samples: read
        assert (judged.excluded("numpy", name) or "").startswith(OVER_THREADS), name
    assert not judged.passed


def test_one_compiled_steady_sample_is_enough_to_exclude_a_metric(tmp_path: Path) -> None:
    m = metric("matmul", [0.01] * 10)
    m["marks"] = {"compiled": [4]}
    judged = assess(run_of(tmp_path, result("numpy", [m])))
    assert (judged.excluded("numpy", "matmul") or "").startswith(RECOMPILED) and not judged.passed
    assert "1/10" in (judged.excluded("numpy", "matmul") or "")


def test_a_rate_exactly_at_its_limit_is_plausible_and_exactly_at_the_measured_ceiling_is_not_above_it() -> None:
    """A limit is the most a device can do: reaching it is possible, passing it is not; a rate equal
    to calibration's best is 100 % of achievable, not "above the measured ceiling"."""
    at = Finding("numpy", "matmul", "flops", achieved=5e11, peak=5e11, basis="datasheet", synchronised=True,
                 achievable=5e11)  # fmt: skip
    assert at.plausible and not at.above_achievable
    assert at.achievable_text == f"{fmt_share(1.0)} of achievable"
    above = Finding("numpy", "matmul", "flops", achieved=5.01e11, peak=5e11, basis="datasheet", synchronised=True,
                    achievable=5e11)  # fmt: skip
    assert not above.plausible and above.above_achievable


# ---------------------------------------------------------------------------------------------
# The noise floor: what a held row says, and what a session's own spread lets it see.


def test_a_row_held_as_drift_says_the_allowance_it_stayed_within(tmp_path: Path) -> None:
    """A change significant between processes but inside this machine's run-to-run gate is "not
    significant (within run-to-run noise, X)", X the gate as a change (z x sqrt 2 x drift): above the
    row's own change, below the 50 % no floor may excuse; a change past the gate stands."""
    noisy = run_of(tmp_path / "noise", rounds_doc("numpy", levels(0.1, 0.02, 11)))
    noise_floor.store([noisy], 6, 1.0)
    a = run_of(tmp_path / "a", rounds_doc("numpy", levels(0.1, 0.003, 12)))
    sigma = noise_floor.between_processes(noisy)["numpy"]["matmul"]
    z = statistics.NormalDist().inv_cdf(1 - ALPHA / 2)
    gate = z * math.sqrt(2) * sigma  # one row: Bonferroni over a family of 1
    inside = run_of(tmp_path / "in", rounds_doc("numpy", levels(0.1 * math.exp(0.8 * gate), 0.003, 13)))
    [held] = noise_floor.apply(compare_runs(assess(a), assess(inside))).changes
    assert held.within_sessions is not None and not held.significant
    assert math.isclose(held.within_sessions, math.exp(gate) - 1, rel_tol=1e-9)
    assert held.ratio - 1 < held.within_sessions < noise_floor.MAX_HELD
    assert held.verdict == f"not significant (within run-to-run noise, {held.within_sessions:.1%})"
    # Past z x sqrt 2 x drift (yet under z x 2 x drift): the verdict stands.
    past = run_of(tmp_path / "past", rounds_doc("numpy", levels(0.1 * math.exp(1.25 * gate), 0.003, 14)))
    [called] = noise_floor.apply(compare_runs(assess(a), assess(past))).changes
    assert called.within_sessions is None and called.significant and called.verdict.endswith("slower")


def test_the_change_two_separate_runs_reveal_is_revealed_80_percent_of_the_time() -> None:
    """`--detect` refuses a change below `reachable`: the change that clears the run-to-run gate in
    80 % of pairs of runs whose levels each drift by sigma (log). Checked by drawing such pairs."""
    rng = random.Random(56)
    for sigma, rows in ((0.05, 1), (0.02, 6)):
        change = math.log1p(noise_floor.reachable(sigma, rows))
        gate = noise_floor.session_gate(sigma, rows)
        draws = 40_000
        seen = sum(abs(change + rng.gauss(0, sigma) - rng.gauss(0, sigma)) >= gate for _ in range(draws))
        assert abs(seen / draws - 0.8) < 0.015, (sigma, rows, seen / draws)


def test_a_session_without_a_floor_sees_what_its_fewer_side_allows(tmp_path: Path) -> None:
    """Two sides of 6 and 12 rounds: the change the verdict could detect is that of 6 rounds a side at
    the pooled spread of their own round medians; the larger side does not make it smaller."""
    xa, xb = levels(0.1, 0.02, 21, rounds=6), levels(0.1, 0.02, 22, rounds=12)
    comparison = compare_runs(assess(run_of(tmp_path / "a", rounds_doc("numpy", xa))),
                              assess(run_of(tmp_path / "b", rounds_doc("numpy", xb))))  # fmt: skip
    logs = [[math.log(x) for x in side] for side in (xa, xb)]
    sigma = math.sqrt(sum(statistics.variance(s) * (len(s) - 1) for s in logs) / (len(xa) + len(xb) - 2))
    fewer = noise_floor.detectable(sigma, 6, comparison.family_size)
    assert fewer is not None
    [line] = noise_floor.explain(comparison, None, comparison.a.results["numpy"], session=True)
    assert line.endswith(f"numpy matmul {fmt_share(fewer)}"), line


# ---------------------------------------------------------------------------------------------
# The history: change points, their direction, and what changed there.


def history(
    tmp_path: Path, medians: list[float], *, better: str = "lower", cores: list[int] | None = None
) -> list[Run]:
    runs = []
    for i, median in enumerate(medians):
        m = metric("matmul", [median] * 3)
        if better == "higher":
            m.update(kind="value", unit="tokens/s", better="higher", first_call=None)
        doc = result("numpy", [m])
        if cores is not None:
            doc["environment"]["machine"] = {
                "cpu": {"model": "Some CPU", "logical_cores": 16, "usable_cores": cores[i]}
            }
        runs.append(run_of(tmp_path / f"run{i}", doc))
    return runs


def changes_of(runs: list[Run]) -> list[Any]:
    [series] = series_of([(run, assess(run)) for run in runs])
    return find_changes(series)


def test_a_history_step_reads_worse_or_better_by_the_metric_s_direction(tmp_path: Path) -> None:
    """Times 1.0 -> 0.7: an improvement of 30 %; tokens/s 100 -> 80: 25 % worse (1/0.8 - 1), 100 -> 125:
    20 % better."""
    [faster] = changes_of(history(tmp_path / "t", [1.0] * 8 + [0.7] * 8))
    assert not faster.worse and math.isclose(faster.change, -0.3)
    [slower] = changes_of(history(tmp_path / "s", [1.0] * 8 + [1.3] * 8))
    assert slower.worse and math.isclose(slower.change, 0.3)
    [drop] = changes_of(history(tmp_path / "d", [100.0] * 8 + [80.0] * 8, better="higher"))
    assert drop.worse and math.isclose(drop.change, 0.25)
    [rise] = changes_of(history(tmp_path / "r", [100.0] * 8 + [125.0] * 8, better="higher"))
    assert not rise.worse and math.isclose(rise.change, -0.2)


def test_a_run_whose_median_is_0_leaves_its_series_and_the_step_is_still_found(tmp_path: Path) -> None:
    runs = history(tmp_path, [1.0] * 8 + [0.0] + [1.5] * 8)
    [series] = series_of([(run, assess(run)) for run in runs])
    assert any(why.endswith("median not above 0") for why in series.left_out) and len(series.points) == 16
    [step] = find_changes(series)
    assert math.isclose(step.ratio, 1.5)


def test_a_change_point_names_a_change_of_usable_cores(tmp_path: Path) -> None:
    """16 -> 12 usable cores (a container's CPU limit) is the same machine, and the likely cause."""
    [step] = changes_of(history(tmp_path, [1.0] * 8 + [1.3] * 8, cores=[16] * 8 + [12] * 8))
    assert "cores 16 -> 12" in step.changed


def test_identical_medians_step_by_more_than_the_0_1_percent_noise_floor() -> None:
    """A series of identical medians has no noise to scale by: the floor (0.1 % in log units) stands in,
    so a 0.15 % step is a change and a 0.05 % one is not."""
    assert change_points.find([1.0] * 8 + [1.0015] * 8) == [8]
    assert change_points.find([1.0] * 8 + [1.0005] * 8) == []


# ---------------------------------------------------------------------------------------------
# The site: a comparison's rows coloured by their verdicts, and the notes beside a run's numbers.


def test_the_site_colours_each_compared_row_by_its_verdict(tmp_path: Path) -> None:
    """30 % slower: "worse"; 30 % faster: "better"; a 1 % change inside the rounds' spread: "same"."""
    spread = [1.00, 1.03, 0.97, 1.02, 0.98, 1.01, 0.99, 1.02]
    a = result("numpy", [with_rounds(metric(name, [1.0] * 8), [1.0] * 8) for name in ("slow", "fast")]
               + [with_rounds(metric("same", spread), spread)])  # fmt: skip
    near = [x * 1.01 for x in spread]
    b = result("numpy", [with_rounds(metric("slow", [1.3] * 8), [1.3] * 8),
                         with_rounds(metric("fast", [0.7] * 8), [0.7] * 8), with_rounds(metric("same", near), near)])  # fmt: skip
    entries = [
        PublishedRun(i, name, run_of(tmp_path / name, doc), None)
        for i, (name, doc) in enumerate([("a", a), ("b", b)], 1)
    ]
    page = compare_page(entries[0], entries[1], FlagBook(Verdicts()), "suite-xla.html")
    classes = dict((m, c) for c, m in re.findall(r'<tr class="([a-z]+)"><td>numpy</td><td>([a-z]+)</td>', page))
    assert classes == {"slow": "worse", "fast": "better", "same": "same"}, classes


def test_a_time_without_barrier_evidence_gets_a_note_and_nothing_else_does(tmp_path: Path) -> None:
    """The site's "sync not checked" note: an ok job's time metric whose sync nobody checked; not one
    whose barrier found nothing running, not a value metric, not a failed job's leftovers."""
    unchecked = metric("unchecked", [0.01] * 3)
    checked = metric("checked", [0.01] * 3)
    checked["sync"] = {"state": "ok"}
    value = metric("value", [5.0] * 3)
    value.update(kind="value", unit="items/s", better="higher", first_call=None)
    failed = result("jax", [metric("leftover", [0.01] * 3)])
    failed.update(status="failed", reason="boom")
    notes = run_notes(assess(run_of(tmp_path, result("numpy", [unchecked, checked, value]), failed)))
    assert list(notes) == [("numpy", "unchecked")] and notes[("numpy", "unchecked")][0].startswith("sync not checked")


# ---------------------------------------------------------------------------------------------
# Time to target pooled over rounds, and the looks of a budgeted session.


def test_a_loss_target_pools_from_the_one_round_that_ran() -> None:
    """A language model's target is a loss: pooled as one, even when a single round of the job ran."""
    target = {"loss": 1.6, "status": "reached", "seconds": 30.0, "wall_seconds": 31.0, "epochs": 2, "best_loss": 1.55}
    ran = {"status": "ok", "params": {"seed": 42}, "training": {"target": target}}
    pooled = time_to_target.pool([ran, {"status": "failed", "params": {"seed": 43}}])
    assert pooled is not None and pooled["loss"] == 1.6 and "accuracy" not in pooled
    assert pooled["status"] == "reached" and pooled["rounds"] == [
        {"seed": 42, "status": "reached", "seconds": 30.0, "wall_seconds": 31.0, "epochs": 2, "best_loss": 1.55}
    ]


def row(p: float, n: int) -> Change:
    return Change(framework="numpy", metric="noop", unit="s", better="lower", median_a=1.0, median_b=1.3, ratio=1.3,
                  ci_low=1.1, ci_high=1.5, p_value=p, basis=ROUNDS, processes=(n, n))  # fmt: skip


def test_a_budgeted_session_numbers_its_looks_from_one_deferred_or_not() -> None:
    schedule = sequential.Schedule(160.0)
    early = schedule.look(4, 20.0, False, family([row(0.03, 4)]))  # 4 a side can reach no p this small: deferred
    later = schedule.look(8, 40.0, False, family([row(0.5, 8)]))
    last = schedule.look(9, 160.0, True, family([row(0.5, 8)]))
    assert early.deferred and not later.deferred
    assert [look.number for look in (early, later, last)] == [1, 2, 3]
    assert early.line().startswith("look 1 after 4 round(s)") and later.line().startswith("look 2 after 8 round(s)")


def session(tmp_path: Path, scale: float, margin: float) -> Comparison:
    """The two sides of one `harness ab` session (30 rounds each, 0.05 % spread), B at `scale` times A,
    judged beyond `margin`."""
    sides = []
    for name, side, other, seed, factor in (("ra", "baseline", "rb", 10, 1.0), ("rb", "candidate", "ra", 11, scale)):
        path = partner(rounds_run(tmp_path / name, 0.0005, seed, rounds=30, scale=factor), name, side, other)
        summary = json.loads((path / "summary.json").read_text())
        summary.update(interleaved_record(side, other, margin))
        (path / "summary.json").write_text(json.dumps(summary))
        sides.append(assess(load_run(path)))
    return compare_runs(*sides)


def test_a_session_s_p_is_the_p_of_a_change_beyond_its_margin(tmp_path: Path) -> None:
    """0.5 % apart with a 1 % margin: no evidence of a change beyond the margin, so p is 1 (the plain
    test's p would be tiny: the sides do differ, by less than the margin); 3 % apart: a small p."""
    within = session(tmp_path / "within", 1.005, 0.01)
    assert within.changes and all(c.p_value == 1.0 and not c.significant for c in within.changes)
    beyond = session(tmp_path / "beyond", 1.03, 0.01)
    assert beyond.changes and all(c.p_value < 1e-6 and c.significant for c in beyond.changes)


def test_a_cpu_rate_above_its_datasheet_peak_is_implausible_and_just_under_it_is_not(tmp_path: Path) -> None:
    """Two AVX2 cores reporting 2 GHz: at most 2 x 3 GHz (x1.5 turbo allowance) x 32 float32 FLOP a cycle,
    192 GFLOP/s. A 2 GFLOP matmul at 190 GFLOP/s stands; at 250 GFLOP/s it cannot have been timed whole."""
    cpu = {"model": "test", "logical_cores": 2, "usable_cores": 2, "vector": "avx2", "mhz": 2000.0, "max_mhz": None}
    docs = []
    for fw, rate in (("numpy", 190e9), ("jax", 250e9)):
        doc = result(fw, [metric("matmul", [2e9 / rate] * 5, flops=2e9)])
        doc["environment"] = {
            "machine": {"cpu": cpu},
            "precision": {"measured": {"matmul": {"class": "fp32", "bits": 23}}},
        }
        docs.append(doc)
    judged = assess(run_of(tmp_path, *docs))
    assert judged.implausible == {("jax", "matmul")}
    assert (judged.excluded("jax", "matmul") or "").startswith("implausible FLOP/s")
