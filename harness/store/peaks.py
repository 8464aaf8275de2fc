"""The datasheet ceilings of a device: what no honest measurement can exceed.

Read from the result file alone (the job's device name, memory and power limit, its CPU's cores
and clock, the arithmetic its precision probe measured), so the lint (judge/plausibility.py),
the runner's early warning and the roofline picture all hold a rate to the same peak.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from harness.store.calibration import CEILING_KEYS, DTYPES, ceiling_key

NO_PEAK = "no datasheet peak"

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
# (`environment.precision.measured`, suites/contract/precision.py), not the flags it set. A peak
# has two figures: its value, the datasheet figure of that arithmetic, which "% of peak" divides
# by (MFU), and its ceiling (`Peak.limit`), the fastest a job reading as that arithmetic can
# honestly go, which the lint holds a rate to. They differ for GPU float32 (three TF32 passes read
# as fp32 and run at up to TF32 / 3: an H200's FP32 figure is 67 TFLOP/s, its float32 limit 165)
# and for GPU bandwidth (cache-resident data, below).
TERA = 1e12
GIB = 2**30


@dataclass(frozen=True)
class GpuPeak:
    """One board variant. Variants of one chip differ in clocks, power and memory (an H100 PCIe
    reaches 3/4 of an SXM5's FLOP/s, an H100 NVL has more and faster memory), so each has its row."""

    name: str  # the variant, as NVIDIA's datasheet names it
    reported: tuple[str, ...]  # device names the driver reports for it (compared by `_normal`)
    memory_gib: float  # on the datasheet ("80GB" boards hold 80 GiB; the driver reports slightly less)
    max_power_w: float  # the datasheet's maximum board power: no power limit can be set above it
    fp64: float
    fp32: float
    tf32: float
    bf16: float  # also the fp16 figure on every card listed
    memory_tb_s: float

    def holds(self, memory_bytes: float) -> bool:
        """Whether a reported total memory is this variant's: drivers report 1-3 % under the label."""
        return 0.93 <= memory_bytes / GIB / self.memory_gib <= 1.01


# Dense figures, halved from the datasheets' "with sparsity" ones where only those are printed.
# Sources (NVIDIA datasheets): H100 SXM5/NVL: nvidia.com/en-us/data-center/h100 (datasheet table,
# NVL column: FP64 30, FP64 tensor 60, FP32 60, TF32 835*, BF16 1,671*, 94 GB, 3.9 TB/s, 350-400 W);
# H100 PCIe: "NVIDIA H100 PCIe GPU" product brief PB-11133 (FP64 tensor 51, TF32 756*, BF16 1,513*,
# 80 GB, 2 TB/s, 350 W); H200 SXM/NVL: nvidia.com/en-us/data-center/h200 (141 GB, 4.8 TB/s, up to
# 700 W / 600 W; the NVL's compute as the H100 NVL's); GH200: the Grace Hopper Superchip datasheet
# (the Hopper GPU's figures: FP64 tensor 67, TF32 494 / 989*, BF16 990 / 1,979*; 96 GB HBM3 at
# 4 TB/s or 144 GB HBM3e at 4.9 TB/s; module power 450-1,000 W); A100: the A100 datasheet (FP64
# tensor 19.5, TF32 156, BF16 312; 40 GB: 1,555 GB/s; 80 GB: 1,935 GB/s PCIe, 2,039 GB/s SXM;
# 250/300 W PCIe, 400 W SXM). Reported names: as nvidia-smi and torch.cuda.get_device_name print
# them (e.g. "NVIDIA H100 80GB HBM3" is the SXM5 board, "NVIDIA H200 NVL" reports 143771 MiB).
# A name not listed gets no peak rather than a neighbour's.
_HOPPER_SXM = {"fp64": 67, "fp32": 67, "tf32": 494.5, "bf16": 989.5}
_HOPPER_NVL = {"fp64": 60, "fp32": 60, "tf32": 417.5, "bf16": 835.5}
_H100_PCIE = {"fp64": 51, "fp32": 51, "tf32": 378, "bf16": 756.5}
_A100 = {"fp64": 19.5, "fp32": 19.5, "tf32": 156, "bf16": 312}
_RTX_3060_TI = {"fp64": 0.253, "fp32": 16.2, "tf32": 16.2, "bf16": 64.8}
# A bare family name says no form factor (should a driver or a virtual GPU report one): its
# memory and power limit must tell the variant, else it gets no peak.
_BARE_H100 = "NVIDIA H100"
GPU_PEAKS: tuple[GpuPeak, ...] = (
    GpuPeak("H100 SXM5 80GB", ("NVIDIA H100 80GB HBM3", _BARE_H100), 80, 700, **_HOPPER_SXM, memory_tb_s=3.35),
    GpuPeak("H100 PCIe 80GB", ("NVIDIA H100 PCIe", _BARE_H100), 80, 350, **_H100_PCIE, memory_tb_s=2.0),
    GpuPeak("H100 NVL 94GB", ("NVIDIA H100 NVL", _BARE_H100), 94, 400, **_HOPPER_NVL, memory_tb_s=3.9),
    GpuPeak("H200 SXM 141GB", ("NVIDIA H200",), 141, 700, **_HOPPER_SXM, memory_tb_s=4.8),
    GpuPeak("H200 NVL 141GB", ("NVIDIA H200 NVL",), 141, 600, **_HOPPER_NVL, memory_tb_s=4.8),
    # "480GB" and "120GB" count the Grace CPU's LPDDR5X; the Hopper GPU has 96 GB of HBM3 in both.
    GpuPeak("GH200 96GB HBM3", ("NVIDIA GH200 480GB", "NVIDIA GH200 120GB"), 96, 1000, **_HOPPER_SXM, memory_tb_s=4.0),
    GpuPeak("GH200 144GB HBM3e", ("NVIDIA GH200 144G HBM3e",), 144, 1000, **_HOPPER_SXM, memory_tb_s=4.9),
    GpuPeak("A100 SXM4 80GB", ("NVIDIA A100-SXM4-80GB",), 80, 400, **_A100, memory_tb_s=2.039),
    GpuPeak("A100 SXM4 40GB", ("NVIDIA A100-SXM4-40GB",), 40, 400, **_A100, memory_tb_s=1.555),
    GpuPeak("A100 PCIe 80GB", ("NVIDIA A100 80GB PCIe",), 80, 300, **_A100, memory_tb_s=1.935),
    GpuPeak("A100 PCIe 40GB", ("NVIDIA A100-PCIE-40GB",), 40, 250, **_A100, memory_tb_s=1.555),
    GpuPeak("GeForce RTX 3060 Ti", ("NVIDIA GeForce RTX 3060 Ti",), 8, 200, **_RTX_3060_TI, memory_tb_s=0.448),
)
GPU_CACHE_HEADROOM = 4.0
MAX_NAME = 80  # characters of a device name quoted in a reason
POWER_TOLERANCE_W = 1.0  # NVML reports milliwatts: a limit at the maximum may read a fraction above

# FLOP per cycle per core for float64 with two FMA pipes: 2 pipes x lanes x 2 (multiply + add).
FP64_FLOP_PER_CYCLE = {"avx512f": 32, "avx2": 16, "avx": 8, "sse2": 8, "neon": 8}
# L1 bytes per cycle per core: two vector loads and one vector store.
L1_BYTES_PER_CYCLE = {"avx512f": 192, "avx2": 96, "avx": 48, "sse2": 48, "neon": 48}
# When only the nominal clock is known, allow this much turbo so the lint flags only the impossible.
TURBO_HEADROOM = 1.5

# The float32 arithmetic classes of the precision probe -> the datasheet column they run at.
_MEASURED_COLUMN = {"fp32": "fp32", "tf32": "tf32", "bf16x3": "bf16", "bf16": "bf16", "fp16": "bf16"}
_HALF = ("bf16", "fp16", "bf16x3")
# A dtype's spelling (calibration.DTYPES) -> the datasheet figure it is held to.
_DTYPE_CLASS = {"float64": "fp64", "float32": "fp32", "bfloat16": "half", "float16": "half"}


@dataclass(frozen=True)
class Peak:
    value: float  # FLOP/s or bytes/s: the datasheet figure, what "% of peak" divides by
    basis: str
    limit: float | None = None  # above this the lint calls it impossible (default: value)

    @property
    def ceiling(self) -> float:
        return self.limit if self.limit is not None else self.value


@dataclass(frozen=True)
class GpuMatch:
    """The peak-table row of one GPU, or why it has none (an unknown or ambiguous variant)."""

    row: GpuPeak | None
    why: str | None = None


def _dtype_class(dtype: str | None) -> str:
    # "any": unknown, held (like half precision on a GPU) against the highest figure
    return _DTYPE_CLASS.get(DTYPES.get(dtype, "") if isinstance(dtype, str) else "", "any")


def _normal(name: str) -> str:
    """Driver names differ in case, spacing and (older drivers) the "NVIDIA " prefix."""
    words = name.lower().split()
    return " ".join(words[1:] if words[:1] == ["nvidia"] else words)


def match_gpu(name: str, memory_bytes: float | None = None, power_limit_w: float | None = None) -> GpuMatch:
    """The variant a device is, from its reported name, total memory and power limit (each optional).

    The name picks the candidates; the memory (a physical fact) must then fit; where several are
    left, a power limit above a variant's maximum rules that variant out (a limit below it proves
    nothing: any board can be capped lower). Not exactly one left: no row, and the reason."""
    candidates = [g for g in GPU_PEAKS if _normal(name) in {_normal(r) for r in g.reported}]
    name = name[:MAX_NAME] or "an unnamed GPU"  # from a file: said, never at any length
    if not candidates:
        return GpuMatch(None, f"{NO_PEAK}: {name} is not in the peak table")
    if memory_bytes is not None:
        fitting = [g for g in candidates if g.holds(memory_bytes)]
        if not fitting:
            known = ", ".join(f"{g.name}" for g in candidates)
            return GpuMatch(None, f"{NO_PEAK}: {name} with {memory_bytes / GIB:.1f} GiB is none of {known}")
        candidates = fitting
    if len(candidates) > 1 and power_limit_w is not None:
        candidates = [g for g in candidates if power_limit_w <= g.max_power_w + POWER_TOLERANCE_W] or candidates
    if len(candidates) > 1:
        told = "memory and power limit do not tell" if memory_bytes and power_limit_w else "memory or power unknown"
        return GpuMatch(None, f"{NO_PEAK}: {name} could be {' or '.join(g.name for g in candidates)} ({told})")
    return GpuMatch(candidates[0])


def _gpu_column(gpu: GpuPeak, dtype: str | None, arithmetic: str) -> tuple[float, float, str]:
    """(the datasheet figure of the arithmetic, the most a job reading as it can reach, its label), TFLOP/s."""
    if (cls := _dtype_class(dtype)) == "fp64":
        return gpu.fp64, gpu.fp64, "FP64"
    if cls == "fp32":
        if (column := _MEASURED_COLUMN.get(arithmetic, "fp32")) == "fp32" and gpu.tf32 / 3 > gpu.fp32:
            # Three TF32 passes (cuBLAS/XLA's split-precision float32) keep float32's error, so the
            # probe reads them as fp32 (suites/contract/precision.py), yet they run at up to a third
            # of the TF32 rate: the float32 limit is the larger of the two. "% of peak" stays against
            # the FP32 figure, the arithmetic asked for (an H200 fp32 job at 50 TFLOP/s is 75 % of
            # its 67, not 30 % of 165).
            return gpu.fp32, gpu.tf32 / 3, "FP32"
        label = {"fp32": "FP32", "tf32": "TF32", "bf16": "BF16/FP16"}[column]
        value = getattr(gpu, column)
        return value, value, label + (f" (measured {arithmetic} arithmetic)" if arithmetic != "fp32" else "")
    return gpu.bf16, gpu.bf16, "BF16"


def gpu_peak(match: GpuMatch, dtype: str | None, arithmetic: str) -> Peak | str:
    """`arithmetic`: the measured float32 class (fp32, tf32, bf16x3, bf16, fp16). A str: why no peak.

    The peak's value is the datasheet figure of that arithmetic ("% of peak"); its ceiling, where
    higher, the fastest a job that reads as it can honestly go (the plausibility limit)."""
    if match.row is None:
        return match.why or NO_PEAK
    value, limit, label = _gpu_column(match.row, dtype, arithmetic)
    basis = f"{match.row.name} {label} peak {value:g} TFLOP/s"
    if limit > value:
        return Peak(value * TERA, f"{basis}; limit {limit:.4g} TFLOP/s, 3xTF32 at TF32 / 3", limit=limit * TERA)
    return Peak(value * TERA, basis)


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


def _per_cycle_peak(cpu: dict[str, Any], table: dict[str, int], scale: int, unit: str, label: str = "") -> Peak | None:
    """cores x clock x `table[vector] * scale` `unit` per cycle; None where the CPU leaves one unknown."""
    vector = cpu.get("vector")
    cores = _cores(cpu)
    clock = _clock(cpu)
    if vector not in table or cores is None or clock is None:
        return None
    ghz, clock_note = clock
    per_cycle = table[vector] * scale
    basis = f"{label}{cores} cores x {ghz:.2f} GHz ({clock_note}) x {per_cycle} {unit}/cycle ({vector})"
    return Peak(cores * ghz * 1e9 * per_cycle, basis)


def cpu_peak(cpu: dict[str, Any], dtype: str | None) -> Peak | None:
    return _per_cycle_peak(cpu, FP64_FLOP_PER_CYCLE, 1 if _dtype_class(dtype) == "fp64" else 2, "FLOP")


def cpu_bandwidth(cpu: dict[str, Any]) -> Peak | None:
    return _per_cycle_peak(cpu, L1_BYTES_PER_CYCLE, 1, "B", "L1 bound: ")


def gpu_bandwidth(match: GpuMatch) -> Peak | str:
    if match.row is None:
        return match.why or NO_PEAK
    gpu = match.row
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
    if precision.get("compute_dtype") == "bfloat16":  # bf16 operands: the float32 flags stay at full precision
        return "bf16"
    tf32 = bool(precision.get("cuda_matmul_allow_tf32")) or precision.get("jax_default_matmul_precision") in (
        "tensorfloat32",
        "default",
        "bfloat16",
    )
    return "tf32" if tf32 else "fp32"


def _gpu_of(result: Mapping[str, Any]) -> GpuMatch:
    """The job's GPU from its result (a file: every field checked): the device name the framework
    reported, its total memory (PyTorch records it; NVML's record where it has one), and the power
    limit NVML read for the GPUs of that name, when they all agree (NVML lists every GPU, the job
    ran on one)."""
    env = _dict(result.get("environment"))
    device = _dict(env.get("device"))
    name = str(device["name"]) if isinstance(device.get("name"), str) else ""
    same = [g for g in _dict(env.get("nvml")).get("gpus") or [] if isinstance(g, dict) and _same_name(g, name)]
    memory = device.get("memory_bytes") if _positive(device.get("memory_bytes")) else _agreed(same, "memory_bytes")
    return match_gpu(name, memory, _agreed(same, "power_limit_w"))


def _same_name(gpu: dict[str, Any], name: str) -> bool:
    return isinstance(gpu.get("name"), str) and _normal(gpu["name"]) == _normal(name)


def _agreed(gpus: list[dict[str, Any]], field: str) -> float | None:
    values = {float(g[field]) for g in gpus if _positive(g.get(field))}
    return values.pop() if len(values) == 1 else None


def peak_or_why(result: Mapping[str, Any], dtype: str | None) -> Peak | str:
    """The datasheet FLOP/s peak of one metric's dtype, or why there is none."""
    env = _dict(result.get("environment"))
    if result.get("device") == "gpu":
        arithmetic = measured_arithmetic(result) or _flagged_arithmetic(_dict(env.get("precision")))
        return gpu_peak(_gpu_of(result), dtype, arithmetic)
    half = _dtype_class(dtype) == "half" or (_dtype_class(dtype) != "fp64" and measured_arithmetic(result) in _HALF)
    if half:
        # A CPU may run half precision on matrix units (AMX, AVX512-BF16) the vector figure below
        # does not count: 1.2 TFLOP/s of bfloat16 on two cores that peak at 0.5 TFLOP/s of float32.
        return f"{NO_PEAK}: half-precision arithmetic on a CPU (matrix units are not in the table)"
    return cpu_peak(_dict(_dict(env.get("machine")).get("cpu")), dtype) or "device peak unknown"


def bandwidth_or_why(result: Mapping[str, Any]) -> Peak | str:
    env = _dict(result.get("environment"))
    if result.get("device") == "gpu":
        return gpu_bandwidth(_gpu_of(result))
    return cpu_bandwidth(_dict(_dict(env.get("machine")).get("cpu"))) or "device peak unknown"


def peak_for(result: Mapping[str, Any], dtype: str | None) -> Peak | None:
    peak = peak_or_why(result, dtype)
    return peak if isinstance(peak, Peak) else None


def bandwidth_for(result: Mapping[str, Any]) -> Peak | None:
    peak = bandwidth_or_why(result)
    return peak if isinstance(peak, Peak) else None


def machine_limits(device: str, cpu: Mapping[str, Any], gpu_names: list[str]) -> dict[str, tuple[float, str]]:
    """The most a calibration job on this machine can honestly reach, per calibrated quantity (a
    ceiling key, or bandwidth) -> (limit, basis): what `calibration.load_cache` holds a cached figure to.

    Generous on purpose, so only the impossible is discarded: a CPU counts all its logical cores, a
    GPU name that several variants report counts its fastest, and so does the fastest of several
    GPUs. A device not in the tables gives no limit, and neither does half precision on a CPU."""
    candidates: dict[str, list[Peak | str | None]]  # quantity -> the peaks it may have here
    if device == "gpu":
        # The host sees names only (nvidia-smi): every variant a name may be is a candidate.
        names = {_normal(n) for n in gpu_names}
        rows = [GpuMatch(g) for g in GPU_PEAKS if names & {_normal(r) for r in g.reported}]
        keys = [f"float32/{cls}" for cls in _MEASURED_COLUMN] + [
            k for k in CEILING_KEYS if not k.startswith("float32/")
        ]
        candidates = {key: [gpu_peak(m, *key.split("/")) for m in rows] for key in keys}
        candidates["bandwidth"] = [gpu_bandwidth(m) for m in rows]
    else:
        every_core = {k: v for k, v in cpu.items() if k != "usable_cores"}  # not this process's affinity
        candidates = {key: [cpu_peak(every_core, key.split("/")[0])] for key in ("float32/fp32", "float64/fp64")}
        candidates["bandwidth"] = [cpu_bandwidth(every_core)]
    found: dict[str, tuple[float, str]] = {}
    for key, peaks in candidates.items():
        best = max((p for p in peaks if isinstance(p, Peak)), key=lambda p: p.ceiling, default=None)
        if best is not None:
            found[key] = (best.ceiling, best.basis)
    return found


def achievable_key(result: Mapping[str, Any], dtype: Any) -> str | None:
    """The calibrated ceiling a FLOP/s of this result is held to: the metric's dtype and, for float32,
    the arithmetic the job's precision probe measured (never the flags it set)."""
    return ceiling_key(dtype, measured_arithmetic(result))
