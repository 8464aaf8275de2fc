"""The precision a framework really computed in, measured rather than read from the flags we set.

Before timing, every job multiplies two 512 x 512 float32 matrices and convolves a 64-channel
image batch with a 64 x 64 x 3 x 3 kernel (a reduction of 576 terms) through the same framework
settings, device and compute dtype as the suite. The operands are random with every one of
float32's 24 significand bits in use (the lowest one always set) and mixed signs, the same bits in
every framework (a fixed-seed integer hash, not a NumPy generator whose stream may change between
releases). At these sizes the libraries pick the kernels the workload's large GEMMs and
convolutions get: a 64^3 product may run on a path that never reaches the tensor cores.

Each output is compared with a float64 reference, and its error is normalised by what the
arithmetic could at best be held to: e_ij = |c_ij - exact_ij| / sum_k |a_ik| |b_kj|. The median
over all outputs, as "effective bits" -log2(median e), classifies the arithmetic. The median,
because every output of one kernel goes through the same arithmetic while the largest errors are
the tail of float32's own accumulation rounding: at the median a Winograd convolution and a
sequentially accumulated float32 GEMM stay above the bf16x3 line (the maximum would not).

Thresholds sit halfway between the nearest emulations of neighbouring classes, computed in NumPy
on these operands (`python -m tests.precision_emulation` prints this table; median effective bits):

    class   emulation                                                 matmul   conv
    fp32    float32 GEMM (BLAS)                                        27.01   27.01
            float32, products added one at a time in order             26.69
            3xTF32: tf32 big*big + big*small + small*big               27.01
            Winograd F(2x2,3x3) / F(4x4,3x3), float32 transforms               26.99 / 25.24
            FFT convolution in float32                                         27.49
    ------  FP32_BITS = 24.2 ---------------------------------------------------------------
    bf16x3  bfloat16 hi*hi + hi*lo + lo*hi (XLA's bfloat16_3x)         23.03   23.11
    ------  BF16X3_BITS = 20.0 -------------------------------------------------------------
    tf32    operands rounded to 10 explicit bits, float32 sums         16.92   17.01
            operands truncated to 10 bits (low 13 bits ignored)        15.53   15.61
    fp16    operands rounded to float16 (10 bits too: the overflow     16.92   17.01
            probe below tells it from tf32)
    ------  TF32_BITS = 14.8 ---------------------------------------------------------------
    bf16    operands rounded to 7 explicit bits, float32 sums          13.92   14.01
            ... and the output rounded to bfloat16 (autocast, Flax)    13.63   13.72
            operands truncated to 7 bits                               12.53

CPU measurements fall on the same lines: JAX and PyTorch at fp32 read 26.7-27.4 bits, at bf16
13.6-13.7 (jaxlib 0.10.2, torch 2.13, x86-64).

3xTF32 (CUTLASS, XLA's TF32_TF32_F32_X3) is not told apart from fp32, and cannot be by error:
its splitting error (about 2^-23 of each product, random in sign) averages down over the
reduction below float32's own accumulation rounding (medians 27.01 both). It reads fp32.

fp16 keeps 10 bits as tf32 does; one operand element, 73728 = 2^16 * 1.125, overflows float16
(largest finite 65504) and is finite in fp32, tf32 and bf16 (8-bit exponents), so non-finite
outputs in the slice it feeds (the last row of the product, the last image of the convolution;
left out of the error) mean fp16.

Standard library at import: the operands and references need NumPy, imported where they are
built (every framework stack has it).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

OVERFLOW_PROBE = 73728.0  # finite in fp32, tf32 and bf16 (8-bit exponent), infinite in fp16
# Operands are MATMUL_SIZE square: large enough that cuBLAS/XLA choose the kernels (tensor cores
# where allowed) that the suites' GEMMs get. The convolution reduces over 64 x 3 x 3 = 576 terms.
MATMUL_SIZE = 512
CONV_INPUT = (8, 64, 16, 16)  # NCHW
CONV_KERNEL = (64, 64, 3, 3)  # OIHW, VALID padding, stride 1
SEED = 24  # any fixed value: the operands are a pure function of it

CLASSES = ("fp32", "bf16x3", "tf32", "bf16", "fp16")
# Mantissa bits the class keeps (its operands' explicit bits; not the probe's effective bits).
# For comparing a measured class with a declared setting.
CLASS_BITS = {"fp32": 23, "bf16x3": 16, "tf32": 10, "fp16": 10, "bf16": 7}
# Median effective bits at and above which each class begins (table above); below the last, bf16.
FP32_BITS = 24.2
BF16X3_BITS = 20.0
TF32_BITS = 14.8
THRESHOLDS = (("fp32", FP32_BITS), ("bf16x3", BF16X3_BITS), ("tf32", TF32_BITS))
# The reference is float64: an error below its own resolution reads as this many bits.
EXACT_BITS = 53.0

METHOD = (
    "random float32 operands with full significands (matmul 512^3, conv 64->64 3x3 over 576 terms) "
    "against a float64 reference; class from the median of |c - exact| / sum|a||b| as bits, "
    "fp16 from a 73728 operand (contract/precision.py)"
)


def classify(bits: float, overflowed: bool) -> str:
    """The arithmetic class from the median effective bits and whether the fp16 probe overflowed."""
    if overflowed:
        return "fp16"
    return next((cls for cls, floor in THRESHOLDS if bits >= floor), "bf16")


@dataclass(frozen=True)
class Probe:
    """One operation's float32 operands and its exact result; the operation itself is the adapter's.

    Along axis 0 of the output, the last entry is the fp16 overflow slice (last row of the product,
    last image of the convolution): it decides fp16 and is left out of the error."""

    lhs: Any  # numpy float32
    rhs: Any
    exact: Any  # numpy float64, the output's shape
    scale: Any  # sum_k |a_ik| |b_kj| per output, float64

    def measure(self, out: Any) -> dict[str, Any]:
        """`environment.precision.measured.<op>` for the framework's output `out` (array-like)."""
        import numpy as np

        got = np.asarray(out, dtype=np.float64)
        if got.shape != self.exact.shape:
            raise ValueError(f"probe output has shape {got.shape}, expected {self.exact.shape}")
        overflowed = not bool(np.isfinite(got[-1]).all())
        with np.errstate(invalid="ignore", over="ignore"):
            error = np.abs(got[:-1] - self.exact[:-1]) / self.scale[:-1]
        error[~np.isfinite(error)] = np.inf  # a NaN output is as wrong as an infinite one
        median = float(np.median(error))
        bits = EXACT_BITS if median == 0.0 else min(EXACT_BITS, max(0.0, -math.log2(median)))
        worst = float(error.max())
        return {
            "class": classify(bits, overflowed),
            "bits": round(bits, 2),
            "median_rel_error": median if math.isfinite(median) else None,
            "max_rel_error": worst if math.isfinite(worst) else None,
            "non_finite": int((~np.isfinite(got[:-1])).sum()),
            "fp16_overflow": overflowed,
        }


def measured_record(matmul: dict[str, Any] | None, conv: dict[str, Any] | None) -> dict[str, Any]:
    """`environment.precision.measured`: one `Probe.measure` per operation that could be probed."""
    record: dict[str, Any] = {"method": METHOD}
    for name, found in (("matmul", matmul), ("conv", conv)):
        if found is not None:
            record[name] = found
    return record


def declared_class(float32_matmul: str | None, compute_dtype: str | None = None) -> str | None:
    """The class a framework's own settings claim (`float32_matmul` and `compute_dtype` as the
    adapters record them): a bfloat16 compute dtype is bf16 whatever float32 matmuls do."""
    if compute_dtype == "bfloat16":
        return "bf16"
    return {"float32": "fp32", "highest": "fp32", "tf32": "tf32", "bfloat16": "bf16", "bf16": "bf16"}.get(
        str(float32_matmul)
    )


def random_operand(shape: Sequence[int], stream: int) -> Any:
    """float32 values of magnitude in [1, 2) with all 24 significand bits in use (the lowest set),
    random signs; a splitmix64 hash of (SEED, stream, index), so every NumPy release gives the same
    bits. Only rounding to fewer bits can change such a value."""
    import numpy as np

    count = math.prod(shape)
    x = np.arange(count, dtype=np.uint64) + np.uint64((SEED << 40) + (stream << 32))
    x = x * np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    x ^= x >> np.uint64(31)
    significand = (x & np.uint64(0x7FFFFF)) | np.uint64(1)
    sign = (x >> np.uint64(63)) << np.uint64(31)
    exponent = np.uint64(127 << 23)  # 2^0: magnitudes in [1, 2)
    return (sign | exponent | significand).astype(np.uint32).view(np.float32).reshape(tuple(shape))


def matmul_probe() -> Probe:
    """A @ B, both MATMUL_SIZE square; A[-1, 0] is the fp16 overflow probe."""
    import numpy as np

    a = random_operand((MATMUL_SIZE, MATMUL_SIZE), 1)
    b = random_operand((MATMUL_SIZE, MATMUL_SIZE), 2)
    a[-1, 0] = OVERFLOW_PROBE
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    return Probe(a, b, a64 @ b64, np.abs(a64) @ np.abs(b64))


def conv_probe() -> Probe:
    """conv2d(x, w), NCHW input and OIHW kernel, VALID, stride 1; x[-1, 0, 0, 0] is the overflow probe."""
    import numpy as np

    x = random_operand(CONV_INPUT, 3)
    w = random_operand(CONV_KERNEL, 4)
    x[-1, 0, 0, 0] = OVERFLOW_PROBE
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    return Probe(x, w, conv_reference(x64, w64), conv_reference(np.abs(x64), np.abs(w64)))


def im2col(x: Any, kh: int, kw: int) -> Any:
    """(C*kh*kw, N*OH*OW): each column one input window of a VALID, stride-1 convolution,
    C-major as an OIHW kernel's row, so the convolution is one GEMM."""
    import numpy as np

    n, c, h, w = x.shape
    oh, ow = h - kh + 1, w - kw + 1
    windows = [x[:, :, i : i + oh, j : j + ow] for i in range(kh) for j in range(kw)]  # each (N, C, OH, OW)
    return np.stack(windows, axis=2).transpose(1, 2, 0, 3, 4).reshape(c * kh * kw, n * oh * ow)


def conv_reference(x: Any, w: Any) -> Any:
    """Cross-correlation (what every framework calls convolution) as one GEMM, in x's dtype."""
    o, _, kh, kw = w.shape
    n, _, h, wd = x.shape
    out = w.reshape(o, -1) @ im2col(x, kh, kw)  # (O, N*OH*OW)
    return out.reshape(o, n, h - kh + 1, wd - kw + 1).transpose(1, 0, 2, 3)
