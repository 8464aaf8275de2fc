"""NumPy + SciPy: scipy.optimize.minimize(method="BFGS") with finite-difference gradients, as the seed."""

from __future__ import annotations

from typing import Any

from suites.runtime import perturb
from suites.runtime.context import Context
from suites.scipy.common import TOL, X0, make_data


def run(ctx: Context) -> None:
    import numpy as np
    import scipy.optimize

    a, b = make_data(ctx.params["n"], ctx.params["seed"])
    x0 = np.asarray(X0)

    def rmse_with_calibration(x: Any, a: Any, b: Any) -> Any:
        return np.sqrt(np.mean((a - (b - x[1]) / x[0]) ** 2))

    ctx.measure("loss", lambda: rmse_with_calibration(x0, a, b), description="one RMSE evaluation at x0")
    result = ctx.measure(
        "minimise",
        lambda: scipy.optimize.minimize(rmse_with_calibration, x0, args=(a, b), method="BFGS", tol=TOL),
        description="a whole BFGS minimisation from x0 (gradient by finite differences)",
    )
    ctx.value("iterations", result.nit, unit="", better="lower")
    ctx.value("function evaluations", result.nfev, unit="", better="lower", description="including finite differences")
    ctx.value("gradient evaluations", result.njev, unit="", better="lower")
    ctx.note(f"scipy BFGS: status {result.status} ({result.message}); gradient by finite differences, as the seed")

    perturb.check(ctx, "x_opt", [float(v) for v in result.x])
    perturb.check(ctx, "loss_opt", float(result.fun))
    perturb.check(ctx, "grad_at_opt", float(np.max(np.abs(result.jac))))
