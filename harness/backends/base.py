"""What every backend is given and returns for one job; the runner turns the outcome into a result.

A backend starts the job with `job_command` after writing its job.json (the whole spec,
suites/runtime/job_spec.py) into the job's folder, and reports what happened in a `JobOutcome`.
It never writes a result file: a status only the scheduler knows (cancelled, a node failure,
its own time limit) travels in `status` and `reason`, and the runner writes the result.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from harness.limits import Limits
from harness.plan import Job


@dataclass
class JobOutcome:
    exit_code: int | None
    timed_out: bool
    stdout_log: Path
    stderr_log: Path
    wall_s: float
    # backend facts recorded into the result (e.g. image tag and id for docker)
    annotations: dict[str, Any] = field(default_factory=dict)
    oom: bool = False  # killed for memory (docker's OOMKilled flag)
    stderr_tail: str = ""  # kept in memory while the job ran, never read back from the log file
    result_problem: str | None = None  # why the job's result file was refused (a link, a FIFO, too large)
    # A status the scheduler decided and exit codes cannot tell (e.g. cancelled, a node failure):
    # it replaces whatever the job wrote, with `reason` as the result's reason.
    status: str | None = None
    reason: str | None = None


@dataclass(frozen=True)
class BackendOptions:
    """Everything a command's options say about how jobs run; each backend takes what applies to it."""

    echo: bool = True
    limits: Limits = field(default_factory=Limits)
    pythons: Mapping[str, str] = field(default_factory=dict)  # local: stack -> interpreter
    gpus: str | None = None  # docker: all | N | device=0,1
    wheelhouse: Path | None = None  # docker: build missing images from these wheels only
    transfer: str = "auto"  # docker: bind | copy | auto (copy for an engine not on this machine)
    pinned: Mapping[str, dict[str, Any]] = field(default_factory=dict)  # docker: stack -> recorded image


class Backend(Protocol):
    name: str

    def run_job(self, job: Job, run_id: str, run_dir: Path) -> JobOutcome: ...


def job_command(spec_path: str, python: str = "python") -> list[str]:
    """The in-job command line, the same for every backend: everything else is in the spec file."""
    return [python, "-m", "suites", "run", "--job", spec_path]
