"""Seed 000 "XLA": dense float64 linear algebra on N x N matrices."""

from suites.contract.spec import CheckSpec, Param, SuiteSpec

SPEC = SuiteSpec(
    name="xla",
    description="float64 random matrices, mean/sum, matmul and inverse of N x N (seed 000)",
    frameworks=("numpy", "jax", "pytorch"),
    params=(
        Param("matrix_size", "int", 5000, "N of the N x N float64 matrices", min=2, max=40000),
        Param("seed", "int", 0, "seed of the random matrices", min=0, max=2**31 - 1),
        Param(
            "synchronise",
            "bool",
            True,
            "test only: false times matmul/inverse without device sync, to prove the plausibility lint",
        ),
    ),
    checks=(
        # float64 LU on a product of uniform matrices gives ~1e-9 at N=5000; float32 would
        # give ~1e-2, so this limit proves the computation really ran in float64.
        CheckSpec("residual", "max |C inv(C) - I| on the shared C", limit=1e-6),
        CheckSpec("product_sum", "sum of C = A @ B on the shared A, B", rtol=1e-9),
    ),
    repeat=5,
    warmup=1,
    x64=True,
    smoke={"matrix_size": 64},
    metrics=("generate", "mean_sum", "matmul", "inverse"),
)
