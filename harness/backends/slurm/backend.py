"""Slurm backend: each job is one sbatch job with a node of its own, in its pinned stack.

The harness runs on a login node (or anywhere sbatch works) and the run folder must be on a
file system the compute nodes share, as Slurm's own output files are. Per job: a fresh job
folder (backends/job_folder.py) is the only place the job may write; the batch script
(harness/backends/slurm/script.py, kept as logs/<framework>.sbatch.sh) runs it there through the chosen
runtime; the harness polls the job's state, enforces --timeout from the moment the job starts
running (queue time is not the job's), scancels it on timeout or Ctrl-C, then takes back only
the job's own result file and artefacts, and the tails of Slurm's output files, read without
following links.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from harness.backends import job_folder
from harness.backends.base import BackendOptions, JobOutcome, Limits
from harness.backends.job_folder import tail_text
from harness.backends.ranks import rank_log_names
from harness.backends.slurm import control, tasks
from harness.backends.slurm.script import (
    Layout,
    Stack,
    batch_script,
    job_name,
    job_spec_for,
    literal,
    prepare_script,
    run_comment,
)
from harness.backends.slurm.settings import SlurmSettings, from_environment
from harness.core.errors import HarnessError
from harness.core.safe_files import UnsafeFile, make_folder, read_tail
from harness.store.images import variant_for
from harness.store.plan import Job
from harness.text.escape import plain
from suites.contract.ranks import FAULT_VAR, processes
from suites.contract.registry import SUITES_DIR

POLL_FIRST_S, POLL_MAX_S = 0.5, 5.0  # quick for short jobs, gentle on slurmctld for long ones
MAX_LOG_BYTES = 16 * 2**20  # the tail of Slurm's output files that is kept in logs/
PREPARE_TIMEOUT_S = 3600.0
QUERY_PATIENCE_S = 300.0  # how long slurmctld may leave the state polls unanswered
ENVS_DIR = ".slurm-envs"  # default home of the venvs: beside the run folders, so on the same shared file system


def _slurm_path(path: Path) -> str:
    """A path for sbatch --output/--error: '%' would be a Slurm filename pattern."""
    return str(path).replace("%", "%%")


class SlurmBackend:
    name = "slurm"

    def __init__(self, settings: SlurmSettings, limits: Limits | None = None, echo: bool = True) -> None:
        control.require_slurm()
        self.settings = settings
        self.limits = limits or Limits()
        self.echo = echo
        self._prepared: dict[str, str | None] = {}  # stack env name -> why it could not be prepared

    def say(self, text: str) -> None:
        if self.echo:
            with contextlib.suppress(OSError, ValueError):
                print(text, flush=True)

    # -- the stack environment -------------------------------------------------------------------

    def prepare(self, stack: Stack, envs: Path, logs: Path) -> str | None:
        """Build the stack's venv here, once, before the first job needs it (None: ready).

        The batch script checks it again on the node and builds it there if it is missing, but
        doing it here keeps pip's time out of the job's time limit and its output on this terminal.
        """
        if stack.name in self._prepared:
            return self._prepared[stack.name]
        layout = Layout(code="''", out="''", lock=literal(stack.lock_file), envs=literal(envs))
        log = logs / f"{stack.stack}-{stack.variant}.env.log"
        self.say(f"   {stack.stack} venv: {envs / stack.name} (built from its lock on first use)")
        with job_folder.open_log(logs, log.name) as sink:
            try:
                proc = subprocess.run(
                    ["bash", "-c", prepare_script(stack, layout, self.settings)],
                    stdout=sink,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    timeout=PREPARE_TIMEOUT_S,
                )
                problem = None if proc.returncode == 0 else f"exit code {proc.returncode}"
            except (OSError, subprocess.TimeoutExpired) as error:
                problem = str(error)
        if problem is not None:
            last = tail_text(read_tail(log, 4096), lines=1)
            problem = f"the {stack.stack} venv could not be prepared ({problem}): {last}; see logs/{log.name}"
        self._prepared[stack.name] = problem
        return problem

    # -- one job ------------------------------------------------------------------------------------

    def run_job(self, job: Job, run_id: str, run_dir: Path) -> JobOutcome:
        outcome, found = job_folder.run_in_folder(run_dir, job, lambda work: self._run(job, run_id, run_dir, work))
        return job_folder.note_harvest(outcome, found)

    def _run(self, job: Job, run_id: str, run_dir: Path, work: Path) -> JobOutcome:
        logs = run_dir / "logs"
        stdout_log, stderr_log = logs / f"{job.framework}.stdout.log", logs / f"{job.framework}.stderr.log"
        started = time.perf_counter()
        stack = Stack.of(job.stack, variant_for(job.device))
        envs = (Path(self.settings.envs) if self.settings.envs else run_dir.parent / ENVS_DIR).resolve()
        runtime = self.settings.runtime
        annotations: dict[str, Any] = {
            "image": stack.record(runtime, self.settings, str(envs / stack.name)),
            "slurm": {"runtime": runtime},
        }

        script = logs / f"{job.framework}.sbatch.sh"
        # A script left by an earlier attempt of this job (a resumed run): its Slurm job may still be
        # queued or running if that harness died without cancelling it. Never a second copy beside it.
        problem = self._cancel_earlier(job, run_id) if os.path.lexists(script) else None
        if problem is None and runtime == "venv":
            problem = self.prepare(stack, envs, logs)
        if problem is not None:
            return job_folder.not_started(logs, job, started, problem, annotations)
        cache = None
        if runtime == "venv" and job.cache == "warm" and job.cache_dir is not None:
            cache = str(make_folder(Path(job.cache_dir) / job.stack, Path(job.cache_dir)))  # one per stack
        layout = Layout(
            code=literal(SUITES_DIR.parent.resolve()),
            out=literal(work.resolve()),
            lock=literal(stack.lock_file),
            envs=literal(envs),
            data=job.data_dir,
            cache=cache,
        )
        if (world := processes(job.params)) > 1:
            annotations["slurm"]["ranks"] = world
        try:
            text = batch_script(
                job, run_id, stack, layout, self.settings, self.limits, fault=os.environ.get(FAULT_VAR) or None
            )
            spec = job_spec_for(job, run_id, runtime, layout)
        except HarnessError as error:
            return job_folder.not_started(logs, job, started, str(error), annotations)
        job_folder.write_spec(work, spec)
        with job_folder.open_log(logs, script.name) as sink:
            sink.write(text.encode())
        slurm_out, slurm_err = work / "slurm.stdout", work / "slurm.stderr"
        try:
            job_id = control.submit(
                str(script),
                [f"--output={_slurm_path(slurm_out.resolve())}", f"--error={_slurm_path(slurm_err.resolve())}"],
            )
        except HarnessError as error:
            return job_folder.not_started(logs, job, started, str(error), annotations)
        annotations["slurm"]["job_id"] = job_id
        self.say(f"   Slurm job {job_id} submitted")
        state: control.JobState | None = None
        stopped = False
        try:
            state, stopped = self._wait(job, job_id)
        except BaseException:
            # Ctrl-C, SIGTERM or a failing poll: the job must not run on without us.
            control.cancel(job_id)
            raise
        finally:
            if world > 1:
                stderr_tail, failed = self._keep_rank_logs(job, world, work, slurm_out, slurm_err, logs, state)
            else:
                stderr_tail, failed = self._keep_logs(slurm_out, slurm_err, logs, stdout_log, stderr_log), None
        if state is None:
            ending = control.Ending(None, status="failed", reason=f"Slurm no longer knows job {job_id}")
        else:
            ending = control.ending(job_id, state, stopped_for_timeout=stopped)
            annotations["slurm"].update(state=state.state, node=state.node or None)
        if failed is not None and ending.status is None and not ending.timed_out and not ending.oom:
            # A rank failed: the job failed, whatever rank 0 managed to write (ranks.py's contract).
            ending = control.Ending(ending.exit_code, status="failed", reason=failed)
        return JobOutcome(
            exit_code=ending.exit_code,
            timed_out=ending.timed_out,
            stdout_log=stdout_log,
            stderr_log=stderr_log,
            wall_s=time.perf_counter() - started,
            annotations=annotations,
            oom=ending.oom,
            stderr_tail=stderr_tail,
            # A status the runner cannot infer from exit codes (cancelled, a node failure): the
            # runner replaces the job's own file, if any, by one that says what happened to it.
            status=ending.status,
            reason=ending.reason or ending.status,
        )

    def _cancel_earlier(self, job: Job, run_id: str) -> str | None:
        """scancel this job's Slurm jobs of an earlier attempt at the run that have not ended (a harness
        killed while one was queued or running left it behind); why the job cannot be submitted, if so.

        The run lock (run_folder.run_lock) says no other harness is working on this run, so such a job
        is an orphan: its output goes to a job folder nothing will read, and it holds a node."""
        try:
            left = [
                (job_id, state)
                for job_id, name, state in control.jobs_with_comment(run_comment(run_id))
                if name == job_name(job.framework) and state not in control.TERMINAL
            ]
        except HarnessError as error:
            return (
                f"not submitted: an earlier attempt of this job may still be in Slurm, and asking failed ({error}); "
                f"check `squeue --me` for {job_name(job.framework)} and resume again"
            )
        for job_id, state in left:
            control.cancel(job_id)
            print(
                f"note: Slurm job {job_id} ({job.framework}) from an earlier attempt of run {run_id} was still "
                f"{plain(state)}: cancelled it (scancel) before submitting again",
                file=sys.stderr,
                flush=True,
            )
        return None

    def _wait(self, job: Job, job_id: str) -> tuple[control.JobState | None, bool]:
        """Poll until the job ends: (its last state, whether the harness stopped it for its --timeout)."""
        delay, running_since, stopped, said = POLL_FIRST_S, None, False, ""
        unanswered_since: float | None = None
        while True:
            now = time.monotonic()
            try:
                state = control.query(job_id)
            except HarnessError as error:
                # slurmctld busy or restarting: keep asking for a while before giving up on the job.
                unanswered_since = unanswered_since or now
                if now - unanswered_since > QUERY_PATIENCE_S:
                    raise HarnessError(f"{error} (for {QUERY_PATIENCE_S:g} s); the job was cancelled") from None
                time.sleep(POLL_MAX_S)
                continue
            unanswered_since = None
            if state is None or state.finished:
                return state, stopped
            if state.state == "RUNNING" and running_since is None:
                running_since = now
                said = "running"
                self.say(f"   Slurm job {job_id} running")
            elif state.state == "PENDING" and state.reason and said != state.reason:
                said = state.reason
                self.say(f"   Slurm job {job_id} pending ({plain(state.reason)})")
            pause = delay
            if running_since is not None and not stopped:
                if (left := running_since + job.timeout_s - now) <= 0:
                    control.cancel(job_id)  # our own deadline: Slurm's --time is only the backstop
                    stopped = True
                else:
                    pause = min(delay, left + 0.05)
            time.sleep(pause)
            delay = min(delay * 1.5, POLL_MAX_S)

    def _keep_rank_logs(
        self,
        job: Job,
        world: int,
        work: Path,
        slurm_out: Path,
        slurm_err: Path,
        logs: Path,
        state: control.JobState | None,
    ) -> tuple[str, str | None]:
        """A data-parallel job's logs into logs/ (keep_rank_logs), each rank's from the job's folder. Returns
        the stderr tail and, when a rank failed, the failed result's reason (tasks.failure)."""

        def task(rank: int, stream: str) -> bytes:
            try:
                return read_tail(work / tasks.job_folder_log(rank, stream), MAX_LOG_BYTES)
            except UnsafeFile as error:
                return f"harness: rank {rank}'s {stream} was not read: {error}\n".encode()

        batch = {"stdout": _slurm_output(slurm_out), "stderr": _slurm_output(slurm_err)}
        started = any(os.path.lexists(work / tasks.job_folder_log(0, s)) for s in ("stdout", "stderr"))
        judge = started and state is not None and state.finished
        code = None if state is None else (-state.signal if state.signal else state.exit_code)
        stderr, failed, shown = keep_rank_logs(logs, job.framework, range(world), world, batch, task, judge, code)
        if self.echo:
            for line in tail_text(shown, lines=40, max_chars=8000).splitlines():
                self.say("  " + plain(line))
        return tail_text(stderr), failed

    def _keep_logs(self, slurm_out: Path, slurm_err: Path, logs: Path, stdout_log: Path, stderr_log: Path) -> str:
        """Copy the tails of Slurm's output files into logs/ (never through a link the job planted)."""
        for source, target in ((slurm_out, stdout_log), (slurm_err, stderr_log)):
            data = _slurm_output(source)
            with job_folder.open_log(logs, target.name) as sink:
                sink.write(data)
            if source is slurm_out and self.echo:
                for line in tail_text(data, lines=40, max_chars=8000).splitlines():
                    self.say("  " + plain(line))
        return tail_text(data)  # Slurm's stderr, the last copied


def _slurm_output(path: Path) -> bytes:
    """The tail of one of Slurm's output files, read without following a link."""
    try:
        return read_tail(path, MAX_LOG_BYTES)
    except UnsafeFile as error:
        return f"harness: Slurm's output file was not read: {error}\n".encode()


def keep_rank_logs(
    logs: Path,
    framework: str,
    ranks: Iterable[int],
    world: int,
    batch: dict[str, bytes],
    read: Callable[[int, str], bytes],
    judge: bool,
    exit_code: int | None = None,
) -> tuple[bytes, str | None, bytes]:
    """A data-parallel job's logs into `logs`, for the backend and for an export's collect: rank 0's with
    the batch script's own (`batch`: env builds, srun's report, slurmstepd) as the job's usual logs, each
    other rank of `ranks` under `rank_log_names`; `read(rank, stream)` is what the rank itself wrote.
    Returns the stderr for a failed result's tail, the failed result's reason when `judge` and a rank
    failed (tasks.failure, given the batch script's `exit_code`), and rank 0's stdout log as kept."""
    failed: str | None = None
    named: int | None = None
    if judge:
        found = tasks.failure(batch["stderr"].decode("utf-8", "replace"), world, exit_code, lambda r: read(r, "stderr"))
        if found is not None:
            failed, named = found
    shown = b""
    for rank in ranks:
        out, err = read(rank, "stdout"), read(rank, "stderr")
        if rank == 0:  # the script's own output around rank 0's: env building first, srun's report last
            out = shown = tasks.joined(batch["stdout"], out, "rank 0")
            err = tasks.joined(err, batch["stderr"], tasks.BATCH_HEADING)
        for name, data in zip(rank_log_names(framework, rank), (out, err), strict=True):
            with job_folder.open_log(logs, name) as sink:
                sink.write(data)
    # The failed rank's own last words, then what Slurm said about the ranks.
    return tasks.joined(read(named or 0, "stderr"), batch["stderr"], tasks.BATCH_HEADING), failed, shown


def check_options(options: BackendOptions) -> SlurmSettings:
    """The settings a slurm run would use, every one checked, without asking Slurm anything
    (`run --dry-run` calls it too, through backends/base.check_options)."""
    if options.pythons:
        raise HarnessError(
            "--python picks local interpreters; the slurm backend uses the stacks' locks (drop --python)"
        )
    settings = from_environment(wheelhouse=str(options.wheelhouse) if options.wheelhouse else None, gpus=options.gpus)
    if settings.runtime == "apptainer" and settings.images is None:
        raise HarnessError(
            "HARNESS_SLURM_RUNTIME=apptainer needs HARNESS_SLURM_IMAGES (a folder of .sif files or docker://REGISTRY)"
        )
    return settings


def from_options(options: BackendOptions) -> SlurmBackend:
    settings = check_options(options)
    backend = SlurmBackend(settings, options.limits, options.echo)
    print(f"note: slurm backend: jobs run in their stack through {settings.runtime}", file=sys.stderr)
    return backend
