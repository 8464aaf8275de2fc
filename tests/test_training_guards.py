"""Every timed training number through the guards (issue 56): epochs and GPT's intervals carry the
contention readings and compile marks `measure` writes (suites/runtime/context.py `record_time`), and
the value metrics computed from them (`derived_from`: throughput, tokens/s) are excluded whenever
their time metric is (harness/judge/assessment.py `derived_exclusions`)."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from harness.core.schema import InvalidResult, validate
from harness.execute.rounds import pool
from harness.judge.assessment import DISTURBED, FAILED, assess, run_exit_code
from harness.report.table import render
from harness.store.run_folder import load_run
from suites.contract.registry import all_suites
from suites.runtime import contention, training
from suites.runtime.context import Context, Readings
from tests.conftest import harness, read, run_folder
from tests.factories import metric, result, write_run
from tests.test_contention import readings
from tests.test_nvml import FakeClock, _gpu_context, fake_pynvml


def context(**kwargs: Any) -> Context:
    spec = all_suites()["xla"]
    return Context(spec, "jax", spec.resolve({}), repeat=3, warmup=0, device="cpu", device_kind="cpu",
                   sync=lambda out: None, **kwargs)  # fmt: skip


def named(ctx: Context, name: str) -> dict[str, Any]:
    return next(m for m in ctx.metrics if m["name"] == name)


# -- the job side: record_time writes what measure writes ----------------------------------------


@pytest.fixture
def two_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(contention, "usable_cores", lambda: 2)


def test_record_time_marks_contended_and_compiled_samples_as_measure_does(two_cores: None) -> None:
    ctx = context()
    before, after = readings([0.5] * 3, cpu_rate=1.0, others=1.0)  # a neighbour took the other core throughout
    ctx.record_time("epoch", first_call=2.0, samples=[0.5, 0.5, 0.5], readings=Readings(before, after),
                    compiled=[0, 2, 0])  # fmt: skip
    epoch = named(ctx, "epoch")
    assert epoch["contention"]["contended"] == [0, 1, 2] and epoch["marks"]["contended"] == [0, 1, 2]
    assert len(epoch["contention"]["cpu_s"]) == len(epoch["contention"]["wall_s"]) == 3
    assert epoch["marks"]["compiled"] == [1] and epoch["steady_compilations"] == 2 and epoch["compiles"] is False
    quiet = readings([0.5] * 3, cpu_rate=2.0, others=0.0)
    ctx = context()  # the readings above start at 0 too: a job's own never overlap
    ctx.record_time("declared", first_call=1.0, samples=[0.5] * 3, readings=Readings(*quiet), compiled=[1, 1, 1],
                    compiles=True)  # fmt: skip
    declared = named(ctx, "declared")
    assert declared["marks"] == {} and declared["steady_compilations"] == 3 and declared["compiles"] is True
    ctx.record_time("uncounted", first_call=1.0, samples=[0.5, 0.5], compiled=[0, None])
    assert named(ctx, "uncounted")["steady_compilations"] is None and "contention" not in named(ctx, "uncounted")
    with pytest.raises(ValueError, match="2/2 contention readings for 3 samples"):
        ctx.record_time("short", first_call=1.0, samples=[0.5] * 3, readings=Readings(before[:2], after[:2]))
    with pytest.raises(ValueError, match="1 compilation counts for 3 samples"):
        ctx.record_time("short", first_call=1.0, samples=[0.5] * 3, compiled=[0])
    assert validate(doc_of(ctx), "test")  # what the job writes, the host reads


def doc_of(ctx: Context) -> dict[str, Any]:
    return result("jax", copy.deepcopy(ctx.metrics))


def test_the_training_loop_reads_each_epoch_and_marks_a_retrace_in_a_steady_one(tmp_path: Path) -> None:
    class Counter:
        count = 0

        def __call__(self) -> int:
            return self.count

    counter = Counter()

    def run_epoch(e: int) -> int:
        if e in (0, 2):  # epoch 1 compiles (fine), epoch 3 retraces
            counter.count += 1
        return e

    ctx = context()
    history = training.train(ctx, epochs=4, run_epoch=run_epoch, read=lambda out: (1.0, 50.0), samples_per_epoch=8,
                             compilations=counter)  # fmt: skip
    assert all(e.before is not None and e.after is not None and e.before.at <= e.after.at for e in history.epochs)
    training.record(ctx, history)
    epoch, throughput = named(ctx, "epoch"), named(ctx, "throughput")
    assert epoch["marks"].get("compiled") == [1] and epoch["steady_compilations"] == 1
    assert len(epoch["contention"]["cpu_s"]) == 3 and epoch["contention"]["cores"] >= 1
    assert throughput["derived_from"] == "epoch"
    judged = assess(load_run(write_run(tmp_path / "run", [doc_of(ctx)])))
    assert judged.excluded("jax", "epoch") == "compiled in the steady state (1/3 samples)"
    assert judged.excluded("jax", "throughput") == judged.excluded("jax", "epoch")
    assert run_exit_code(judged) == FAILED


def test_an_epoch_the_gpu_was_throttled_in_is_marked_from_the_meter_s_clock_state() -> None:
    clock = FakeClock()
    module = fake_pynvml(clock=clock)
    states = iter([0, 0x4 | 0x20, 0, 0x40])  # read after each epoch: epoch 1, then the three steady ones
    module.nvmlDeviceGetCurrentClocksEventReasons = lambda h: next(states)  # type: ignore[attr-defined]
    ctx = _gpu_context(clock, module)

    def run_epoch(e: int) -> int:
        clock.now += 0.5
        return e

    history = training.train(ctx, epochs=4, run_epoch=run_epoch, read=lambda out: (1.0, 50.0), samples_per_epoch=8)
    training.record(ctx, history)
    seen = named(ctx, "epoch")["contention"]
    assert seen["clock_event_reasons"] == [36, 0, 64] and seen["sm_clock_mhz"] == [345.0] * 3
    assert seen["throttled"] == [0, 2] and named(ctx, "epoch")["marks"]["throttled"] == [0, 2]


def test_a_value_names_only_time_metrics_already_recorded() -> None:
    ctx = context()
    ctx.record_time("epoch", first_call=1.0, samples=[0.5])
    ctx.value("accuracy", 50.0, unit="%")
    ctx.value("throughput", [2.0], unit="samples/s", derived_from="epoch")
    ctx.value("both", [2.0], unit="x", derived_from=["epoch"])
    assert named(ctx, "throughput")["derived_from"] == "epoch" and named(ctx, "both")["derived_from"] == ["epoch"]
    assert "derived_from" not in named(ctx, "accuracy")
    for wrong in ("nosuch", "accuracy", []):
        with pytest.raises(ValueError, match="not a time metric of this job"):
            ctx.value("bad", [1.0], unit="", derived_from=wrong)


# -- the schema: derived_from is read from a hostile file ----------------------------------------


def derived_doc(derived_from: Any, *, on: str = "value") -> dict[str, Any]:
    epoch = metric("epoch", [0.5, 0.6, 0.7])
    rate = {**metric("throughput", [2.0, 1.7, 1.4]), "kind": on, "unit": "samples/s", "better": "higher"}
    rate["derived_from"] = derived_from
    accuracy = {**metric("accuracy", [50.0]), "kind": "value", "unit": "%", "better": "higher"}
    return result("jax", [epoch, accuracy, rate])


def problem(doc: dict[str, Any]) -> str:
    try:
        validate(doc, "test")
    except InvalidResult as refused:
        return str(refused)
    return ""


@pytest.mark.parametrize("fine", ["epoch", ["epoch"], None])
def test_derived_from_naming_a_time_metric_of_the_result_validates(fine: Any) -> None:
    assert problem(derived_doc(fine)) == ""


@pytest.mark.parametrize(
    ("derived_from", "on", "message"),
    [
        ("nosuch", "value", "metrics[2] ('throughput').derived_from: 'nosuch' is not a time metric of this result"),
        ("accuracy", "value", "'accuracy' is not a time metric of this result"),  # a value metric
        ("throughput", "value", "'throughput' is not a time metric of this result"),  # itself
        (["epoch", "nosuch"], "value", "'nosuch' is not a time metric of this result"),
        (["epoch", "epoch"], "value", "derived_from: expected distinct names"),
        ("epoch", "time", "derived_from: only a value metric is derived from a time metric"),
        ([], "value", "derived_from: expected a time metric's name or a list of them"),
        ("", "value", "derived_from: expected a time metric's name or a list of them"),
        (3, "value", "derived_from: expected a time metric's name or a list of them"),
        ({"name": "epoch"}, "value", "derived_from: expected a time metric's name or a list of them"),
        ([["epoch"]], "value", "derived_from: expected a time metric's name or a list of them"),
        (["epoch"] * 9, "value", "derived_from: expected a time metric's name or a list of them"),
        ("x" * 100_000, "value", "is not a time metric of this result"),
    ],
)
def test_hostile_derived_from_is_refused_naming_the_field(derived_from: Any, on: str, message: str) -> None:
    found = problem(derived_doc(derived_from, on=on))
    assert "invalid result" in found and message in found, found
    assert found.count("\n") == 0 and len(found) < 400  # one line, the hostile name shortened


def test_rounds_drop_a_derived_metric_with_its_partial_source() -> None:
    whole = derived_doc("epoch")
    partial = derived_doc("epoch")
    partial["metrics"] = [m for m in partial["metrics"] if m["name"] != "epoch"]
    del partial["metrics"][-1]["derived_from"]  # as a job without a steady epoch writes it
    pooled = pool([whole, partial], "r")
    assert [m["name"] for m in pooled["metrics"]] == ["accuracy"]
    assert any("dropped: epoch, throughput" in n for n in pooled["notes"])
    assert problem(pooled) == ""


# -- the host: a derived metric is excluded whenever its time metric is --------------------------


def _contended(m: dict[str, Any], indices: list[int]) -> dict[str, Any]:
    n = len(m["samples"])
    m["contention"] = {
        "cpu_s": [0.01] * n, "involuntary_switches": [0] * n, "others_cores": [1.0] * n, "steal_cores": [0.0] * n,
        "runnable": [3] * n, "cores": 2, "window_s": 0.2, "contended": indices,
    }  # fmt: skip
    m["marks"] = {"contended": indices} if indices else {}
    return m


def training_run(tmp_path: Path, plant: str) -> Path:
    """Two frameworks' epochs, throughput and a speed-up from both loops; `plant` taints jax's epoch."""
    docs = []
    for fw in ("numpy", "jax"):
        epoch = _contended(metric("epoch", [0.5 + 0.01 * i for i in range(6)]), [])
        other = _contended(metric("step", [0.1 + 0.001 * i for i in range(6)]), [])
        if fw == "jax" and plant == "contended":
            epoch = _contended(epoch, list(range(6)))
        elif fw == "jax" and plant == "recompiled":
            epoch["marks"] = {"compiled": [2]}
        elif fw == "jax" and plant == "escaped":
            epoch["sync"] = {"state": "escaped", "excess_median_s": 0.01, "sample_median_s": 0.5}
        rate = {**metric("throughput", [16 / s for s in epoch["samples"]]), "kind": "value", "unit": "samples/s",
                "better": "higher", "derived_from": "epoch"}  # fmt: skip
        ratio = {**metric("speed-up", [5.0]), "kind": "value", "unit": "x", "better": "higher",
                 "derived_from": ["step", "epoch"]}  # fmt: skip
        plain = {**metric("accuracy", [90.0]), "kind": "value", "unit": "%", "better": "higher"}
        docs.append(result(fw, [epoch, other, rate, ratio, plain]))
    return write_run(tmp_path / plant, docs)


@pytest.mark.parametrize(
    ("plant", "reason", "word", "code"),
    [
        # One metric of four mostly disturbed leaves the ratios; the run stands (6 of 24 samples).
        ("contended", "contended (6/6 samples)", "CONTENDED", 0),
        ("recompiled", "compiled in the steady state (1/6 samples)", "RECOMPILED", FAILED),
        ("escaped", "sync escaped", "ESCAPED", FAILED),
    ],
)
def test_a_derived_value_is_excluded_with_its_time_metric_s_reason(
    tmp_path: Path, plant: str, reason: str, word: str, code: int
) -> None:
    judged = assess(load_run(training_run(tmp_path, plant)))
    for name in ("epoch", "throughput", "speed-up"):  # the speed-up is made of step and epoch: one is enough
        assert judged.excluded("jax", name) == reason, name
        assert judged.flag_word("jax", name) == word, name
        assert judged.ratio("jax", name) is None
    assert judged.excluded("jax", "step") is None and judged.excluded("jax", "accuracy") is None
    assert not any(judged.excluded("numpy", name) for name in ("epoch", "throughput", "speed-up", "accuracy"))
    assert run_exit_code(judged) == code
    if plant == "contended":
        assert ("jax", "epoch") in judged.disturbed and judged.crowded is None
    row = next(line for line in render(judged).splitlines() if line.startswith("throughput"))
    assert row.count(word) == 1, row  # jax's cell carries the flag word, numpy's not
    assert judged.excluded("jax", "throughput") == reason  # assessed once: the propagation is not repeated


def test_a_quiet_run_excludes_no_derived_value(tmp_path: Path) -> None:
    judged = assess(load_run(training_run(tmp_path, "none")))
    assert not judged.exclusions and run_exit_code(judged) == 0
    ratio = judged.ratio("jax", "throughput")
    assert ratio is not None and ratio.value == pytest.approx(1.0)


def test_a_derived_value_loses_the_rounds_its_time_metric_lost_and_is_disturbed_with_it(tmp_path: Path) -> None:
    """Rounds: throughput has no readings of its own; the round its epoch's samples were disturbed in is
    left out of its test and its noise floor too (one process for both), and a mostly disturbed epoch
    makes the throughput row 'disturbed' (exit 3 at the gate), not merely excluded."""
    from harness.judge.assessment import kept_rounds

    epoch = _contended(metric("epoch", [0.5] * 6), [0, 1])  # round 0 (samples 0-1) mostly disturbed
    epoch.update(round_medians=[0.9, 0.5, 0.5], round_sizes=[2, 2, 2])
    rate = {**metric("throughput", [32.0] * 6), "kind": "value", "unit": "samples/s", "better": "higher",
            "derived_from": "epoch", "round_medians": [18.0, 32.0, 32.0], "round_sizes": [2, 2, 2]}  # fmt: skip
    doc = result("jax", [epoch, rate])
    assert kept_rounds(doc, epoch) == ([0.5, 0.5], 1) and kept_rounds(doc, rate) == ([32.0, 32.0], 1)
    judged = assess(load_run(training_run(tmp_path, "contended")))
    assert {("jax", "epoch"), ("jax", "throughput"), ("jax", "speed-up")} <= judged.disturbed


# -- real runs: a CPU hog beside training, and a retrace planted in the steady epochs ------------

# One busy loop pinned to each CPU this process may use: whichever CPU `--threads 1` pins the job to is
# shared (unpinned hogs may all be balanced onto the CPUs the pinned job does not use).
HOG = "import os\nos.sched_setaffinity(0, [{cpu}])\nwhile True:\n    pass\n"

BESIDE_A_HOG = {
    # GPT's smoke model, 3 intervals: 2 steady samples of `train step` (interval seconds / steps). Twelve
    # steps make each interval (about 0.2 s beside the hog) span its own contention window: with the smoke's
    # 3 (50 ms) a sample's window leaned on its neighbours', and a CI rehearsal once marked neither sample.
    "gpt": ("train step", "tokens/s", ("--smoke", "--param", "intervals=3", "--param", "steps=12")),
    "mnist": ("epoch", "throughput", ("--param", "dataset=synthetic", "--param", "train_samples=64",
                                      "--param", "test_samples=16", "--param", "batch_size=32",
                                      "--param", "epochs=3")),
}  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("suite", sorted(BESIDE_A_HOG))
def test_training_beside_a_cpu_hog_is_marked_contended_and_the_run_exits_disturbed(suite: str, results: Path) -> None:
    """Real processes: a busy loop on every usable core while PyTorch trains (about 5-10 s)."""
    if not os.path.exists("/proc/stat") or not hasattr(os, "sched_getaffinity"):
        pytest.fail("this test needs Linux's /proc/stat and affinity (the machines the harness runs jobs on have them)")
    timed, derived, params = BESIDE_A_HOG[suite]
    hogs = [subprocess.Popen([sys.executable, "-c", HOG.format(cpu=c)]) for c in sorted(os.sched_getaffinity(0))]
    try:
        time.sleep(0.3)  # the hogs are running
        proc = harness("run", "--suite", suite, "--frameworks", "pytorch", "--backend", "local", "--threads", "1",
                       *params, "--results-dir", str(results), timeout=300)  # fmt: skip
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    doc = read(run_folder(proc.stdout) / "pytorch.json")
    assert doc["status"] == "ok", proc.stdout + proc.stderr
    steps = next(m for m in doc["metrics"] if m["name"] == timed)
    seen = steps["contention"]
    assert proc.returncode == DISTURBED, f"{proc.stdout}{proc.stderr}\ncontention of {timed}: {seen}"
    assert len(seen["cpu_s"]) == len(steps["samples"]) == 2 and seen["contended"] == [0, 1], seen
    assert steps["marks"]["contended"] == [0, 1] and steps["steady_compilations"] == 0
    assert next(m for m in doc["metrics"] if m["name"] == derived)["derived_from"] == timed
    for name in (timed, derived):  # the steady row comes first, before its first call and rates
        row = next(line for line in proc.stdout.splitlines() if line.startswith(name))
        assert "CONTENDED" in row, proc.stdout
    assert "RUN FLAGGED: 2 of 2 samples were contended" in proc.stdout


def test_a_retrace_in_the_steady_epochs_is_recompiled_and_the_run_fails(results: Path) -> None:
    """The mistakes suite's product timed in epochs through runtime/training.py; jax's epochs each compile."""
    proc = harness("run", "--suite", "mistakes", "--frameworks", "numpy,jax", "--backend", "local", "--smoke",
                   "--param", "mistake=retrace_epochs", "--param", "culprit=jax", "--results-dir", str(results))  # fmt: skip
    assert proc.returncode == FAILED, proc.stdout + proc.stderr
    run = run_folder(proc.stdout)
    judged = assess(load_run(run))
    assert judged.recompiled == {("jax", "epoch"): (3, 3)}  # the three steady epochs, numpy's none
    assert judged.excluded("jax", "throughput") == "compiled in the steady state (3/3 samples)"
    assert judged.flag_word("numpy", "throughput") != "RECOMPILED"  # no blame on the honest loop
    assert not judged.gate_failed  # the product is right: only the compile guard catches it
    jax = read(run / "jax.json")
    epoch = next(m for m in jax["metrics"] if m["name"] == "epoch")
    assert epoch["marks"]["compiled"] == [0, 1, 2] and epoch["steady_compilations"] == 3
    assert "RECOMPILED" in proc.stdout and "jax epoch: 3 of 3 samples compiled" in proc.stdout
