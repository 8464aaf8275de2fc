"""Ceilings measured on this machine: achievable matmul FLOP/s per dtype and arithmetic, and
streaming bandwidth.

Datasheets say what a device could do; what its libraries reach on it is often far less (a GPU
at a lower power limit, a CPU whose turbo never engages). `harness calibrate` runs the hidden
`calibrate` suite with each framework stack and keeps, per quantity, the best sample of any stack.
A matmul ceiling is keyed by the operands' dtype and the arithmetic the suite's precision probe
measured for it (`ceiling_key`: "float32/fp32", "float32/tf32", "bfloat16/bf16", "float64/fp64",
...), so a TF32 run is never held against a float32 ceiling. The suite caches the
ceilings in the cache home (harness/core/cache_home.py: `calibration/<fingerprint>.json`) per machine
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
import os
import shutil
import stat
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.core import cache_home
from harness.core.errors import HarnessError
from harness.core.safe_files import write_json_atomic
from harness.core.schema import number
from harness.text.escape import plain
from suites.contract import machine, precision
from suites.contract.frameworks import FRAMEWORKS
from suites.contract.marks import ESCAPED as ESCAPED_MARK

if TYPE_CHECKING:
    from harness.store.run_folder import Run

FORMAT = "harness-calibration"
# Version 1 kept one median per stack and dtype, not keyed by arithmetic: never read (a cache of it
# is measured again; a run folder's copy gives no "% of achievable"), since its float32 figure may
# be another arithmetic's and a median under load understates the ceiling.
VERSION = 2
RUN_FILE = "calibration.json"
MAX_BYTES = 1 << 20
MODES = ("auto", "always", "never")
SIZES = ("full", "smoke")  # the calibrate suite's size a framework's figures were measured at
BANDWIDTH = "bandwidth"
MATMUL_PREFIX = "matmul "  # the calibrate suite's matmul metrics: "matmul <ceiling key>"
# The operands' dtype -> its spelling in a ceiling key; float32 adds the measured arithmetic class.
DTYPES = {
    "float64": "float64", "f64": "float64", "double": "float64",
    "float32": "float32", "f32": "float32", "float": "float32",
    "bfloat16": "bfloat16", "bf16": "bfloat16",
    "float16": "float16", "f16": "float16", "half": "float16",
}  # fmt: skip
# Every key a ceiling may have: float32 under each class the precision probe tells apart; the
# other dtypes compute in their own arithmetic whatever a framework's float32 flags say.
CEILING_KEYS = (
    *(f"float32/{cls}" for cls in precision.CLASSES),
    "bfloat16/bf16",
    "float16/fp16",
    "float64/fp64",
)
# Beyond any machine one job runs on (the largest GPUs reach petaFLOP/s and tens of TB/s), whatever
# it is: a figure above these is a corrupt or planted file, refused before the device's own peak
# (Limits, below) is even asked.
PHYSICAL_MAX = {"flops": 1e18, BANDWIDTH: 1e17}
# ceiling key or "bandwidth" -> (the most this machine's device can reach, why): the datasheet
# peaks of harness/store/peaks.py, computed by the caller (a layer above this module).
Limits = Mapping[str, tuple[float, str]]


def ceiling_key(dtype: Any, arithmetic: str | None) -> str | None:
    """The ceiling a matmul-like rate is held to: its operands' dtype and, for float32, the arithmetic
    class the precision probe measured (suites/contract/precision.py). None: nothing to key it by (an
    undeclared dtype, or float32 whose arithmetic was not measured)."""
    spelled = DTYPES.get(dtype) if isinstance(dtype, str) else None
    if spelled is None:
        return None
    if spelled != "float32":
        return next(key for key in CEILING_KEYS if key.startswith(spelled + "/"))
    return f"float32/{arithmetic}" if arithmetic in precision.CLASSES else None


def _unit(quantity: str) -> str:
    return "B/s" if quantity == BANDWIDTH else "FLOP/s"


@dataclass(frozen=True)
class Ceilings:
    """The best rate any framework reached here, per quantity (None: not measured)."""

    fingerprint: str
    flops_by_key: dict[str, float]  # ceiling key ("float32/tf32") -> FLOP/s
    bandwidth: float | None
    frameworks: tuple[str, ...]

    def flops(self, key: str | None) -> float | None:
        """The matmul ceiling of one key (`ceiling_key`); never another key's, even a close one."""
        return self.flops_by_key.get(key) if isinstance(key, str) else None


def gpu_names() -> list[str]:
    if (exe := shutil.which("nvidia-smi")) is None:
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
    return number(value) and value > 0  # number(): a huge int from a hostile cache never reaches float()


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
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ValueError(f"not a {FORMAT} document")
    if (version := doc.get("version")) != VERSION:
        shown = version if isinstance(version, int) and not isinstance(version, bool) else "?"
        raise ValueError(
            f"version {shown} is not read (version {VERSION} keys each ceiling by dtype and arithmetic, "
            "the best of several samples)"
        )
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
        for key, value in _flops_entry(name, entry).items():
            flops[key] = max(flops.get(key, 0.0), value)
        if entry.get("size", "full") not in SIZES:
            raise ValueError(f"frameworks.{name}.size: expected one of {', '.join(SIZES)}")
        if (moved := entry.get(BANDWIDTH)) is not None:
            bandwidth = max(bandwidth or 0.0, _figure(f"frameworks.{name}.{BANDWIDTH}", moved, BANDWIDTH))
    return Ceilings(fp, flops, bandwidth, tuple(sorted(per_fw)))


def _flops_entry(name: str, entry: dict[str, Any]) -> dict[str, float]:
    """One framework's matmul ceilings, validated: known keys, positive finite rates below any machine's."""
    found = entry.get("flops", {})
    if not isinstance(found, dict):
        raise ValueError(f"frameworks.{name}.flops: expected an object of ceiling key -> FLOP/s")
    for key in found:
        if key not in CEILING_KEYS:
            raise ValueError(f"frameworks.{name}.flops: unknown ceiling key {key!r} (one of {', '.join(CEILING_KEYS)})")
    return {key: _figure(f"frameworks.{name}.flops.{key}", value, "flops") for key, value in found.items()}


def _figure(where: str, value: Any, kind: str) -> float:
    if not _positive(value):
        raise ValueError(f"{where}: expected a positive number")
    if value > PHYSICAL_MAX[kind]:
        raise ValueError(f"{where}: {value:.3g} {_unit(kind)} is beyond any machine's peak")
    return float(value)


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
    return _read_cache(fp, limits)[0]


def cache_problem(fp: str, limits: Limits | None = None) -> str | None:
    """Why the cache file of this fingerprint is not (wholly) used, in one line; None: used, or none."""
    return _read_cache(fp, limits)[1]


def _read_cache(fp: str, limits: Limits | None) -> tuple[dict[str, Any] | None, str | None]:
    path = cache_path(fp)
    try:
        if (doc := read_json_file(path)) is None:
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
        figures = {**entry.get("flops", {}), BANDWIDTH: entry.get(BANDWIDTH)}
        for quantity, (limit, basis) in limits.items():
            if (value := figures.get(quantity)) is not None and value > limit:
                found[name] = f"{name} {quantity} {value:.3g} {_unit(quantity)} is above the peak ({basis})"
                break
    return found


def ceilings_for_run(run: Run) -> Ceilings | None:
    """The ceilings a run was measured against (its own copy), or None."""
    try:
        doc = read_json_file(run.path / RUN_FILE)
        return parse(doc) if doc is not None else None
    except ValueError as error:
        if (problem := f"{RUN_FILE}: ignored ({error})") not in run.problems:
            run.problems.append(problem)
        return None


def rates_from_result(result: Mapping[str, Any]) -> dict[str, Any]:
    """The ceilings one ok calibration result shows: {"flops": {ceiling key: FLOP/s}, "bandwidth":
    B/s}, each from the best sample (see `best_sample`), leaving out untrustworthy samples; {} if none."""
    if result.get("status") != "ok":
        return {}
    flops: dict[str, float] = {}
    bandwidth = 0.0
    for metric in result.get("metrics", []):
        if (best := best_sample(metric)) is None:
            continue
        # Every metric declares both a FLOP and a byte count (for the roofline), so the stream
        # has a FLOP/s and each matmul a bandwidth: the best rate any metric reached is what is
        # achievable here, which a last-one-wins assignment would replace with whichever came last.
        if (key := _matmul_key(metric)) is not None and _positive(metric.get("flops")):
            flops[key] = max(flops.get(key, 0.0), float(metric["flops"]) / best)
        if _positive(metric.get("bytes")):
            bandwidth = max(bandwidth, float(metric["bytes"]) / best)
    rates: dict[str, Any] = {"flops": flops} if flops else {}
    if bandwidth:
        rates[BANDWIDTH] = bandwidth
    return rates


def best_sample(metric: Mapping[str, Any]) -> float | None:
    """The fastest trustworthy sample of a time metric (seconds), None if it has none.

    The best, not the median: a ceiling is what the machine can reach, and a median taken while
    other work shared the machine understates it; a run measured later on a quieter machine then
    showed 227 % "of achievable". A faster sample than the machine can produce would need work
    escaping the clock, so samples the barrier caught doing that (and metrics it flagged) are left
    out; a contended sample is only ever slower, and the best of several passes it over."""
    if isinstance(sync := metric.get("sync"), dict) and sync.get("state") == "escaped":
        return None
    samples = metric.get("samples")
    if not isinstance(samples, list):
        return None
    marks = metric.get("marks")
    escaped = marks.get(ESCAPED_MARK) if isinstance(marks, dict) else None
    left_out = set(escaped) if isinstance(escaped, list) else set()
    kept = [float(s) for i, s in enumerate(samples) if i not in left_out and _positive(s)]
    return min(kept) if kept else None


def _matmul_key(metric: Mapping[str, Any]) -> str | None:
    """The ceiling key a calibrate matmul metric names ("matmul float32/tf32", "... n/2" at another
    size), if it agrees with the metric's dtype: a name and a dtype that disagree key nothing."""
    name = metric.get("name")
    if not isinstance(name, str) or not name.startswith(MATMUL_PREFIX):
        return None
    key = name.removeprefix(MATMUL_PREFIX).split(" ", 1)[0]
    if key not in CEILING_KEYS or key.split("/")[0] != DTYPES.get(metric.get("dtype") or ""):
        return None
    return key


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
    from suites.contract.registry import all_suites

    calibrate = all_suites()["calibrate"]
    chosen: list[str] = []
    for name in frameworks:
        stack = FRAMEWORKS[name].stack
        rep = next((f for f in calibrate.frameworks if FRAMEWORKS[f].stack == stack), None)
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


def smoke_frameworks(doc: dict[str, Any]) -> list[str]:
    """The frameworks whose figures in a parsed document were measured at the smoke size (lower ceilings than the full size's)."""
    return sorted(name for name, entry in doc.get("frameworks", {}).items() if entry.get("size") == "smoke")


def describe(doc: dict[str, Any]) -> list[str]:
    """Human lines for `harness calibrate`."""
    ceilings = parse(doc)
    lines = [
        f"fingerprint {ceilings.fingerprint} ({doc.get('device', '?')}); frameworks: {', '.join(ceilings.frameworks)}"
    ]
    for key, value in sorted(ceilings.flops_by_key.items()):
        lines.append(f"  matmul {key}: {value / 1e9:.4g} GFLOP/s achievable")
    if ceilings.bandwidth is not None:
        lines.append(f"  stream bandwidth: {ceilings.bandwidth / 1e9:.4g} GB/s achievable")
    for name, entry in sorted(doc["frameworks"].items()):
        figures = {**entry.get("flops", {}), BANDWIDTH: entry.get(BANDWIDTH)}
        parts = [f"{k} {v / 1e9:.4g}" for k, v in sorted(figures.items()) if v is not None]
        size = ", smoke size" if entry.get("size") == "smoke" else ""
        lines.append(f"    {name}: " + ", ".join(parts) + f" (run {plain(str(entry.get('run_id')))}{size})")
    lines.append("  each the best sample of any stack (a ceiling is what this machine can reach)")
    return lines
