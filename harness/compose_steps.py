"""The two host-side steps of `docker compose up` (compose.yaml), run in the report image.

plan:   validate the suite and its parameters exactly as `harness run` does, create the run
        folder, and write for each framework the job command its service runs (one argument
        per line), so compose's jobs run the same command line as the docker backend's.
finish: give every planned job a result (a `failed` one with the stderr tail when a job left
        none), write the run summary, give the folder to the owner of the results folder and
        print the comparison table with `harness show`.

Standard library plus the harness: no Docker SDK, no framework.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from harness.backends.base import JobOutcome, job_command
from harness.errors import HarnessError
from harness.plan import Job, make_plan
from harness.runner import finalize, new_summary, placeholder_result, summary_entry
from suites.runtime.files import write_json_atomic
from suites.runtime.result import utc_now

BACKEND = "compose"


def _chown_tree(paths: list[Path], uid: int, gid: int) -> None:
    """Only root can give files away; as anyone else the files are already the caller's."""
    if os.getuid() != 0:
        return
    for top in paths:
        for path in [top, *(top.rglob("*") if top.is_dir() else [])]:
            os.lchown(path, uid, gid)


def plan_step(args: argparse.Namespace) -> int:
    results = Path(args.results)
    plan = make_plan(
        suite=args.suite,
        frameworks=args.frameworks,
        params=args.param,
        repeat=args.repeat,
        warmup=None,
        device=args.device,
        threads=None,
        baseline=None,
        backend=BACKEND,
        timeout_s=None,
        data_dir="/data",
    )
    run_dir = results / plan.run_id
    (run_dir / "logs").mkdir(parents=True)
    (run_dir / ".compose").mkdir()
    write_json_atomic(run_dir / "plan.json", plan.as_record())
    summary = new_summary(plan, BACKEND, ["docker", "compose", "up"])
    write_json_atomic(run_dir / "summary.json", summary)
    for job in plan.jobs:
        out = f"/results/{plan.run_id}/{job.result_file()}"
        cmd = job_command(job, plan.run_id, BACKEND, out, python="python", data_dir=job.data_dir)
        (run_dir / ".compose" / f"{job.framework}.args").write_text("\n".join(cmd) + "\n")
    pointer = results / args.pointer
    pointer.write_text(plan.run_id + "\n")
    uid, gid = (int(part) for part in args.job_user.split(":"))
    _chown_tree([run_dir, pointer], uid, gid)  # the job services run as this user
    names = ", ".join(job.framework for job in plan.jobs)
    print(f"compose run {plan.run_id}: suite {plan.suite} on {names}, params {json.dumps(plan.jobs[0].params)}")
    return 0


def _collect(run_dir: Path, run_id: str, job: Job) -> dict[str, Any]:
    """What the runner makes of a job, from what compose left: the result file and the exit code."""
    out = run_dir / job.result_file()
    if job.skip_reason:
        result = placeholder_result(run_id, job, BACKEND, "skipped", job.skip_reason)
        write_json_atomic(out, result)
        return result
    exit_file = run_dir / ".compose" / f"{job.framework}.exit"
    code = exit_file.read_text().strip() if exit_file.is_file() else ""
    logs = run_dir / "logs"
    outcome = JobOutcome(
        exit_code=int(code) if code.lstrip("-").isdigit() else None,
        timed_out=False,
        stdout_log=logs / f"{job.framework}.stdout.log",
        stderr_log=logs / f"{job.framework}.stderr.log",
        wall_s=0.0,
        annotations={"compose_service": job.stack},
    )
    return finalize(run_id, job, BACKEND, out, outcome)


def finish_step(args: argparse.Namespace) -> int:
    results = Path(args.results)
    pointer = results / args.pointer
    try:
        run_id = pointer.read_text().strip()
        run_dir = results / run_id
        plan = json.loads((run_dir / "plan.json").read_text())
    except (OSError, ValueError) as error:
        raise HarnessError(f"no compose run to finish ({error}); the plan service must run first") from None
    summary = json.loads((run_dir / "summary.json").read_text())
    summary["jobs"] = []
    for record in plan["jobs"]:
        job = Job(**record)
        summary["jobs"].append(summary_entry(job, _collect(run_dir, run_id, job)))
    summary["finished_at"] = utc_now()
    write_json_atomic(run_dir / "summary.json", summary)
    owner = results.stat()
    _chown_tree([run_dir, pointer], owner.st_uid, owner.st_gid)  # the results belong to whoever owns ./results
    shown = subprocess.run([sys.executable, "-m", "harness.cli", "show", str(run_dir)], check=False)
    print(f"\nrun folder: results/{run_id}")
    all_ok = all(job["status"] in ("ok", "skipped") for job in summary["jobs"])
    return 0 if all_ok and shown.returncode == 0 else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.compose_steps")
    parser.add_argument("--results", default="/results", help="the results folder, as mounted")
    parser.add_argument("--pointer", default=".compose-run", help="file in --results naming the current run")
    sub = parser.add_subparsers(dest="step", required=True)
    plan = sub.add_parser("plan")
    plan.add_argument("--suite", required=True)
    plan.add_argument("--frameworks")
    plan.add_argument("--param", action="append", default=[])
    plan.add_argument("--repeat", type=int)
    plan.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    plan.add_argument("--job-user", default="10001:10001", help="uid:gid the job services run as")
    sub.add_parser("finish")
    args = parser.parse_args(argv)
    try:
        return plan_step(args) if args.step == "plan" else finish_step(args)
    except HarnessError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
