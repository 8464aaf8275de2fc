"""Ceilings measured on this machine: `harness calibrate`, the automatic once-per-machine run, the cache."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.core import cache_home
from harness.judge.assessment import assess
from harness.report.table import render
from harness.store.calibration import parse, read_json_file
from harness.store.run_folder import load_run
from suites.contract.registry import all_suites
from suites.contract.spec import SMOKE_REPEAT
from tests.conftest import Calibrated, finished, harness, read, run_folder
from tests.factories import metric, result, write_run


def cache_files(home: Path | None = None) -> list[Path]:
    """The calibration cache of a cache home: this test's own by default (tests/conftest.py sets it)."""
    return sorted(((home or cache_home.home()) / cache_home.CALIBRATION).glob("*.json"))


@pytest.mark.slow
def test_calibrate_measures_every_stack_and_caches_per_machine(calibrated: Calibrated) -> None:
    proc = calibrated.proc  # the session's one `harness calibrate --backend local` (tests/conftest.py)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "matmul float64/fp64" in proc.stdout and "stream bandwidth" in proc.stdout
    (cache,) = cache_files(calibrated.home)
    ceilings = parse(read(cache))
    assert ceilings.frameworks == ("jax", "numpy", "pytorch")
    assert ceilings.bandwidth and ceilings.bandwidth > 1e8  # more than 0.1 GB/s on any real machine
    assert ceilings.flops_by_key["float32/fp32"] > ceilings.flops_by_key["float64/fp64"] * 0.5
    (run,) = (calibrated.home / cache_home.CALIBRATION / cache_home.RUNS).iterdir()  # at the smoke size it asked
    for fw in ceilings.frameworks:
        doc = read(run / f"{fw}.json")
        assert doc["params"] == all_suites()["calibrate"].smoke and doc["settings"]["repeat"] == SMOKE_REPEAT, doc
    # recorded as smoke figures, and said so: a run judged against them warns (tests/test_selftest.py)
    assert {entry["size"] for entry in read(cache)["frameworks"].values()} == {"smoke"}
    assert proc.stdout.count(", smoke size)") == 3


@pytest.mark.slow
def test_run_calibrates_once_and_shows_percent_of_achievable(results: Path) -> None:
    first = harness("run", "--suite", "xla", "--frameworks", "numpy", "--smoke", "--calibrate", "auto",
                    "--results-dir", str(results))  # fmt: skip
    assert finished(first), first.stdout + first.stderr
    assert "calibrating this machine" in first.stderr
    run = run_folder(first.stdout)
    judged = assess(load_run(run))
    shares = [f for f in judged.findings if f.achievable_fraction is not None]
    assert shares, judged.findings  # every rate got its share of the calibrated ceiling
    # The table shows it, unless the busy test machine disturbed the metric (then it shows why not).
    shown = [f for f in shares if judged.excluded(f.framework, f.metric) is None]
    assert ("of achievable" in first.stdout) == bool(shown), first.stdout
    assert parse(read(run / "calibration.json")).frameworks == ("numpy",)
    second = harness("run", "--suite", "xla", "--frameworks", "numpy", "--smoke", "--calibrate", "auto",
                     "--results-dir", str(results))  # fmt: skip
    assert finished(second) and "calibrating" not in second.stderr  # cached for this fingerprint
    assert len(cache_files()) == 1
    assert not (results / ".calibration").exists()  # machine-wide state stays out of the results folder


def test_a_tampered_calibration_is_ignored_and_named(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path / "run", [result("numpy", [metric("matmul", [0.1] * 3, flops=2e9)])])
    doc = {
        "format": "harness-calibration",
        "version": 2,
        "fingerprint": "abc",
        "frameworks": {"numpy": {"flops": {"float64/fp64": -5}}},
    }
    (run_dir / "calibration.json").write_text(json.dumps(doc))
    run = load_run(run_dir)
    text = render(assess(run))
    assert "of achievable" not in text and "calibration.json: ignored" in text
    good = {**doc, "frameworks": {"numpy": {"flops": {"float64/fp64": 5e9}, "size": "smoke"}}}
    assert parse(good).flops_by_key == {"float64/fp64": 5e9}
    with pytest.raises(ValueError, match="size: expected one of full, smoke"):
        parse({**doc, "frameworks": {"numpy": {"flops": {"float64/fp64": 5e9}, "size": "\x1b[2J"}}})
    (run_dir / "calibration.json").unlink()
    (run_dir / "calibration.json").symlink_to("/dev/zero")
    with pytest.raises(ValueError, match="cannot open|regular"):
        read_json_file(run_dir / "calibration.json")


def test_achievable_share_uses_the_best_framework(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path / "run", [result("numpy", [metric("matmul", [0.1] * 3, flops=2e9)])])
    doc = {
        "format": "harness-calibration", "version": 2, "fingerprint": "abc",
        "frameworks": {"numpy": {"flops": {"float64/fp64": 25e9}}, "jax": {"flops": {"float64/fp64": 40e9}}},
    }  # fmt: skip
    doc["frameworks"]["numpy"]["bandwidth"] = 1e10
    (run_dir / "calibration.json").write_text(json.dumps(doc))
    for m in (r := read(run_dir / "numpy.json"))["metrics"]:
        m["dtype"] = "float64"
    (run_dir / "numpy.json").write_text(json.dumps(r))
    rate = next(line for line in render(assess(load_run(run_dir))).splitlines() if line.startswith("matmul GFLOP/s"))
    assert "50% of achievable" in rate  # 20 GFLOP/s against the best framework's 40


class _Ctx:
    """What samples_for reads of a job's Context: its repeat and its synchronisation."""

    repeat = 10

    @staticmethod
    def sync(out: object) -> object:
        return out


@pytest.mark.parametrize(("seconds", "samples"), [(0.0, 10), (0.15, 6), (0.5, 3)])
def test_a_slow_product_gets_fewer_samples_but_never_under_three(
    monkeypatch: pytest.MonkeyPatch, seconds: float, samples: int
) -> None:
    """PyTorch's bfloat16 matmul on a CPU without bf16 units takes seconds a product: ten of them
    each, three sizes, two arithmetics made most of `harness calibrate` here (80 s -> 50 s)."""
    import time

    from suites.calibrate import common

    monkeypatch.setattr(common, "SAMPLE_BUDGET_S", 1.0)
    calls = []

    def product() -> None:
        calls.append(1)
        time.sleep(seconds)

    assert common.samples_for(_Ctx(), product) == samples  # type: ignore[arg-type]
    assert len(calls) == 2  # the compile's call, then the timed one
