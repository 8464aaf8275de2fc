"""TEMPLATE: copy this folder to suites/<name>/, then rename `name` below (it must equal the folder).

The registry finds the suite by its folder (folders starting with "_" are skipped, which is why
this template never shows in `harness list`). Everything the host needs is declared here:
parameters with ranges, the checks every framework reports and their tolerances, the frameworks,
and the smoke size the conformance test and `harness run --smoke` use.
"""

from suites.contract.spec import CheckSpec, Param, SuiteSpec

SPEC = SuiteSpec(
    name="_template",
    description="a float32 matrix product of N x N matrices (what one line of `harness list` says)",
    frameworks=("numpy", "jax", "pytorch"),
    params=(
        Param("n", "int", 1024, "N of the N x N float32 matrices", min=2, max=65536),
        Param("seed", "int", 0, "NumPy seed of the shared inputs", min=0, max=2**31 - 1),
    ),
    checks=(
        # A check compared across frameworks: |v - reference| <= atol + rtol * |reference|.
        # Justify the tolerance from the arithmetic (here: float32 sums of N products).
        CheckSpec("product_sum", "sum of A @ B on the shared inputs", rtol=1e-5),
    ),
    repeat=5,
    warmup=1,
    smoke={"n": 64},
    metrics=("matmul",),
)
