"""Remote engines: suites in and results out through the Docker API instead of bind mounts.

A bind mount names a path on the engine's machine; with `DOCKER_HOST=ssh://gpu-box` that path
does not exist there. In `copy` mode each job gets named volumes instead: a short-lived loader
container (never started) receives the suites (and the data folder) by `put_archive`, the job
mounts them read-only, and after the job its result folder comes back by `get_archive`.
"""

from __future__ import annotations

import contextlib
import io
import os
import tarfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import Any

from harness.errors import HarnessError
from harness.safe_writes import write_bytes_atomic

OUT_SUBDIR = "out"  # the job writes here: a folder the job's user owns inside the results volume


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


def tar_writable_dir(name: str, uid: int, gid: int, files: dict[str, bytes] | None = None) -> bytes:
    """A folder `name` the job's user may write into, and beside it `files` (read-only to the job)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
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
    client: Any, name: str, labels: dict[str, str], image_id: str, fills: dict[str, bytes], reaper: Any = None
) -> Iterator[dict[str, str]]:
    """Named volumes (mount point -> volume name) filled through a loader; removed on the way out."""
    from docker.types import Mount

    volumes = {target: f"{name}-{i}" for i, target in enumerate(fills)}
    created = []
    try:
        for volume in volumes.values():
            if reaper is not None:
                reaper.track("volume", volume)
            created.append(client.volumes.create(name=volume, labels=labels))
        if reaper is not None:
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
            if reaper is not None:
                reaper.untrack("container", f"{name}-loader")
        yield volumes
    finally:
        for volume in created:
            # a volume still held by a dying container is left for `harness clean`
            with contextlib.suppress(Exception):
                volume.remove(force=True)
                if reaper is not None:
                    reaper.untrack("volume", volume.name)


def _archive(container: Any, path: str, limit: int) -> bytes | None:
    """The tar of one path in the container, read no further than `limit` bytes; None if absent."""
    import docker.errors

    try:
        stream, _ = container.get_archive(path)
    except docker.errors.NotFound:
        return None
    data = bytearray()
    for chunk in stream:
        data += chunk
        if len(data) > limit:
            close = getattr(stream, "close", None)
            if close is not None:
                close()
            raise ValueError(f"{PurePosixPath(path).name} is larger than {limit} bytes")
    return bytes(data)


def fetch_results(container: Any, source: str, work: Path, result_name: str, artifacts_name: str) -> str | None:
    """Copy the job's own result file and artefact folder out of its (stopped) container.

    Only those two names are asked for, each read to a size limit; from the archives only
    regular files under the asked-for name come back (no links, devices or other paths). They
    land in the host-side job folder, from which job_folder.harvest takes them like a bind
    mount's. Returns why the result file was refused, or None.
    """
    from harness.backends.job_folder import MAX_ARTIFACT_BYTES, MAX_ARTIFACT_FILES
    from harness.schema import MAX_RESULT_BYTES

    tar_overhead = 1024 * (MAX_ARTIFACT_FILES + 2)
    problem = None
    for name, limit, files in (
        (result_name, MAX_RESULT_BYTES + tar_overhead, 1),
        (artifacts_name, MAX_ARTIFACT_BYTES + tar_overhead, MAX_ARTIFACT_FILES),
    ):
        try:
            data = _archive(container, f"{source}/{name}", limit)
        except ValueError as error:
            if name == result_name:
                problem = f"refused its result file {result_name}: {error}"
            continue
        if data is None:
            continue
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            taken = 0
            for member in tar.getmembers():
                parts = PurePosixPath(member.name).parts
                if not parts or parts[0] != name or ".." in parts or any(p in ("", ".") for p in parts):
                    continue  # only what is under the asked-for name
                if name == result_name and len(parts) == 1 and not member.isfile():
                    problem = f"refused its result file {result_name}: not a regular file in the container"
                    continue
                if not member.isfile() or taken >= files:
                    continue
                target = work.joinpath(*parts)
                extracted = tar.extractfile(member)
                if extracted is None:
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                write_bytes_atomic(target, extracted.read())
                taken += 1
    return problem
