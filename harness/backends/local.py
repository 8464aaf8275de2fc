"""Local backend: the job contract in a subprocess of a local Python (development, CI, no Docker).

The job writes only into its own folder (backends/job_folder.py); its output goes through pipes
into logs the harness created, and it dies with the harness: a SIGKILLed harness takes its job
along (PR_SET_PDEATHSIG), so no job runs on, orphaned, after its run is gone. Whatever the job
started, even in a session of its own, is ended with it (`contained`, below).
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import os
import resource
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.backends import job_folder, ranks
from harness.backends.base import BackendOptions, JobOutcome, Limits, job_command
from harness.backends.fork_pool import ServerPool
from harness.backends.fork_server import ForkedJob, ForkServer, ServerGone
from harness.backends.job_folder import Tail, pump, read_chunks
from harness.core.safe_files import make_folder
from harness.store.plan import Job
from harness.text.escape import plain
from suites.contract.ranks import processes, rank_environment
from suites.contract.registry import SUITES_DIR

PR_SET_PDEATHSIG = 1  # linux/prctl.h
Process = subprocess.Popen[bytes] | ForkedJob  # a started job: a ForkedJob behaves as a Popen


def _prctl() -> Any:
    """libc's prctl, looked up before any fork (ctypes must not load libraries in the child)."""
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # not Linux: no parent-death signal
        return None


_PRCTL = _prctl()


# -- the job's whole process tree ---------------------------------------------------------------
#
# Every process a local job starts ends with the job, however it tried to get away.
#
# Killing the job's process group misses whatever left it (setpgid, setsid), and the parent-death
# signal covers only the job's first process: a job that double-forked with setsid left a grandchild
# running after the harness, and the harness waited on the output pipes that grandchild held. So while
# a local job runs, the harness is a child subreaper (Linux): an orphaned descendant of the job is
# reparented to the harness instead of init, and can still be found. When the job ends, each child of
# the harness that was not there before the job and is outside the harness's own session is the job's
# (the job starts in a session of its own, and a process can only start a new session, never join
# the harness's), so it and everything below it is killed, again until none is left (a process may fork
# while it is killed), and reaped: no process and no zombie outlives the job, and its pipes close at once.
#
# Jobs in one harness run one at a time (DESIGN.md); a lock keeps it so here, since a second job in
# the same process would look like the first one's leftovers. What this cannot cover: a harness killed
# with SIGKILL runs no code, so a setsid grandchild then goes to init (the job's own first process
# still dies with the harness, backends/local.py). Elsewhere than Linux only the process group is
# killed.

PR_SET_CHILD_SUBREAPER, PR_GET_CHILD_SUBREAPER = 36, 37  # linux/prctl.h
PROC = "/proc"
SWEEP_LIMIT_S = 10.0  # a process stuck in the kernel (D state) dies when it can; the harness goes on
_ONE_JOB = threading.Lock()


@dataclass(frozen=True)
class Stat:
    """What /proc/<pid>/stat says that matters here."""

    ppid: int
    session: int
    zombie: bool
    start: int  # clock ticks after boot: with the pid, names one process even after the pid is reused


def read_stat(pid: int) -> Stat | None:
    try:
        with open(f"{PROC}/{pid}/stat", "rb") as handle:
            text = handle.read()
    except OSError:  # gone (or never there)
        return None
    # The command name (field 2) is in parentheses and may itself hold spaces and parentheses.
    fields = text[text.rindex(b")") + 2 :].split()
    return Stat(ppid=int(fields[1]), session=int(fields[3]), zombie=fields[0] == b"Z", start=int(fields[19]))


def process_table() -> dict[int, Stat]:
    with contextlib.suppress(OSError):
        names = os.listdir(PROC)
        return {int(name): stat for name in names if name.isdigit() and (stat := read_stat(int(name))) is not None}
    return {}


def subreaper(on: bool | None = None) -> bool:
    """Whether this process is a child subreaper; with `on`, make it one (or not) first."""
    if _PRCTL is None:
        return False
    if on is not None and _PRCTL(PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) != 0:
        return False
    value = ctypes.c_int(0)
    return _PRCTL(PR_GET_CHILD_SUBREAPER, ctypes.byref(value), 0, 0, 0) == 0 and value.value != 0


class JobTree:
    """The children of the harness that a job left behind, told apart from the harness's own."""

    def __init__(self) -> None:
        self.harness = os.getpid()
        self.session = os.getsid(0)
        self.before = {(pid, s.start) for pid, s in process_table().items() if s.ppid == self.harness}

    def leftovers(self, table: dict[int, Stat]) -> list[int]:
        return [
            pid
            for pid, s in table.items()
            if s.ppid == self.harness and s.session != self.session and (pid, s.start) not in self.before
        ]

    def end(self) -> None:
        """Kill and reap what the job left (call once its first process has been waited for)."""
        deadline = time.monotonic() + SWEEP_LIMIT_S
        while roots := self.leftovers(table := process_table()):
            for pid in below(roots, table):
                if not table[pid].zombie:
                    kill(pid, table[pid].start)
            for pid in roots:  # our children (a pid not reaped is never reused): safe to reap
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, os.WNOHANG)
            if time.monotonic() > deadline:
                return
            time.sleep(0.005)  # SIGKILL lands asynchronously; the next pass reaps, and finds new forks


def below(roots: list[int], table: dict[int, Stat]) -> list[int]:
    """`roots` and all their descendants in `table`."""
    children: dict[int, list[int]] = {}
    for pid, s in table.items():
        children.setdefault(s.ppid, []).append(pid)
    found, todo = [], list(roots)
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def kill(pid: int, start: int) -> None:
    """SIGKILL `pid` if it is still the process seen in the table (its pid may have been freed and reused)."""
    try:
        fd: int | None = os.pidfd_open(pid)  # holds the process: its pid cannot be reused while open
    except ProcessLookupError:
        return
    except (AttributeError, OSError):  # no pidfds here (kernel < 5.3): only the moment's check below
        fd = None
    try:
        if (seen := read_stat(pid)) is None or seen.start != start:
            return
        if fd is None:
            os.kill(pid, signal.SIGKILL)
        else:
            signal.pidfd_send_signal(fd, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):  # gone, or a setuid program we may not signal
        pass
    finally:
        if fd is not None:
            os.close(fd)


@contextlib.contextmanager
def contained() -> Iterator[JobTree]:
    """Around one job: the harness is a subreaper throughout, and nothing the job started outlives the block."""
    with _ONE_JOB:
        if not (was := subreaper()):
            subreaper(True)
        tree = JobTree()
        try:
            yield tree
        finally:
            try:
                tree.end()
            finally:
                if not was:
                    subreaper(False)  # the harness's other subprocesses keep their usual orphans' fate


class LocalBackend:
    name = "local"

    def __init__(
        self,
        pythons: dict[str, str] | None = None,
        echo: bool = True,
        limits: Limits | None = None,
        suites_dir: Path = SUITES_DIR,
        fork_rounds: bool = False,
    ) -> None:
        self.pythons = pythons or {}
        self.echo = echo
        self.limits = limits or Limits()
        self.suites_dir = suites_dir  # the code the jobs run (another checkout's in `harness ab`)
        self.fork_rounds = fork_rounds  # inside `serving()`: each job forked from a server that imported once
        self._serving = False
        self.pool: ServerPool | None = None  # inside `serving()` with fork_rounds: the session's servers

    @contextlib.contextmanager
    def serving(self, shared: ServerPool | None = None) -> Iterator[ServerPool | None]:
        """Around a session's rounds: each job is forked from a server per (interpreter, framework,
        settings) that imported the framework once (suites/runtime/fork_server.py), unless this
        backend was asked for fresh processes. `shared`: another side's servers, which serve this
        side's jobs too where the code matches (harness/backends/fork_pool.py); the block that made
        the servers ends them."""
        if self._serving:  # already inside one (a backend shared by two sides): that block ends them
            yield self.pool
            return
        self._serving = True
        self.pool = (shared or ServerPool()) if self.fork_rounds else None
        if self.pool is not None:
            # What a server would pass on from this backend to every child: it must be every side's.
            stacks = tuple((stack, self.python_for(stack)) for stack in sorted(self.pythons))
            self.pool.join(str(self.suites_dir.parent), (stacks, self.limits))
        try:
            yield self.pool
        finally:
            pool, self.pool, self._serving = self.pool, None, False
            if pool is not None and pool is not shared:
                pool.close()

    def _server(self, job: Job, spec_path: str, cache_dir: str | None, env: dict[str, str]) -> ForkServer | None:
        """The server this job forks from (started now if none of its key serves this code), or None."""
        if self.pool is None:
            return None
        python = self.python_for(job.stack)
        root = str(self.suites_dir.parent)
        # The checkout's own folder (first on PYTHONPATH) is not the key: a server serves every
        # checkout whose code it ran is the same (fork_pool.py).
        rest = {**env, "PYTHONPATH": env["PYTHONPATH"].split(os.pathsep, 1)[1:]}
        key = (python, job.framework, job.device, job.threads, job.cache, cache_dir, repr(sorted(rest.items())))
        parent = os.getpid()
        server = self.pool.server_for(
            key,
            root,
            lambda: ForkServer.start(
                [python, "-m", "suites", "serve", "--job", spec_path],
                env,
                root,
                lambda: self._child_setup(parent),
                job.timeout_s,
            ),
        )
        if (why := self.pool.notice()) is not None:
            print(f"--processes forked: this session's jobs run in fresh processes: {plain(why)}", file=sys.stderr)
        return server

    def _child_setup(self, parent: int) -> None:
        """Runs in the child before exec: die with the harness, then the local stand-ins for limits."""
        if _PRCTL is not None:
            _PRCTL(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            if os.getppid() != parent:  # the harness died before the line above: do not run orphaned
                os._exit(1)
        if self.limits.memory_bytes is not None:
            # Address-space cap: allocations beyond it raise MemoryError, which the job reports as oom.
            resource.setrlimit(resource.RLIMIT_AS, (self.limits.memory_bytes, self.limits.memory_bytes))
        if self.limits.cpus is not None:
            allowed = sorted(os.sched_getaffinity(0))
            os.sched_setaffinity(0, allowed[: max(1, math.ceil(self.limits.cpus))])

    def python_for(self, stack: str) -> str:
        python = self.pythons.get(stack, sys.executable)
        # A path is taken from the user's folder, not the job's (it starts in the suites' root); a bare
        # name is looked up on PATH as given.
        return os.path.abspath(python) if os.sep in python else python

    def _fork(self, server: ForkServer | None, spec_path: str) -> ForkedJob | None:
        """The job as a child of its server; None (a fresh process instead) when there is none or it failed."""
        if server is None:
            return None
        try:
            return server.fork(spec_path, str(self.suites_dir.parent))
        except ServerGone:
            server.close()
            return None

    def _start(self, cmd: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        parent = os.getpid()
        # Own session: a timeout kills the job and anything it spawned (compilers, workers).
        return subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
            # `python -m` puts the working folder first on sys.path: run from the suites' root, so
            # a `suites` package in whatever folder the user is in is never the code that runs.
            cwd=self.suites_dir.parent,
            preexec_fn=lambda: self._child_setup(parent),
        )

    def run_job(self, job: Job, run_id: str, run_dir: Path) -> JobOutcome:
        outcome, found = job_folder.run_in_folder(
            run_dir, job, lambda work: self._run(job, run_id, run_dir / "logs", work)
        )
        return job_folder.note_harvest(outcome, found)

    def _run(self, job: Job, run_id: str, logs: Path, work: Path) -> JobOutcome:
        work = Path(os.path.abspath(work))  # the job starts in another folder (below): no relative paths
        cache_dir = None
        if job.cache == "warm" and job.cache_dir is not None:
            # One per stack (versions never mix), made below the cache home's folder without a link.
            cache_dir = os.path.abspath(make_folder(Path(job.cache_dir) / job.stack, Path(job.cache_dir)))
        spec = job.spec(
            run_id=run_id,
            backend=self.name,
            result_path=str(work / job.result_file()),
            # the job sees the host's folders as they are (made absolute, links not followed)
            data_dir=None if job.data_dir is None else os.path.abspath(job.data_dir),
            cache_dir=cache_dir,
        )
        spec_path = str(job_folder.write_spec(work, spec))
        cmd = job_command(spec_path, python=self.python_for(job.stack))
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(self.suites_dir.parent), env.get("PYTHONPATH")]))
        env["PYTHONUNBUFFERED"] = "1"
        world = processes(job.params)
        if world > 1:  # a data-parallel job: N fresh processes on this machine, never forked from a server
            return self._run_ranks(job, logs, cmd, env, world)
        server = self._server(job, spec_path, cache_dir, env)  # before the job's tree is taken: not the job's
        stdout_log, stderr_log = logs / f"{job.framework}.stdout.log", logs / f"{job.framework}.stderr.log"
        stdout_sink = job_folder.open_log(logs, stdout_log.name)
        stderr_sink = job_folder.open_log(logs, stderr_log.name)
        started = time.perf_counter()
        pumps: list[threading.Thread] = []
        tail = Tail()
        try:
            with contained():  # whatever the job starts ends with it, setsid or not
                try:
                    proc: Process = self._fork(server, spec_path) or self._start(cmd, env)
                except OSError as error:  # e.g. a --python path that does not exist: the job fails, the run goes on
                    message = f"cannot start {cmd[0]}: {error}\n"
                    with stderr_sink:
                        stderr_sink.write(message.encode())
                    stdout_sink.close()
                    return JobOutcome(
                        None, False, stdout_log, stderr_log, time.perf_counter() - started, stderr_tail=message.strip()
                    )
                assert proc.stdout is not None and proc.stderr is not None
                pumps += [
                    pump(read_chunks(proc.stdout), stdout_sink, sys.stdout if self.echo else None),
                    pump(read_chunks(proc.stderr), stderr_sink, None, tail),
                ]
                timed_out = _wait(proc, job.timeout_s)
        finally:
            # Every process that held the pipes' other ends is gone now: the pumps reach the end at
            # once (the timeout is for a pipe handed to a process outside the job, say over a socket).
            for thread in pumps:
                thread.join(timeout=5)
        return JobOutcome(
            exit_code=proc.returncode,
            timed_out=timed_out,
            stdout_log=stdout_log,
            stderr_log=stderr_log,
            wall_s=time.perf_counter() - started,
            annotations={"python": self.python_for(job.stack)},
            stderr_tail=tail.text(),
        )

    def _run_ranks(self, job: Job, logs: Path, cmd: list[str], env: dict[str, str], world: int) -> JobOutcome:
        """The job's ranks (suites/contract/ranks.py), each in a session of its own, rank 0 meeting the
        others on a loopback port; the first to fail ends them all (harness/backends/ranks.py)."""
        coordinator = f"127.0.0.1:{ranks.free_port()}"
        started = time.perf_counter()
        pumps: list[threading.Thread] = []
        procs: list[subprocess.Popen[bytes]] = []
        tails = [Tail() for _ in range(world)]
        names = [ranks.rank_log_names(job.framework, r) for r in range(world)]
        supervised = None
        try:
            with contained():
                for r in range(world):
                    stdout_sink = job_folder.open_log(logs, names[r][0])
                    stderr_sink = job_folder.open_log(logs, names[r][1])
                    try:
                        proc = self._start(cmd, {**env, **rank_environment(r, world, coordinator)})
                    except OSError as error:
                        message = f"cannot start {cmd[0]} for rank {r}: {error}\n"
                        with stderr_sink:
                            stderr_sink.write(message.encode())
                        stdout_sink.close()
                        for started_proc in procs:
                            with contextlib.suppress(ProcessLookupError):
                                os.killpg(started_proc.pid, signal.SIGKILL)
                        return JobOutcome(None, False, logs / names[0][0], logs / names[0][1],
                                          time.perf_counter() - started, stderr_tail=message.strip())  # fmt: skip
                    procs.append(proc)
                    assert proc.stdout is not None and proc.stderr is not None
                    echo = sys.stdout if self.echo and r == 0 else None
                    pumps += [
                        pump(read_chunks(proc.stdout), stdout_sink, echo),
                        pump(read_chunks(proc.stderr), stderr_sink, None, tails[r]),
                    ]

                def kill(r: int) -> None:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(procs[r].pid, signal.SIGKILL)
                    procs[r].wait()

                # When each rank ended, taken by a thread blocked in its wait (a poll every 50 ms
                # cannot order a crash and its peer's broken connection a millisecond later).
                ended: dict[int, float] = {}

                def waiter(r: int) -> None:
                    procs[r].wait()
                    ended.setdefault(r, time.monotonic())

                for r in range(world):
                    threading.Thread(target=waiter, args=(r,), daemon=True).start()
                supervised = ranks.supervise([p.poll for p in procs], kill, job.timeout_s, ended=ended.get)
                for r in range(world):
                    kill(r)  # what each rank left running in its group
        finally:
            for thread in pumps:
                thread.join(timeout=5)
        assert supervised is not None  # the block above either supervised the ranks or returned
        failed = supervised.first_failed
        tail = tails[failed if failed is not None else 0].text()
        return JobOutcome(
            exit_code=procs[0].returncode if failed is None else supervised.exit_codes[failed],
            timed_out=supervised.timed_out,
            stdout_log=logs / names[0][0],
            stderr_log=logs / names[0][1],
            wall_s=time.perf_counter() - started,
            annotations={"python": self.python_for(job.stack), "ranks": world, "coordinator": coordinator},
            stderr_tail=tail,
            status="failed" if failed is not None else None,
            reason=supervised.reason(job.timeout_s) if failed is not None else None,
        )


def _wait(proc: Process, timeout_s: float | None) -> bool:
    """Wait for the job's first process, killing its process group at a timeout; true if it timed out."""
    try:
        proc.wait(timeout=timeout_s)
        return False
    except subprocess.TimeoutExpired:
        return True
    finally:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)  # what the job left running in its group


def from_options(options: BackendOptions) -> LocalBackend:
    return LocalBackend(
        pythons=dict(options.pythons),
        echo=options.echo,
        limits=options.limits,
        suites_dir=options.suites_dir,
        fork_rounds=options.fork_rounds,
    )
