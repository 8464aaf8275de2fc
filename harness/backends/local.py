"""Local backend: the job contract in a subprocess of a local Python (development, CI, no Docker)."""

from __future__ import annotations

import contextlib
import math
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

from harness.backends.base import JobOutcome, job_command
from harness.backends.streams import pump, stdout_echo
from harness.limits import Limits
from harness.plan import Job
from suites.runtime.registry import SUITES_DIR


class LocalBackend:
    name = "local"

    def __init__(self, pythons: dict[str, str] | None = None, echo: bool = True, limits: Limits | None = None) -> None:
        self.pythons = pythons or {}
        self.echo = echo
        self.limits = limits or Limits()

    def _apply_limits(self) -> None:
        """Runs in the child before exec: the local stand-ins for a container's limits."""
        if self.limits.memory_bytes is not None:
            # Address-space cap: allocations beyond it raise MemoryError, which the job reports as oom.
            resource.setrlimit(resource.RLIMIT_AS, (self.limits.memory_bytes, self.limits.memory_bytes))
        if self.limits.cpus is not None:
            allowed = sorted(os.sched_getaffinity(0))
            os.sched_setaffinity(0, allowed[: max(1, math.ceil(self.limits.cpus))])

    def python_for(self, stack: str) -> str:
        return self.pythons.get(stack, sys.executable)

    def run_job(self, job: Job, run_id: str, run_dir: Path) -> JobOutcome:
        logs = run_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        out = run_dir / job.result_file()
        cache_dir = None
        if job.cache == "warm" and job.cache_dir is not None:
            cache_dir = str(Path(job.cache_dir) / job.stack)  # one per stack: versions never mix
            Path(cache_dir).mkdir(parents=True, exist_ok=True)
        cmd = job_command(
            job,
            run_id,
            self.name,
            str(out),
            python=self.python_for(job.stack),
            data_dir=job.data_dir,
            cache_dir=cache_dir,
        )
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SUITES_DIR.parent), env.get("PYTHONPATH")]))
        env["PYTHONUNBUFFERED"] = "1"
        started = time.perf_counter()
        # Own session: a timeout kills the job and anything it spawned (compilers, workers).
        stdout_log, stderr_log = logs / f"{job.framework}.stdout.log", logs / f"{job.framework}.stderr.log"
        try:
            proc = subprocess.Popen(
                cmd,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                start_new_session=True,
                preexec_fn=self._apply_limits if self.limits != Limits() else None,
            )
        except OSError as error:  # e.g. a --python path that does not exist: this job fails, the run goes on
            stderr_log.write_text(f"cannot start {cmd[0]}: {error}\n")
            stdout_log.write_text("")
            return JobOutcome(None, False, stdout_log, stderr_log, time.perf_counter() - started)
        assert proc.stdout is not None and proc.stderr is not None
        pumps = [pump(proc.stdout, stdout_log, stdout_echo(self.echo)), pump(proc.stderr, stderr_log, None)]
        timed_out = False
        try:
            proc.wait(timeout=job.timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            for thread in pumps:
                thread.join(timeout=5)
        return JobOutcome(
            exit_code=proc.returncode,
            timed_out=timed_out,
            stdout_log=stdout_log,
            stderr_log=stderr_log,
            wall_s=time.perf_counter() - started,
            annotations={"python": self.python_for(job.stack)},
        )
