"""Test-only: one float64 matmul, written honestly or with one classic benchmarking mistake planted in
one framework (`harness selftest --mistakes`, harness/execute/mistakes.py).

Each mistake hides from every guard but the one it is there to prove: where the mistake leaves the
product right (a cached or unsynchronised result, a deleted computation, an inflated FLOP count),
the check is taken from an honest call, so only the timing guard can catch it.

Each is planted to be caught whatever the machine's speed: a busy machine slows a dispatch or a lookup
as much as the work, so the mistakes that skip work run at N = 1024 on a CPU (the work 64 times that
at 256, the skipping call no longer), and an inflated FLOP count is a multiple of what the device can
do in the median time the machine gave (`--param limit`, passed by `selftest --mistakes`)."""

from suites.contract.spec import CheckSpec, Param, SuiteSpec

MISTAKES = (
    "none",
    "unsynchronised",
    "float32",
    "own_data",
    "half_work",
    "memoised",
    "dead_code",
    "inflated_flops",
    "retrace",
    "retrace_epochs",
    "growing_cache",
    "extra_threads",
)

SPEC = SuiteSpec(
    name="mistakes",
    description="test only: a float64 matmul with a classic benchmarking mistake planted in one framework",
    frameworks=("numpy", "jax", "pytorch"),
    params=(
        Param("mistake", "str", "none", "the mistake planted in the culprit", choices=MISTAKES),
        Param("culprit", "str", "none", "the framework that makes it", choices=("none", "numpy", "jax", "pytorch")),
        Param(
            "n",
            "int",
            0,
            "N of the N x N product (0: 256 on a CPU, or 1024 for a mistake that skips work; 4096 on a GPU)",
            min=0,
            max=16384,
        ),
        Param("seed", "int", 0, "seed of the shared operands", min=0, max=2**31 - 1),
        Param(
            "limit",
            "float",
            0.0,
            "the device's float64 FLOP/s limit, of which inflated_flops claims a multiple "
            "(0: unknown, inflated_flops is skipped)",
            min=0.0,
            max=1e18,
        ),
    ),
    checks=(
        CheckSpec(
            "product",
            "the timed product's sum and three of its entries, on the shared float64 operands",
            rtol=1e-9,
        ),
    ),
    repeat=5,
    warmup=1,
    timeout_s=300,
    x64=True,
    hidden=True,
    smoke={"n": 64},
    metrics=("matmul",),
)
