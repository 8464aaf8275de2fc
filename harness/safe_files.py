"""Reading run files without trusting what is on disk (writing them: harness/safe_writes.py).

A job (or anyone who edits a run folder) can leave a symbolic link, a FIFO or a device where a
result or a log is expected. Every read here opens without following links, refuses anything
but a regular file and reads at most a limit.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path
from typing import Any

from harness.errors import HarnessError

_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_CHUNK = 1 << 20


class UnsafeFile(HarnessError):
    """Not a plain, readable file of an acceptable size; `reason` says which, without the path."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


class MissingFile(UnsafeFile):
    pass


def kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISLNK, "symbolic link"),
        (stat.S_ISDIR, "directory"),
        (stat.S_ISFIFO, "FIFO"),
        (stat.S_ISSOCK, "socket"),
        (stat.S_ISCHR, "character device"),
        (stat.S_ISBLK, "block device"),
    ):
        if test(mode):
            return name
    return "regular file" if stat.S_ISREG(mode) else "special file"


def _refuse(path: Path, mode: int) -> UnsafeFile:
    return UnsafeFile(path, f"is a {kind(mode)}, not a regular file")


def _open_regular(path: Path, single_link: bool) -> tuple[int, os.stat_result]:
    """An fd on a regular file reached without following a link at its last component."""
    try:
        before = os.lstat(path)
    except FileNotFoundError:
        raise MissingFile(path, "is missing") from None
    except OSError as error:
        raise UnsafeFile(path, f"cannot be read ({error.strerror})") from None
    if not stat.S_ISREG(before.st_mode):  # never open a FIFO or a device, not even non-blocking
        raise _refuse(path, before.st_mode)
    try:
        fd = os.open(path, _READ_FLAGS)
    except FileNotFoundError:
        raise MissingFile(path, "is missing") from None
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise _refuse(path, stat.S_IFLNK) from None
        raise UnsafeFile(path, f"cannot be read ({error.strerror})") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or (info.st_dev, info.st_ino) != (before.st_dev, before.st_ino):
        os.close(fd)
        raise UnsafeFile(path, "changed while it was opened; read it again when nothing writes it")
    if single_link and info.st_nlink > 1:
        os.close(fd)
        raise UnsafeFile(path, "is a hard link to another file; only a file of its own is accepted")
    return fd, info


def read_bytes(path: Path, limit: int, *, single_link: bool = False, what: str = "file") -> bytes:
    """The whole content of a regular file (no link followed) of at most `limit` bytes."""
    fd, info = _open_regular(path, single_link)
    try:
        if info.st_size > limit:
            raise UnsafeFile(path, f"{info.st_size} bytes is too large for a {what} (limit {limit})")
        chunks, total = [], 0
        while True:  # st_size can lie (a file still growing): stop at the limit regardless
            chunk = os.read(fd, min(_CHUNK, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise UnsafeFile(path, f"more than {limit} bytes is too large for a {what} (limit {limit})")
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_text(path: Path, limit: int) -> str:
    return read_bytes(path, limit).decode("utf-8", errors="replace")


def read_tail(path: Path, max_bytes: int) -> bytes:
    """The last `max_bytes` of a regular file (no link followed); b'' when it is missing."""
    try:
        fd, info = _open_regular(path, single_link=False)
    except MissingFile:
        return b""
    try:
        os.lseek(fd, max(0, info.st_size - max_bytes), os.SEEK_SET)
        return os.read(fd, max_bytes)
    finally:
        os.close(fd)


def is_regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def remove_tree(path: Path) -> None:
    """Remove a folder a job wrote into; links in it are removed, never followed."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(info.st_mode):
        path.unlink(missing_ok=True)
        return
    import shutil

    def unlock(func: Any, name: str, exc: Any) -> None:
        """A job may leave folders without write or read permission: open them up (never via a link)."""
        for candidate in (name, os.path.dirname(name)):
            with contextlib.suppress(OSError):
                if stat.S_ISDIR(os.lstat(candidate).st_mode):
                    os.chmod(candidate, 0o700)

    for _ in range(8):  # each pass opens up (at least) one more level of locked folders
        shutil.rmtree(path, onerror=unlock)  # fd-based on Linux: safe against planted links
        if not os.path.lexists(path):
            return


def real_folder(path: Path, allow_link: bool = False) -> None:
    """Create `path` as a folder of our own; a link planted in a run folder is never written through."""
    if path.is_symlink() and not allow_link:
        raise HarnessError(f"{path} is a symbolic link; remove it (a report is written only into a real folder)")
    if path.exists() and not path.is_dir():
        raise HarnessError(f"--out {path} is a file; give a folder for the report")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise HarnessError(
            f"--out {path}: cannot create the report folder ({error.strerror}); choose another"
        ) from None
