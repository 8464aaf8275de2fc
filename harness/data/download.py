"""Downloading archives with a progress bar, verifying the publisher's checksum before use."""

from __future__ import annotations

import hashlib
import urllib.error
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

from harness.data.sources import Archive
from harness.errors import HarnessError

CHUNK = 1 << 16
TIMEOUT_S = 60.0
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
    """Stream `url` into `part`; returns (md5, sha256) of what arrived."""
    request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT})
    md5, sha = hashlib.md5(usedforsecurity=False), hashlib.sha256()
    with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response, part.open("wb") as out:
        length = response.headers.get("Content-Length")
        task = progress.add_task(archive.name, total=int(length) if length else archive.size)
        while chunk := response.read(CHUNK):
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
        except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as error:
            reason = getattr(error, "reason", error)
            problems.append(f"{url}: {reason}")
            continue
        if md5 != archive.md5:
            part.unlink(missing_ok=True)
            problems.append(f"{url}: md5 {md5} does not match the published {archive.md5}")
            continue
        part.replace(target)
        return Fetched(archive, target, url, sha, target.stat().st_size, downloaded=True)
    part.unlink(missing_ok=True)
    raise HarnessError(
        f"could not download {archive.name}: " + "; ".join(problems)
        + ". On an offline machine, copy the archives into a folder and use --from FOLDER"
    )  # fmt: skip


def from_folder(archive: Archive, source: Path) -> Fetched:
    """An archive the user already has (offline machines), verified and read in place."""
    found = source / archive.name
    if not found.is_file():
        raise HarnessError(f"--from {source}: {archive.name} is not there; it must hold the original archive files")
    md5, sha = _hashes(found)
    if md5 != archive.md5:
        raise HarnessError(
            f"{found}: md5 {md5} does not match the published {archive.md5}; the file is not the original"
        )
    return Fetched(archive, found, str(found.resolve()), sha, found.stat().st_size, downloaded=False)
