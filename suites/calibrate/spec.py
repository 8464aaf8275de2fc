"""Test-free machine calibration: achievable matmul FLOP/s per dtype and streaming bandwidth.

Run by `harness calibrate` (and once per machine fingerprint by `harness run`); the results
give the "% of achievable" next to the datasheet's "% of peak" (harness/calibration.py).
"""

from suites.runtime.spec import Param, SuiteSpec

SPEC = SuiteSpec(
    name="calibrate",
    description="machine ceilings: float32/float64 matmul FLOP/s and STREAM-scale bandwidth (harness calibrate)",
    frameworks=("numpy", "jax", "pytorch"),
    params=(
        Param("matmul_size", "int", 0, "N of the N x N matmuls (0: 1024 on a CPU, 8192 on a GPU)", min=0, max=65536),
        Param("stream_mib", "int", 0, "MiB of the streamed array (0: 256 on a CPU, 2048 on a GPU)", min=0, max=65536),
    ),
    repeat=5,
    warmup=1,
    timeout_s=600.0,
    x64=True,  # the float64 matmul; every other array says float32 explicitly
    hidden=True,
    smoke={"matmul_size": 128, "stream_mib": 8},
    metrics=("matmul float32", "matmul float64", "stream scale"),
)
