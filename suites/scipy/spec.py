"""Seed 000 "SciPy": fit a linear calibration by minimising an RMSE with BFGS."""

from suites.contract import perturb_params
from suites.contract.spec import CheckSpec, Param, SuiteSpec

SPEC = SuiteSpec(
    name="scipy",
    description="BFGS (tol 1e-4, x0 = [1, 0]) on rmse_with_calibration over n float64 points (seed 000)",
    frameworks=("numpy", "jax"),
    unsupported={"pytorch": "PyTorch has no BFGS minimiser; torch.optim.LBFGS is a different algorithm"},
    params=(
        Param("n", "int", 10_000, "number of points t = linspace(0, 100, n)", min=10, max=10**8),
        Param("seed", "int", 0, "NumPy seed of the noisy data every framework shares", min=0, max=2**31 - 1),
        *perturb_params.PARAMS,
    ),
    checks=(
        # Both minimisers stop once |gradient|_inf < 1e-4. The loss's inverse Hessian at the
        # optimum has norm 5.5 on this data, so each stopping point lies within
        # 5.5 * 1.4e-4 = 7.8e-4 of the true optimum and the two within 1.6e-3 of each other,
        # whatever their line searches did (measured: 4e-6). rtol 1e-3 + atol 1e-3 covers that.
        CheckSpec("x_opt", "the fitted (slope, offset)", rtol=1e-3, atol=1e-3),
        # Near the optimum the loss is quadratic: each stop is within 0.5 * 5.5 * (1.4e-4)^2 =
        # 5.5e-8 of the minimum (about 0.44), i.e. 1.3e-7 relative; measured 8e-11.
        CheckSpec("loss_opt", "the RMSE at the fitted x", rtol=1e-6),
        CheckSpec(
            "grad_at_opt",
            "max |gradient| the minimiser reports at its optimum (SciPy's is a finite difference)",
            limit=1e-4,
        ),
    ),
    repeat=5,
    warmup=1,
    timeout_s=1800.0,
    x64=True,  # float64 in both frameworks, as SciPy computes
    smoke={"n": 1000},
    metrics=(
        "loss",
        "minimise",
        "iterations",
        "function evaluations",
        "gradient evaluations",  # every framework
        "minimise compile",
        "minimise, retraced every call (seed)",
        "loss, new input shape",  # jax only
        "jit cache before new shape",
        "jit cache after new shape",
    ),
)
