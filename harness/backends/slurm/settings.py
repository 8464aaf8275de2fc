"""What the slurm backend and `harness export slurm` are told: the runtime inside the allocation,
where the stack environments live, extra sbatch options; validated once, one-line errors.

`harness run --backend slurm` takes these from the environment (HARNESS_SLURM_*), so every
command that runs jobs gets them without options of its own; `export slurm` has options.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
from collections.abc import Mapping
from dataclasses import dataclass

from harness.core import cache_home
from harness.core.errors import HarnessError
from harness.text.escape import plain

RUNTIMES = ("venv", "apptainer", "podman")
# Options the harness sets itself (or that would change what a submission is): refused from users.
RESERVED = (
    "--wrap", "--array", "-a", "--output", "-o", "--error", "-e", "--export", "--parsable",
    "--chdir", "-D", "--wait", "-W", "--job-name", "-J", "--open-mode", "--input", "-i",
)  # fmt: skip
GPUS = re.compile(r"all|[1-9][0-9]{0,3}")


@dataclass(frozen=True)
class SlurmSettings:
    runtime: str = "venv"
    # Shared folder of the stack venvs. `run`: HARNESS_SLURM_ENVS, else the cache home's venvs/ (one venv
    # per stack and lock for every results folder, calibration's jobs included); `export`: None = its envs/.
    envs: str | None = None
    python: str = "python3"  # the interpreter venvs are made from: CPython 3.11, as the locks are resolved for
    images: str | None = None  # apptainer: folder of .sif files or docker://REGISTRY; podman: REGISTRY
    sbatch_options: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()  # extra wheel folders (e.g. the CPU torch wheel), index still used
    wheelhouse: str | None = None  # only these wheels, no index (air-gapped clusters)
    gpus: str | None = None  # --device gpu: a count, or all (the default: the whole node's)


def check_runtime(name: str, option: str) -> str:
    if name not in RUNTIMES:
        raise HarnessError(f"{option} {plain(name)!r} is not one of {', '.join(RUNTIMES)}")
    return name


def check_gpus(gpus: str | None) -> str | None:
    """Slurm picks the devices: only a count, or all, make sense here."""
    if gpus is not None and not GPUS.fullmatch(gpus):
        raise HarnessError(
            f"--gpus {plain(gpus)!r}: with Slurm give a count (e.g. 2) or all; the scheduler picks which GPUs"
        )
    return gpus


def parse_sbatch_options(text: str, option: str) -> tuple[str, ...]:
    try:
        words = tuple(shlex.split(text))
    except ValueError as error:
        raise HarnessError(f"{option} {plain(text)!r} is not shell words ({error})") from None
    for word in words:
        name = word.split("=", 1)[0]
        if not word.startswith("-") or "\n" in word:
            raise HarnessError(f"{option}: {plain(word)!r} is not an sbatch option; write each as --name=value")
        if name in RESERVED:
            raise HarnessError(f"{option}: {name} is set by the harness itself; leave it out")
    return words


def check_python(text: str, option: str) -> str:
    if not text.strip() or any(c.isspace() for c in text):
        raise HarnessError(f"{option} {plain(text)!r} is not an interpreter name or path (e.g. python3.11)")
    return text


def auto_runtime(images: str | None) -> str:
    """A container runtime where one is on PATH and images were named for it; else a venv."""
    if images is not None:
        if shutil.which("apptainer") or shutil.which("singularity"):
            return "apptainer"
        if shutil.which("podman"):
            return "podman"
    return "venv"


def from_environment(
    environ: Mapping[str, str] | None = None, *, wheelhouse: str | None = None, gpus: str | None = None
) -> SlurmSettings:
    env = os.environ if environ is None else environ

    def value(name: str) -> str | None:
        text = env.get(name, "").strip()
        return text or None

    images = value("HARNESS_SLURM_IMAGES")
    requested = value("HARNESS_SLURM_RUNTIME") or "auto"
    runtime = auto_runtime(images) if requested == "auto" else check_runtime(requested, "HARNESS_SLURM_RUNTIME")
    return SlurmSettings(
        runtime=runtime,
        envs=value("HARNESS_SLURM_ENVS") or str(cache_home.venvs_dir(env)),
        python=check_python(value("HARNESS_SLURM_PYTHON") or "python3", "HARNESS_SLURM_PYTHON"),
        images=images,
        sbatch_options=parse_sbatch_options(env.get("HARNESS_SLURM_OPTIONS", ""), "HARNESS_SLURM_OPTIONS"),
        find_links=tuple(p for p in env.get("HARNESS_FIND_LINKS", "").split(os.pathsep) if p.strip()),
        wheelhouse=wheelhouse,
        gpus=check_gpus(gpus),
    )
