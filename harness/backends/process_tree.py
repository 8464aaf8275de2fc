"""Every process a local job starts ends with the job, however it tried to get away.

Killing the job's process group misses whatever left it (setpgid, setsid), and the parent-death
signal covers only the job's first process: a job that double-forked with setsid left a grandchild
running after the harness, and the harness waited on the output pipes that grandchild held. So while
a local job runs, the harness is a child subreaper (Linux): an orphaned descendant of the job is
reparented to the harness instead of init, and can still be found. When the job ends, each child of
the harness that was not there before the job and is outside the harness's own session is the job's
(the job starts in a session of its own, and a process can only start a new session, never join
the harness's), so it and everything below it is killed, again until none is left (a process may fork
while it is killed), and reaped: no process and no zombie outlives the job, and its pipes close at once.

Jobs in one harness run one at a time (DESIGN.md); a lock keeps it so here, since a second job in
the same process would look like the first one's leftovers. What this cannot cover: a harness killed
with SIGKILL runs no code, so a setsid grandchild then goes to init (the job's own first process
still dies with the harness, backends/local.py). Elsewhere than Linux only the process group is
killed.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

PR_SET_CHILD_SUBREAPER, PR_GET_CHILD_SUBREAPER = 36, 37  # linux/prctl.h
PROC = "/proc"
SWEEP_LIMIT_S = 10.0  # a process stuck in the kernel (D state) dies when it can; the harness goes on
_ONE_JOB = threading.Lock()


def _libc_prctl() -> Any:
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # not Linux
        return None


_PRCTL = _libc_prctl()


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
    table = {}
    with contextlib.suppress(OSError):
        for name in os.listdir(PROC):
            if name.isdigit() and (stat := read_stat(int(name))) is not None:
                table[int(name)] = stat
    return table


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
        while True:
            table = process_table()
            roots = self.leftovers(table)
            if not roots:
                return
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
        seen = read_stat(pid)
        if seen is None or seen.start != start:
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
        was = subreaper()
        if not was:
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
