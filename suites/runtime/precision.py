"""The precision a framework really computed in, measured rather than read from the flags we set.

Before timing, every job multiplies (and convolves) float32 inputs whose exact result is known
through the same framework settings as the suite: probe value i carries a 2^-i part (1 + 2^-i
for i <= 9, 1 + 2^-9 + 2^-i above, so that a split into a bfloat16 and a bfloat16 remainder
cannot hold it exactly past 16 bits) against an identity operand, so the output equals the
input exactly only where the arithmetic kept i mantissa bits. Counting the bits that survived
classifies the arithmetic:

    bits kept   class     how it happens
    >= 20       fp32      IEEE float32 (up to ~3 bits lost to a Winograd/FFT algorithm)
    12 .. 19    bf16x3    float32 emulated with three bfloat16 passes (XLA "bfloat16_3x")
    9 .. 11     tf32      TensorFloat-32 (10 explicit bits) on tensor cores
    <= 8        bf16      bfloat16 (7 explicit bits)

and one extra value, 73728 = 2^16 * 1.125, overflows float16 (largest finite 65504), so an
infinite or NaN output there means fp16 even though fp16, like tf32, keeps 10 bits.

Standard library only: the adapters run the operations and hand the outputs here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

MAX_BITS = 23  # float32's explicit mantissa bits
OVERFLOW_PROBE = 73728.0  # finite in fp32, tf32 and bf16 (8-bit exponent), infinite in fp16
PROBE_SIZE = 64  # operands are PROBE_SIZE x PROBE_SIZE, so the framework takes its real GEMM path

CLASSES = ("fp32", "bf16x3", "tf32", "bf16", "fp16")
# Mantissa bits the class keeps, for comparing a measured class with a declared setting.
CLASS_BITS = {"fp32": 23, "bf16x3": 16, "tf32": 10, "fp16": 10, "bf16": 7}


SPLIT_BIT = 9  # above it, values carry 2^-9 too: the bfloat16 remainder then needs i - 8 bits


def probe_value(i: int) -> float:
    """Probe i (1..23): exact in float32, and its 2^-i part survives only i-bit arithmetic."""
    return 1.0 + 2.0**-i if i <= SPLIT_BIT else 1.0 + 2.0**-SPLIT_BIT + 2.0**-i


def probe_values() -> list[float]:
    """The 23 bit probes, then the fp16 overflow probe."""
    return [probe_value(i) for i in range(1, MAX_BITS + 1)] + [OVERFLOW_PROBE]


def bits_kept(outputs: Sequence[float]) -> int:
    """How many leading probe values came back with their 2^-i part (at least half of it)."""
    kept = 0
    for i, out in enumerate(outputs[:MAX_BITS], start=1):
        if not math.isfinite(out) or abs(out - probe_value(i)) >= 2.0 ** -(i + 1):
            break
        kept = i
    return kept


def classify(outputs: Sequence[float]) -> dict[str, Any]:
    """The arithmetic class of one operation from its probe outputs (see the module docstring)."""
    if len(outputs) != MAX_BITS + 1:
        raise ValueError(f"expected {MAX_BITS + 1} probe outputs, got {len(outputs)}")
    bits = bits_kept(outputs)
    overflow = outputs[MAX_BITS]
    if not math.isfinite(overflow):
        cls = "fp16"
    elif bits >= 20:
        cls = "fp32"
    elif bits >= 12:
        cls = "bf16x3"
    elif bits >= 9:
        cls = "tf32"
    else:
        cls = "bf16"
    worst = max(
        (abs(o - v) / v if math.isfinite(o) else math.inf for o, v in zip(outputs, probe_values(), strict=True)),
        default=0.0,
    )
    return {"class": cls, "bits": bits, "max_rel_error": worst if math.isfinite(worst) else None}


def declared_class(float32_matmul: str | None) -> str | None:
    """The class a framework's own flags claim (`float32_matmul` as the adapters record it)."""
    return {"float32": "fp32", "highest": "fp32", "tf32": "tf32", "bfloat16": "bf16", "bf16": "bf16"}.get(
        str(float32_matmul)
    )


def measured_record(matmul: Sequence[float] | None, conv: Sequence[float] | None) -> dict[str, Any]:
    """`environment.precision.measured`: one class per operation that could be probed."""
    record: dict[str, Any] = {"method": "identity operands carrying a 2^-i part, i = 1..23 (runtime/precision.py)"}
    for name, outputs in (("matmul", matmul), ("conv", conv)):
        if outputs is not None:
            record[name] = classify(outputs)
    return record


def identity_operands() -> tuple[list[list[float]], list[list[float]]]:
    """A (PROBE_SIZE x PROBE_SIZE) with the probe values on its first column, and the identity B.

    A @ B = A, so column 0 of the product must give the probe values back unchanged.
    """
    values = probe_values()
    a = [[(values[r] if r < len(values) and c == 0 else 0.0) for c in range(PROBE_SIZE)] for r in range(PROBE_SIZE)]
    b = [[1.0 if r == c else 0.0 for c in range(PROBE_SIZE)] for r in range(PROBE_SIZE)]
    return a, b
