"""Test-free machine calibration: achievable matmul FLOP/s per dtype and arithmetic, and streaming bandwidth.

Run by `harness calibrate` (and once per machine fingerprint by `harness run`); the results
give the "% of achievable" next to the datasheet's "% of peak" (harness/store/calibration.py).
"""

from suites.contract.precision import CLASSES
from suites.contract.spec import Param, SuiteSpec

SPEC = SuiteSpec(
    name="calibrate",
    description="machine ceilings: matmul FLOP/s per dtype and arithmetic, STREAM-scale bandwidth (harness calibrate)",
    frameworks=("numpy", "jax", "pytorch"),
    params=(
        Param("matmul_size", "int", 0, "N of the N x N matmuls (0: 1024 on a CPU, 8192 on a GPU)", min=0, max=65536),
        Param("stream_mib", "int", 0, "MiB of the streamed array (0: 256 on a CPU, 2048 on a GPU)", min=0, max=65536),
    ),
    # The ceiling is the best sample (harness/store/calibration.py): more samples, more chances that one ran
    # on a quiet machine. Each is one N x N matmul or one pass over the stream.
    repeat=10,
    warmup=1,
    timeout_s=600.0,
    x64=True,  # the float64 matmul; every other array says float32 explicitly
    hidden=True,
    smoke={"matmul_size": 128, "stream_mib": 8},
    # "matmul <ceiling key>[ n/2| n/4]": float32 under the class its probe measured, bfloat16,
    # float64, each at three sizes (suites/calibrate/common.py).
    metrics=(
        *(
            f"matmul {key}{suffix}"
            for key in (*(f"float32/{cls}" for cls in CLASSES), "bfloat16/bf16", "float64/fp64")
            for suffix in ("", " n/2", " n/4")
        ),
        "stream scale",
    ),
)
