"""Reading and writing run files without trusting what is on disk.

A job (or anyone who edits a run folder) can leave a symbolic link, a FIFO or a device where a
result or a log is expected. Every read here opens without following links, refuses anything
but a regular file and reads at most a limit. Writing: see "Writing", below.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import secrets
import stat
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from harness.core.errors import HarnessError

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


def is_folder(path: Path) -> bool:
    """A real folder at `path`: a link to one is not."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
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


# -- Writing ------------------------------------------------------------------------------------
#
# The one way the harness writes under a folder it owns (a results folder, the cache home).
#
# Every writer names an *anchor*: the folder the user chose (links above it and at it are theirs
# to make). Each path component below the anchor is opened relative to its parent's descriptor with
# O_NOFOLLOW, and created there when missing, so a link or a file a job (or anyone) planted at any
# level -- `<run>`, `logs`, `<fw>-artifacts`, a subfolder of the artefacts -- is refused, naming it,
# and never written through. The last component is written as a temporary file in that folder and
# renamed over the name, which replaces a planted link instead of following it.
#
# A full disk is reported as `NoSpace` (a one-line message, exit status 1) rather than a traceback,
# and a half-written temporary file is removed, so the file it was to replace stays whole.
#
# Every write raises the audit event `harness.write` (anchor, path): tests/test_planted_links.py
# lists the paths a real run writes from those events, then plants a link at each of them.

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
FULL = (errno.ENOSPC, errno.EDQUOT)


class NoSpace(HarnessError):
    """The disk (or quota) holding `path` is full: a state of the machine, not bad input."""

    exit_code = 1

    def __init__(self, path: Path, strerror: str | None = None, then: str | None = None) -> None:
        self.path = path
        self.strerror = strerror or "No space left on device"
        self.reason = f"the disk holding {path} is full ({self.strerror})"
        fix = then or "free some space (or give another --results-dir) and run again"
        super().__init__(f"{self.reason}; {fix}")


def failure(path: Path, error: OSError, doing: str) -> HarnessError:
    """The error to raise for an OSError met while writing `path`: NoSpace, or UnsafeFile saying what."""
    if error.errno in FULL:
        return NoSpace(path, error.strerror)
    if error.errno in (errno.ELOOP, errno.ENOTDIR, errno.EISDIR, errno.ENOTEMPTY, errno.EEXIST):
        return UnsafeFile(path, "is a link or not a plain folder of the harness's; remove it and run again")
    return UnsafeFile(path, f"cannot be {doing} ({error.strerror})")


def _below(anchor: Path, path: Path) -> tuple[str, ...]:
    try:
        parts = path.relative_to(anchor).parts
    except ValueError:
        raise UnsafeFile(path, f"is not inside {anchor}, where it must be written") from None
    if any(part in ("", ".", "..") for part in parts):
        raise UnsafeFile(path, "names a parent folder; give a plain path")
    return parts


@contextlib.contextmanager
def folder_fd(path: Path, anchor: Path | None = None, *, create: bool = True, mode: int = 0o755) -> Iterator[int]:
    """A descriptor on folder `path`; each component below `anchor` (default: `path` itself) is
    opened without following a link, and created first when `create` says so."""
    anchor = path if anchor is None else anchor
    parts = _below(anchor, path)
    try:
        if create:
            anchor.mkdir(parents=True, exist_ok=True)  # the user's own folder, links and all
        fd = os.open(anchor, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as error:
        raise failure(anchor, error, "opened as a folder") from None
    try:
        for depth, part in enumerate(parts, 1):
            where = anchor.joinpath(*parts[:depth])
            if create:
                try:
                    os.mkdir(part, mode, dir_fd=fd)
                except FileExistsError:
                    pass  # a folder from before, or something planted: the open below tells them apart
                except OSError as error:
                    raise failure(where, error, "created") from None
            try:
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as error:
                raise failure(where, error, "opened as a folder") from None
            os.close(fd)
            fd = child
        yield fd
    finally:
        os.close(fd)


def make_folder(path: Path, anchor: Path | None = None, mode: int = 0o755) -> Path:
    sys.audit("harness.write", str(anchor or path), str(path))
    with folder_fd(path, anchor, mode=mode):
        return path


def probe(folder: Path) -> None:
    """Create `folder` if needed and check a file can be made in it (then removed)."""
    with folder_fd(folder) as dir_fd:
        name = f".harness-write-test.{secrets.token_hex(6)}"
        try:
            os.close(os.open(name, _NEW_FILE, 0o600, dir_fd=dir_fd))
        except OSError as error:
            raise failure(folder, error, "written") from None
        os.unlink(name, dir_fd=dir_fd)


def new_folder(path: Path, anchor: Path) -> None:
    """Create `path` (below `anchor`), which must not exist yet: FileExistsError when it does."""
    sys.audit("harness.write", str(anchor), str(path))
    with folder_fd(path.parent, anchor) as dir_fd:
        try:
            os.mkdir(path.name, 0o755, dir_fd=dir_fd)
        except FileExistsError:
            raise  # the caller's to word (e.g. "run X already exists")
        except OSError as error:
            raise failure(path, error, "created") from None


def create(folder: Path, name: str, mode: int = 0o644, anchor: Path | None = None) -> BinaryIO:
    """A new, empty file `name` in `folder` opened for writing; a link or FIFO there is removed first."""
    path = folder / name
    sys.audit("harness.write", str(anchor or folder), str(path))
    with folder_fd(folder, anchor) as dir_fd:
        for _ in range(3):
            with contextlib.suppress(FileNotFoundError, IsADirectoryError):
                os.unlink(name, dir_fd=dir_fd)
            try:
                fd = os.open(name, _NEW_FILE, mode, dir_fd=dir_fd)
            except FileExistsError:
                continue  # someone re-created it in between: remove and try again
            except OSError as error:
                raise failure(path, error, "written") from None
            return os.fdopen(fd, "wb")
    raise UnsafeFile(path, "keeps being re-created by another process; stop it and run again")


def write_bytes_atomic(path: Path, data: bytes, anchor: Path | None = None) -> None:
    """Replace `path` with `data` in one rename: a planted link is replaced, never written through.

    Folders between `anchor` and `path` are walked without following links (default anchor: the
    file's own folder, for a path the user gave, such as --out or --junit)."""
    sys.audit("harness.write", str(anchor or path.parent), str(path))
    with folder_fd(path.parent, anchor) as dir_fd:
        tmp = f".{path.name[:100]}.{secrets.token_hex(6)}.tmp"
        try:
            fd = os.open(tmp, _NEW_FILE, 0o644, dir_fd=dir_fd)
        except OSError as error:
            raise failure(path, error, "written") from None
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            _check_replaceable(path, dir_fd)
            os.replace(tmp, path.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException as error:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dir_fd)
            if isinstance(error, OSError):
                raise failure(path, error, "written") from None
            raise


def _check_replaceable(path: Path, dir_fd: int) -> None:
    """A write replaces a regular file (or a planted link, never written through) and nothing else: a
    rename over a FIFO, a device or a socket would remove it (as root, `--junit /dev/full` once
    replaced the device with a file)."""
    try:
        mode = os.stat(path.name, dir_fd=dir_fd, follow_symlinks=False).st_mode
    except FileNotFoundError:
        return
    if not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
        raise UnsafeFile(path, f"is a {kind(mode)}, not a regular file; give the path of a file to write")


def write_json_atomic(path: Path, document: Any, anchor: Path | None = None) -> None:
    write_bytes_atomic(path, (json.dumps(document, indent=2, allow_nan=False) + "\n").encode("utf-8"), anchor)


def rename(folder: Path, old: str, new: str, anchor: Path | None = None) -> None:
    """Rename `old` to `new` inside `folder` (kept for inspection); nothing when `old` is gone."""
    sys.audit("harness.write", str(anchor or folder), str(folder / new))
    with folder_fd(folder, anchor, create=False) as dir_fd:
        try:
            os.replace(old, new, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except FileNotFoundError:
            pass
        except OSError as error:
            raise failure(folder / new, error, "renamed") from None


def remove(path: Path, anchor: Path | None = None) -> None:
    """Remove the file `path` (a link there is removed, not followed); nothing when it is gone."""
    sys.audit("harness.write", str(anchor or path.parent), str(path))
    with folder_fd(path.parent, anchor, create=False) as dir_fd, contextlib.suppress(FileNotFoundError):
        os.unlink(path.name, dir_fd=dir_fd)


@dataclass
class Copied:
    files: int = 0
    bytes: int = 0
    skipped: list[str] = field(default_factory=list)


def copy_regular_tree(
    source: Path, target: Path, *, max_bytes: int, max_files: int, max_depth: int = 8, anchor: Path | None = None
) -> Copied:
    """Copy only the regular, singly linked files under `source` (no link followed) into `target`,
    every folder of which is below `anchor` (default: target's parent) and reached without links.

    What is skipped (links, FIFOs, devices, hard links, anything past the limits) is named in
    `Copied.skipped`, so the result can say that part of the artefacts was dropped and why.
    """
    anchor = target.parent if anchor is None else anchor
    copied = Copied()
    try:
        top = os.lstat(source)
    except FileNotFoundError:
        return copied
    if not stat.S_ISDIR(top.st_mode):
        copied.skipped.append(f"{source.name} ({kind(top.st_mode)})")
        return copied
    for folder, dirs, files, dir_fd in os.fwalk(source, follow_symlinks=False):
        relative = Path(folder).relative_to(source)
        linked = [d for d in dirs if stat.S_ISLNK(os.lstat(d, dir_fd=dir_fd).st_mode)]
        if len(relative.parts) >= max_depth and dirs:
            copied.skipped.append(f"{relative} (folders nested deeper than {max_depth})")
            dirs[:] = []  # fwalk recurses: a hostile tree a thousand folders deep is not walked
        for name in sorted(files) + linked:
            where = relative / name
            data = _read_one(name, dir_fd, where, copied, max_bytes, max_files)
            if data is None:
                continue
            write_bytes_atomic(target / where, data, anchor)
            copied.files += 1
            copied.bytes += len(data)
    return copied


def _read_one(name: str, dir_fd: int, where: Path, copied: Copied, max_bytes: int, max_files: int) -> bytes | None:
    """One artefact's bytes, or None with the reason in `copied.skipped`."""
    try:
        info = os.lstat(name, dir_fd=dir_fd)
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode) or info.st_nlink > 1:
        copied.skipped.append(f"{where} ({'hard link' if stat.S_ISREG(info.st_mode) else kind(info.st_mode)})")
        return None
    if copied.files >= max_files or copied.bytes + info.st_size > max_bytes:
        copied.skipped.append(f"{where} (over the artefact limit of {max_files} files, {max_bytes} bytes)")
        return None
    try:
        fd = os.open(name, _READ_FLAGS, dir_fd=dir_fd)
    except OSError:
        copied.skipped.append(f"{where} (unreadable)")
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            copied.skipped.append(f"{where} (changed while copied)")
            return None
        budget = max_bytes - copied.bytes
        chunks, size = [], 0
        while size <= budget:
            chunk = os.read(fd, min(_CHUNK, budget + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    if size > budget:
        copied.skipped.append(f"{where} (grew past the artefact limit)")
        return None
    return b"".join(chunks)


@contextlib.contextmanager
def flock_file(
    path: Path, what: str, busy: Callable[[str], None], mode: int = 0o644, anchor: Path | None = None
) -> Iterator[None]:
    """Hold an exclusive flock on `path` (created, never through a link) for the `with` block.

    When another process holds it, `busy(holder)` is called with what that holder wrote into the
    file (its pid and command): raising refuses, returning waits for the lock. The kernel releases
    the lock when its holder dies (even by SIGKILL), so a stale lock never blocks.
    """
    sys.audit("harness.write", str(anchor or path.parent), str(path))
    with folder_fd(path.parent, anchor) as dir_fd:
        try:
            fd = os.open(path.name, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dir_fd)
        except OSError as error:
            if error.errno in FULL:
                raise NoSpace(path, error.strerror) from None
            raise HarnessError(f"{path}: cannot lock the {what} ({error.strerror}); remove it") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise HarnessError(f"{path}: not a regular file; remove it")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            busy(os.pread(fd, 300, 0).decode("utf-8", "replace").strip() or "another process")
            fcntl.flock(fd, fcntl.LOCK_EX)
        os.ftruncate(fd, 0)
        try:  # who holds it, for the refusal a second harness prints; a full disk must not stop the run
            os.pwrite(fd, f"pid {os.getpid()}: {' '.join(['harness', *sys.argv[1:]])}"[:300].encode(), 0)
        except OSError as error:
            if error.errno not in FULL:
                raise
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
    finally:
        os.close(fd)  # releases the lock
