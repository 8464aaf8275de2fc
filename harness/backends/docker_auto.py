"""`--backend auto` (the default): docker when an engine answers, else local with a notice."""

from __future__ import annotations

import sys
from pathlib import Path

from harness.backends.base import Backend
from harness.backends.docker_transfer import transfer_mode
from harness.backends.local import LocalBackend
from harness.errors import HarnessError
from harness.images import connect, engine_problem
from harness.limits import Limits


def resolve_backend(requested: str, *, pythons: dict[str, str], gpus: str | None, device: str) -> str:
    """The backend a run uses: `docker` or `local` (auto decided here, once, before planning)."""
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


def make_backend(
    name: str,
    *,
    pythons: dict[str, str],
    echo: bool,
    limits: Limits,
    gpus: str | None,
    wheelhouse: Path | None,
    transfer: str = "auto",
) -> Backend:
    if name == "local":
        return LocalBackend(pythons=pythons, echo=echo, limits=limits)
    from harness.backends.docker_backend import DockerBackend, GpuRequest

    request = GpuRequest.parse(gpus) if gpus is not None else None  # bad input fails before connecting
    mode = transfer_mode(transfer)
    engine = connect(hint="start Docker, or run with --backend local")
    return DockerBackend(engine, echo=echo, limits=limits, gpus=request, wheelhouse=wheelhouse, transfer=mode)
