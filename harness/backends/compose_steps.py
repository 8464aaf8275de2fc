"""The two host-side steps of `docker compose up` (compose.yaml), run in the report image.

plan:   validate the suite and its parameters exactly as `harness run` does, end the previous run
        first if `up` was stopped before its report (compose_finish.py: finished jobs kept, the
        rest `interrupted`), create the run folder, and give each framework's service its own empty
        job folder (`<results>/<jobs-dir>/<framework>/`, the only thing that service mounts
        writable) with its job.json and the job command in it (one argument per line), so
        compose's jobs run the same spec and command as the docker backend's and never see the run
        folder or each other's files.
finish: take from each job folder only the job's own result, artefacts, logs and exit code
        (regular files, no links followed, size-capped), give every planned job a result (a
        `failed` one with the stderr tail when a job left none), write the run summary, give the
        run folder to the owner of the results folder, print the comparison with `harness show`,
        and exit with the run's status as `harness run` does (0, 1, 3, 130): compose.yaml's
        `outcome` service turns a non-zero one into `up`'s failure.

Standard library plus the harness: no Docker SDK, no framework.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from pathlib import Path

from harness.backends import job_folder
from harness.backends.base import job_command
from harness.backends.compose_finish import (
    ARGS,
    BACKEND,
    COMMAND,
    chown_tree,
    finish_run,
    pointed_run,
    show_and_judge,
    statuses,
)
from harness.core.errors import HarnessError
from harness.core.safe_files import make_folder, new_folder, remove_tree, write_bytes_atomic
from harness.store.plan import PlanRequest, make_plan
from harness.store.run_folder import RunWriter, new_run_folder
from harness.text.escape import plain
from suites.contract import job_spec
from suites.contract.ranks import processes
from suites.contract.settings import PRECISIONS


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
    ranked = [job.framework for job in plan.jobs if processes(job.params) > 1]
    if ranked:  # one service per job, one process each: nothing here would start a job's other ranks
        raise HarnessError(
            f"devices={processes(plan.jobs[0].params)} runs each job on several processes, which a compose job "
            "service cannot start: use `harness run --backend docker` (or local, slurm), or `harness export k8s`"
        )
    pointer, jobs_root = results / args.pointer, results / args.jobs_dir
    _end_stopped_run(results, pointer, jobs_root)  # before its job folders are made again below
    # The pointer first: a plan step stopped half-way leaves a run the next one ends, not one nothing names.
    write_bytes_atomic(pointer, (plan.run_id + "\n").encode(), results)
    run_dir = new_run_folder(results, plan.run_id, "plan")
    make_folder(run_dir / "logs", results)
    RunWriter(run_dir, plan, BACKEND, COMMAND).start()
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
        chown_tree([work], uid, gid)  # the job services run as this user: theirs, and only this folder
    names = ", ".join(job.framework for job in plan.jobs)
    print(f"compose run {plan.run_id}: suite {plan.suite} on {names}, params {json.dumps(plan.jobs[0].params)}")
    return 0


def _end_stopped_run(results: Path, pointer: Path, jobs_root: Path) -> None:
    """The previous `up` stopped before its report (Ctrl-C): end that run now, as `harness run` ends an
    interrupted one, with the results its finished jobs left in their folders."""
    if not os.path.lexists(pointer):
        return  # the first compose run in this results folder
    try:
        previous = pointed_run(results, pointer)
    except HarnessError as error:
        print(f"note: the previous compose run was not looked at: {plain(error)}", file=sys.stderr)
        return
    if previous.finished:
        return
    writer = finish_run(results, jobs_root, previous)
    print(
        f"compose run {previous.run_id} stopped before its report; ended it now: {statuses(writer)} "
        f"(results/{previous.run_id})"
    )


def finish_step(args: argparse.Namespace) -> int:
    results = Path(args.results)
    pointer, jobs_root = results / args.pointer, results / args.jobs_dir
    run = pointed_run(results, pointer)
    if run.finished:  # a second report (`docker compose run --no-deps report`) shows it, never collects again
        print(f"compose run {run.run_id} was finished at {plain(run.summary['finished_at'])}; showing it again")
    else:
        finish_run(results, jobs_root, run)
    with contextlib.suppress(OSError):
        jobs_root.rmdir()  # empty now; the next plan step creates it again
    owner = results.stat()
    chown_tree([pointer], owner.st_uid, owner.st_gid)
    return show_and_judge(run.run_dir)


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
