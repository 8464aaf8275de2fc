"""Running the calibration: the hidden `calibrate` suite through the same backend as the run.

Its runs and the ceilings they gave live in the cache home (harness/cache_home.py), not in a
results folder: one calibration per machine fingerprint serves every results folder, and one
harness measures at a time (a second waits on the fingerprint's lock, then reads what the first
stored instead of measuring with the first still busy on the same cores).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from harness import cache_home
from harness.backends.base import Backend
from harness.calibration import (
    RUN_FILE,
    cache_lock,
    fingerprint,
    load_cache,
    parse,
    rates_from_result,
    stack_representatives,
    store,
)
from harness.plan import make_plan
from harness.runner import execute
from harness.schema import InvalidResult, load_result
from suites.runtime.files import write_json_atomic


def calibrate(
    frameworks: list[str],
    *,
    device: str,
    threads: int | None,
    cpus: float | None,
    backend: Backend,
    force: bool = False,
) -> dict[str, Any] | None:
    """Ceilings for this machine, measuring the stacks not yet in the cache; None if none could be."""
    fp = fingerprint(device, threads, cpus)
    wanted = stack_representatives(frameworks)
    cached = load_cache(fp)
    if not force and not _missing(cached, wanted):
        return cached
    with cache_home.locked(cache_lock(fp), f"calibration of this machine (fingerprint {fp})"):
        cached = load_cache(fp)  # what another harness measured while this one waited
        todo = wanted if force else _missing(cached, wanted)
        if not todo:
            return cached
        return _measure(todo, fp, cached, device=device, threads=threads, backend=backend)


def _missing(cached: dict[str, Any] | None, wanted: list[str]) -> list[str]:
    have = set(cached["frameworks"]) if cached else set()
    return [fw for fw in wanted if fw not in have]


def _measure(
    todo: list[str], fp: str, cached: dict[str, Any] | None, *, device: str, threads: int | None, backend: Backend
) -> dict[str, Any] | None:
    print(
        f"calibrating this machine (fingerprint {fp}, once): achievable FLOP/s and bandwidth with {', '.join(todo)}",
        file=sys.stderr,
        flush=True,
    )
    plan = make_plan(
        suite="calibrate",
        frameworks=",".join(todo),
        params=[],
        repeat=None,
        warmup=None,
        device=device,
        threads=threads,
        baseline=None,
        backend=backend.name,
    )
    run_dir = execute(plan, backend, cache_home.calibration_runs_dir(), argv=["harness", "calibrate"])
    measured: dict[str, dict[str, Any]] = {}
    for job in plan.jobs:
        try:
            result = load_result(run_dir / job.result_file())
        except InvalidResult as error:
            print(f"calibration: {error}", file=sys.stderr)
            continue
        rates = rates_from_result(result)
        if not rates:
            print(f"calibration: {job.framework} gave no usable figure ({result['status']})", file=sys.stderr)
            continue
        measured[job.framework] = {**rates, "run_id": plan.run_id, "measured_at": result.get("finished_at")}
    if not measured:
        return cached
    return store(fp, device, measured)


def attach(run_dir: Path, doc: dict[str, Any] | None) -> None:
    """Copy the ceilings a run was measured against into its folder (what `show` reads later)."""
    if doc is None:
        return
    parse(doc)
    write_json_atomic(run_dir / RUN_FILE, doc)


def describe(doc: dict[str, Any]) -> list[str]:
    """Human lines for `harness calibrate`."""
    ceilings = parse(doc)
    lines = [
        f"fingerprint {ceilings.fingerprint} ({doc.get('device', '?')}); frameworks: {', '.join(ceilings.frameworks)}"
    ]
    for dtype, value in sorted(ceilings.flops_by_dtype.items()):
        lines.append(f"  matmul {dtype}: {value / 1e9:.4g} GFLOP/s achievable")
    if ceilings.bandwidth is not None:
        lines.append(f"  stream bandwidth: {ceilings.bandwidth / 1e9:.4g} GB/s achievable")
    for name, entry in sorted(doc["frameworks"].items()):
        parts = [f"{k} {v / 1e9:.4g}" for k, v in sorted(entry.items()) if k in ("float32", "float64", "bandwidth")]
        lines.append(f"    {name}: " + ", ".join(parts) + f" (run {entry.get('run_id')})")
    return lines
