"""Numbers we cannot stand behind: escaped synchronisation, and rates above the device's peak.

Three independent tests, any of which keeps a metric out of ratios, comparisons and records:
- sync escape: the job's barrier after the samples found work still running (suites/runtime/syncguard.py);
- FLOP lint: achieved FLOP/s above the device's physical peak;
- bandwidth lint: achieved bytes/s above the device's physical memory-system ceiling.
The last two catch an unsynchronised timing even from an old result without barrier evidence.
Each run is linted once, in assessment.py, which turns the three into the run's exclusions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from harness.calibration import Ceilings
from harness.result_types import Metric
from harness.run_folder import Run

IMPLAUSIBLE = "implausible - likely a missing device synchronisation"
ESCAPED = "sync escaped - work was still running when the clock stopped"


@dataclass(frozen=True)
class Finding:
    framework: str
    metric: str
    quantity: str  # "flops" (FLOP/s) or "bytes" (bytes/s)
    achieved: float  # per second, at the median
    peak: float | None
    basis: str
    synchronised: bool
    limit: float | None = None  # above this it is impossible (default: the peak)
    achievable: float | None = None  # measured on this machine by `harness calibrate`

    @property
    def fraction(self) -> float | None:
        return self.achieved / self.peak if self.peak else None

    @property
    def achievable_fraction(self) -> float | None:
        return self.achieved / self.achievable if self.achievable else None

    @property
    def ceiling(self) -> float | None:
        return self.limit if self.limit is not None else self.peak

    @property
    def plausible(self) -> bool:
        return self.ceiling is None or self.achieved <= self.ceiling

    @property
    def unit(self) -> str:
        return "GFLOP/s" if self.quantity == "flops" else "GB/s"


def _number(value: Any) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0
    return float(value) if ok else None


def _finding(
    fw: str, metric: Metric, quantity: str, amount: float, peak: Peak | None, achievable: float | None
) -> Finding | None:
    median = _number(metric["stats"]["median"])
    if median is None:
        return None
    return Finding(
        framework=fw,
        metric=metric["name"],
        quantity=quantity,
        achieved=amount / median,
        peak=peak.value if peak else None,
        basis=peak.basis if peak else "device peak unknown",
        synchronised=bool(metric.get("synchronised", True)),
        limit=peak.ceiling if peak else None,
        achievable=achievable,
    )


def lint(run: Run, ceilings: Ceilings | None) -> list[Finding]:
    """Every FLOP/s and bytes/s of the ok jobs' time metrics, against the datasheet peaks and the
    `ceilings` measured on this machine (None: not calibrated). Called by assessment.assess only."""
    findings = []
    for fw, result in run.results.items():
        if result["status"] != "ok":
            continue
        for metric in result["metrics"]:
            if metric["kind"] != "time":
                continue
            flops, moved = _number(metric.get("flops")), _number(metric.get("bytes"))
            if flops is not None:
                achievable = ceilings.flops(metric.get("dtype")) if ceilings else None
                finding = _finding(fw, metric, "flops", flops, peak_for(result, metric.get("dtype")), achievable)
                if finding is not None:
                    findings.append(finding)
            if moved is not None:
                achievable = ceilings.bandwidth if ceilings else None
                finding = _finding(fw, metric, "bytes", moved, bandwidth_for(result), achievable)
                if finding is not None:
                    findings.append(finding)
    return findings


def sync_state(metric: Mapping[str, Any]) -> str:
    """ok, escaped, or unchecked (no barrier evidence: an old result, or the check switched off)."""
    sync = metric.get("sync")
    state = sync.get("state") if isinstance(sync, dict) else None
    return state if state in ("ok", "escaped", "unchecked") else "unchecked"


__all__ = ["ESCAPED", "IMPLAUSIBLE", "Ceilings", "Finding", "lint", "sync_state"]


# Physical peaks of known devices: the ceilings no honest measurement can exceed.
#
# FLOP/s: GPU figures are NVIDIA's dense (no sparsity) datasheet peaks in TFLOP/s; FP64 uses the
# tensor-core figure where one exists, because cuBLAS DGEMM uses it. CPU peaks are computed from
# cores x clock x FLOP per cycle.
#
# Bandwidth: GPU figures are the datasheet memory (HBM/GDDR) bandwidth in TB/s. A working set
# that fits in the GPU's L2 cache can honestly be streamed faster than that (measured L2
# bandwidth is 2.5-3x HBM on A100/H100), so the lint allows `GPU_CACHE_HEADROOM` x the memory
# figure before calling a rate impossible; "% of peak" is still against the memory figure. On a
# CPU nothing moves data faster than the L1 caches: cores x clock x (2 loads + 1 store of one
# vector register) per cycle, a bound that holds whatever fits in which cache.
#
# Which FLOP/s peak applies to a float32 metric follows the precision the job *measured*
# (`environment.precision.measured`, suites/runtime/precision.py), not the flags it set.
TERA = 1e12


@dataclass(frozen=True)
class GpuPeak:
    match: tuple[str, ...]  # all substrings must appear in the device name
    name: str
    fp64: float
    fp32: float
    tf32: float
    bf16: float  # also the fp16 figure on every card listed
    memory_tb_s: float


# Order matters: the first match wins, so more specific names come first.
GPU_PEAKS: tuple[GpuPeak, ...] = (
    GpuPeak(("H200",), "H200 SXM", fp64=67, fp32=67, tf32=495, bf16=989, memory_tb_s=4.8),
    GpuPeak(("H100", "PCIe"), "H100 PCIe", fp64=51, fp32=51, tf32=378, bf16=756, memory_tb_s=2.0),
    GpuPeak(("H100",), "H100 SXM", fp64=67, fp32=67, tf32=495, bf16=989, memory_tb_s=3.35),
    # 80 GB SXM figure (the 40 GB card has 1.555 TB/s): the higher one, so only the impossible is flagged.
    GpuPeak(("A100",), "A100", fp64=19.5, fp32=19.5, tf32=156, bf16=312, memory_tb_s=2.039),
    GpuPeak(("3060 Ti",), "GeForce RTX 3060 Ti", fp64=0.253, fp32=16.2, tf32=16.2, bf16=64.8, memory_tb_s=0.448),
)
GPU_CACHE_HEADROOM = 4.0

# FLOP per cycle per core for float64 with two FMA pipes: 2 pipes x lanes x 2 (multiply + add).
FP64_FLOP_PER_CYCLE = {"avx512f": 32, "avx2": 16, "avx": 8, "sse2": 8, "neon": 8}
# L1 bytes per cycle per core: two vector loads and one vector store.
L1_BYTES_PER_CYCLE = {"avx512f": 192, "avx2": 96, "avx": 48, "sse2": 48, "neon": 48}
# When only the nominal clock is known, allow this much turbo so the lint flags only the impossible.
TURBO_HEADROOM = 1.5

# The float32 arithmetic classes of the precision probe -> the datasheet column they run at.
_MEASURED_COLUMN = {"fp32": "fp32", "tf32": "tf32", "bf16x3": "bf16", "bf16": "bf16", "fp16": "bf16"}


@dataclass(frozen=True)
class Peak:
    value: float  # FLOP/s or bytes/s
    basis: str
    limit: float | None = None  # above this the lint calls it impossible (default: value)

    @property
    def ceiling(self) -> float:
        return self.limit if self.limit is not None else self.value

    @property
    def flops_per_s(self) -> float:  # the name the FLOP lint reads
        return self.value


def _dtype_class(dtype: str | None) -> str:
    if dtype in ("float64", "f64", "double"):
        return "fp64"
    if dtype in ("float32", "f32", "float"):
        return "fp32"
    return "any"  # unknown or half precision: hold against the highest figure


def _gpu(device_name: str) -> GpuPeak | None:
    return next((g for g in GPU_PEAKS if all(part in device_name for part in g.match)), None)


def gpu_peak(device_name: str, dtype: str | None, arithmetic: str) -> Peak | None:
    """`arithmetic`: the measured float32 class (fp32, tf32, bf16x3, bf16, fp16)."""
    gpu = _gpu(device_name)
    if gpu is None:
        return None
    cls = _dtype_class(dtype)
    if cls == "fp64":
        value, label = gpu.fp64, "FP64"
    elif cls == "fp32":
        column = _MEASURED_COLUMN.get(arithmetic, "fp32")
        value, label = getattr(gpu, column), {"fp32": "FP32", "tf32": "TF32", "bf16": "BF16/FP16"}[column]
        if arithmetic != "fp32":
            label += f" (measured {arithmetic} arithmetic)"
    else:
        value, label = gpu.bf16, "BF16"
    return Peak(value * TERA, f"{gpu.name} {label} peak {value:g} TFLOP/s")


def _clock(cpu: dict[str, Any]) -> tuple[float, str] | None:
    if _positive(cpu.get("max_mhz")):
        return float(cpu["max_mhz"]) / 1000, "max clock"
    if _positive(cpu.get("mhz")):
        return float(cpu["mhz"]) / 1000 * TURBO_HEADROOM, f"reported clock x{TURBO_HEADROOM:g} turbo allowance"
    return None


def _positive(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0


def _cores(cpu: dict[str, Any]) -> int | None:
    for key in ("usable_cores", "logical_cores"):
        if isinstance(cpu.get(key), int) and not isinstance(cpu.get(key), bool) and cpu[key] > 0:
            return int(cpu[key])
    return None


def cpu_peak(cpu: dict[str, Any], dtype: str | None) -> Peak | None:
    vector = cpu.get("vector")
    cores = _cores(cpu)
    clock = _clock(cpu)
    if vector not in FP64_FLOP_PER_CYCLE or cores is None or clock is None:
        return None
    ghz, clock_note = clock
    per_cycle = FP64_FLOP_PER_CYCLE[vector] * (1 if _dtype_class(dtype) == "fp64" else 2)
    value = cores * ghz * 1e9 * per_cycle
    basis = f"{cores} cores x {ghz:.2f} GHz ({clock_note}) x {per_cycle} FLOP/cycle ({vector})"
    return Peak(value, basis)


def cpu_bandwidth(cpu: dict[str, Any]) -> Peak | None:
    vector = cpu.get("vector")
    cores = _cores(cpu)
    clock = _clock(cpu)
    if vector not in L1_BYTES_PER_CYCLE or cores is None or clock is None:
        return None
    ghz, clock_note = clock
    per_cycle = L1_BYTES_PER_CYCLE[vector]
    value = cores * ghz * 1e9 * per_cycle
    basis = f"L1 bound: {cores} cores x {ghz:.2f} GHz ({clock_note}) x {per_cycle} B/cycle ({vector})"
    return Peak(value, basis)


def gpu_bandwidth(device_name: str) -> Peak | None:
    gpu = _gpu(device_name)
    if gpu is None:
        return None
    value = gpu.memory_tb_s * TERA
    basis = f"{gpu.name} memory {gpu.memory_tb_s:g} TB/s (limit x{GPU_CACHE_HEADROOM:g} for cache-resident data)"
    return Peak(value, basis, limit=value * GPU_CACHE_HEADROOM)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def measured_arithmetic(result: Mapping[str, Any]) -> str | None:
    """The float32 matmul class the job's precision probe measured (None: not probed)."""
    measured = _dict(_dict(_dict(result.get("environment")).get("precision")).get("measured"))
    cls = _dict(measured.get("matmul")).get("class")
    return cls if isinstance(cls, str) else None


def _flagged_arithmetic(precision: dict[str, Any]) -> str:
    """Results written before the probe existed: infer from the flags the job set."""
    tf32 = bool(precision.get("cuda_matmul_allow_tf32")) or precision.get("jax_default_matmul_precision") in (
        "tensorfloat32",
        "default",
        "bfloat16",
    )
    return "tf32" if tf32 else "fp32"


def peak_for(result: Mapping[str, Any], dtype: str | None) -> Peak | None:
    env = _dict(result.get("environment"))
    device = _dict(env.get("device"))
    if result.get("device") == "gpu":
        arithmetic = measured_arithmetic(result) or _flagged_arithmetic(_dict(env.get("precision")))
        return gpu_peak(str(device.get("name", "")), dtype, arithmetic)
    return cpu_peak(_dict(_dict(env.get("machine")).get("cpu")), dtype)


def bandwidth_for(result: Mapping[str, Any]) -> Peak | None:
    env = _dict(result.get("environment"))
    if result.get("device") == "gpu":
        return gpu_bandwidth(str(_dict(env.get("device")).get("name", "")))
    return cpu_bandwidth(_dict(_dict(env.get("machine")).get("cpu")))


def machine_limits(device: str, cpu: Mapping[str, Any], gpu_names: list[str]) -> dict[str, tuple[float, str]]:
    """The most a calibration job on this machine can honestly reach, per calibrated quantity (float32,
    float64, bandwidth) -> (limit, basis): what `calibration.load_cache` holds a cached figure to.

    Generous on purpose, so only the impossible is discarded: a CPU counts all its logical cores, a
    float32 matmul on a GPU is held to the highest column its arithmetic could have run at (BF16),
    and the fastest of several GPUs counts. A device not in the tables gives no limit."""
    found: dict[str, tuple[float, str]] = {}
    if device == "gpu":
        for dtype, arithmetic in (("float32", "bf16"), ("float64", "fp64")):
            peaks = [p for p in (gpu_peak(name, dtype, arithmetic) for name in gpu_names) if p is not None]
            if peaks:
                best = max(peaks, key=lambda p: p.ceiling)
                found[dtype] = (best.ceiling, best.basis)
        moved = [p for p in (gpu_bandwidth(name) for name in gpu_names) if p is not None]
        if moved:
            best = max(moved, key=lambda p: p.ceiling)
            found["bandwidth"] = (best.ceiling, best.basis)
        return found
    every_core = {k: v for k, v in cpu.items() if k != "usable_cores"}  # not this process's affinity
    for dtype in ("float32", "float64"):
        peak = cpu_peak(every_core, dtype)
        if peak is not None:
            found[dtype] = (peak.ceiling, peak.basis)
    bandwidth = cpu_bandwidth(every_core)
    if bandwidth is not None:
        found["bandwidth"] = (bandwidth.ceiling, bandwidth.basis)
    return found
