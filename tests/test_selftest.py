"""`harness selftest`: the decision per check on results built in memory (the GPU's failure
modes planted), and the whole command on this CPU (what the GPU machine runs with --device gpu)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.execute.selftest import Check, check_result
from harness.judge.assessment import assess
from harness.store.run_folder import Run
from tests.conftest import REPO, Calibrated, finished, interrupt_at, seed_calibration
from tests.factories import metric, result

PEAK = "peak memory above baseline"
NOT_OBSERVED = {"peak": "not observable", "why": "JAX cannot reset its allocator's peak"}
BLIND = {"observable": False, "why": "jax.monitoring has no compilation event in this release"}


def _training(fw: str, **changes: Any) -> dict[str, Any]:
    epoch = metric("epoch", [1.0, 1.0, 1.0])
    epoch["sync"] = {"state": "ok"}
    values = [
        dict(metric(PEAK, [12.0], first=None), kind="value", unit="MiB"),
        dict(metric("compilations (later epochs)", [0.0], first=None), kind="value", unit=""),
    ]
    doc = result(fw, [epoch, *values], checks=[])
    doc["suite"], doc["params"], doc["settings"]["precision"] = "mnist", {}, "fp32"
    doc["environment"]["precision"] = {"measured": {"matmul": {"class": "fp32"}, "conv": {"class": "fp32"}}}
    doc["training"] = {"data": "device", "compilations": {"observable": True, "how": "XLA compilations"}}
    for key, value in changes.items():
        value(doc) if callable(value) else doc.__setitem__(key, value)
    return doc


def _checks(doc: dict[str, Any]) -> list[Check]:
    run = Run(Path("."), {"baseline": doc["framework"], "suite": "mnist"}, {doc["framework"]: doc})
    return list(check_result("mnist", doc["framework"], doc, assess(run)))


def _verdicts(doc: dict[str, Any]) -> dict[str, bool | None]:
    return {c.name: c.passed for c in _checks(doc)}


def test_a_clean_training_result_passes_every_check() -> None:
    verdicts = _verdicts(_training("pytorch"))
    assert verdicts == {"finished": True, "sync": True, "precision": True, "plausible": None, "memory": True,
                        "steady": True}  # fmt: skip


@pytest.mark.parametrize(
    ("plant", "failing"),
    [
        (lambda d: d["metrics"][0].__setitem__("sync", {"state": "escaped"}), "sync"),
        (lambda d: d["metrics"][0].pop("sync"), "sync"),  # no evidence is no pass
        (lambda d: d["environment"]["precision"]["measured"]["conv"].__setitem__("class", "tf32"), "precision"),
        (lambda d: d["environment"].pop("precision"), "precision"),
        (lambda d: d.__setitem__("metrics", [m for m in d["metrics"] if m["name"] != PEAK]), "memory"),
        (lambda d: d["metrics"][2].__setitem__("samples", [2.0]), "steady"),  # retraced after epoch 1
        (lambda d: d.__setitem__("training", {"data": "host"}), "steady"),
        (lambda d: d["training"].update(memory=NOT_OBSERVED), "memory"),  # even with a row beside it
        (lambda d: d["training"].update(compilations=BLIND), "steady"),  # even with a 0 beside it
    ],
)
def test_each_planted_gpu_failure_fails_its_check(plant: Any, failing: str) -> None:
    doc = _training("pytorch")
    plant(doc)
    verdicts = _verdicts(doc)
    assert verdicts[failing] is False
    assert all(v is not False for name, v in verdicts.items() if name != failing)


def _details(doc: dict[str, Any]) -> dict[str, str]:
    return {c.name: c.detail for c in _checks(doc)}


def test_what_could_not_be_observed_fails_with_the_jobs_reason() -> None:
    doc = _training("flax")
    doc["metrics"] = [m for m in doc["metrics"] if m["name"] not in (PEAK, "compilations (later epochs)")]
    doc["training"].update(memory=NOT_OBSERVED, compilations=BLIND)
    details = _details(doc)
    assert details["memory"] == "peak not observable: JAX cannot reset its allocator's peak"
    assert details["steady"].startswith("compilations not observable: jax.monitoring has no compilation event")


def test_a_hostile_reason_is_one_short_inert_line() -> None:
    doc = _training("flax")
    hostile = {"peak": "not observable", "why": "\x1b[2J" * 500}
    doc["training"].update(memory=hostile, compilations={"observable": False})
    details = _details(doc)
    assert "\x1b" not in details["memory"] and len(details["memory"]) < 300
    assert details["steady"].startswith("compilations not observable: no reason given")


def test_a_failed_job_fails_and_a_skipped_one_is_not_applicable() -> None:
    failed = dict(_training("flax"), status="failed", reason="CUDA out of memory")
    assert _verdicts(failed) == {"finished": False}
    skipped = dict(_training("flax"), status="skipped", reason="no GPU")
    assert _verdicts(skipped) == {"finished": None}
    assert Check("x", "jax", "sync", False, "escaped: matmul").line().startswith("FAIL  x")


@pytest.mark.slow
def test_selftest_passes_on_this_cpu_one_line_per_check(
    tmp_path: Path, calibrated: Calibrated, own_cache_home: Path
) -> None:
    seed_calibration(calibrated, own_cache_home)  # the session's ceilings: measuring them again costs 80 s
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli", "selftest", "--device", "cpu", "--suites", "xla,mnist",
         "--results-dir", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, timeout=1200,
    )  # fmt: skip
    assert finished(proc), proc.stdout + proc.stderr
    assert "calibrating this machine" not in proc.stderr  # it judged "achievable" against the seeded ceilings
    assert "were measured at the smoke size" in proc.stderr  # the seeded ones are smoke figures, and it says so
    lines = [line for line in proc.stdout.splitlines() if line[:4] in ("PASS", "FAIL", "n/a ")]
    assert not [line for line in lines if line.startswith("FAIL")]
    names = {(line.split()[1], line.split()[2], line.split()[3]) for line in lines}
    assert {("xla", "jax", "sync"), ("xla", "pytorch", "achievable"), ("mnist", "flax", "memory"),
            ("mnist", "pytorch", "steady"), ("mnist", "flax", "precision")} <= names  # fmt: skip


def test_ctrl_c_stops_the_whole_selftest_not_one_suite(tmp_path: Path) -> None:
    # Ctrl-C during one suite's run used to end that run only; the selftest then went on to the next
    # suite (seen on a GPU session, whose time limit is a SIGINT). It must stop, exit 130, keep the run.
    code, out, err = interrupt_at("-> xla/", "selftest", "--suites", "xla,autograd", "--no-calibrate",
                                  "--results-dir", str(tmp_path))  # fmt: skip
    assert code == 130, out + err
    assert "-- autograd" not in out, out
    assert "Traceback" not in err
    assert [p.name for p in tmp_path.iterdir() if "-xla-" in p.name], "the interrupted run was not kept"
