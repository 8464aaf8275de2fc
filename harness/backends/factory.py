"""One way every command gets a backend: the name -> module table, and `auto` decided once.

`run`, `calibrate`, `reproduce` and `selftest` all call `make_backend`, so a reproduction against a
remote engine gets the same copy transfer, limits and GPU request as the run it reproduces. Adding
a backend is one module and one entry in harness/backend_table.py (docs/extending.md); the module
is imported by its path when that backend is made, never before.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping

from harness.backend_table import RUNS
from harness.backends.base import Backend, BackendOptions
from harness.errors import HarnessError
from harness.images import engine_problem

__all__ = ["CHOICES", "FACTORIES", "BackendOptions", "make_backend", "resolve_backend"]


def _from_module(path: str) -> Callable[[BackendOptions], Backend]:
    def make(options: BackendOptions) -> Backend:
        made: Backend = importlib.import_module(path).from_options(options)
        return made

    return make


FACTORIES: dict[str, Callable[[BackendOptions], Backend]] = {name: _from_module(path) for name, path in RUNS.items()}
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
