"""Ceilings measured on this machine: achievable matmul FLOP/s per dtype and streaming bandwidth.

Datasheets say what a device could do; what its libraries reach on it is often far less (a GPU
at a lower power limit, a CPU whose turbo never engages). `harness calibrate` runs the hidden
`calibrate` suite with each framework stack, keeps the best rate per quantity, and caches the
ceilings in the cache home (harness/cache_home.py: `calibration/<fingerprint>.json`) per machine
fingerprint (CPU, cores, memory, device, thread and CPU limits), so every results folder on this
machine shares them. `harness run` calibrates once per fingerprint on its own and copies the
ceilings it used into the run folder (`calibration.json`), so "% of achievable" is reproducible
from the run folder alone. (Caches under `<results-dir>/.calibration/` from before the cache home
are not read: measuring once more is cheap, and ceilings whose provenance is a folder that may
since have moved are not worth a migration.)
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import stat
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness import cache_home
from harness.errors import HarnessError
from harness.safe_files import write_json_atomic
from suites.runtime import machine
from suites.runtime.frameworks import FRAMEWORKS

if TYPE_CHECKING:
    from harness.run_folder import Run

FORMAT = "harness-calibration"
VERSION = 1
RUN_FILE = "calibration.json"
MAX_BYTES = 1 << 20
CALIBRATED_DTYPES = ("float32", "float64")
MODES = ("auto", "always", "never")
# Beyond any machine one job runs on (the largest GPUs reach petaFLOP/s and tens of TB/s), whatever
# it is: a figure above these is a corrupt or planted file, refused before the device's own peak
# (Limits, below) is even asked.
PHYSICAL_MAX = {"float32": 1e18, "float64": 1e18, "bandwidth": 1e17}
UNITS = {"float32": "FLOP/s", "float64": "FLOP/s", "bandwidth": "B/s"}
# quantity (float32, float64, bandwidth) -> (the most this machine's device can reach, why): the
# datasheet peaks of harness/plausibility.py, computed by the caller (a layer above this module).
Limits = Mapping[str, tuple[float, str]]


@dataclass(frozen=True)
class Ceilings:
    """The best rate any framework reached here, per quantity (None: not measured)."""

    fingerprint: str
    flops_by_dtype: dict[str, float]
    bandwidth: float | None
    frameworks: tuple[str, ...]

    def flops(self, dtype: Any) -> float | None:
        return self.flops_by_dtype.get(dtype) if isinstance(dtype, str) else None


def gpu_names() -> list[str]:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return []
    try:
        out = subprocess.run(
            [exe, "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True, timeout=20, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in out.stdout.splitlines() if line.strip()]


def fingerprint(device: str, threads: int | None, cpus: float | None) -> str:
    """What must be equal for two ceilings to apply: hardware, device, thread and CPU limits."""
    facts = machine.describe()
    cpu = facts["cpu"]
    key = {
        "cpu": cpu.get("model"),
        "logical_cores": cpu.get("logical_cores"),
        "arch": facts.get("machine"),
        "memory_bytes": facts.get("memory_bytes"),
        "device": device,
        "gpus": gpu_names() if device == "gpu" else [],
        "threads": threads,
        "cpus": cpus,
    }
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]


def _positive(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def read_json_file(path: Path, max_bytes: int = MAX_BYTES) -> Any:
    """A small JSON file that a job or a user could have tampered with: no links, regular, capped."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as error:
        raise ValueError(f"cannot open ({error.strerror})") from None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise ValueError("not a regular file")
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise ValueError(f"larger than {max_bytes} bytes")
    try:
        return json.loads(data.decode("utf-8"), parse_constant=_refuse)
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        raise ValueError(f"not valid JSON ({error})") from None


def _refuse(name: str) -> Any:
    raise ValueError(f"{name} is not a number")


def parse(doc: Any) -> Ceilings:
    """Validate a calibration document (cache file or a run's copy); raises ValueError."""
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or doc.get("version") != VERSION:
        raise ValueError(f"not a {FORMAT} version {VERSION} document")
    fp = doc.get("fingerprint")
    if not isinstance(fp, str) or not fp.isalnum() or len(fp) > 64:
        raise ValueError("fingerprint: expected a short alphanumeric string")
    per_fw = doc.get("frameworks")
    if not isinstance(per_fw, dict):
        raise ValueError("frameworks: expected an object")
    flops: dict[str, float] = {}
    bandwidth: float | None = None
    for name, entry in per_fw.items():
        if name not in FRAMEWORKS or not isinstance(entry, dict):
            raise ValueError(f"frameworks: unknown framework {name!r}")
        for quantity in (*CALIBRATED_DTYPES, "bandwidth"):
            value = entry.get(quantity)
            if value is None:
                continue
            if not _positive(value):
                raise ValueError(f"frameworks.{name}.{quantity}: expected a positive number")
            if value > PHYSICAL_MAX[quantity]:
                raise ValueError(
                    f"frameworks.{name}.{quantity}: {value:.3g} {UNITS[quantity]} is beyond any machine's peak"
                )
            if quantity == "bandwidth":
                bandwidth = max(bandwidth or 0.0, float(value))
            else:
                flops[quantity] = max(flops.get(quantity, 0.0), float(value))
    return Ceilings(fp, flops, bandwidth, tuple(sorted(per_fw)))


def cache_path(fp: str) -> Path:
    """The machine-wide cache file of one fingerprint (its folder is created on first use)."""
    if not fp.isalnum() or not fp.isascii():
        raise HarnessError(f"calibration fingerprint {fp!r} is not alphanumeric")
    return cache_home.calibration_dir() / f"{fp}.json"


def cache_lock(fp: str) -> Path:
    """Held while this fingerprint is measured: a second harness waits, then finds the cache filled."""
    return cache_path(fp).with_suffix(".lock")


def load_cache(fp: str, limits: Limits | None = None) -> dict[str, Any] | None:
    """The cached document for this fingerprint, or None (missing or unusable: recalibrate).

    `limits`: this machine's peaks; a framework's figures above them are dropped (it is measured
    again), as a result above the peak is never a record (plausibility.py)."""
    doc, _ = _read_cache(fp, limits)
    return doc


def cache_problem(fp: str, limits: Limits | None = None) -> str | None:
    """Why the cache file of this fingerprint is not (wholly) used, in one line; None: used, or none."""
    _, problem = _read_cache(fp, limits)
    return problem


def _read_cache(fp: str, limits: Limits | None) -> tuple[dict[str, Any] | None, str | None]:
    path = cache_path(fp)
    try:
        doc = read_json_file(path)
        if doc is None:
            return None, None
        ceilings = parse(doc)
    except ValueError as error:
        return None, f"calibration cache {path} ignored ({error}); measuring again"
    if ceilings.fingerprint != fp:
        return None, f"calibration cache {path} ignored (it names fingerprint {ceilings.fingerprint}); measuring again"
    above = above_limits(doc, limits or {})
    if not above:
        return doc, None
    kept = {name: entry for name, entry in doc["frameworks"].items() if name not in above}
    problem = (
        f"calibration cache {path}: {'; '.join(above.values())}: discarded, measuring {', '.join(sorted(above))} again"
    )
    return ({**doc, "frameworks": kept} if kept else None), problem


def above_limits(doc: dict[str, Any], limits: Limits) -> dict[str, str]:
    """Frameworks of a parsed document with a figure above this machine's peak -> what is wrong."""
    found: dict[str, str] = {}
    for name, entry in sorted(doc["frameworks"].items()):
        for quantity, (limit, basis) in limits.items():
            value = entry.get(quantity)
            if value is not None and value > limit:
                found[name] = f"{name} {quantity} {value:.3g} {UNITS[quantity]} is above the peak ({basis})"
                break
    return found


def ceilings_for_run(run: Run) -> Ceilings | None:
    """The ceilings a run was measured against (its own copy), or None."""
    try:
        doc = read_json_file(run.path / RUN_FILE)
        return parse(doc) if doc is not None else None
    except ValueError as error:
        problem = f"{RUN_FILE}: ignored ({error})"
        if problem not in run.problems:
            run.problems.append(problem)
        return None


def rates_from_result(result: Mapping[str, Any]) -> dict[str, float]:
    """Best-per-quantity rates of one ok calibration result, leaving out untrustworthy samples."""
    rates: dict[str, float] = {}
    if result.get("status") != "ok":
        return rates
    for metric in result.get("metrics", []):
        sync = metric.get("sync")
        if isinstance(sync, dict) and sync.get("state") == "escaped":
            continue
        median = metric.get("stats", {}).get("median")
        if not _positive(median):
            continue
        # Every metric declares both a FLOP and a byte count (for the roofline), so the stream
        # has a FLOP/s and each matmul a bandwidth: the best rate any metric reached is what is
        # achievable here, which a last-one-wins assignment would replace with whichever came last.
        if _positive(metric.get("flops")) and metric.get("dtype") in CALIBRATED_DTYPES:
            _keep_max(rates, str(metric["dtype"]), float(metric["flops"]) / float(median))
        if _positive(metric.get("bytes")):
            _keep_max(rates, "bandwidth", float(metric["bytes"]) / float(median))
    return rates


def _keep_max(rates: dict[str, float], quantity: str, rate: float) -> None:
    rates[quantity] = max(rates.get(quantity, 0.0), rate)


def store(
    fp: str, device: str, per_framework: dict[str, dict[str, Any]], limits: Limits | None = None
) -> dict[str, Any]:
    """Merge new per-framework figures into the cache for this fingerprint; returns the document.
    Figures already cached above `limits` are dropped, not merged back.

    Call it holding `cache_lock(fp)`: the read-merge-write is then never interleaved with another."""
    doc = load_cache(fp, limits) or {
        "format": FORMAT,
        "version": VERSION,
        "fingerprint": fp,
        "device": device,
        "machine": machine.describe()["cpu"],
        "frameworks": {},
    }
    doc["frameworks"].update(per_framework)
    parse(doc)  # never write what we would refuse to read
    write_json_atomic(cache_path(fp), doc)
    return doc


def stack_representatives(frameworks: list[str]) -> list[str]:
    """One calibrating framework per stack (flax calibrates as jax: the same libraries)."""
    from suites.calibrate.spec import SPEC

    chosen: list[str] = []
    for name in frameworks:
        stack = FRAMEWORKS[name].stack
        rep = next((f for f in SPEC.frameworks if FRAMEWORKS[f].stack == stack), None)
        if rep is not None and rep not in chosen:
            chosen.append(rep)
    return chosen


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise HarnessError(f"--calibrate {mode!r} is not one of {', '.join(MODES)}; e.g. --calibrate never")
    return mode


def attach(run_dir: Path, doc: dict[str, Any] | None) -> None:
    """Copy the ceilings a run was measured against into its folder (what `show` reads later)."""
    if doc is None:
        return
    parse(doc)
    write_json_atomic(run_dir / RUN_FILE, doc, run_dir.parent)  # no link followed from the results folder down


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
