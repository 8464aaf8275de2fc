"""Slurm's commands (sbatch, scontrol, sacct, scancel) and what a job's final state means here.

States come from `scontrol show job` (slurmctld keeps finished jobs for MinJobAge, 300 s by
default), so no accounting database is needed; where slurmctld has already forgotten a job,
`sacct` answers on clusters that keep accounting.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
from dataclasses import dataclass

from harness.core.errors import HarnessError
from harness.text.escape import plain

# Job states after which nothing more happens (squeue(1), JOB STATE CODES).
TERMINAL = frozenset(
    {
        "BOOT_FAIL", "CANCELLED", "COMPLETED", "DEADLINE", "FAILED", "NODE_FAIL",
        "OUT_OF_MEMORY", "PREEMPTED", "REVOKED", "SPECIAL_EXIT", "TIMEOUT",
    }
)  # fmt: skip
COMMAND_TIMEOUT_S = 120.0  # a busy slurmctld can be slow, but a hung one must not hang the run


@dataclass(frozen=True)
class JobState:
    state: str  # e.g. PENDING, RUNNING, COMPLETED, CANCELLED
    exit_code: int | None = None  # the batch script's exit status
    signal: int | None = None  # the signal that ended it, if one did
    reason: str = ""  # why it is pending, or why it ended
    node: str = ""  # where the batch script ran

    @property
    def finished(self) -> bool:
        return self.state in TERMINAL


@dataclass(frozen=True)
class Ending:
    """What the runner needs: an exit code and flags, or a status it cannot infer itself."""

    exit_code: int | None
    timed_out: bool = False
    oom: bool = False
    status: str | None = None  # cancelled, or failed for a reason of Slurm's (node failure, preemption)
    reason: str | None = None


def parse_exit(text: str) -> tuple[int | None, int | None]:
    """Slurm's `ExitCode=status:signal`."""
    if not (match := re.fullmatch(r"(\d+):(\d+)", text.strip())):
        return None, None
    return int(match.group(1)), int(match.group(2))


def parse_scontrol(text: str) -> JobState | None:
    """One job from `scontrol show job -o ID` (space-separated Key=Value pairs on one line)."""
    fields = dict(re.findall(r"(\w+)=(\S*)", text))
    if not (state := fields.get("JobState")):
        return None
    code, signal = parse_exit(fields.get("ExitCode", ""))
    reason = fields.get("Reason", "")
    node = fields.get("BatchHost", "")
    return JobState(state, code, signal, "" if reason == "None" else reason, "" if node == "(null)" else node)


def parse_sacct(text: str) -> JobState | None:
    """The allocation's line from `sacct -n -P -X -j ID -o State,ExitCode,Reason,NodeList`."""
    for line in text.splitlines():
        parts = [part.strip() for part in line.split("|")] + ["", ""]
        if parts[0]:
            code, signal = parse_exit(parts[1])
            reason = "" if parts[2] == "None" else parts[2]
            node = "" if parts[3] in ("None assigned", "(null)") else parts[3]
            return JobState(parts[0].split()[0], code, signal, reason, node)
    return None


def ending(job_id: str, state: JobState, *, stopped_for_timeout: bool) -> Ending:
    """The outcome of a finished job. `stopped_for_timeout`: the harness itself cancelled it for its --timeout."""
    code = -state.signal if state.signal else state.exit_code  # as subprocess reports a signal
    if state.state == "CANCELLED" and stopped_for_timeout:
        return Ending(code, timed_out=True)
    if state.state == "TIMEOUT":  # Slurm's --time ran out before the harness's own --timeout
        return Ending(code, status="timeout", reason=f"Slurm ended job {job_id} at its time limit (sbatch --time)")
    if state.state == "OUT_OF_MEMORY":
        return Ending(code, oom=True)
    if state.state == "CANCELLED":
        return Ending(code, status="cancelled", reason=f"Slurm job {job_id} was cancelled (scancel) while it ran")
    if state.state in ("COMPLETED", "FAILED"):
        return Ending(code)
    why = f" ({plain(state.reason)})" if state.reason else ""
    return Ending(code, status="failed", reason=f"Slurm ended job {job_id} as {state.state}{why}")


def _run(args: list[str]) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(args, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=COMMAND_TIMEOUT_S)
    except FileNotFoundError:
        raise HarnessError(
            f"{args[0]} is not on PATH; run on a Slurm login node, or use `harness export slurm`"
        ) from None
    except subprocess.TimeoutExpired:
        raise HarnessError(f"{args[0]} did not answer in {COMMAND_TIMEOUT_S:g} s; is slurmctld up (`sinfo`)?") from None


def require_slurm() -> None:
    if missing := [name for name in ("sbatch", "scontrol", "scancel") if shutil.which(name) is None]:
        raise HarnessError(
            f"{', '.join(missing)} not on PATH: the slurm backend runs on a Slurm login node "
            "(or write the jobs with `harness export slurm`)"
        )


def submit(script: str, args: list[str]) -> str:
    """sbatch the script; the job id."""
    proc = _run(["sbatch", "--parsable", *args, script])
    job_id = proc.stdout.strip().split(";")[0]
    if proc.returncode != 0 or not job_id.isdigit():
        text = (proc.stderr or proc.stdout).strip()
        message = plain(text.splitlines()[-1])[-500:] if text else f"exit code {proc.returncode}"
        raise HarnessError(f"sbatch refused the job: {message}")
    return job_id


def query(job_id: str) -> JobState | None:
    """The job's state now; None when neither slurmctld nor accounting knows it.

    Any other failure (slurmctld busy or restarting) raises: a job must never be taken for
    gone, and left running, because one poll went unanswered.
    """
    proc = _run(["scontrol", "show", "job", "-o", job_id])
    if proc.returncode != 0 and "Invalid job id" not in proc.stderr:
        raise HarnessError(f"scontrol show job {job_id} failed: {plain(proc.stderr.strip())[-300:]}")
    state = parse_scontrol(proc.stdout) if proc.returncode == 0 else None
    if state is None and shutil.which("sacct"):
        accounting = _run(["sacct", "-n", "-P", "-X", "-j", job_id, "-o", "State,ExitCode,Reason,NodeList"])
        if accounting.returncode == 0:
            state = parse_sacct(accounting.stdout)
    return state


def jobs_with_comment(comment: str) -> list[tuple[str, str, str]]:
    """(job id, job name, state) of this user's jobs that Slurm still lists with this comment."""
    if (proc := _run(["squeue", f"--user={os.getuid()}", "--noheader", "--format=%i|%j|%k|%T"])).returncode != 0:
        raise HarnessError(f"squeue failed: {plain(proc.stderr.strip())[-300:] or f'exit code {proc.returncode}'}")
    rows = [[part.strip() for part in line.split("|")] for line in proc.stdout.splitlines()]
    return [(parts[0], parts[1], parts[3]) for parts in rows if len(parts) == 4 and parts[2] == comment and parts[0]]


def cancel(job_id: str) -> None:
    """scancel; a job that already ended is no error."""
    with contextlib.suppress(HarnessError):
        _run(["scancel", job_id])
