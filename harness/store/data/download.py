"""Downloading archives with a progress bar, verifying the publisher's checksum before use."""

from __future__ import annotations

import hashlib
import http.client
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

from harness.core.errors import HarnessError, Unreachable
from harness.store.data.sources import Archive

CHUNK = 1 << 16
TIMEOUT_S = 60.0  # per socket operation
MIN_RATE = 50_000  # bytes/s: a download slower than this overall is given up (a stalled server)


class TooLarge(Exception):
    """The server sent (or announced) more bytes than the archive's published size."""


def check_mirror(url: str) -> str:
    """A --mirror must be an http(s) base URL; anything else is one line, before any download."""
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 -- raises ValueError for a port that is not a number
    except ValueError:
        raise HarnessError(f"--mirror {url!r} is not a URL; expected e.g. https://mirror.example.org/mnist/") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise HarnessError(
            f"--mirror {url!r} is not an http(s) URL with a host; expected e.g. https://mirror.example.org/mnist/ "
            "(a local folder: use --from FOLDER)"
        )
    if parts.query or parts.fragment:
        raise HarnessError(f"--mirror {url!r}: a base URL has no ?query or #fragment; archive names are appended")
    return url


USER_AGENT = "fw-harness-data/1 (+https://github.com/)"


@dataclass(frozen=True)
class Fetched:
    archive: Archive
    path: Path
    url: str  # where it came from (a URL, or the local file for --from)
    sha256: str
    bytes: int
    downloaded: bool  # False: the user's own file (--from), never deleted


def progress_bar() -> Progress:
    """Bars on stderr, so stdout stays clean for what the command prints."""
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=False,
    )


def _hashes(path: Path) -> tuple[str, str]:
    md5, sha = hashlib.md5(usedforsecurity=False), hashlib.sha256()
    with path.open("rb") as stream:
        while chunk := stream.read(1 << 20):
            md5.update(chunk)
            sha.update(chunk)
    return md5.hexdigest(), sha.hexdigest()


def _download_one(url: str, part: Path, archive: Archive, progress: Progress) -> tuple[str, str]:
    """Stream `url` into `part`; returns (md5, sha256) of what arrived.

    Never more than the archive's published size is read (any other size cannot match its
    MD5), and the whole transfer has a deadline, so a hostile or broken server cannot fill the
    disk or hold the command forever.
    """
    request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT})
    md5, sha = hashlib.md5(usedforsecurity=False), hashlib.sha256()
    deadline = time.monotonic() + TIMEOUT_S + archive.size / MIN_RATE
    received = 0
    with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response, part.open("wb") as out:
        length = response.headers.get("Content-Length")
        announced = int(length) if length and length.strip().isdigit() else None
        if announced is not None and announced > archive.size:
            raise TooLarge(f"announces {announced} bytes, the published archive has {archive.size}")
        task = progress.add_task(archive.name, total=announced or archive.size)
        sock = getattr(getattr(response.fp, "raw", None), "_sock", None)
        while True:
            if (left := deadline - time.monotonic()) <= 0:
                raise TimeoutError(f"slower than {MIN_RATE // 1000} kB/s overall; gave up")
            if sock is not None:  # no single wait may outlast the deadline (a server dripping a byte at a time)
                sock.settimeout(min(TIMEOUT_S, left))
            # read1: what has arrived (one receive), not a whole block that a drip takes hours to fill
            try:
                chunk = response.read1(min(CHUNK, archive.size + 1 - received))
            except TimeoutError:
                if left >= TIMEOUT_S:
                    raise  # one receive waited TIMEOUT_S: a stalled server, said as such
                raise TimeoutError(f"slower than {MIN_RATE // 1000} kB/s overall; gave up") from None
            if not chunk:
                break
            received += len(chunk)
            if received > archive.size:
                raise TooLarge(f"sent more than the published {archive.size} bytes; stopped reading")
            out.write(chunk)
            md5.update(chunk)
            sha.update(chunk)
            progress.update(task, advance=len(chunk))
    return md5.hexdigest(), sha.hexdigest()


def download(archive: Archive, bases: Sequence[str], folder: Path, progress: Progress) -> Fetched:
    """Try each base URL in turn; keep the first copy whose md5 matches the published one."""
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / archive.name
    part = folder / (archive.name + ".part")
    problems = []
    for base in bases:
        url = base.rstrip("/") + "/" + archive.name
        try:
            md5, sha = _download_one(url, part, archive, progress)
        except urllib.error.HTTPError as error:
            problems.append(f"{url}: HTTP {error.code}")
            continue
        except (TooLarge, urllib.error.URLError, TimeoutError, OSError, ValueError, http.client.HTTPException) as error:
            # HTTPException / ValueError: a malformed or cut-off response (status line, headers, body)
            reason = getattr(error, "reason", error)
            part.unlink(missing_ok=True)
            problems.append(f"{url}: {reason or type(error).__name__}")
            continue
        if md5 != archive.md5:
            part.unlink(missing_ok=True)
            problems.append(f"{url}: md5 {md5} does not match the published {archive.md5}")
            continue
        part.replace(target)
        return Fetched(archive, target, url, sha, target.stat().st_size, downloaded=True)
    part.unlink(missing_ok=True)
    raise Unreachable(
        f"could not download {archive.name}: " + "; ".join(problems)
        + ". On an offline machine, copy the archives into a folder and use --from FOLDER"
    )  # fmt: skip


def from_folder(archive: Archive, source: Path) -> Fetched:
    """An archive the user already has (offline machines), verified and read in place. Its size is
    published with its MD5: a file of another size cannot be the original, and is refused before it
    is read (a 6 GiB sparse file was hashed whole, minutes, to say what its size already said)."""
    found = source / archive.name
    if found.is_symlink() or not found.is_file():
        what = "a symbolic link (links are not followed)" if found.is_symlink() else "not there"
        raise HarnessError(
            f"--from {source}: {archive.name} is {what}; the folder must hold the original archive files"
        )
    if (size := found.stat().st_size) != archive.size:
        raise HarnessError(
            f"{found}: {size} bytes, the published archive has {archive.size}; the file is not the original "
            "(copy the original archive into the --from folder)"
        )
    md5, sha = _hashes(found)
    if md5 != archive.md5:
        raise HarnessError(
            f"{found}: md5 {md5} does not match the published {archive.md5}; the file is not the original"
        )
    return Fetched(archive, found, str(found.resolve()), sha, size, downloaded=False)
