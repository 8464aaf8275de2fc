"""What every backend returns for one job; the runner turns it into a result status."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

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


class Backend(Protocol):
    name: str

    def run_job(self, job: Job, run_id: str, run_dir: Path) -> JobOutcome: ...


def job_command(
    job: Job,
    run_id: str,
    backend: str,
    out: str,
    python: str = "python",
    data_dir: str | None = None,
    cache_dir: str | None = None,
) -> list[str]:
    """The in-job command line, the same for every backend."""
    import json

    cmd = [
        python, "-m", "suites", "run",
        "--suite", job.suite,
        "--framework", job.framework,
        "--params", json.dumps(job.params, sort_keys=True),
        "--repeat", str(job.repeat),
        "--warmup", str(job.warmup),
        "--device", job.device,
        "--run-id", run_id,
        "--backend", backend,
        "--out", out,
    ]  # fmt: skip
    if job.threads is not None:
        cmd += ["--threads", str(job.threads)]
    if data_dir is not None:
        cmd += ["--data-dir", data_dir]
    cmd += ["--cache", job.cache, "--precision", job.precision]
    if job.cache == "warm" and cache_dir is not None:
        cmd += ["--cache-dir", cache_dir]
    return cmd
