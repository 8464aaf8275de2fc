"""Data-parallel jobs on Slurm without a cluster: every new line of the batch script (the allocation,
the coordinator, each task's environment, srun), what srun's report says about the ranks, and the
backend and `collect` keeping each rank's logs and naming a failed rank."""

from __future__ import annotations

import os
import re
import stat
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from harness.backends.base import Limits
from harness.backends.slurm import backend as slurm_backend
from harness.backends.slurm import control, tasks
from harness.backends.slurm import export as slurm_export
from harness.backends.slurm.script import Layout, Stack, batch_script
from harness.backends.slurm.settings import SlurmSettings
from harness.core.errors import HarnessError
from harness.core.schema import load_result
from harness.execute.runner import execute
from harness.store.images import variant_for
from harness.store.plan import Job, Plan, PlanRequest, make_plan
from tests.conftest import harness, read

RUN_ID = "20260101-000000-xla-abcd"


def plan_of(devices: int, **changes: object) -> Plan:
    plan = make_plan(
        PlanRequest(suite="xla", frameworks="numpy", params=("matrix_size=64",), repeat=3, timeout_s=5), backend="slurm"
    )
    job = plan.jobs[0]
    return replace(plan, jobs=(replace(job, params={**job.params, "devices": devices}, **changes),))  # type: ignore[arg-type]


def ranked(devices: int = 4, **changes: object) -> Job:
    return plan_of(devices, **changes).jobs[0]


def layout(data: str | None = None) -> Layout:
    return Layout(code="/repo", out="'/runs/r 1/.jobs/numpy-1'", lock="/repo/lock.txt", envs="/envs", data=data)


def script(job: Job, runtime: str = "venv", nodes: int = 1, fault: str | None = None, **settings: object) -> str:
    chosen = SlurmSettings(runtime=runtime, **settings)  # type: ignore[arg-type]
    stack = Stack.of("numpy", variant_for(job.device))
    return batch_script(job, RUN_ID, stack, layout(job.data_dir), chosen, Limits(), nodes=nodes, fault=fault)


def bash_parses(text: str) -> None:
    proc = subprocess.run(["bash", "-n"], input=text, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def sbatch_lines(text: str) -> list[str]:
    return [line.removeprefix("#SBATCH ") for line in text.splitlines() if line.startswith("#SBATCH ")]


def after(text: str, marker: str) -> list[str]:
    """The script's lines from the one starting with `marker` to the end."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(marker))
    return lines[start:]


RANK_PASSING = (
    '"SLURM_PROCID=$SLURM_PROCID" "SLURM_NTASKS=$SLURM_NTASKS" "SLURM_LOCALID=$SLURM_LOCALID" '
    '"HARNESS_WORLD_SIZE=$HARNESS_WORLD_SIZE" "HARNESS_COORDINATOR=$HARNESS_COORDINATOR" '
    '"HARNESS_LOCAL_WORLD_SIZE=$HARNESS_LOCAL_WORLD_SIZE"'
)
COORDINATOR_LINES = [
    "# The ranks meet at rank 0: task 0 runs on the first node of the allocation (srun's block distribution),",
    "# on a port of this job's own (two jobs sharing a node must not meet at one port).",
    'coordinator_host=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)',
    '[ -n "$coordinator_host" ] || { echo "harness: no host in SLURM_JOB_NODELIST=$SLURM_JOB_NODELIST" >&2; exit 1; }',
    'export HARNESS_COORDINATOR="$coordinator_host:$(( 20000 + SLURM_JOB_ID % 20000 ))"',
]


# -- the batch script ----------------------------------------------------------------------------


def test_a_data_parallel_venv_job_is_one_allocation_of_one_task_per_rank_started_by_srun() -> None:
    text = script(ranked(4))
    bash_parses(text)
    assert sbatch_lines(text) == [
        "--job-name=fw-harness-numpy",
        f"--comment=fw-harness:{RUN_ID}",
        "--nodes=1",
        "--ntasks=4",
        "--ntasks-per-node=4",
        "--exclusive",
        "--mem=0",
        "--time=2",
        "--export=PATH",
    ]
    assert "Data-parallel: 4 ranks, 4 on each of 1 node(s), one srun task each; rank 0 writes the result." in text
    # The stack environment is prepared once, in the batch script, before any rank starts.
    lines = after(text, "ensure_env ||")
    assert lines[1:] == [
        *COORDINATOR_LINES,
        "export HARNESS_WORLD_SIZE=4",
        "export HARNESS_LOCAL_WORLD_SIZE=4",
        "export code out env_dir",
        "rank_task() {",
        '  scratch=$(mktemp -d "${TMPDIR:-/tmp}/fw-harness.XXXXXX") || exit 1',
        "  trap 'rm -rf \"$scratch\"' EXIT",
        '  cd "$out" || exit 1',
        "  # Nothing of the submitter's environment reaches the job: only what it needs, as in a container.",
        '  env -i PATH="$PATH" HOME="$scratch" TMPDIR="$scratch" PYTHONPATH="$code" PYTHONUNBUFFERED=1 '
        f"{RANK_PASSING} "
        '${CUDA_VISIBLE_DEVICES+"CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES"} "$env_dir/bin/python" -m suites run --job job.json',
        "  code=$?",
        '  echo "harness: rank $SLURM_PROCID exited with code $code at $(date +%s.%N)" >&2',
        "  exit $code",
        "}",
        "export -f rank_task",
        'srun --export=ALL --kill-on-bad-exit=1 --wait=120 --output="${out//%/%%}/rank%t.stdout.log" '
        '--error="${out//%/%%}/rank%t.stderr.log" bash -c rank_task',
    ]
    assert "HARNESS_RANK_FAULT" not in text  # nothing planted: nothing forwarded


@pytest.mark.parametrize("devices", [0, 1])
def test_a_job_of_one_process_keeps_the_single_script(devices: int) -> None:
    text = script(ranked(devices))
    assert "--ntasks=1" in sbatch_lines(text) and "srun" not in text and "rank_task" not in text
    assert text.splitlines()[-1].endswith('"$env_dir/bin/python" -m suites run --job job.json')


def test_a_planted_fault_reaches_every_rank_and_a_malformed_one_is_refused() -> None:
    text = script(ranked(2), fault="slow:1:250")
    bash_parses(text)
    assert "export HARNESS_RANK_FAULT=slow:1:250  # a planted fault (testing aid), from the harness" in text
    assert f'{RANK_PASSING} "HARNESS_RANK_FAULT=$HARNESS_RANK_FAULT" ' in text
    # devices=1 is a world of one: the fault still reaches its one process.
    single = script(ranked(1), fault="crash:0")
    assert "export HARNESS_RANK_FAULT=crash:0" in single and '"HARNESS_RANK_FAULT=$HARNESS_RANK_FAULT"' in single
    assert "HARNESS_RANK_FAULT" not in script(ranked(0), fault="crash:0")  # no data-parallel loop: nothing to plant
    with pytest.raises(HarnessError, match="expected slow:RANK:MS, crash:RANK or hang:RANK"):
        script(ranked(2), fault="crash:one")
    quoted = script(ranked(2), fault="hang:1")
    assert "export HARNESS_RANK_FAULT=hang:1 " in quoted


def write_stub(folder: Path, name: str, body: str) -> None:
    path = folder / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def test_the_coordinator_is_the_first_host_of_the_node_list_on_a_port_from_the_job_id(tmp_path: Path) -> None:
    # The script's own lines, run by bash against an scontrol that expands a node list as Slurm's does.
    write_stub(tmp_path, "scontrol", 'test "$1 $2 $3" = "show hostnames n[07-08]" && printf "n07\\nn08\\n"\n')
    lines = [*after(script(ranked(4), fault="crash:3"), "# The ranks meet")][:9]
    probe = "\n".join([*lines, 'echo "$HARNESS_COORDINATOR $HARNESS_WORLD_SIZE $HARNESS_RANK_FAULT"'])
    for job_id, port in (("12345", 32345), ("45000", 25000), ("20000", 20000)):
        env = {"PATH": f"{tmp_path}:/usr/bin:/bin", "SLURM_JOB_ID": job_id, "SLURM_JOB_NODELIST": "n[07-08]"}
        proc = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, env=env)
        assert (proc.returncode, proc.stdout.strip()) == (0, f"n07:{port} 4 crash:3"), proc.stderr
    env = {"PATH": f"{tmp_path}:/usr/bin:/bin", "SLURM_JOB_ID": "1", "SLURM_JOB_NODELIST": "other"}
    proc = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, env=env)
    assert proc.returncode == 1 and "harness: no host in SLURM_JOB_NODELIST=other" in proc.stderr


def test_each_task_hands_only_its_rank_and_the_jobs_variables_to_the_job(tmp_path: Path) -> None:
    """rank_task as srun runs it (bash -c, the exported function, Slurm's per-task variables): the job
    gets a clean environment with Slurm's words for its rank, the world and the coordinator."""
    env_dir, out = tmp_path / "env", tmp_path / "out"
    (env_dir / "bin").mkdir(parents=True)
    out.mkdir()
    write_stub(env_dir / "bin", "python", 'echo "cwd=$(pwd) args=$*"; env | sort\n')
    text = script(ranked(2), fault="crash:1")
    function = after(text, "export code out env_dir")[:-1]  # up to `export -f rank_task`, without srun
    setup = [
        "set -u",
        f"code=/repo out={out} env_dir={env_dir}",
        "export HARNESS_COORDINATOR=n07:21234 HARNESS_WORLD_SIZE=2 HARNESS_LOCAL_WORLD_SIZE=2 HARNESS_RANK_FAULT=crash:1",
        *function,
        "SLURM_PROCID=1 SLURM_NTASKS=2 SLURM_LOCALID=0 SECRET=leak bash -c rank_task",
    ]
    proc = subprocess.run(
        ["bash", "-c", "\n".join(setup)], capture_output=True, text=True, env={"PATH": os.environ["PATH"]}
    )
    assert proc.returncode == 0, proc.stderr
    seen = dict(line.split("=", 1) for line in proc.stdout.splitlines()[1:])
    assert proc.stdout.splitlines()[0] == f"cwd={out} args=-m suites run --job job.json"
    assert {k: v for k, v in seen.items() if k.startswith(("SLURM_", "HARNESS_"))} == {
        "SLURM_PROCID": "1",
        "SLURM_NTASKS": "2",
        "SLURM_LOCALID": "0",
        "HARNESS_WORLD_SIZE": "2",
        "HARNESS_COORDINATOR": "n07:21234",
        "HARNESS_LOCAL_WORLD_SIZE": "2",
        "HARNESS_RANK_FAULT": "crash:1",
    }
    assert (
        "SECRET" not in seen
        and seen["PYTHONPATH"] == "/repo"
        and seen["HOME"].startswith(("/tmp", os.environ.get("TMPDIR", "/tmp")))
    )
    assert not Path(seen["HOME"]).exists()  # the task's scratch is gone with it
    # The task's last word: how and when its job process ended (the stub python exited 0).
    assert re.fullmatch(r"harness: rank 1 exited with code 0 at \d+\.\d{9}\n", proc.stderr), proc.stderr
    write_stub(env_dir / "bin", "python", "exit 7\n")
    proc = subprocess.run(
        ["bash", "-c", "\n".join(setup)], capture_output=True, text=True, env={"PATH": os.environ["PATH"]}
    )
    assert proc.returncode == 7 and tasks.ended_at(proc.stderr.encode(), 1) is not None
    assert tasks.ended_at(proc.stderr.encode(), 1)[0] == 7  # type: ignore[index]
    assert tasks.ended_at(proc.stderr.encode(), 0) is None  # another rank's line is not this rank's


def test_a_gpu_job_takes_one_gpu_per_task_and_every_task_sees_its_nodes_gpus() -> None:
    gpu = ranked(4, device="gpu")
    text = script(gpu)
    assert "--gpus-per-task=1" in sbatch_lines(text) and not any("gres" in line for line in sbatch_lines(text))
    assert text.splitlines()[-1].startswith("srun --export=ALL --kill-on-bad-exit=1 --wait=120 ")
    assert text.splitlines()[-1].endswith(" --gpu-bind=none bash -c rank_task")
    assert "--gpu-bind" not in script(ranked(4))
    assert "--gpus-per-task=1" in sbatch_lines(script(gpu, gpus="all"))
    with pytest.raises(HarnessError, match="takes one GPU per rank; drop --gpus"):
        script(gpu, gpus="2")


def test_nodes_spread_the_ranks_evenly_or_are_refused_in_one_line() -> None:
    lines = sbatch_lines(script(ranked(8, device="gpu"), nodes=2))
    assert lines[2:5] == ["--nodes=2", "--ntasks=8", "--ntasks-per-node=4"] and "--gpus-per-task=1" in lines
    assert "4 on each of 2 node(s)" in script(ranked(8), nodes=2)
    for job, nodes, message in (
        (ranked(4), 3, "--nodes 3 does not divide devices=4 evenly"),
        (ranked(2), 4, "--nodes 4 does not divide devices=2 evenly"),
        (ranked(0), 2, "runs one process: drop --nodes"),
        (ranked(4), 0, "--nodes 0: give a number of nodes"),
    ):
        with pytest.raises(HarnessError, match=re.escape(message)) as caught:
            script(job, nodes=nodes)
        assert "\n" not in str(caught.value)


def test_podman_ranks_share_the_hosts_network_under_names_of_their_own() -> None:
    text = script(ranked(2, device="gpu", data_dir="/data/sets"), "podman")
    bash_parses(text)
    function = after(text, "export code out data")
    assert function[1:4] == [
        "rank_task() {",
        '  userns=--userns=keep-id; [ "$(id -u)" = 0 ] && userns=--userns=host',
        "  # The host's network: the ranks meet over TCP at rank 0's port, from this node and the others.",
    ]
    command = function[4]
    for part in ("--name fw-harness-numpy-$SLURM_JOB_ID-$SLURM_PROCID ", " --network=host ", " --read-only ",
                 " --cap-drop=all ", '-v "$data:/data:ro"', " --device nvidia.com/gpu=all ",
                 '-e "SLURM_PROCID=$SLURM_PROCID" -e "SLURM_NTASKS=$SLURM_NTASKS" -e "SLURM_LOCALID=$SLURM_LOCALID" '
                 '-e "HARNESS_WORLD_SIZE=$HARNESS_WORLD_SIZE" -e "HARNESS_COORDINATOR=$HARNESS_COORDINATOR" '
                 '-e "HARNESS_LOCAL_WORLD_SIZE=$HARNESS_LOCAL_WORLD_SIZE"'):  # fmt: skip
        assert part in command, part
    assert "--network=none" not in text
    single = script(ranked(0), "podman")
    assert "--network=none" in single and "$SLURM_PROCID" not in single  # one process: no network at all


def test_apptainer_ranks_get_their_variables_and_the_gpu_list_unsplit() -> None:
    text = script(ranked(2, device="gpu"), "apptainer", images="/shared/sif")
    bash_parses(text)
    function = after(text, "export code out cli image")
    assert function[2] == (
        '  [ -z "${CUDA_VISIBLE_DEVICES+x}" ] || export APPTAINERENV_CUDA_VISIBLE_DEVICES="$CUDA_VISIBLE_DEVICES" '
        'SINGULARITYENV_CUDA_VISIBLE_DEVICES="$CUDA_VISIBLE_DEVICES"'
    )
    command = function[3]
    assert command.startswith('  "$cli" exec --containall --no-home --cleanenv ')
    assert (
        '--env "SLURM_PROCID=$SLURM_PROCID" --env "SLURM_NTASKS=$SLURM_NTASKS" --env "SLURM_LOCALID=$SLURM_LOCALID" '
        '--env "HARNESS_WORLD_SIZE=$HARNESS_WORLD_SIZE" --env "HARNESS_COORDINATOR=$HARNESS_COORDINATOR" '
        '--env "HARNESS_LOCAL_WORLD_SIZE=$HARNESS_LOCAL_WORLD_SIZE" --nv'
    ) in command
    assert function[-1].endswith("--gpu-bind=none bash -c rank_task")


# -- what srun said ------------------------------------------------------------------------------

# As this machine's srun (Slurm 22.05) wrote them on the batch script's stderr.
CRASHED = """srun: error: vm: task 1: Exited with exit code 3
srun: launch/slurm: _step_signal: Terminating StepId=55.0
srun: error: vm: task 0: Terminated
srun: Force Terminated StepId=55.0
"""
SEGFAULT = """srun: error: vm: task 0: Segmentation fault
srun: launch/slurm: _step_signal: Terminating StepId=58.0
slurmstepd-vm: error: *** STEP 58.0 ON vm CANCELLED AT 2026-11-29T18:38:41 ***
srun: error: vm: task 1: Terminated
"""
OUTLIVED = """srun: First task exited 10s ago
srun: StepId=59.0 task 1: running
srun: StepId=59.0 task 0: exited
srun: launch/slurm: _step_signal: Terminating StepId=59.0
srun: error: vm: task 1: Killed
"""
BOTH = "srun: error: vm: tasks 0-1: Exited with exit code 127\n"


def no_logs(rank: int) -> bytes:
    return b""


@pytest.mark.parametrize(
    ("stderr", "reason", "rank"),
    [
        (CRASHED, "rank 1 of 2 exited with code 3; rank 0 was stopped (each rank's log is in the run's logs/)", 1),
        (SEGFAULT, "rank 0 of 2 was killed by signal 11; rank 1 was stopped (each rank's log is in the run's logs/)", 0),
        (BOTH, "rank 0 of 2 exited with code 127 (each rank's log is in the run's logs/)", 0),
        (OUTLIVED, "ranks 1 of 2 were still running 120 s after the first rank ended, and srun stopped them "
                   "(each rank's log is in the run's logs/)", None),
        ("srun: error: n1: task 1: Bus error (core dumped)\n", "rank 1 of 2 was killed by signal 7 (each rank's log "
         "is in the run's logs/)", 1),
        ("srun: error: n1: task 1: Something new\x1b[2J\n", "rank 1 of 2 ended: Something new\\x1b[2J (each rank's "
         "log is in the run's logs/)", 1),
    ],
)  # fmt: skip
def test_srun_says_which_rank_failed(stderr: str, reason: str, rank: int | None) -> None:
    assert tasks.failure(stderr, 2, 143, no_logs) == (reason, rank)


# Seen here with gpt's DDP loop and HARNESS_RANK_FAULT=crash:1: rank 0 saw its peer go (gloo's
# "Connection reset by peer") and srun heard of its exit first.
PEER_FIRST = """srun: error: vm: task 0: Exited with exit code 1
srun: launch/slurm: _step_signal: Terminating StepId=78.0
srun: error: vm: task 1: Exited with exit code 3
"""


def test_the_rank_that_ended_first_is_named_whatever_order_srun_heard_them_in() -> None:
    logs = {
        0: b"RuntimeError: Connection reset by peer\nharness: rank 0 exited with code 1 at 1764441135.412000001\n",
        1: b"planted crash\nharness: rank 1 exited with code 3 at 1764441135.398000000\n",
    }
    assert tasks.failure(PEER_FIRST, 2, 1, lambda r: logs[r]) == (
        "rank 1 of 2 exited with code 3 (each rank's log is in the run's logs/)",
        1,
    )
    # Without the ranks' own lines, srun's order is all there is.
    assert tasks.failure(PEER_FIRST, 2, 1, no_logs) == (
        "rank 0 of 2 exited with code 1 (each rank's log is in the run's logs/)",
        0,
    )
    # A rank's line naming another rank, or a rank srun says ended well, changes nothing.
    forged = {0: logs[0], 1: b"harness: rank 0 exited with code 9 at 1.0\n"}
    assert tasks.failure(PEER_FIRST, 2, 1, lambda r: forged[r])[1] == 0  # type: ignore[index]
    # Without srun's report, the ranks' own lines name the first to fail.
    assert tasks.failure("", 2, None, lambda r: logs[r]) == (
        "rank 1 of 2 exited with code 3 (srun did not report it) (each rank's log is in the run's logs/)",
        1,
    )


def test_without_srun_report_a_failed_script_names_the_rank_whose_log_ends_with_an_exception() -> None:
    logs = {0: b"working\n", 1: b"Traceback (most recent call last):\n  ...\nValueError: bad shape\n"}
    reason, rank = tasks.failure("", 2, 1, lambda r: logs[r])  # type: ignore[misc]
    assert rank == 1 and reason.startswith("a task of the job's 2 ranks failed (the batch script exited with code 1")
    assert "rank 1's log ends with ValueError: bad shape" in reason
    assert tasks.failure("", 2, 1, no_logs) == (
        "a task of the job's 2 ranks failed (the batch script exited with code 1; srun did not say which); "
        "each rank's log is in the run's logs/",
        None,
    )
    assert tasks.failure("", 2, 0, no_logs) is None  # every rank exited 0
    assert tasks.failure("srun: error: vm: task 7: Exited with exit code 1\n", 2, 0, no_logs) is None  # no such rank


# -- the backend, against a scripted scheduler ------------------------------------------------------


class RankedSlurm:
    """sbatch/scontrol stand-ins: the 'job' leaves what a 2-rank job whose rank 1 crashed leaves."""

    def __init__(self) -> None:
        self.scripts: list[str] = []

    def submit(self, script_path: str, args: list[str]) -> str:
        self.scripts.append(Path(script_path).read_text())
        work = Path(args[0].removeprefix("--output=")).parent
        (work / "slurm.stdout").write_text("harness: building the env\n")
        (work / "slurm.stderr").write_text(CRASHED)
        (work / "rank0.stdout.log").write_text("rank 0 working\n")
        (work / "rank0.stderr.log").write_text("slurmstepd: *** STEP 55.0 ON vm CANCELLED ***\n")
        (work / "rank1.stdout.log").write_text("rank 1 working\n")
        (work / "rank1.stderr.log").write_text("Traceback (most recent call last):\nRuntimeError: rank 1 died\n")
        (work / "numpy.json").write_text("{}")  # whatever rank 0 wrote, a failed rank fails the job
        return "55"

    def query(self, job_id: str) -> control.JobState:
        return control.JobState("FAILED", 143, 0, "NonZeroExitCode", "vm")


def test_the_backend_keeps_every_ranks_logs_and_names_the_failed_rank(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake = RankedSlurm()
    monkeypatch.setattr(control, "require_slurm", lambda: None)
    monkeypatch.setattr(control, "submit", fake.submit)
    monkeypatch.setattr(control, "query", fake.query)
    monkeypatch.setenv("HARNESS_RANK_FAULT", "crash:1")
    plan = plan_of(2)
    backend = slurm_backend.SlurmBackend(SlurmSettings(runtime="podman"), echo=False)
    run = execute(plan, backend, tmp_path / "results")
    doc = load_result(run / "numpy.json")
    assert (doc["status"], doc["reason"]) == (
        "failed",
        "rank 1 of 2 exited with code 3; rank 0 was stopped (each rank's log is in the run's logs/)",
    )
    assert doc["environment"]["launch"]["slurm"] == {
        "runtime": "podman", "ranks": 2, "job_id": "55", "state": "FAILED", "node": "vm"
    }  # fmt: skip
    tail = doc["stderr_tail"] or ""
    assert tail.index("RuntimeError: rank 1 died") < tail.index("srun: error: vm: task 1: Exited with exit code 3")
    logs = run / "logs"
    assert (logs / "numpy.stdout.log").read_text() == (
        "harness: building the env\nharness: --- rank 0 ---\nrank 0 working\n"
    )
    assert (logs / "numpy.stderr.log").read_text() == (
        "slurmstepd: *** STEP 55.0 ON vm CANCELLED ***\nharness: --- the batch script (srun, slurmstepd) ---\n"
        + CRASHED
    )
    assert (logs / "numpy.rank1.stdout.log").read_text() == "rank 1 working\n"
    assert "RuntimeError: rank 1 died" in (logs / "numpy.rank1.stderr.log").read_text()
    assert "export HARNESS_RANK_FAULT=crash:1" in fake.scripts[0]
    assert (logs / "numpy.sbatch.sh").read_text() == fake.scripts[0]


def test_a_ranks_log_planted_as_a_link_is_not_followed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("host secret\n")

    class Linking(RankedSlurm):
        def submit(self, script_path: str, args: list[str]) -> str:
            job_id = super().submit(script_path, args)
            link = Path(args[0].removeprefix("--output=")).parent / "rank1.stdout.log"
            link.unlink()
            link.symlink_to(secret)
            return job_id

    fake = Linking()
    monkeypatch.setattr(control, "require_slurm", lambda: None)
    monkeypatch.setattr(control, "submit", fake.submit)
    monkeypatch.setattr(control, "query", fake.query)
    run = execute(plan_of(2), slurm_backend.SlurmBackend(SlurmSettings(runtime="podman"), echo=False), tmp_path / "r")
    kept = (run / "logs" / "numpy.rank1.stdout.log").read_text()
    assert "host secret" not in kept and "was not read" in kept


# -- export and collect ----------------------------------------------------------------------------


def test_an_exported_data_parallel_script_keeps_each_ranks_logs_in_logs(tmp_path: Path) -> None:
    out = tmp_path / "export"
    slurm_export.export(plan_of(8, device="cpu"), out, SlurmSettings(), Limits(), nodes=2)
    text = (out / "job-numpy.sh").read_text()
    bash_parses(text)
    assert sbatch_lines(text)[2:5] == ["--nodes=2", "--ntasks=8", "--ntasks-per-node=4"]
    assert "--output=logs/numpy.stdout.log" in sbatch_lines(text)
    assert text.splitlines()[-1] == (
        'srun --export=ALL --kill-on-bad-exit=1 --wait=120 --output="${root//%/%%}/logs/numpy.rank%t.stdout.log" '
        '--error="${root//%/%%}/logs/numpy.rank%t.stderr.log" bash -c rank_task'
    )
    assert "Written by `harness export slurm`. Data-parallel: 8 ranks, 4 on each of 2 node(s)" in text
    assert read(out / "plan.json")["slurm"]["nodes"] == 2
    # srun's patterns and the root's '%': a folder named with one still finds its logs.
    probe = 'root="/a%b"; echo --output="${root//%/%%}/logs/numpy.rank%t.stdout.log"'
    assert subprocess.run(["bash", "-c", probe], capture_output=True, text=True).stdout.strip() == (
        "--output=/a%%b/logs/numpy.rank%t.stdout.log"
    )
    with pytest.raises(HarnessError, match="--nodes 3 does not divide devices=8"):
        slurm_export.export(plan_of(8), tmp_path / "other", SlurmSettings(), Limits(), nodes=3)
    assert not (tmp_path / "other").exists()  # refused before anything was written


def test_an_exported_fault_is_forwarded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESS_RANK_FAULT", "crash:1")
    slurm_export.export(plan_of(2), tmp_path / "export", SlurmSettings(), Limits())
    assert "export HARNESS_RANK_FAULT=crash:1" in (tmp_path / "export" / "job-numpy.sh").read_text()


def test_collect_keeps_the_rank_logs_and_fails_a_job_whose_rank_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = plan_of(2)
    out = tmp_path / "export"
    slurm_export.export(plan, out, SlurmSettings(), Limits())
    # plan.json names a parameter xla does not have: read back as the plan exported.
    monkeypatch.setattr(slurm_export, "plan_from_record", lambda record, where: plan)
    logs = out / "logs"
    (logs / "numpy.stdout.log").write_text("harness: building the env\n")
    (logs / "numpy.stderr.log").write_text(CRASHED)
    (logs / "numpy.rank0.stdout.log").write_text("rank 0 working\n")
    (logs / "numpy.rank0.stderr.log").write_text("")
    (logs / "numpy.rank1.stdout.log").write_text("rank 1 working\n")
    (logs / "numpy.rank1.stderr.log").write_text("RuntimeError: rank 1 died\n")
    run = slurm_export.collect(out, tmp_path / "results")
    doc = load_result(run / "numpy.json")
    assert (doc["status"], doc["reason"]) == (
        "failed",
        "rank 1 of 2 exited with code 3; rank 0 was stopped (each rank's log is in the run's logs/)",
    )
    assert (doc["stderr_tail"] or "").startswith(
        "RuntimeError: rank 1 died\nharness: --- the batch script (srun, slurmstepd) ---"
    )
    assert (run / "logs" / "numpy.stdout.log").read_text() == (
        "harness: building the env\nharness: --- rank 0 ---\nrank 0 working\n"
    )
    assert (run / "logs" / "numpy.stderr.log").read_text() == CRASHED  # rank 0 said nothing: Slurm's words alone
    assert (run / "logs" / "numpy.rank1.stderr.log").read_text() == "RuntimeError: rank 1 died\n"


def test_collect_of_a_job_whose_ranks_never_started_writes_no_rank_logs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = plan_of(4)
    out = tmp_path / "export"
    slurm_export.export(plan, out, SlurmSettings(), Limits())
    monkeypatch.setattr(slurm_export, "plan_from_record", lambda record, where: plan)
    (out / "logs" / "numpy.stderr.log").write_text("harness: the numpy environment could not be prepared\n")
    run = slurm_export.collect(out, tmp_path / "results")
    doc = load_result(run / "numpy.json")
    assert doc["status"] == "failed" and "could not be prepared" in (doc["stderr_tail"] or "")
    assert sorted(p.name for p in (run / "logs").iterdir()) == ["numpy.stderr.log", "numpy.stdout.log"]


def test_harness_export_slurm_of_a_data_parallel_suite(tmp_path: Path) -> None:
    """The CLI as a user runs it (mnist declares `devices` through its training spec)."""
    out = tmp_path / "export"
    proc = harness("export", "slurm", "--suite", "mnist", "--frameworks", "pytorch", "--param", "devices=2",
                   "--param", "dataset=synthetic", "--out", str(out))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    text = (out / "job-pytorch.sh").read_text()
    bash_parses(text)
    assert sbatch_lines(text)[2:5] == ["--nodes=1", "--ntasks=2", "--ntasks-per-node=2"]
    assert text.splitlines()[-1].endswith('--error="${root//%/%%}/logs/pytorch.rank%t.stderr.log" bash -c rank_task')
    assert read(out / "jobs" / "pytorch" / "job.json")["params"]["devices"] == 2


def test_export_slurm_spreads_the_ranks_over_nodes_and_refuses_an_uneven_split(tmp_path: Path) -> None:
    """`--nodes` on the command line: 4 ranks on 2 nodes, 2 a node; 3 ranks on 2 nodes is one line, exit 2."""
    out = tmp_path / "export"
    proc = harness("export", "slurm", "--suite", "gpt", "--frameworks", "pytorch", "--param", "devices=4",
                   "--nodes", "2", "--out", str(out))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    text = (out / "job-pytorch.sh").read_text()
    bash_parses(text)
    assert sbatch_lines(text)[2:5] == ["--nodes=2", "--ntasks=4", "--ntasks-per-node=2"]
    uneven = harness("export", "slurm", "--suite", "gpt", "--frameworks", "pytorch", "--param", "devices=3",
                     "--param", "scaling=weak", "--nodes", "2", "--out", str(tmp_path / "uneven"))  # fmt: skip
    assert uneven.returncode == 2 and uneven.stderr.count("\n") == 1 and "Traceback" not in uneven.stderr, uneven.stderr
    assert not (tmp_path / "uneven").exists()
