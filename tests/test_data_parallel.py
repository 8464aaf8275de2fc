"""Data-parallel jobs end to end on the local backend: N real processes per job, gloo collectives, both
frameworks (issue 59). What a user runs: `harness run --suite gpt --frameworks flax,pytorch --param devices=2`."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import finished, harness, run_folder

pytestmark = pytest.mark.slow

SMALL = ("--smoke", "--backend", "local", "-q", "--timeout", "300")


def _leftovers(folder: Path) -> list[str]:
    """Processes still running a job of this results folder."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(folder) in cmdline and "suites" in cmdline:
            found.append(cmdline)
    return found


def _result(folder: Path, framework: str) -> dict:  # type: ignore[type-arg]
    return json.loads((folder / f"{framework}.json").read_text())


def test_gpt_on_two_processes_agrees_with_one_and_reports_scaling(tmp_path: Path) -> None:
    proc = harness("run", "--suite", "gpt", "--frameworks", "flax,pytorch", "--param", "devices=2", *SMALL,
                   "--results-dir", str(tmp_path), "--format", "table")  # fmt: skip
    assert finished(proc), proc.stdout[-3000:] + proc.stderr[-3000:]
    folder = run_folder(proc.stdout)
    for framework in ("flax", "pytorch"):
        result = _result(folder, framework)
        assert result["status"] == "ok", result.get("reason")
        block = result["parallel"]
        assert block["devices"] == 2 and block["collectives"] == "gloo" and len(block["ranks"]) == 2
        assert block["global_batch"] == 4 and block["per_device_batch"] == 2 and block["unit"] == "tokens"
        assert block["single_step_s"] > 0 and 0 < block["efficiency"] < 2
        assert block["allreduce"]["busbw_Bps"] > 0 and block["allreduce"]["bytes"] % 4 == 0
        # the agreement gate's inputs: the 1-way run's checks at the same global batch, close to the N-way's
        single = {c["name"]: c["value"] for c in block["single"]["checks"]}
        mine = {c["name"]: c["value"] for c in result["checks"]}
        assert set(single) == set(mine) == {"dp_first_step_loss", "dp_step_weights", "dp_loss_curve"}
        assert single["dp_loss_curve"] == pytest.approx(mine["dp_loss_curve"], rel=1e-4)
        assert (folder / "logs" / f"{framework}.rank1.stderr.log").is_file()
    # both frameworks trained the same model on the same batches: the first loss agrees across them
    flax, torch = (_result(folder, fw) for fw in ("flax", "pytorch"))
    loss = {fw: next(c["value"] for c in r["checks"] if c["name"] == "dp_first_step_loss") for fw, r in
            (("flax", flax), ("pytorch", torch))}  # fmt: skip
    assert loss["flax"] == pytest.approx(loss["pytorch"], rel=1e-5)
    for words in ("Data-parallel", "step (1-way)", "efficiency", "bus GB/s"):
        assert words in proc.stdout
    assert not _leftovers(tmp_path)


def test_a_planted_straggler_is_named_in_the_per_rank_figures(tmp_path: Path) -> None:
    proc = harness("run", "--suite", "mnist", "--frameworks", "pytorch", "--param", "devices=2", *SMALL,
                   "--results-dir", str(tmp_path), env={"HARNESS_RANK_FAULT": "slow:1:60"})  # fmt: skip
    folder = run_folder(proc.stdout)
    result = _result(folder, "pytorch")
    assert result["status"] == "ok", result.get("reason")
    block = result["parallel"]
    assert block["straggler"] is not None and block["straggler"]["rank"] == 1
    assert block["ranks"][1]["compute_s"] > 1.3 * block["ranks"][0]["compute_s"]
    assert "STRAGGLER" in proc.stdout
    assert result["environment"]["variables"]["HARNESS_RANK_FAULT"] == "slow:1:60"  # a planted run says so


def test_a_crashed_rank_fails_the_job_cleanly_and_names_the_rank(tmp_path: Path) -> None:
    proc = harness("run", "--suite", "mnist", "--frameworks", "flax,pytorch", "--param", "devices=2", *SMALL,
                   "--results-dir", str(tmp_path), env={"HARNESS_RANK_FAULT": "crash:1"})  # fmt: skip
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    folder = run_folder(proc.stdout)
    for framework in ("flax", "pytorch"):  # a failing job never loses the other's result: both are written
        result = _result(folder, framework)
        assert result["status"] == "failed"
        assert result["reason"].startswith("rank 1 of 2 exited with code 3"), result["reason"]
        assert "planted fault: crash" in (folder / "logs" / f"{framework}.rank1.stderr.log").read_text()
    assert "Traceback" not in proc.stderr
    assert not _leftovers(tmp_path)


def test_an_uneven_strong_split_is_refused_before_anything_runs(tmp_path: Path) -> None:
    proc = harness("run", "--suite", "gpt", "--param", "devices=3", *SMALL, "--results-dir", str(tmp_path))
    assert proc.returncode == 2
    assert "does not split over devices=3" in proc.stderr and "Traceback" not in proc.stderr
    assert not list(tmp_path.iterdir())
