"""The backend contract: what every backend is given (options, resource limits) and returns for one
job, and how a command gets the backend it names.

A backend starts the job with `job_command` after writing its job.json (the whole spec,
suites/contract/job_spec.py) into the job's folder, and reports what happened in a `JobOutcome`.
It never writes a result file: a status only the scheduler knows (cancelled, a node failure,
its own time limit) travels in `status` and `reason`, and the runner writes the result.

`run`, `calibrate`, `reproduce` and `selftest` all call `make_backend`, so a reproduction against a
remote engine gets the same copy transfer, limits and GPU request as the run it reproduces. Adding
a backend is one module and one entry in harness/core/backend_table.py (docs/extending.md); the module
is imported by its path when that backend is made, never before.
"""

from __future__ import annotations

import contextlib
import importlib
import math
import os
import re
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from harness.core.backend_table import RUNS
from harness.core.errors import HarnessError
from harness.store.images import engine_problem
from harness.store.plan import Job
from harness.text.escape import plain
from suites.contract.ranks import FAULT_VAR, RankError, fault_from
from suites.contract.registry import SUITES_DIR

# Resource limits from the command line (`--memory 2g`, `--cpus 1.5`), shared by all backends.
_UNITS = {"": 1, "b": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
MAX_MEMORY = 2**50  # 1 PiB: more is a typo, and past 2**63 Docker and setrlimit overflow
MIN_CPUS, MAX_CPUS = 0.01, 4096.0  # Docker's smallest CPU quota; more cores than any machine has


@dataclass(frozen=True)
class Limits:
    memory_bytes: int | None = None
    cpus: float | None = None


def parse_memory(text: str) -> int:
    if not (match := re.fullmatch(r"\s*(\d{1,20}(?:\.\d{1,20})?)\s*([bkmgt]?)i?b?\s*", text.lower())):
        raise HarnessError(f"--memory {plain(text)!r} is not a size; use e.g. 512m or 4g")
    if (amount := float(match.group(1)) * _UNITS[match.group(2)]) > MAX_MEMORY:
        raise HarnessError(f"--memory {plain(text)!r} is more than 1 PiB; give the limit a job should really have")
    if (value := int(amount)) < 6 * 2**20:  # Docker refuses less than 6 MB; a job needs more anyway
        raise HarnessError(f"--memory {plain(text)!r} is too small; give at least 6m")
    return value


def make_limits(memory: str | None, cpus: float | None) -> Limits:
    if cpus is not None and not (math.isfinite(cpus) and MIN_CPUS <= cpus <= MAX_CPUS):
        raise HarnessError(f"--cpus {cpus:g} must be a number of CPUs from {MIN_CPUS:g} to {MAX_CPUS:g}")
    return Limits(memory_bytes=parse_memory(memory) if memory is not None else None, cpus=cpus)


@dataclass
class JobOutcome:
    exit_code: int | None
    timed_out: bool
    stdout_log: Path
    stderr_log: Path
    wall_s: float
    # backend facts recorded into the result (e.g. image tag and id for docker)
    annotations: dict[str, Any] = field(default_factory=dict)
    oom: bool = False  # killed for memory (docker's OOMKilled flag)
    stderr_tail: str = ""  # kept in memory while the job ran, never read back from the log file
    result_problem: str | None = None  # why the job's result file was refused (a link, a FIFO, too large)
    # A status the scheduler decided and exit codes cannot tell (e.g. cancelled, a node failure):
    # it replaces whatever the job wrote, with `reason` as the result's reason.
    status: str | None = None
    reason: str | None = None


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
    suites_dir: Path = SUITES_DIR  # local, docker: the suites the jobs run (`harness ab`: a checkout's)
    fork_rounds: bool = False  # local: rounds fork each job from a server that imported once (--processes forked)


class Backend(Protocol):
    name: str

    def run_job(self, job: Job, run_id: str, run_dir: Path) -> JobOutcome: ...


@contextlib.contextmanager
def serving(*backends: Backend) -> Iterator[None]:
    """Around a session's rounds: a backend that can fork each job from a server that imported its
    framework once (local) does so inside the block; the others run their jobs as always. The
    sides' backends of one kind share their servers (`serving(shared)` is given what the first
    returned): in `harness ab`, one server forks both sides' jobs where their code before the fork
    is the same, so what a server passes to its children is no difference between the sides."""
    with contextlib.ExitStack() as stack:
        shared: dict[object, object] = {}
        for backend in backends:
            enter: Callable[[object], contextlib.AbstractContextManager[object]] | None = getattr(
                backend, "serving", None
            )
            if enter is None:
                continue
            kind = getattr(type(backend), "serving", None)  # one method, one kind of what it shares
            shared[kind] = stack.enter_context(enter(shared.get(kind)))
        yield


def job_command(spec_path: str, python: str = "python") -> list[str]:
    """The in-job command line, the same for every backend: everything else is in the spec file."""
    return [python, "-m", "suites", "run", "--job", spec_path]


# Choosing one: the name -> module table (harness/core/backend_table.py), and `auto` decided once.
__all__ = ["CHOICES", "FACTORIES", "BackendOptions", "check_options", "make_backend", "resolve_backend"]


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
        if (problem := engine_problem()) is None:
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


def check_options(name: str, options: BackendOptions) -> None:
    """What the backend called `name` refuses in the command's options, found without starting
    anything (no engine contacted, no scheduler asked): `run` calls it before `--dry-run` prints the
    plan as well as before a real run, so a dry run accepts exactly what a run accepts. A backend
    module may define `check_options(options)`; its `from_options` runs the same checks."""
    if (path := RUNS.get(name)) is None:
        raise HarnessError(f"backend {name!r} is not one of {', '.join(FACTORIES)}")
    try:  # a planted fault with a typo must stop the run here, not run clean or fail every rank
        fault_from(os.environ.get(FAULT_VAR))
    except RankError as error:
        raise HarnessError(f"{plain(str(error))}; fix or unset it") from None
    check: Callable[[BackendOptions], object] | None = getattr(importlib.import_module(path), "check_options", None)
    if check is not None:
        check(options)


def make_backend(name: str, options: BackendOptions) -> Backend:
    """The backend called `name` (already resolved: not `auto`), built from the command's options."""
    if (factory := FACTORIES.get(name)) is None:
        raise HarnessError(f"backend {name!r} is not one of {', '.join(FACTORIES)}")
    return factory(options)
