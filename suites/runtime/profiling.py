"""Profiles of the steady state: a few extra steps under the framework's own profiler, after the
timed samples and never among them (docs/method.md, "Profiles: where the step's time goes").

Each profiled step runs the same callable the timed samples ran, ends in the same synchronisation,
and sits inside one step annotation named STEP, so the host can cut the trace into steps the same
way for every framework. The trace is kept as it is, in the Chrome trace-event format (gzipped
JSON, which Perfetto, chrome://tracing and TensorBoard open), under the job's artefact folder; the
result's `profiles` entry names it and carries the wall time of each profiled step, from which the
host measures what the profiler itself cost (profiled step against the timed median).

Standard library only; the framework side is a `Profiler` (runtime/profile_jax.py, profile_torch.py).
"""

from __future__ import annotations

import itertools
import json
import re
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol

from suites.contract.profiles import FOLDER, MAX_STEPS, OPS_SUFFIX, STEP, SUFFIX

__all__ = ["FOLDER", "MAX_STEPS", "OPS_SUFFIX", "STEP", "SUFFIX", "Profiler", "capture", "cycle", "slug"]


class Profiler(Protocol):
    """One framework's profiler: a session writing one trace, and a step annotation inside it."""

    name: str  # e.g. "torch.profiler 2.13.0"

    def session(self, scratch: Path) -> AbstractContextManager[None]: ...

    def step(self, index: int) -> AbstractContextManager[None]: ...

    def export(self, scratch: Path, dest: Path) -> None:
        """After the session: the trace, as gzipped Chrome trace-event JSON, at `dest`."""


def slug(metric: str) -> str:
    """A file name from a metric name ("train step" -> "train-step"): letters, digits, '-' only."""
    text = re.sub(r"[^a-z0-9]+", "-", metric.lower()).strip("-")
    return text[:60] or "metric"


def capture(
    profiler: Profiler,
    step: Callable[[], Any],
    sync: Callable[[Any], None],
    *,
    steps: int,
    folder: Path,
    metric: str,
    taken: set[str] | frozenset[str] = frozenset(),
    programs: Callable[[], list[str]] | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, Any]:
    """Run `step` `steps` times under `profiler`, each call synchronised inside its annotation; the
    trace lands at folder/profiles/<slug>.trace.json.gz. Returns the result's `profiles` entry
    (less what the caller adds: the metric's name and how many steps make one of its samples).
    `taken`: traces this job wrote already (two metrics whose names make one file name).
    `programs`: the optimised HLO text of the compiled step (JAX), called before the session (it may
    compile): what each of the trace's XLA operations runs goes beside it (runtime/hlo_ops.py)."""
    if not 1 <= steps <= MAX_STEPS:
        raise ValueError(f"profile steps {steps} is not between 1 and {MAX_STEPS}")
    out = folder / FOLDER
    out.mkdir(parents=True, exist_ok=True)
    stem = slug(metric)
    for n in range(2, 10_000):
        if f"{FOLDER}/{stem}{SUFFIX}" not in taken:
            break
        stem = f"{slug(metric)}-{n}"
    scratch = out / f".{stem}.scratch"
    dest = out / f"{stem}{SUFFIX}"
    ops: dict[str, Any] = {}
    if programs is not None:
        try:
            from suites.contract.files import write_text_atomic
            from suites.runtime import hlo_ops

            sidecar = out / f"{stem}{OPS_SUFFIX}"
            write_text_atomic(sidecar, json.dumps(hlo_ops.sidecar(programs())))
            ops["ops"] = f"{FOLDER}/{sidecar.name}"
        except Exception as error:  # names alone still attribute most of the trace
            ops["ops_error"] = f"{type(error).__name__}: {error}"[:300]
    walls: list[float] = []
    began = clock()
    with profiler.session(scratch):
        # One step outside every annotation first: the profiler's first step pays for its own start
        # (buffers, thread registration: 2x a steady step here), which is not the program's cost.
        sync(step())
        for index in range(steps):
            with profiler.step(index):
                start = clock()
                sync(step())
                walls.append(clock() - start)
    profiler.export(scratch, dest)
    _remove(scratch)
    return {
        "trace": f"{FOLDER}/{dest.name}",
        "profiler": profiler.name,
        "steps": steps,
        "step_s": walls,
        "capture_s": clock() - began,
        **ops,
    }


def cycle(calls: Sequence[Callable[[], Any]]) -> Callable[[], Any]:
    """One callable that runs `calls` in turn, one per call (a loop's batches, round and round)."""
    turn: Iterator[Callable[[], Any]] = itertools.cycle(calls)

    def next_call() -> Any:
        return next(turn)()

    return next_call


def _remove(path: Path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)
    if path.exists() and not path.is_dir():
        path.unlink()
