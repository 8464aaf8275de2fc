"""One harness per run folder: an exclusive lock held while a run (or its resume) writes there.

Two `--resume` of one run would otherwise race: both redo the same jobs and one crashes on the
other's files. The lock is an fcntl.flock on `<run>/.lock`, released by the kernel when the
holder dies (even by SIGKILL), so a stale lock never blocks a later resume. The holder writes its
pid and command into the file so the refusal can name it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from harness.errors import HarnessError
from harness.text.escape import plain

LOCK_NAME = ".lock"


@contextlib.contextmanager
def run_lock(run_dir: Path) -> Iterator[None]:
    try:
        fd = os.open(run_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as error:
        raise HarnessError(f"{run_dir / LOCK_NAME}: cannot lock the run folder ({error.strerror}); remove it") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = plain(os.pread(fd, 300, 0).decode("utf-8", "replace").strip()) or "another process"
            raise HarnessError(
                f"run {run_dir.name} is in use by another harness ({holder}); wait for it to finish or stop it"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()}: {' '.join(['harness', *sys.argv[1:]])}"[:300].encode(), 0)
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
    finally:
        os.close(fd)  # releases the lock
