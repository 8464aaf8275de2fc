"""Seed 000 "JIT": an elementwise function, eager against compiled, over four array lengths."""

from suites.contract import perturb_params
from suites.contract.spec import CheckSpec, Param, SuiteSpec

SPEC = SuiteSpec(
    name="jit",
    description="f(x) = 0.2x + sin x + cos 2x on float32 arrays of growing length, eager vs jit (seed 000)",
    frameworks=("numpy", "jax", "pytorch"),
    params=(
        # The seed's lengths 1e4..1e7 are the decades from min_length to max_length.
        Param("min_length", "int", 10_000, "shortest array length L (then x10 up to max_length)", min=1, max=10**9),
        Param("max_length", "int", 10_000_000, "longest array length L", min=1, max=10**9),
        Param(
            "total",
            "int",
            100_000_000,
            "elements per timed loop: the loop count is K = total // L (at least 1), as in the seed",
            min=1,
            max=10**12,
        ),
        *perturb_params.PARAMS,
    ),
    checks=(
        # Same float32 inputs (built by NumPy) in every framework; the libraries' float32
        # sin/cos differ by a few ulp (|f| <= 4.6 here, ulp(4) = 4.8e-7), so 1e-5 relative
        # with 1e-6 absolute leaves a 10x margin and still catches float16 or a wrong formula.
        CheckSpec(
            "f_at_6",
            "f(x) at x = linspace(0, 4 pi, 6) in float32, through the compiled path where there is one",
            rtol=1e-5,
            atol=1e-6,
        ),
        CheckSpec(
            "jit_vs_eager",
            "max |f_jit(x) - f_eager(x)| on the shortest timed array: compiling must not change the result",
            limit=1e-5,
            frameworks=("jax", "pytorch"),  # NumPy has no compiler
        ),
        # The seed printed [1, 1.398, -0.76, 1.653, 1.748, 3.508]: those are float16 results at
        # float16 x (in float32 f(2.513) = 1.3995, f(10.05) = 1.7319). Rounding to 3 decimals
        # (5e-4) plus one float16 ulp of |f| < 4 (2e-3) bounds the difference.
        CheckSpec(
            "seed_f16_error",
            "max |f16(x16) - seed printout| with f evaluated in float16 at the seed's float16 x",
            limit=2.5e-3,
        ),
    ),
    repeat=5,
    warmup=1,
    timeout_s=1800.0,
    smoke={"min_length": 1000, "max_length": 1000, "total": 100_000},
)
