"""The two host-side steps of `docker compose up` (compose.yaml), run in the report image.

plan:   validate the suite and its parameters exactly as `harness run` does, create the run
        folder, and give each framework's service its own empty job folder
        (`<results>/<jobs-dir>/<framework>/`, the only thing that service mounts writable) with
        its job.json and the job command in it (one argument per line), so compose's jobs run
        the same spec and command as the docker backend's and never see the run folder or each
        other's files.
finish: take from each job folder only the job's own result, artefacts, logs and exit code
        (regular files, no links followed, size-capped), give every planned job a result (a
        `failed` one with the stderr tail when a job left none), write the run summary, give the
        run folder to the owner of the results folder and print the comparison with `harness show`.

Standard library plus the harness: no Docker SDK, no framework.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

from harness.backends import job_folder
from harness.backends.base import JobOutcome, job_command
from harness.backends.job_folder import finalize, tail_text
from harness.core.errors import HarnessError
from harness.core.result_types import Result
from harness.core.safe_files import (
    UnsafeFile,
    make_folder,
    new_folder,
    read_bytes,
    read_tail,
    remove_tree,
    write_bytes_atomic,
    write_json_atomic,
)
from harness.core.schema import RUN_ID
from harness.store.plan import Job, Plan, PlanRequest, make_plan, plan_from_record
from harness.store.run_folder import PLAN_FILE, RunWriter, new_run_folder, placeholder_result, read_plan_record, within
from harness.text.escape import plain
from suites.contract import job_spec
from suites.contract.settings import PRECISIONS

COMMAND = ["docker", "compose", "up"]
BACKEND = "compose"
ARGS, EXIT, STDOUT, STDERR = "job.args", "exit", "stdout.log", "stderr.log"  # names in a job folder (job.sh)
MAX_LOG_BYTES = 16 * 2**20  # a log copied into the run folder keeps at most its last 16 MiB
MAX_SMALL = 64 * 1024


def _chown_tree(paths: list[Path], uid: int, gid: int) -> None:
    """Only root can give files away; as anyone else the files are already the caller's."""
    if os.getuid() != 0:
        return
    for top in paths:
        os.lchown(top, uid, gid)
        for folder, dirs, files in os.walk(top, followlinks=False):
            for name in dirs + files:
                os.lchown(os.path.join(folder, name), uid, gid)


def _job_user(text: str) -> tuple[int, int]:
    try:
        uid, gid = (int(part) for part in text.split(":"))
    except ValueError:
        raise HarnessError(f"--job-user {plain(text)!r} is not UID:GID (e.g. 10001:10001)") from None
    if uid <= 0 or gid <= 0:
        raise HarnessError(f"--job-user {plain(text)!r} must not be root; the jobs run unprivileged")
    return uid, gid


def plan_step(args: argparse.Namespace) -> int:
    results = Path(args.results)
    uid, gid = _job_user(args.job_user)
    plan = make_plan(
        PlanRequest(
            suite=args.suite,
            frameworks=args.frameworks,
            params=tuple(args.param),
            repeat=args.repeat,
            device=args.device,
            data_dir="/data",
            precision=args.precision,
        ),
        backend=BACKEND,
    )
    run_dir = new_run_folder(results, plan.run_id, "plan")
    make_folder(run_dir / "logs", results)
    RunWriter(run_dir, plan, BACKEND, COMMAND).start()
    jobs_root = results / args.jobs_dir
    for job in plan.jobs:
        work = jobs_root / job.framework
        remove_tree(work)  # a previous run's folder, whatever its job left in it
        new_folder(work, results)
        # The job service mounts `work` at /results and the data folder at /data (compose.yaml).
        spec = job.spec(
            run_id=plan.run_id,
            backend=BACKEND,
            result_path=f"/results/{job.result_file()}",
            data_dir="/data",
            cache_dir=None,
        )
        job_folder.write_spec(work, spec, results)
        cmd = job_command(f"/results/{job_spec.JOB_FILE}", python="python")
        write_bytes_atomic(work / ARGS, ("\n".join(cmd) + "\n").encode(), results)
        _chown_tree([work], uid, gid)  # the job services run as this user: theirs, and only this folder
    write_bytes_atomic(results / args.pointer, (plan.run_id + "\n").encode(), results)
    names = ", ".join(job.framework for job in plan.jobs)
    print(f"compose run {plan.run_id}: suite {plan.suite} on {names}, params {json.dumps(plan.jobs[0].params)}")
    return 0


def _copy_log(work: Path, name: str, target: Path) -> bytes:
    try:
        data = read_tail(work / name, MAX_LOG_BYTES)
    except UnsafeFile as error:
        data = f"harness: the job's {name} was not copied: {error.reason}\n".encode()
    write_bytes_atomic(target, data, within(target.parent.parent))  # <results>/<run>/logs/<name>
    return data


def _collect(run_dir: Path, work: Path, run_id: str, job: Job) -> Result:
    """What the runner makes of a job, from what its compose service left in its own folder."""
    out = run_dir / job.result_file()
    if job.skip_reason:
        result = placeholder_result(run_id, job, BACKEND, "skipped", job.skip_reason)
        write_json_atomic(out, result, within(run_dir))  # as finalize() writes the others
        return result
    try:
        code = read_bytes(work / EXIT, MAX_SMALL).decode("ascii", "replace").strip()
    except UnsafeFile:
        code = ""
    logs = run_dir / "logs"
    stdout_log, stderr_log = logs / f"{job.framework}.stdout.log", logs / f"{job.framework}.stderr.log"
    _copy_log(work, STDOUT, stdout_log)
    stderr = _copy_log(work, STDERR, stderr_log)
    found = job_folder.harvest(work, run_dir, job)
    outcome = JobOutcome(
        exit_code=int(code) if code.lstrip("-").isdigit() and len(code) < 6 else None,
        timed_out=False,
        stdout_log=stdout_log,
        stderr_log=stderr_log,
        wall_s=0.0,
        annotations={"compose_service": job.stack},
        stderr_tail=tail_text(stderr[-16384:]),
    )
    return finalize(run_id, job, BACKEND, out, job_folder.note_harvest(outcome, found))


def _current_run(results: Path, pointer: Path) -> tuple[str, Path, Plan]:
    try:
        run_id = read_bytes(pointer, MAX_SMALL).decode("utf-8", "replace").strip()
        if not RUN_ID.fullmatch(run_id):
            raise HarnessError(f"{pointer}: {plain(run_id)!r} is not a run id")
        run_dir = results / run_id
        record = read_plan_record(run_dir)
    except HarnessError as error:
        raise HarnessError(f"no compose run to finish ({error}); the plan service must run first") from None
    plan = plan_from_record(record, str(run_dir / PLAN_FILE))
    if plan.run_id != run_id:
        raise HarnessError(f"{run_dir / PLAN_FILE} belongs to run {plan.run_id}, not {run_id}; run `up` again")
    return run_id, run_dir, plan


def finish_step(args: argparse.Namespace) -> int:
    results = Path(args.results)
    pointer = results / args.pointer
    run_id, run_dir, plan = _current_run(results, pointer)
    writer = RunWriter(run_dir, plan, BACKEND, COMMAND)
    jobs_root = results / args.jobs_dir
    for job in plan.jobs:
        work = jobs_root / job.framework
        try:
            writer.add(job, _collect(run_dir, work, run_id, job), write=False)
        finally:
            remove_tree(work)
    with contextlib.suppress(OSError):
        jobs_root.rmdir()  # empty now; the next plan step creates it again
    writer.finish()
    owner = results.stat()
    _chown_tree([run_dir, pointer], owner.st_uid, owner.st_gid)  # the results belong to whoever owns ./results
    shown = subprocess.run([sys.executable, "-m", "harness.cli", "show", str(run_dir)], check=False)
    print(f"\nrun folder: results/{run_id}")
    all_ok = all(job["status"] in ("ok", "skipped") for job in writer.summary["jobs"])
    return 0 if all_ok and shown.returncode == 0 else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.backends.compose_steps")
    parser.add_argument("--results", default="/results", help="the results folder, as mounted")
    parser.add_argument("--pointer", default=".compose-run", help="file in --results naming the current run")
    parser.add_argument(
        "--jobs-dir", default=".compose-jobs", help="folder in --results holding one writable folder per job service"
    )
    sub = parser.add_subparsers(dest="step", required=True)
    plan = sub.add_parser("plan")
    plan.add_argument("--suite", required=True)
    plan.add_argument("--frameworks")
    plan.add_argument("--param", action="append", default=[])
    plan.add_argument("--repeat", type=int)
    plan.add_argument("--device", choices=job_spec.DEVICES, default="cpu")
    plan.add_argument("--precision", choices=PRECISIONS, default="fp32")
    plan.add_argument("--job-user", default="10001:10001", help="uid:gid the job services run as")
    sub.add_parser("finish")
    args = parser.parse_args(argv)
    for name in (args.pointer, args.jobs_dir):
        if Path(name).name != name or name in ("", ".", ".."):
            print(f"error: {plain(name)!r} must be a plain name inside --results", file=sys.stderr)
            return 2
    try:
        return plan_step(args) if args.step == "plan" else finish_step(args)
    except HarnessError as error:
        print(f"error: {plain(error)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
