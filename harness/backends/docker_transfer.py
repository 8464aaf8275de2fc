"""What a job container reads and writes that is not in its image, moved through the Docker API.

Results, in every mode: a job's `/results` is a named tmpfs volume of RESULTS_CAP_BYTES (and
RESULTS_CAP_FILES files), never a host folder, so a job writing without end meets ENOSPC inside
its container and the engine's disk never holds more than the cap. A tmpfs volume lives only
while a container holds it mounted, so a small holder container (the job's image, hardened like
the job, sleeping) keeps it from before the job starts until its result file and artefacts have
come back by `get_archive` -- streamed to disk under their own limits, never read whole into
memory -- and says how full it was.

Remote engines: a bind mount names a path on the engine's machine; with `DOCKER_HOST=ssh://gpu-box`
that path does not exist there. In `copy` mode each job's suites (and data folder) go into named
volumes instead: a short-lived loader container (never started) receives them by `put_archive`,
and the job mounts them read-only.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import tarfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import Any

from harness.backends.job_folder import MAX_ARTIFACT_BYTES, MAX_ARTIFACT_FILES, Harvest
from harness.backends.reaper import Reaper
from harness.core import owner
from harness.core.errors import HarnessError
from harness.core.safe_files import MissingFile, UnsafeFile, create, failure, read_bytes
from harness.core.schema import MAX_RESULT_BYTES
from harness.store.images import LABEL

OUT_SUBDIR = "out"  # copy mode: the job writes here, a folder its user owns inside the results volume
RESULTS_MOUNT = "/results"
# What a job's /results may hold: its result file and artefacts at their own limits (16 MiB and
# 256 MiB: all the harness ever takes back), plus 8 MiB for job.json and the tmpfs's rounding of
# every file to whole pages. Pages of a tmpfs are memory, charged to the job's memory limit.
RESULTS_CAP_BYTES = MAX_RESULT_BYTES + MAX_ARTIFACT_BYTES + 8 * 2**20  # 280 MiB
RESULTS_CAP_FILES = 4 * MAX_ARTIFACT_FILES  # files and folders: the job's inodes, capped as well
# Free space below this after the job: its /results counts as full (a write past the cap failed).
FULL_MARGIN = 2**20
# The tar of what is asked back can carry no more than the volume plus a header or two per file;
# past this the stream is closed, not read on (an engine that ignored the size option).
ARCHIVE_LIMIT = RESULTS_CAP_BYTES + RESULTS_CAP_FILES * 4096
_CHUNK = 1 << 20
HOLDER_LABEL = f"{LABEL}.holds"  # on the holder container: what it holds mounted
HOLDER_KEEPS = (f"{LABEL}.run-id", f"{LABEL}.{owner.LABEL_KEY}")  # what the reaper and `clean` go by


def transfer_mode(requested: str) -> str:
    """`bind` or `copy`; auto picks copy for an engine that is not on this machine."""
    if requested in ("bind", "copy"):
        return requested
    if requested != "auto":
        raise HarnessError(f"--transfer {requested!r} is not auto, bind or copy")
    host = os.environ.get("DOCKER_HOST", "")
    local = not host or host.startswith(("unix://", "npipe://")) or "localhost" in host or "127.0.0.1" in host
    return "bind" if local else "copy"


def tar_folder(folder: Path, skip_caches: bool = True) -> bytes:
    """A tar of the folder's contents (not the folder itself), readable by any user."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for path in sorted(folder.rglob("*")):
            if skip_caches and ("__pycache__" in path.parts or path.suffix == ".pyc"):
                continue
            info = tar.gettarinfo(str(path), arcname=str(path.relative_to(folder)))
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mode = 0o755 if path.is_dir() else 0o644
            if path.is_file():
                with path.open("rb") as handle:
                    tar.addfile(info, handle)
            elif path.is_dir():
                tar.addfile(info)
    return buffer.getvalue()


def tar_writable_dir(
    name: str, uid: int, gid: int, files: dict[str, bytes] | None = None, *, folder: bool = True
) -> bytes:
    """A folder `name` the job's user may write into (unless `folder` is false), and beside it
    `files` (read-only to the job)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        if folder:
            info = tarfile.TarInfo(name)
            info.type, info.mode, info.uid, info.gid = tarfile.DIRTYPE, 0o777, uid, gid
            tar.addfile(info)
        for file_name, data in (files or {}).items():
            entry = tarfile.TarInfo(file_name)
            entry.size, entry.mode = len(data), 0o644
            tar.addfile(entry, io.BytesIO(data))
    return buffer.getvalue()


@contextmanager
def job_volumes(
    client: Any, name: str, labels: dict[str, str], image_id: str, fills: dict[str, bytes], reaper: Reaper
) -> Iterator[dict[str, str]]:
    """Named volumes (mount point -> volume name) filled through a loader; removed on the way out."""
    from docker.types import Mount

    volumes = {target: f"{name}-{i}" for i, target in enumerate(fills)}
    created = []
    try:
        for volume in volumes.values():
            reaper.track("volume", volume)
            created.append(client.volumes.create(name=volume, labels=labels))
        reaper.track("container", f"{name}-loader")
        loader = client.containers.create(
            image_id,
            ["true"],
            name=f"{name}-loader",
            labels=labels,
            network_mode="none",
            mounts=[Mount(target, volume, type="volume") for target, volume in volumes.items()],
        )
        try:
            for target, data in fills.items():
                if data and not loader.put_archive(target, data):
                    raise HarnessError(f"the Docker engine refused the copy into {target}")
        finally:
            loader.remove(force=True)
            reaper.untrack("container", f"{name}-loader")
        yield volumes
    finally:
        for volume in created:
            # a volume still held by a dying container is left for `harness clean`
            with contextlib.suppress(Exception):
                volume.remove(force=True)
                reaper.untrack("volume", volume.name)


def results_volume_name(run_id: str, work: Path) -> str:
    """The job's results volume: named after its host-side job folder (fresh for every attempt)."""
    return f"fw-harness-{run_id}-{work.name}-results"


@contextmanager
def results_volume(
    client: Any,
    name: str,
    labels: dict[str, str],
    image_id: str,
    user: tuple[int, int],
    layout: bytes,
    owned_by_job: bool,
    reaper: Reaper,
) -> Iterator[Any]:
    """The job's capped `/results` (a tmpfs volume called `name`), filled with `layout` (a tar:
    job.json, and in copy mode the job's writable out/), held mounted by a running holder
    container, which is yielded: fetch from it and ask it `results_full` before leaving. The
    volume's top folder belongs to the job's user when `owned_by_job`, otherwise to root.

    The volume carries `labels`; the holder only their run id and owner (what `harness clean`
    goes by), no suite or framework, so it is never taken for the job's own container."""
    from docker.types import Mount

    uid, gid = user if owned_by_job else (0, 0)
    options = f"size={RESULTS_CAP_BYTES},nr_inodes={RESULTS_CAP_FILES},uid={uid},gid={gid}"
    options += f",mode={'0700' if owned_by_job else '0755'},nosuid,nodev"
    holder_name = f"{name}-holder"
    volume = None
    try:
        reaper.track("volume", name)
        volume = client.volumes.create(
            name=name, driver="local", driver_opts={"type": "tmpfs", "device": "tmpfs", "o": options}, labels=labels
        )
        reaper.track("container", holder_name)
        holder = client.containers.create(
            image_id,
            ["python", "-c", "import time\nwhile True: time.sleep(3600)"],
            name=holder_name,
            labels={**{k: v for k, v in labels.items() if k in HOLDER_KEEPS}, HOLDER_LABEL: "results"},
            user=f"{user[0]}:{user[1]}",
            network_mode="none",
            read_only=True,
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            pids_limit=16,
            mem_limit=64 * 2**20,
            memswap_limit=64 * 2**20,
            mounts=[Mount(RESULTS_MOUNT, name, type="volume")],
            detach=True,
        )
        try:
            holder.start()
            if not holder.put_archive(RESULTS_MOUNT, layout):
                raise HarnessError(f"the Docker engine refused the copy into {RESULTS_MOUNT}")
            yield holder
        finally:
            with contextlib.suppress(Exception):  # one left behind: the reaper or `harness clean` removes it
                holder.remove(force=True)
                reaper.untrack("container", holder_name)
    finally:
        if volume is not None:
            # a volume still held by a dying container is left for `harness clean`
            with contextlib.suppress(Exception):
                volume.remove(force=True)
                reaper.untrack("volume", name)


_USAGE = "import os; s = os.statvfs('/results'); print(s.f_bavail * s.f_frsize, s.f_favail)"


def results_full(holder: Any) -> str | None:
    """Why the job's /results counts as full (a write past its cap failed), or None."""
    import docker.errors

    try:
        code, output = holder.exec_run(["python", "-c", _USAGE])
        free_bytes, free_files = (int(word) for word in output.split())
    except (docker.errors.APIError, ValueError, TypeError):
        return None  # not known: nothing is claimed
    if code != 0:
        return None
    if free_bytes < FULL_MARGIN:
        what = f"its /results reached its size cap of {RESULTS_CAP_BYTES // 2**20} MiB"
    elif free_files <= 0:
        what = f"its /results reached its cap of {RESULTS_CAP_FILES} files and folders"
    else:
        return None
    return f"{what}; writes past it failed (No space left on device), and what they held is missing"


def whole_json(path: Path) -> bool:
    """Whether the fetched file at `path` is one whole JSON document (not cut by a full /results)."""
    try:
        json.loads(read_bytes(path, MAX_RESULT_BYTES, single_link=True))
    except (MissingFile, UnsafeFile, ValueError):
        return False
    return True


class _TooLong(Exception):
    pass


class _Chunks(io.RawIOBase):
    """The API's stream of tar chunks as a file, refusing to be read past `limit` bytes."""

    def __init__(self, chunks: Iterable[bytes], limit: int) -> None:
        self.chunks = iter(chunks)
        self.limit = limit
        self.seen = 0
        self.pending = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self.pending:
            if (chunk := next(self.chunks, None)) is None:
                return 0
            self.seen += len(chunk)
            if self.seen > self.limit:
                raise _TooLong(f"its archive ran past {self.limit} bytes; the rest was not read")
            self.pending = chunk
        size = min(len(buffer), len(self.pending))
        buffer[:size] = self.pending[:size]
        self.pending = self.pending[size:]
        return size


def fetch_results(container: Any, source: str, work: Path, result_name: str, artifacts_name: str) -> Harvest:
    """Copy the job's own result file and artefact folder out of its container (the holder).

    Only those two names are asked for; from their archives, streamed, only regular files under
    the asked-for name come back (no links, devices or other paths), each written to disk as it
    arrives, within the result's limit and the artefacts' byte and file limits -- what does not
    fit is skipped and named, and the stream is not read past ARCHIVE_LIMIT. They land in the
    host-side job folder (never mounted into any container), from which job_folder.harvest takes
    them like a bind mount's.
    """
    import docker.errors

    fetched = Harvest()
    for name, limit, files in (
        (result_name, MAX_RESULT_BYTES, 1),
        (artifacts_name, MAX_ARTIFACT_BYTES, MAX_ARTIFACT_FILES),
    ):
        try:
            stream, _ = container.get_archive(f"{source}/{name}")
        except docker.errors.NotFound:
            continue
        taken, used = 0, 0
        try:
            with tarfile.open(fileobj=io.BufferedReader(_Chunks(stream, ARCHIVE_LIMIT)), mode="r|") as tar:
                for member in tar:
                    parts = PurePosixPath(member.name).parts
                    if not parts or parts[0] != name or ".." in parts or any(p in ("", ".") for p in parts):
                        continue  # only what is under the asked-for name
                    where = "/".join(parts[1:]) or name
                    if name == result_name and len(parts) == 1:
                        if not member.isfile():
                            fetched.problem = (
                                f"refused its result file {result_name}: not a regular file in the container"
                            )
                            continue
                        if member.size > limit:
                            fetched.problem = f"refused its result file {result_name}: larger than {limit} bytes"
                            continue
                    if not member.isfile():
                        if not member.isdir():
                            fetched.skipped.append(f"{where} (not a regular file)")
                        continue
                    if taken >= files or used + member.size > limit:
                        fetched.skipped.append(f"{where} (over the artefact limit of {files} files, {limit} bytes)")
                        continue
                    if (extracted := tar.extractfile(member)) is None:
                        continue
                    try:
                        _write(work, parts, extracted)
                    except UnsafeFile as error:  # e.g. a file where another entry wants a folder
                        fetched.skipped.append(f"{where} ({error.reason})")
                        continue
                    taken, used = taken + 1, used + member.size
        except _TooLong as error:
            if name == result_name:
                fetched.problem = f"refused its result file {result_name}: {error}"
            else:
                fetched.skipped.append(f"{name} ({error})")
        except tarfile.TarError as error:
            fetched.skipped.append(f"{name} (unreadable archive: {error})")
        finally:
            if (close := getattr(stream, "close", None)) is not None:
                close()
    return fetched


def _write(work: Path, parts: tuple[str, ...], source: Any) -> None:
    """One file from the archive into the job folder, a chunk at a time."""
    target = work.joinpath(*parts)
    try:
        with create(target.parent, target.name, anchor=work) as sink:
            while chunk := source.read(_CHUNK):
                sink.write(chunk)
    except BaseException as error:
        with contextlib.suppress(OSError):
            target.unlink()  # no half file is taken back (the job folder is the harness's alone)
        if isinstance(error, OSError):
            raise failure(target, error, "written") from None
        raise
