"""Stack images: the tag a stack's lock file maps to, and building it when it is missing.

A tag names the stack, the variant and the lock file's sha256, so a changed lock builds a new
image and an unchanged one is reused without asking the builder anything. The recipe (the
Dockerfile and the base image) is checked through a label, so editing the Dockerfile rebuilds
under the same tag.

Builds go through the engine's classic builder with a context this module assembles:
Dockerfile, the variant's lock file and a `wheelhouse/` folder holding only the wheels that
lock pins. With `--wheelhouse DIR` pip sees nothing else (no index: air-gapped); without it,
wheels dropped into `images/<stack>/wheelhouse/` are offered first and the index fills the rest.
"""

from __future__ import annotations

import hashlib
import io
import re
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from packaging.tags import Tag
from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion

from harness.core.errors import HarnessError
from harness.text.numbers import fmt_bytes
from suites.contract.frameworks import STACKS

IMAGES_DIR = Path(__file__).resolve().parents[2] / "images"
VARIANTS = ("cpu", "cuda12")


def variant_for(device: str) -> str:
    """The image variant a job on `device` runs in (every backend picks it this way)."""
    return "cuda12" if device == "gpu" else "cpu"


DEFAULT_BASE_IMAGE = "python:3.11-slim-bookworm"
REPOSITORY = "fw-harness"
LABEL = "org.fw-harness"
BASE_ID_LABEL = f"{LABEL}.base-image-id"  # the base image's content id at build time
# The `bench` user every Dockerfile creates; jobs started by root on the host run as it.
IMAGE_USER = (10001, 10001)
# The images' interpreter and platform: CPython 3.11 on x86_64 glibc (Debian bookworm, 2.36).
PYTHON_TAGS = {"py3", "py311", "cp311", "py2.py3"}
_MANYLINUX = [f"manylinux_2_{minor}_x86_64" for minor in range(5, 37)] + [
    "manylinux2014_x86_64",
    "manylinux2010_x86_64",
    "manylinux1_x86_64",
]

Echo = Callable[[str], None]


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@dataclass(frozen=True)
class StackImage:
    """One stack in one variant on one base image: what to build and what to call it."""

    stack: str
    variant: str
    base_image: str
    lock_hash: str  # sha256 of the lock file
    recipe_hash: str  # sha256 of the Dockerfile and the base image name
    lock_path: Path | None = None  # another lock than the stack's own (harness bisect's generated ones)

    @property
    def folder(self) -> Path:
        return IMAGES_DIR / self.stack

    @property
    def lock_file(self) -> Path:
        return self.lock_path or self.folder / f"lock-{self.variant}.txt"

    @property
    def tag(self) -> str:
        # Another base image is another image even with the same lock: it gets its own tag.
        base = (
            ""
            if self.base_image == DEFAULT_BASE_IMAGE
            else "-" + hashlib.sha256(self.base_image.encode()).hexdigest()[:8]
        )
        return f"{REPOSITORY}/{self.stack}:{self.variant}-{self.lock_hash[:12]}{base}"

    def labels(self) -> dict[str, str]:
        return {
            f"{LABEL}.stack": self.stack,
            f"{LABEL}.variant": self.variant,
            f"{LABEL}.lock-hash": self.lock_hash,
            f"{LABEL}.recipe-hash": self.recipe_hash,
            f"{LABEL}.base-image": self.base_image,
        }

    def record(self, image_id: str, base_image_id: str | None = None) -> dict[str, Any]:
        """The result file's `image` field; `base_image_id`: the content id the image was built on
        (a tag such as python:3.11-slim-bookworm moves; the id names the exact bytes)."""
        return {
            "tag": self.tag,
            "id": image_id,
            "stack": self.stack,
            "variant": self.variant,
            "lock_hash": self.lock_hash,
            "base_image": self.base_image,
            "base_image_id": base_image_id,
        }


def stack_image(
    stack: str, variant: str = "cpu", base_image: str = DEFAULT_BASE_IMAGE, lock: Path | None = None
) -> StackImage:
    """The stack's image for its own lock, or (`lock`) for another lock file, e.g. one `harness
    bisect` generated: the tag names the lock's hash, so every lock is an image of its own."""
    if variant not in VARIANTS:
        raise HarnessError(f"--variant {variant!r} is not one of {', '.join(VARIANTS)}")
    if not base_image.strip() or any(c.isspace() for c in base_image):
        raise HarnessError(f"--base-image {base_image!r} is not an image reference; use e.g. {DEFAULT_BASE_IMAGE}")
    folder = IMAGES_DIR / stack
    dockerfile, own = folder / "Dockerfile", folder / f"lock-{variant}.txt"
    if stack not in STACKS or not dockerfile.is_file():
        raise HarnessError(f"unknown stack {stack!r}; stacks with an image: {', '.join(STACKS)}")
    chosen = lock or own
    if not chosen.is_file():
        raise HarnessError(f"{chosen} is missing; regenerate the locks with images/lock.sh {stack} {variant}")
    recipe = hashlib.sha256(dockerfile.read_bytes() + b"\0" + base_image.encode()).hexdigest()
    return StackImage(stack, variant, base_image, sha256_file(chosen), recipe, lock)


def parse_stacks(text: str | None) -> list[str]:
    names = [s.strip() for s in (text or "").split(",") if s.strip()] or list(STACKS)
    for name in names:
        if name not in STACKS:
            raise HarnessError(f"--stacks: unknown stack {name!r}; choose from {', '.join(STACKS)}")
    return list(dict.fromkeys(names))


# ---------------------------------------------------------------------------------------------
# Lock files and wheels


def normalize(name: str) -> str:
    """PEP 503 project name, so `ml_dtypes` (wheel) matches `ml-dtypes` (lock)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def locked_packages(lock_text: str) -> dict[str, str]:
    """name -> version of every `name==version` line of a pip lock file."""
    found: dict[str, str] = {}
    for line in lock_text.splitlines():
        if match := re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==([^\s;\\]+)", line):
            found[normalize(match.group(1))] = match.group(2)
    return found


def _tag_fits(tag: Tag) -> bool:
    """A CPython 3.11 interpreter (or the stable ABI of 3.11 and older) on x86_64 Linux or any platform."""
    abi3 = (
        tag.abi == "abi3" and re.fullmatch(r"cp3(\d+)", tag.interpreter) is not None and int(tag.interpreter[3:]) <= 11
    )
    platform = tag.platform == "any" or (tag.platform.endswith("x86_64") and "linux" in tag.platform)
    return (tag.interpreter in PYTHON_TAGS or abi3) and platform


def wheel_fits(filename: str) -> tuple[str, str] | None:
    """(name, version) of a wheel the images can install (CPython 3.11, x86_64 Linux), else None."""
    try:
        name, version, _, tags = parse_wheel_filename(filename)
    except (InvalidWheelFilename, InvalidVersion):
        return None
    return (normalize(name), str(version)) if any(_tag_fits(tag) for tag in tags) else None


def select_wheels(folder: Path, lock_text: str) -> tuple[list[Path], list[str]]:
    """(wheels in `folder` that the lock pins, `name==version` of pinned packages without one)."""
    wanted = locked_packages(lock_text)
    chosen: list[Path] = []
    have: set[str] = set()
    for path in sorted(folder.glob("*.whl")) if folder.is_dir() else []:
        if (fit := wheel_fits(path.name)) is not None and wanted.get(fit[0]) == fit[1]:
            chosen.append(path)
            have.add(fit[0])
    missing = [f"{name}=={version}" for name, version in wanted.items() if name not in have]
    return chosen, missing


def check_wheelhouse(wheelhouse: Path) -> None:
    if not wheelhouse.is_dir():
        raise HarnessError(f"--wheelhouse {wheelhouse} is not a folder; give the folder that holds the wheels")
    if not any(wheelhouse.glob("*.whl")):
        raise HarnessError(
            f"--wheelhouse {wheelhouse} holds no wheels (*.whl); fill it where PyPI is reachable with "
            f"`harness wheelhouse {wheelhouse}`"
        )


def wheels_for(image: StackImage, wheelhouse: Path | None, extra: Sequence[Path] = ()) -> list[Path]:
    """The wheels a build offers to pip; with a wheelhouse, all of the lock's or an error.
    `extra`: more folders of wheels (bisect's --find-links), searched before the wheelhouse."""
    lock_text = image.lock_file.read_text()
    offered: list[Path] = []
    for folder in extra:
        offered += select_wheels(folder, lock_text)[0]
    have = {fit[0] for w in offered if (fit := wheel_fits(w.name)) is not None}
    if wheelhouse is None:
        return offered + select_wheels(image.folder / "wheelhouse", lock_text)[0]
    check_wheelhouse(wheelhouse)
    chosen, missing = select_wheels(wheelhouse, lock_text)
    chosen = offered + [w for w in chosen if (fit := wheel_fits(w.name)) is not None and fit[0] not in have]
    missing = [m for m in missing if normalize(m.split("==")[0]) not in have]
    if missing:
        shown = ", ".join(missing[:4]) + (f" and {len(missing) - 4} more" if len(missing) > 4 else "")
        raise HarnessError(
            f"--wheelhouse {wheelhouse} lacks {len(missing)} of the wheels the {image.stack} {image.variant} lock "
            f"pins ({shown}); add them with `harness wheelhouse {wheelhouse} --stacks {image.stack} "
            f"--variant {image.variant}`"
        )
    return chosen


def download_command(dest: Path, locks: list[Path], find_links: list[Path]) -> list[str]:
    """pip download of exactly the locked wheels for the images' platform, hashes checked."""
    cmd = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--require-hashes", "--only-binary=:all:",
        "--dest", str(dest), "--python-version", "3.11", "--implementation", "cp",
        "--abi", "cp311", "--abi", "abi3", "--abi", "none",
    ]  # fmt: skip
    cmd += [arg for platform in _MANYLINUX for arg in ("--platform", platform)]
    cmd += pip_sources(find_links, no_index=False)
    return cmd + [arg for lock in locks for arg in ("-r", str(lock))]


def pip_sources(find_links: list[Path], no_index: bool) -> list[str]:
    """pip's options for where wheels come from: each --find-links folder, then no index with --no-index."""
    found = [arg for folder in find_links for arg in ("--find-links", str(folder))]
    return [*found, "--no-index"] if no_index else found


def fill_wheelhouse(dest: Path, images: list[StackImage], find_links: list[Path]) -> list[Path]:
    """Download every wheel the images' locks pin into `dest` (run where an index is reachable)."""
    for folder in find_links:
        if not folder.is_dir():
            raise HarnessError(f"--find-links {folder} is not a folder; give a folder of wheels")
    if dest.exists() and not dest.is_dir():
        raise HarnessError(f"wheelhouse {dest} is a file; give a folder")
    dest.mkdir(parents=True, exist_ok=True)
    # One pip call per lock file: the same package pinned twice would otherwise be a conflict.
    for lock in dict.fromkeys(image.lock_file for image in images):
        if not select_wheels(dest, lock.read_text())[1]:
            continue  # everything this lock pins is already there
        proc = subprocess.run(
            download_command(dest, [lock], find_links), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        if proc.returncode != 0:
            lines = proc.stdout.splitlines()
            last = [line for line in lines if line.startswith("ERROR")] or lines[-1:]
            raise HarnessError(f"downloading the wheels of {lock.relative_to(IMAGES_DIR)} failed: {' '.join(last)}")
    return sorted(dest.glob("*.whl"))


# ---------------------------------------------------------------------------------------------
# The engine


class Engine:
    """A docker SDK client that is known to answer; closed on exit."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.client.close()


def engine_problem() -> str | None:
    """None when a Docker engine answers, else why not (a short phrase)."""
    try:
        connect(timeout=5).client.close()
        return None
    except _NoEngine as error:
        return error.reason


class _NoEngine(HarnessError):
    def __init__(self, reason: str, hint: str) -> None:
        super().__init__(f"no Docker engine answers ({reason}); {hint}")
        self.reason = reason


def connect(timeout: float = 600, hint: str = "start Docker (`docker info` must work)") -> Engine:
    import docker
    import docker.errors

    try:
        client = docker.from_env(timeout=int(timeout))
    except docker.errors.DockerException as error:
        raise _NoEngine(_first_line(error), hint) from None
    try:
        client.ping()
    except Exception as error:  # requests/urllib3 errors of every kind mean the same thing here
        client.close()
        raise _NoEngine(_first_line(error), hint) from None
    return Engine(client)


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0][:200] if text else type(error).__name__


def existing_image_id(engine: Engine, image: StackImage) -> str | None:
    """The id of the image under `image.tag` if it was built from this recipe, else None."""
    import docker.errors

    try:
        found = engine.client.images.get(image.tag)
    except docker.errors.ImageNotFound:
        return None
    labels = found.labels or {}
    if labels.get(f"{LABEL}.recipe-hash") != image.recipe_hash or labels.get(f"{LABEL}.lock-hash") != image.lock_hash:
        return None
    if (base := base_image_id(engine, image.base_image)) is not None and labels.get(BASE_ID_LABEL) != base:
        return None  # the base tag now names other bytes (re-pulled, or another stand-in): rebuild on them
    return str(found.id)


def base_image_id(engine: Engine, reference: str) -> str | None:
    """The content id (sha256:...) of the base image as this engine holds it; None when absent
    (the build then pulls it, and the image records no base id). A `name@sha256:...` reference
    pins the base by digest outright."""
    import docker.errors

    try:
        return str(engine.client.images.get(reference).id)
    except (docker.errors.ImageNotFound, docker.errors.NullResource):
        return None


@contextmanager
def build_context(image: StackImage, wheels: list[Path]) -> Iterator[IO[bytes]]:
    """A tar of the Dockerfile, the lock and wheelhouse/ (spooled to disk: wheels are large)."""
    with tempfile.TemporaryFile() as handle:
        with tarfile.open(fileobj=handle, mode="w") as tar:
            tar.add(image.folder / "Dockerfile", arcname="Dockerfile")
            tar.add(image.lock_file, arcname=f"lock-{image.variant}.txt")  # the name the Dockerfile copies
            folder = tarfile.TarInfo("wheelhouse")
            folder.type, folder.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(folder)
            keep = tarfile.TarInfo("wheelhouse/.keep")
            tar.addfile(keep, io.BytesIO(b""))
            for wheel in wheels:
                tar.add(wheel.resolve(), arcname=f"wheelhouse/{wheel.name}")
        handle.seek(0)
        yield handle


def build(engine: Engine, image: StackImage, wheels: list[Path], offline: bool, echo: Echo) -> str:
    """Build `image` from the assembled context, streaming every line; returns the image id."""
    args = {
        "VARIANT": image.variant,
        "BASE_IMAGE": image.base_image,
        "LOCK_HASH": image.lock_hash,
        "OFFLINE": "1" if offline else "0",
    }
    labels = image.labels()
    if (base := base_image_id(engine, image.base_image)) is not None:
        labels[BASE_ID_LABEL] = base
    tail: list[str] = []
    image_id: str | None = None
    with build_context(image, wheels) as context:
        # The engine may have no bridge network (none here); host networking always exists.
        stream = engine.client.api.build(
            fileobj=context, custom_context=True, tag=image.tag, buildargs=args, labels=labels,
            network_mode="host", rm=True, forcerm=True, decode=True, pull=False,
        )  # fmt: skip
        for chunk in stream:
            if "error" in chunk:
                detail = str(chunk.get("errorDetail", {}).get("message") or chunk["error"]).strip()
                context_lines = " | ".join(line for line in tail[-3:] if line)
                raise HarnessError(
                    f"building {image.tag} failed: {detail.splitlines()[-1] if detail else 'unknown error'}"
                    + (f" (last output: {context_lines})" if context_lines else "")
                    + "; the build log is above"
                )
            if isinstance(text := chunk.get("stream"), str):
                for line in text.splitlines():
                    if line.strip():
                        echo(line.rstrip())
                        tail = (tail + [line.strip()])[-10:]
            if isinstance(aux := chunk.get("aux"), dict) and "ID" in aux:
                image_id = str(aux["ID"])
    return image_id if image_id is not None else str(engine.client.images.get(image.tag).id)


@dataclass(frozen=True)
class Ensured:
    image: StackImage
    image_id: str
    built: bool
    seconds: float
    base_image_id: str | None = None  # from the image's label: what it was built on

    def record(self) -> dict[str, Any]:
        return self.image.record(self.image_id, self.base_image_id)


def ensure(
    engine: Engine, image: StackImage, wheelhouse: Path | None, echo: Echo, extra: Sequence[Path] = ()
) -> Ensured:
    """Reuse the tagged image when its lock and recipe match; build it otherwise (`extra`: more
    folders of wheels, see wheels_for)."""
    started = time.perf_counter()
    if (found := existing_image_id(engine, image)) is not None:
        return Ensured(image, found, False, time.perf_counter() - started, built_on(engine, found))
    wheels = wheels_for(image, wheelhouse, extra)
    image_id = build(engine, image, wheels, offline=wheelhouse is not None, echo=echo)
    return Ensured(image, image_id, True, time.perf_counter() - started, built_on(engine, image_id))


def built_on(engine: Engine, image_id: str) -> str | None:
    """The base image id an image of ours was built on (its label), None for an older image."""
    labels = engine.client.images.get(image_id).labels or {}
    value = labels.get(BASE_ID_LABEL)
    return value if isinstance(value, str) else None


def image_size(engine: Engine, image_id: str) -> int:
    return int(engine.client.images.get(image_id).attrs.get("Size", 0))


# ---------------------------------------------------------------------------------------------
# The `harness build` and `harness wheelhouse` commands


def build_images(
    stacks: list[str], variant: str, base_image: str, wheelhouse: Path | None, echo: bool
) -> list[Ensured]:
    """Build (or reuse) each stack's image, streaming the build output line by line."""
    images = [stack_image(stack, variant, base_image) for stack in stacks]
    if wheelhouse is not None:  # refuse a wheelhouse that cannot serve every build before starting one
        for image in images:
            wheels_for(image, wheelhouse)
    done: list[Ensured] = []
    with connect() as engine:
        for image in images:
            print(f"{image.stack}: {image.tag}", flush=True)

            def show(line: str, stack: str = image.stack) -> None:
                if echo:
                    print(f"  [{stack}] {line}", flush=True)

            result = ensure(engine, image, wheelhouse, show)
            size = fmt_bytes(image_size(engine, result.image_id))
            verb = f"built in {result.seconds:.0f} s" if result.built else "up to date (lock and recipe unchanged)"
            print(f"{image.stack}: {verb}; {result.image_id[:19]}, {size}", flush=True)
            done.append(result)
    return done


def fill_images_wheelhouse(dest: Path, stacks: list[str], variant: str, find_links: list[Path]) -> None:
    wheels = fill_wheelhouse(dest, [stack_image(stack, variant) for stack in stacks], find_links)
    total = sum(path.stat().st_size for path in wheels)
    print(f"{dest}: {len(wheels)} wheels, {fmt_bytes(total)}; build offline with `harness build --wheelhouse {dest}`")
