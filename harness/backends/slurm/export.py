"""`harness export slurm` and collecting what the exported jobs wrote: for clusters the host cannot reach.

The export is a self-contained folder to copy to the cluster: `code/suites/` (the suites, as the
k8s ConfigMap carries them), `locks/` (the stacks' lock files), one batch script per job, a
`prepare-<stack>-<variant>.sh` per venv stack (run it on a login node that can reach PyPI or a
wheelhouse) and `submit.sh`, which submits the jobs one after another from that folder. Each job
reads its spec from `jobs/<framework>/job.json` and writes only into that folder; Slurm's output goes to `logs/`. Copy the folder back and
`harness collect DIR` turns it into a normal run folder, taking each job's result the way the
slurm backend does (backends/job_folder.py).

A data-parallel job (--param devices=N) is one script for N ranks on `nodes` nodes (tasks.py): each
rank's logs are `logs/<framework>.rank<R>.{stdout,stderr}.log` beside the script's own, and collect
keeps them as the slurm backend does (rank 0's with the script's, the others under `rank_log_names`)
and fails the job, naming the rank, when srun says one failed.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
from pathlib import Path
from typing import Any

from harness.backends import job_folder
from harness.backends.base import Limits
from harness.backends.job_folder import tail_text
from harness.backends.slurm import tasks
from harness.backends.slurm.backend import keep_rank_logs
from harness.backends.slurm.script import Layout, Stack, batch_script, job_spec_for, literal, prepare_script
from harness.backends.slurm.settings import RUNTIMES, SlurmSettings
from harness.core.errors import HarnessError
from harness.core.result_types import Result
from harness.core.safe_files import MissingFile, UnsafeFile, create, read_tail
from harness.core.schema import InvalidResult, load_result
from harness.store.images import variant_for
from harness.store.plan import Job, Plan, plan_from_record
from harness.store.run_folder import PLAN_FILE, mismatch, placeholder_result, read_plan_record, within, write_collected
from suites.contract import job_spec
from suites.contract.files import write_json_atomic, write_text_atomic
from suites.contract.ranks import FAULT_VAR, MAX_DEVICES, processes
from suites.contract.registry import SUITES_DIR

MAX_LOG_BYTES = 16 * 2**20
ROOT_IN_JOB = 'root="${SLURM_SUBMIT_DIR:?submit the jobs from their folder: bash submit.sh}"'
ROOT_IN_SCRIPT = 'root="$(cd "$(dirname "$0")" && pwd)"'
# What slurmstepd writes into a job's stderr when it ends it (Slurm's src/slurmd/slurmstepd/req.c).
STEPD_END = re.compile(r"\*\*\* JOB (\d+) ON \S+ CANCELLED AT \S+(?: DUE TO ([A-Z ]+?))? \*\*\*")


def _job_layout(job: Job, stack: Stack, envs: str | None) -> Layout:
    return Layout(
        code='"$root"/code',
        out=f'"$root"/jobs/{job.framework}',
        lock=f'"$root"/locks/{stack.stack}-{stack.variant}.txt',
        envs=literal(envs) if envs else '"$root"/envs',
        data=job.data_dir,
        preamble=(ROOT_IN_JOB, f'mkdir -p "$root/jobs/{job.framework}" || exit 1'),
    )


def submit_script(plan: Plan, names: list[str]) -> str:
    scripts = " ".join(shlex.quote(name) for name in names)
    return (
        "\n".join(
            [
                "#!/bin/bash",
                f"# Submits the jobs of run {plan.run_id}, each starting after the previous one ended (as `harness run`).",
                "set -euo pipefail",
                'cd "$(dirname "$0")"',
                "mkdir -p logs jobs",
                "previous=",
                f"for script in {scripts}; do",
                '  id=$(sbatch --parsable ${previous:+--dependency=afterany:$previous} "$script")',
                "  previous=${id%%;*}",
                '  echo "submitted $script as Slurm job $previous"',
                "done",
                'echo "when they have ended (squeue --me), copy this folder back and run: harness collect <folder>"',
            ]
        )
        + "\n"
    )


def rank_logs(framework: str) -> tuple[str, str]:
    """srun --output/--error of an exported data-parallel job: each rank's logs in the export's logs/."""
    return (
        tasks.task_log("root", f"logs/{framework}.rank%t.stdout.log"),
        tasks.task_log("root", f"logs/{framework}.rank%t.stderr.log"),
    )


def export(plan: Plan, out: Path, settings: SlurmSettings, limits: Limits, nodes: int = 1) -> list[Path]:
    """Write the folder; every script is generated (and so validated) before the first file is written.

    `nodes`: the nodes a data-parallel job's ranks are spread over, devices/nodes on each (the CLI's
    --nodes); FAULT_VAR, when set here, is written into every data-parallel job's script (a testing aid)."""
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise HarnessError(f"--out {out} exists and is not an empty folder; give a new folder for the export")
    stacks: dict[str, Stack] = {}
    documents: dict[str, str] = {}
    specs: dict[str, str] = {}  # jobs/<framework>/job.json: each job's folder holds its spec before it runs
    for job in plan.jobs:
        if job.skip_reason is not None:
            continue
        stack = Stack.of(job.stack, variant_for(job.device))
        stacks[stack.name] = stack
        layout = _job_layout(job, stack, settings.envs)
        documents[f"job-{job.framework}.sh"] = batch_script(
            job,
            plan.run_id,
            stack,
            layout,
            settings,
            limits,
            output=f"logs/{job.framework}.stdout.log",
            error=f"logs/{job.framework}.stderr.log",
            origin="harness export slurm",
            nodes=nodes,
            fault=os.environ.get(FAULT_VAR) or None,
            task_logs=rank_logs(job.framework),
        )
        spec = job_spec_for(job, plan.run_id, settings.runtime, layout)
        specs[f"jobs/{job.framework}/{job_spec.JOB_FILE}"] = job_spec.dumps(spec)
    if not documents:
        raise HarnessError(f"every planned job of {plan.suite} is skipped; nothing to export")
    if settings.runtime == "venv":
        for stack in stacks.values():
            layout = Layout(
                code="''",
                out="''",
                lock=f'"$root"/locks/{stack.stack}-{stack.variant}.txt',
                envs=literal(settings.envs) if settings.envs else '"$root"/envs',
                preamble=(ROOT_IN_SCRIPT,),
            )
            documents[f"prepare-{stack.stack}-{stack.variant}.sh"] = prepare_script(stack, layout, settings)
    documents["submit.sh"] = submit_script(plan, [name for name in documents if name.startswith("job-")])
    record = dict(
        plan.as_record(),
        slurm={
            "runtime": settings.runtime,
            "images": settings.images,
            "python": settings.python,
            "envs": settings.envs,
            "locks": {name: stack.lock_hash for name, stack in stacks.items()},
            "nodes": nodes,
        },
    )
    try:
        out.mkdir(parents=True, exist_ok=True)
        for folder in ("logs", "jobs", "locks"):
            (out / folder).mkdir(exist_ok=True)
        shutil.copytree(SUITES_DIR, out / "code" / "suites", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        for stack in stacks.values():
            shutil.copyfile(stack.lock_file, out / "locks" / f"{stack.stack}-{stack.variant}.txt")
        written = []
        for name, text in documents.items():
            write_text_atomic(out / name, text)
            (out / name).chmod(0o755)
            written.append(out / name)
        for name, text in specs.items():
            write_text_atomic(out / name, text)
            written.append(out / name)
        write_json_atomic(out / PLAN_FILE, record)
    except OSError as error:
        raise HarnessError(f"--out {out}: cannot write the export ({error.strerror}); choose another folder") from None
    return written


def ended_by(stderr: str) -> tuple[str, str] | None:
    """(status, reason) from slurmstepd's last word in a job's stderr, when it ended the job."""
    if not (found := STEPD_END.findall(stderr)):
        return None
    job_id, why = found[-1]
    if why == "TIME LIMIT":
        return "timeout", f"Slurm ended job {job_id} at its time limit (sbatch --time)"
    if why:
        return "failed", f"Slurm ended job {job_id}: {why.lower()}"
    return "cancelled", f"Slurm job {job_id} was cancelled (scancel) while it ran"


def _image_record(record: Any, job: Job) -> dict[str, Any] | None:
    """The `image` field from what plan.json says was exported (hostile: checked field by field)."""
    slurm = record.get("slurm") if isinstance(record, dict) else None
    if not isinstance(slurm, dict) or slurm.get("runtime") not in RUNTIMES:
        return None
    variant = variant_for(job.device)
    locks = slurm.get("locks")
    locks = locks if isinstance(locks, dict) else {}
    lock_hash = next(
        (h for name, h in locks.items() if isinstance(name, str) and name.startswith(f"{job.stack}-{variant}-")), None
    )
    if not isinstance(lock_hash, str) or not re.fullmatch(r"[0-9a-f]{64}", lock_hash):
        return None
    images, envs = slurm.get("images"), slurm.get("envs")
    settings = SlurmSettings(
        runtime=slurm["runtime"],
        images=images if isinstance(images, str) else None,
        python=slurm["python"] if isinstance(slurm.get("python"), str) else "python3",
    )
    stack = Stack(job.stack, variant, lock_hash)
    env_dir = f"{envs if isinstance(envs, str) else '<export>/envs'}/{stack.name}"
    return stack.record(settings.runtime, settings, env_dir)


def collect(folder: Path, results_dir: Path) -> Path:
    try:
        record = read_plan_record(folder)
    except (MissingFile, UnsafeFile) as error:
        raise HarnessError(str(error)) from None
    plan = plan_from_record(record, str(folder / PLAN_FILE))
    runnable = [job for job in plan.jobs if job.skip_reason is None]
    if runnable and not any(_ran(folder, job) for job in runnable):
        raise HarnessError(
            f"{folder}: no job of run {plan.run_id} has run (no Slurm output, no result): nothing to collect; "
            "submit it first (bash submit.sh on the cluster), copy the folder back when the jobs have ended"
        )
    command = ["harness", "collect", str(folder)]
    return write_collected(
        results_dir, plan, "slurm", command, lambda job, run_dir: _collect_job(plan, record, job, folder, run_dir)
    )


def _ran(folder: Path, job: Job) -> bool:
    """Whether Slurm started the job: it creates the job's output files when it starts it (the export
    writes neither), and only a job writes its result. Looked at, never followed (a link counts)."""
    logs = [folder / "logs" / f"{job.framework}.{stream}.log" for stream in ("stdout", "stderr")]
    return any(os.path.lexists(path) for path in (*logs, folder / "jobs" / job.framework / job.result_file()))


def _read_log(folder: Path, name: str) -> bytes:
    try:
        return read_tail(folder / "logs" / name, MAX_LOG_BYTES)
    except UnsafeFile as error:
        return f"harness: the log was not read: {error}\n".encode()


def _collect_rank_logs(folder: Path, job: Job, run_dir: Path, batch: dict[str, bytes]) -> tuple[bytes, str | None]:
    """A data-parallel job's logs, kept as the slurm backend keeps them: (the stderr for a failed result's
    tail, the failed result's reason when srun said that a rank failed)."""
    world = min(processes(job.params), MAX_DEVICES)

    def exported(rank: int, stream: str) -> str:
        return f"{job.framework}.rank{rank}.{stream}.log"

    def left(rank: int) -> bool:
        return any(os.path.lexists(folder / "logs" / exported(rank, stream)) for stream in ("stdout", "stderr"))

    ranks = [rank for rank in range(world) if rank == 0 or left(rank)]  # a rank that never started: no empty logs
    # An exported script's exit code is Slurm's to keep; srun's report in its stderr names the rank.
    kept, reason, _ = keep_rank_logs(
        run_dir / "logs", job.framework, ranks, world, batch, lambda r, s: _read_log(folder, exported(r, s)), left(0)
    )
    return kept, reason


def _collect_job(plan: Plan, record: Any, job: Job, folder: Path, run_dir: Path) -> Result:
    if job.skip_reason is not None:
        return placeholder_result(plan.run_id, job, "slurm", "skipped", job.skip_reason)
    logs = run_dir / "logs"
    batch = {stream: _read_log(folder, f"{job.framework}.{stream}.log") for stream in ("stdout", "stderr")}
    rank_failed = None
    if processes(job.params) > 1:
        stderr, rank_failed = _collect_rank_logs(folder, job, run_dir, batch)
    else:
        for stream, data in batch.items():
            with create(logs, f"{job.framework}.{stream}.log", anchor=within(run_dir)) as sink:
                sink.write(data)
        stderr = batch["stderr"]
    out = run_dir / job.result_file()
    found = job_folder.harvest(folder / "jobs" / job.framework, run_dir, job)
    result: Result | None = None
    ended = ended_by(batch["stderr"].decode("utf-8", "replace"))
    if found.problem is not None:
        result = placeholder_result(plan.run_id, job, "slurm", "invalid-output", found.problem)
    elif ended is not None and (ended[0] != "failed" or not out.exists()):
        result = placeholder_result(plan.run_id, job, "slurm", *ended)
    elif rank_failed is not None:  # a rank failed: the job failed, whatever rank 0 wrote (contract/ranks.py)
        result = placeholder_result(plan.run_id, job, "slurm", "failed", rank_failed)
    else:
        try:
            result = load_result(out)
            if wrong := mismatch(result, job.framework, plan.suite, plan.run_id):
                raise InvalidResult(f"{job.result_file()}: the result {wrong}")
        except InvalidResult as error:
            reason = str(error) if out.exists() else "no result file: the job did not finish (see its stderr log)"
            result = placeholder_result(
                plan.run_id, job, "slurm", "invalid-output" if out.exists() else "failed", reason
            )
    if result["status"] not in ("ok", "skipped") and not result.get("stderr_tail"):
        result["stderr_tail"] = tail_text(stderr) or None
    if result.get("image") is None:
        result["image"] = _image_record(record, job)
    return result
