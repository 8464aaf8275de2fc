"""One way every command gets a backend: a name -> factory table, and `auto` decided once.

`run`, `calibrate`, `reproduce` and `selftest` all call `make_backend`, so a reproduction against a
remote engine gets the same copy transfer, limits and GPU request as the run it reproduces. Adding
a backend is one factory function and one entry in FACTORIES (docs/extending.md).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.backends.base import Backend
from harness.backends.docker_transfer import transfer_mode
from harness.backends.local import LocalBackend
from harness.errors import HarnessError
from harness.images import connect, engine_problem
from harness.limits import Limits


@dataclass(frozen=True)
class BackendOptions:
    """Everything a command's options say about how jobs run; each backend takes what applies to it."""

    echo: bool = True
    limits: Limits = field(default_factory=Limits)
    pythons: Mapping[str, str] = field(default_factory=dict)  # local: stack -> interpreter
    gpus: str | None = None  # docker: all | N | device=0,1
    wheelhouse: Path | None = None  # docker: build missing images from these wheels only
    transfer: str = "auto"  # docker: bind | copy | auto (copy for an engine not on this machine)
    pinned: Mapping[str, dict[str, Any]] = field(default_factory=dict)  # docker: stack -> recorded image


def _local(options: BackendOptions) -> Backend:
    return LocalBackend(pythons=dict(options.pythons), echo=options.echo, limits=options.limits)


def _docker(options: BackendOptions) -> Backend:
    from harness.backends.docker_backend import DockerBackend, GpuRequest

    request = GpuRequest.parse(options.gpus) if options.gpus is not None else None  # fails before connecting
    mode = transfer_mode(options.transfer)
    engine = connect(hint="start Docker, or run with --backend local")
    return DockerBackend(
        engine,
        echo=options.echo,
        limits=options.limits,
        gpus=request,
        wheelhouse=options.wheelhouse,
        transfer=mode,
        pinned=dict(options.pinned),
    )


def _slurm(options: BackendOptions) -> Backend:
    from harness.backends.slurm import from_options
    from harness.slurm.settings import from_environment

    if options.pythons:
        raise HarnessError(
            "--python picks local interpreters; the slurm backend uses the stacks' locks (drop --python)"
        )
    settings = from_environment(wheelhouse=str(options.wheelhouse) if options.wheelhouse else None, gpus=options.gpus)
    return from_options(settings, options.limits, options.echo)


FACTORIES: dict[str, Callable[[BackendOptions], Backend]] = {"local": _local, "docker": _docker, "slurm": _slurm}
CHOICES = ("auto", *FACTORIES)  # what --backend accepts


def resolve_backend(requested: str, *, pythons: Mapping[str, str], gpus: str | None, device: str) -> str:
    """The backend a run uses, a key of FACTORIES (`auto` decided here, once, before planning)."""
    if requested not in CHOICES:
        raise HarnessError(f"--backend {requested!r} is not one of {', '.join(CHOICES)}")
    if gpus is not None and device != "gpu":
        raise HarnessError(f"--gpus {gpus} selects GPUs for --device gpu; add --device gpu or drop --gpus")
    if requested == "auto":
        if pythons:  # --python names local interpreters: the user means the local backend
            return "local"
        problem = engine_problem()
        if problem is None:
            return "docker"
        if gpus is not None:
            raise HarnessError(
                f"--gpus needs the docker backend, but no Docker engine answers ({problem}); start Docker"
            )
        print(f"note: no Docker engine answers ({problem}); running the jobs with the local backend", file=sys.stderr)
        return "local"
    if requested == "docker" and pythons:
        raise HarnessError(
            "--python picks local interpreters; the docker backend uses the stack images (drop --python)"
        )
    if requested == "local" and gpus is not None:
        raise HarnessError("--gpus selects GPUs for containers; use --backend docker (or CUDA_VISIBLE_DEVICES locally)")
    return requested


def make_backend(name: str, options: BackendOptions) -> Backend:
    """The backend called `name` (already resolved: not `auto`), built from the command's options."""
    factory = FACTORIES.get(name)
    if factory is None:
        raise HarnessError(f"backend {name!r} is not one of {', '.join(FACTORIES)}")
    return factory(options)
