"""Each float32 arithmetic class a GPU may use, emulated in NumPy on the precision probe's operands.

The classifier's thresholds (suites/contract/precision.py) are calibrated on these; the tests hold
every emulation to its class. `python -m tests.precision_emulation` prints the calibration table.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from suites.contract import precision


def round_mantissa(x: np.ndarray, bits: int, *, truncate: bool = False) -> np.ndarray:
    """float32 rounded to `bits` explicit mantissa bits: nearest-even (what TF32/bf16 conversions
    do), or toward zero (tensor cores that ignore the low bits of a float32 operand)."""
    raw = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    drop = np.uint64(23 - bits)
    if not truncate:
        half = np.uint64(1 << (23 - bits - 1))
        lsb = (raw >> drop) & np.uint64(1)
        raw = raw + half - np.uint64(1) + lsb
    return ((raw >> drop) << drop).astype(np.uint32).view(np.float32)


def to_fp16(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return x.astype(np.float16).astype(np.float32)


Op = Callable[[np.ndarray, np.ndarray], np.ndarray]


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", over="ignore"):
        return a @ b


def conv(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", over="ignore"):
        return precision.conv_reference(x, w)


def rounded(op: Op, bits: int, *, truncate: bool = False, out_bits: int | None = None) -> Op:
    """Operands rounded to `bits`, products summed in float32 (a tensor core's accumulator)."""

    def run(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        out = op(round_mantissa(a, bits, truncate=truncate), round_mantissa(b, bits, truncate=truncate))
        return out if out_bits is None else round_mantissa(out, out_bits)

    return run


def split3(op: Op, bits: int) -> Op:
    """Each operand split into a `bits`-bit high part and a `bits`-bit remainder; hi*hi + hi*lo +
    lo*hi in float32 (XLA's bfloat16_3x with bits=7, CUTLASS's 3xTF32 with bits=10)."""

    def run(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        a_hi, b_hi = round_mantissa(a, bits), round_mantissa(b, bits)
        a_lo, b_lo = round_mantissa(a - a_hi, bits), round_mantissa(b - b_hi, bits)
        return op(a_hi, b_hi) + (op(a_hi, b_lo) + op(a_lo, b_hi))

    return run


def sequential_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """float32 products added one k at a time (a SIMT SGEMM thread's loop; BLAS blocks it)."""
    out = np.zeros((a.shape[0], b.shape[1]), np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        for k in range(a.shape[1]):
            out += np.multiply.outer(a[:, k], b[k, :])
    return out


def fp16_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return matmul(to_fp16(a), to_fp16(b))


def fp16_conv(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    return conv(to_fp16(x), to_fp16(w))


# Winograd F(m x m, 3 x 3) transforms (Lavin & Gray 2016): the fast fp32 algorithms cuDNN and
# oneDNN pick for 3x3 kernels, which lose a few bits to their transforms.
WINOGRAD = {
    2: (
        [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]],
        [[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]],
        [[1, 1, 1, 0], [0, 1, -1, -1]],
    ),
    4: (
        [
            [4, 0, -5, 0, 1, 0],
            [0, -4, -4, 1, 1, 0],
            [0, 4, -4, -1, 1, 0],
            [0, -2, -1, 2, 1, 0],
            [0, 2, -1, -2, 1, 0],
            [0, 4, 0, -5, 0, 1],
        ],  # fmt: skip
        [
            [1 / 4, 0, 0],
            [-1 / 6, -1 / 6, -1 / 6],
            [-1 / 6, 1 / 6, -1 / 6],
            [1 / 24, 1 / 12, 1 / 6],
            [1 / 24, -1 / 12, 1 / 6],
            [0, 0, 1],
        ],  # fmt: skip
        [[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]],
    ),
}


def winograd_conv(m: int) -> Op:
    """VALID 3x3 convolution by Winograd F(m x m, 3 x 3), every step in float32."""
    bt, g, at = (np.asarray(t, np.float32) for t in WINOGRAD[m])

    def run(x: np.ndarray, w: np.ndarray) -> np.ndarray:
        n, c, h, _ = x.shape
        size, tiles = m + 2, -(-(h - 2) // m)
        padded = np.zeros((n, c, tiles * m + 2, tiles * m + 2), np.float32)
        padded[:, :, :h, :h] = x
        with np.errstate(invalid="ignore", over="ignore"):
            u = np.einsum("ij,ocjk,lk->ocil", g, w, g).astype(np.float32)
            d = np.stack(
                [np.stack([padded[:, :, i * m : i * m + size, j * m : j * m + size] for j in range(tiles)], 2)
                 for i in range(tiles)], 2)  # fmt: skip
            v = np.einsum("ij,nctujk,lk->nctuil", bt, d, bt).astype(np.float32)
            prod = np.einsum("ocil,nctuil->notuil", u, v).astype(np.float32)
            y = np.einsum("ij,notujk,lk->notuil", at, prod, at).astype(np.float32)
        y = y.transpose(0, 1, 2, 4, 3, 5).reshape(n, w.shape[0], tiles * m, tiles * m)
        return y[:, :, : h - 2, : h - 2]

    return run


def fft_conv(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """VALID cross-correlation through float32 FFTs (complex64 throughout)."""
    h, wd = x.shape[2:]
    with np.errstate(invalid="ignore", over="ignore"):
        xf = np.fft.rfft2(x, s=(h, wd))
        wf = np.fft.rfft2(np.ascontiguousarray(w[:, :, ::-1, ::-1]), s=(h, wd))
        y = np.fft.irfft2(np.einsum("ncij,ocij->noij", xf, wf), s=(h, wd)).astype(np.float32)
    return y[:, :, 2:, 2:]


# (operation, emulation name) -> (expected class, emulation). The names are the docstring table's.
EMULATIONS: dict[tuple[str, str], tuple[str, Op]] = {
    ("matmul", "fp32"): ("fp32", matmul),
    ("matmul", "fp32 sequential"): ("fp32", sequential_matmul),
    ("matmul", "3xTF32"): ("fp32", split3(matmul, 10)),
    ("matmul", "bf16x3"): ("bf16x3", split3(matmul, 7)),
    ("matmul", "tf32"): ("tf32", rounded(matmul, 10)),
    ("matmul", "tf32 truncated"): ("tf32", rounded(matmul, 10, truncate=True)),
    ("matmul", "fp16"): ("fp16", fp16_matmul),
    ("matmul", "bf16"): ("bf16", rounded(matmul, 7)),
    ("matmul", "bf16, bf16 output"): ("bf16", rounded(matmul, 7, out_bits=7)),
    ("matmul", "bf16 truncated"): ("bf16", rounded(matmul, 7, truncate=True)),
    ("conv", "fp32"): ("fp32", conv),
    ("conv", "Winograd F(2x2,3x3)"): ("fp32", winograd_conv(2)),
    ("conv", "Winograd F(4x4,3x3)"): ("fp32", winograd_conv(4)),
    ("conv", "FFT"): ("fp32", fft_conv),
    ("conv", "bf16x3"): ("bf16x3", split3(conv, 7)),
    ("conv", "tf32"): ("tf32", rounded(conv, 10)),
    ("conv", "tf32 truncated"): ("tf32", rounded(conv, 10, truncate=True)),
    ("conv", "fp16"): ("fp16", fp16_conv),
    ("conv", "bf16"): ("bf16", rounded(conv, 7)),
    ("conv", "bf16, bf16 output"): ("bf16", rounded(conv, 7, out_bits=7)),
}


def probe_for(op: str) -> precision.Probe:
    return precision.matmul_probe() if op == "matmul" else precision.conv_probe()


def main() -> None:
    probes = {op: probe_for(op) for op in ("matmul", "conv")}
    for (op, name), (expected, emulate) in EMULATIONS.items():
        probe = probes[op]
        found = probe.measure(emulate(probe.lhs, probe.rhs))
        print(f"{op:7s} {name:22s} {expected:7s} -> {found['class']:7s} {found['bits']:6.2f} bits")


if __name__ == "__main__":
    main()
