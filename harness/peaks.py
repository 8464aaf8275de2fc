"""Physical peak FLOP/s of known devices: the ceiling no honest measurement can exceed.

GPU figures are NVIDIA's dense (no sparsity) datasheet peaks in TFLOP/s; FP64 uses the
tensor-core figure where one exists, because cuBLAS DGEMM uses it. CPU peaks are
computed from cores x clock x FLOP per cycle.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

TERA = 1e12


@dataclass(frozen=True)
class GpuPeak:
    match: tuple[str, ...]  # all substrings must appear in the device name
    name: str
    fp64: float
    fp32: float
    tf32: float
    bf16: float


# Order matters: the first match wins, so more specific names come first.
GPU_PEAKS: tuple[GpuPeak, ...] = (
    GpuPeak(("H200",), "H200 SXM", fp64=67, fp32=67, tf32=495, bf16=989),
    GpuPeak(("H100", "PCIe"), "H100 PCIe", fp64=51, fp32=51, tf32=378, bf16=756),
    GpuPeak(("H100",), "H100 SXM", fp64=67, fp32=67, tf32=495, bf16=989),
    GpuPeak(("A100",), "A100", fp64=19.5, fp32=19.5, tf32=156, bf16=312),
    GpuPeak(("3060 Ti",), "GeForce RTX 3060 Ti", fp64=0.253, fp32=16.2, tf32=16.2, bf16=64.8),
)

# FLOP per cycle per core for float64 with two FMA pipes: 2 pipes x lanes x 2 (multiply + add).
FP64_FLOP_PER_CYCLE = {"avx512f": 32, "avx2": 16, "avx": 8, "sse2": 8, "neon": 8}
# When only the nominal clock is known, allow this much turbo so the lint flags only the impossible.
TURBO_HEADROOM = 1.5


@dataclass(frozen=True)
class Peak:
    flops_per_s: float
    basis: str


def _dtype_class(dtype: str | None) -> str:
    if dtype in ("float64", "f64", "double"):
        return "fp64"
    if dtype in ("float32", "f32", "float"):
        return "fp32"
    return "any"  # unknown or half precision: hold against the highest figure


def gpu_peak(device_name: str, dtype: str | None, tf32_allowed: bool) -> Peak | None:
    for gpu in GPU_PEAKS:
        if all(part in device_name for part in gpu.match):
            cls = _dtype_class(dtype)
            if cls == "fp64":
                value, label = gpu.fp64, "FP64"
            elif cls == "fp32":
                value, label = (gpu.tf32, "TF32") if tf32_allowed else (gpu.fp32, "FP32")
            else:
                value, label = gpu.bf16, "BF16"
            return Peak(value * TERA, f"{gpu.name} {label} peak {value:g} TFLOP/s")
    return None


def cpu_peak(cpu: dict[str, Any], dtype: str | None) -> Peak | None:
    vector = cpu.get("vector")
    cores = cpu.get("usable_cores") or cpu.get("logical_cores")
    if vector not in FP64_FLOP_PER_CYCLE or not cores:
        return None
    if cpu.get("max_mhz"):
        ghz, clock_note = cpu["max_mhz"] / 1000, "max clock"
    elif cpu.get("mhz"):
        ghz, clock_note = cpu["mhz"] / 1000 * TURBO_HEADROOM, f"reported clock x{TURBO_HEADROOM:g} turbo allowance"
    else:
        return None
    per_cycle = FP64_FLOP_PER_CYCLE[vector] * (1 if _dtype_class(dtype) == "fp64" else 2)
    value = cores * ghz * 1e9 * per_cycle
    basis = f"{cores} cores x {ghz:.2f} GHz ({clock_note}) x {per_cycle} FLOP/cycle ({vector})"
    return Peak(value, basis)


def peak_for(result: dict[str, Any], dtype: str | None) -> Peak | None:
    env = result["environment"]
    device = env.get("device") or {}
    if result["device"] == "gpu":
        precision = env.get("precision") or {}
        tf32 = bool(precision.get("cuda_matmul_allow_tf32")) or precision.get("jax_default_matmul_precision") in (
            "tensorfloat32",
            "default",
            "bfloat16",
        )
        return gpu_peak(str(device.get("name", "")), dtype, tf32)
    return cpu_peak((env.get("machine") or {}).get("cpu") or {}, dtype)
