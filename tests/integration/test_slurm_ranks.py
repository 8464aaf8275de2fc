"""Data-parallel jobs on this machine's Slurm cluster (.ci/slurm.sh): one allocation of N tasks started
by srun, through `harness run --backend slurm` and through an exported script submitted by hand.

STAND-IN: the first tests run every rank's command as tests/rank_standin.py instead of `python -m
suites run` (same arguments, same venv, same folder), so they check the launcher's part whatever the
job side does: Slurm's rank variables, the coordinator every rank is given, the ranks meeting there
over TCP, a planted fault forwarded, each rank's logs kept, a failed rank named. The exported-script
tests do the same inside the export (the stand-in copied into its code/, the script's command line
pointed at it). The `slow` tests run the real job (gpt and mnist, pytorch, devices=2: no stand-in) and
need each suite's data-parallel loop.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from harness.backends.base import Limits
from harness.backends.slurm import export as slurm_export
from harness.backends.slurm import script
from harness.backends.slurm.backend import SlurmBackend
from harness.backends.slurm.settings import SlurmSettings, from_environment
from harness.core.schema import load_result
from harness.execute.runner import execute
from harness.store.plan import Plan, PlanRequest, make_plan
from tests.conftest import REPO, finished, harness, read, run_folder
from tests.integration.test_slurm import cluster, jobs_of, shared_envs, submit_and_wait  # noqa: F401  (fixtures)

pytestmark = pytest.mark.integration

STANDIN = REPO / "tests" / "rank_standin.py"
RANK_LINE = re.compile(r"rank (\d+) of (\d+) local (\d+) source (\w+) coordinator (\S+) host (\S+)")


def two_rank_plan() -> Plan:
    """The fault suite's numpy job (numpy venv: the one the slurm tests already build) planned as a
    data-parallel job of 2 ranks; the stand-in runs in place of the job."""
    plan = make_plan(
        PlanRequest(suite="fault", frameworks="numpy", params=("mode=ok",), timeout_s=180), backend="slurm"
    )
    job = plan.jobs[0]
    return replace(plan, jobs=(replace(job, params={**job.params, "devices": 2}),))


@pytest.fixture
def standin(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every rank runs tests/rank_standin.py (importable: the job's PYTHONPATH is this checkout)."""
    monkeypatch.setattr(
        script, "job_command", lambda spec, python="python": [python, "-m", "tests.rank_standin", "run", "--job", spec]
    )


def accounts(notes: list[str]) -> dict[int, re.Match[str]]:
    found = {int(m.group(1)): m for m in map(RANK_LINE.search, notes) if m}
    assert len(found) == len(notes), notes
    return found


def slurm_host() -> str:
    return subprocess.run(["hostname", "-s"], capture_output=True, text=True, check=True).stdout.strip()


def run_two_ranks(results: Path) -> Path:
    backend = SlurmBackend(from_environment(), echo=False)
    return execute(two_rank_plan(), backend, results)


def test_two_ranks_meet_in_one_allocation_and_each_keeps_its_logs(standin: None, results: Path) -> None:
    run = run_two_ranks(results)
    doc = load_result(run / "numpy.json")
    assert doc["status"] == "ok", (doc["reason"], doc["stderr_tail"])
    slurm = doc["environment"]["launch"]["slurm"]
    assert (slurm["state"], slurm["ranks"]) == ("COMPLETED", 2)
    # Both ranks reached rank 0 over TCP, each knowing itself from Slurm's own variables.
    seen = accounts(doc["notes"])
    port = 20000 + int(slurm["job_id"]) % 20000
    assert sorted(seen) == [0, 1]
    for rank, match in seen.items():
        assert match.group(2, 3, 4) == ("2", str(rank), "slurm")
        assert match.group(5) == f"{slurm_host()}:{port}"
    # Rank 0's output is the job's usual log; rank 1's is beside it; the script says how it ran them.
    logs = run / "logs"
    assert "stand-in rank 0 of 2" in (logs / "numpy.stdout.log").read_text()
    assert "stand-in rank 1 of 2" in (logs / "numpy.rank1.stdout.log").read_text()
    assert "rank 0 of 2" not in (logs / "numpy.rank1.stdout.log").read_text()
    assert (logs / "numpy.rank1.stderr.log").is_file()
    sbatch = (logs / "numpy.sbatch.sh").read_text()
    assert "#SBATCH --ntasks=2" in sbatch and "srun --export=ALL --kill-on-bad-exit=1 --wait=120 " in sbatch
    assert not (run / ".jobs").exists() and not jobs_of(run.name)


def test_a_failing_rank_fails_the_job_and_is_named(
    standin: None, results: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HARNESS_RANK_FAULT", "crash:1")  # forwarded into the script, to every rank
    run = run_two_ranks(results)
    doc = load_result(run / "numpy.json")
    assert doc["status"] == "failed"
    assert (doc["reason"] or "").startswith("rank 1 of 2 exited with code 3"), doc["reason"]
    assert "in the run's logs/" in (doc["reason"] or "")
    tail = doc["stderr_tail"] or ""
    assert "RuntimeError: planted crash of rank 1" in tail  # the failed rank's own last words
    assert "task 1: Exited with exit code 3" in tail  # and srun's
    assert "planted crash" in (run / "logs" / "numpy.rank1.stdout.log").read_text()
    assert "export HARNESS_RANK_FAULT=crash:1" in (run / "logs" / "numpy.sbatch.sh").read_text()
    assert not jobs_of(run.name)


def exported(tmp_path: Path, fault: str | None, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`harness export slurm` of the 2-rank job (--nodes 1, the export's default), its command then
    pointed at the stand-in, copied into the export's code/ (the cluster sees only that folder).

    Collecting reads the plan back; the fault suite has no `devices` parameter, so plan.json is read
    back as the plan exported (the stand-in's other half; a suite with the parameter needs neither)."""
    if fault is not None:
        monkeypatch.setenv("HARNESS_RANK_FAULT", fault)
    out = tmp_path / "export"
    settings = SlurmSettings(envs=os.environ["HARNESS_SLURM_ENVS"])
    plan = two_rank_plan()
    slurm_export.export(plan, out, settings, Limits(), nodes=1)
    monkeypatch.setattr(slurm_export, "plan_from_record", lambda record, where: plan)
    shutil.copyfile(STANDIN, out / "code" / "rank_standin.py")
    job_script = out / "job-numpy.sh"
    text = job_script.read_text()
    assert text.count("-m suites run --job job.json") == 1
    job_script.write_text(text.replace("-m suites run --job job.json", "-m rank_standin run --job job.json"))
    return out


def submit_and_collect(out: Path, results: Path) -> Path:
    submit_and_wait(out)
    return slurm_export.collect(out, results)  # `harness collect`'s slurm path, in this process


def test_an_exported_two_rank_script_runs_as_submitted(
    tmp_path: Path, results: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = exported(tmp_path, None, monkeypatch)
    text = (out / "job-numpy.sh").read_text()
    assert "#SBATCH --nodes=1" in text and "#SBATCH --ntasks-per-node=2" in text
    run = submit_and_collect(out, results)
    doc = load_result(run / "numpy.json")
    assert doc["status"] == "ok", (doc["reason"], doc["stderr_tail"])
    assert sorted(accounts(doc["notes"])) == [0, 1]
    assert {m.group(4) for m in accounts(doc["notes"]).values()} == {"slurm"}
    # The export's per-rank logs came back as the slurm backend keeps them.
    assert "stand-in rank 1 of 2" in (out / "logs" / "numpy.rank1.stdout.log").read_text()
    assert "stand-in rank 1 of 2" in (run / "logs" / "numpy.rank1.stdout.log").read_text()
    assert "stand-in rank 0 of 2" in (run / "logs" / "numpy.stdout.log").read_text()


def test_an_exported_script_whose_rank_fails_is_collected_as_failed_naming_it(
    tmp_path: Path, results: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = exported(tmp_path, "crash:0", monkeypatch)
    run = submit_and_collect(out, results)
    doc = load_result(run / "numpy.json")
    assert doc["status"] == "failed"
    assert (doc["reason"] or "").startswith("rank 0 of 2 exited with code 3"), doc["reason"]
    assert "planted crash of rank 0" in (doc["stderr_tail"] or "")


def real_run(results: Path, monkeypatch: pytest.MonkeyPatch, suite: str, *args: str) -> tuple[Path, Any]:
    """`harness run --backend slurm` of a real data-parallel job (no stand-in): the suite's DP loop on 2
    ranks, in a pytorch venv built from its lock (the CPU torch wheel from the test wheelhouse)."""
    wheels = Path.home() / ".cache/fw-harness/wheelhouse-cpu"
    if wheels.is_dir() and "HARNESS_FIND_LINKS" not in os.environ:
        monkeypatch.setenv("HARNESS_FIND_LINKS", str(wheels))
    proc = harness("run", "--suite", suite, "--frameworks", "pytorch", "--param", "devices=2", *args, "--smoke",
                   "--backend", "slurm", "--results-dir", str(results), "-q", timeout=1800)  # fmt: skip
    return run_folder(proc.stdout + "\n" + proc.stderr), proc


@pytest.mark.slow
@pytest.mark.parametrize(("suite", "args"), [("gpt", ()), ("mnist", ("--param", "dataset=synthetic"))])
def test_a_real_data_parallel_job_on_two_ranks(
    results: Path, monkeypatch: pytest.MonkeyPatch, suite: str, args: tuple[str, ...]
) -> None:
    run, proc = real_run(results, monkeypatch, suite, *args)
    assert finished(proc), proc.stdout[-3000:] + proc.stderr[-3000:]
    doc = load_result(run / "pytorch.json")
    assert doc["status"] == "ok", doc["reason"]
    assert doc["environment"]["launch"]["slurm"]["ranks"] == 2
    parallel = doc["parallel"]
    assert parallel["devices"] == 2 and [r["rank"] for r in parallel["ranks"]] == [0, 1]
    assert "rank 1" in (run / "logs" / "pytorch.rank1.stdout.log").read_text()
    assert read(run / "summary.json")["backend"] == "slurm" and not jobs_of(run.name)


@pytest.mark.slow
def test_a_real_jobs_crashing_rank_is_named_though_its_peer_is_heard_of_first(
    results: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """gpt's DDP loop with rank 1 planted to crash: rank 0 fails at once on the broken connection and
    srun may report it first; the rank named is the one that ended first, rank 1."""
    monkeypatch.setenv("HARNESS_RANK_FAULT", "crash:1")
    run, proc = real_run(results, monkeypatch, "gpt")
    assert proc.returncode == 1, proc.stderr[-3000:]
    doc = load_result(run / "pytorch.json")
    assert doc["status"] == "failed"
    assert (doc["reason"] or "").startswith("rank 1 of 2 exited with code 3"), doc["reason"]
    assert "planted fault" in (doc["stderr_tail"] or "")
    assert not jobs_of(run.name)
