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


def tar_writable_dir(name: str, uid: int, gid: int) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        info = tarfile.TarInfo(name)
        info.type, info.mode, info.uid, info.gid = tarfile.DIRTYPE, 0o777, uid, gid
        tar.addfile(info)
    return buffer.getvalue()


@contextmanager
def job_volumes(
    client: Any, name: str, labels: dict[str, str], image_id: str, fills: dict[str, bytes]
) -> Iterator[dict[str, str]]:
    """Named volumes (mount point -> volume name) filled through a loader; removed on the way out."""
    from docker.types import Mount

    volumes = {target: f"{name}-{i}" for i, target in enumerate(fills)}
    created = []
    try:
        for volume in volumes.values():
            created.append(client.volumes.create(name=volume, labels=labels))
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
        yield volumes
    finally:
        for volume in created:
            # a volume still held by a dying container is left for `harness clean`
            with contextlib.suppress(Exception):
                volume.remove(force=True)


def fetch_results(container: Any, source: str, run_dir: Path) -> None:
    """Copy the job's result folder out of its (stopped) container into the run folder."""
    import docker.errors

    try:
        stream, _ = container.get_archive(source)
    except docker.errors.NotFound:
        return  # nothing written: the runner reports invalid-output or the failure
    data = b"".join(stream)
    root = PurePosixPath(source).name
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        for member in tar.getmembers():
            parts = PurePosixPath(member.name).parts
            if not parts or parts[0] != root or ".." in parts or member.issym() or member.islnk():
                continue  # only plain files and folders under the result folder come back
            relative = Path(*parts[1:]) if len(parts) > 1 else None
            if relative is None:
                continue
            target = run_dir / relative
            if member.isdir():
                target.mkdir(parents=True, exist_ok=True)
            elif member.isfile():
                target.parent.mkdir(parents=True, exist_ok=True)
                extracted = tar.extractfile(member)
                if extracted is not None:
                    target.write_bytes(extracted.read())
