"""Seed 000 "Autograd": derivatives of the jit suite's f, vectorised and one scalar at a time."""

from suites.autograd.common import GRAD_OF_SUM, JIT_SCALAR_LOOP, JIT_VMAP_GRAD, SCALAR_LOOP, VMAP_GRAD
from suites.contract import perturb_params
from suites.contract.spec import CheckSpec, Param, SuiteSpec

SPEC = SuiteSpec(
    name="autograd",
    description="f'(x) of f(x) = 0.2x + sin x + cos 2x at many float32 points: vmap(grad), sum trick, scalar loop",
    frameworks=("jax", "pytorch"),
    unsupported={"numpy": "no automatic differentiation"},
    params=(
        Param(
            "points",
            "int",
            1000,
            "x = linspace(0, 10 pi, points) in float32; one sample = the gradient at all of them",
            min=1,
            max=10**8,
        ),
        *perturb_params.PARAMS,
    ),
    checks=(
        # float32 everywhere; the seed printed float32 results as doubles. f(3) = 1.70129 is
        # one sin, one cos and two adds: a few ulp (1.2e-7 each) at most between libraries.
        CheckSpec("f_at_3", "f(3.0) in float32", rtol=1e-6),
        CheckSpec("grad_at_3", "f'(3.0) = 0.2 + cos 3 - 2 sin 6, by autodiff in float32", rtol=1e-5, atol=1e-6),
        # f' = 0.2 + cos x - 2 sin 2x, |terms| <= 2, 2x up to 8 pi: a few float32 ulp of 2
        # (2.4e-7 each) apart between libraries (measured: 3e-7 between XLA and PyTorch on CPU);
        # atol keeps the test meaningful at the points where f' is near 0 (-0.083 at x = 6.6).
        CheckSpec(
            "grad_at_20",
            "f'(x) at x = linspace(0, 4 pi, 20) in float32 (NumPy-made points), through vmap(grad)",
            rtol=1e-5,
            atol=2e-6,
        ),
        CheckSpec(
            "seed_error",
            "max difference of f(3) and f'(3) from the seed's printout (1.7012903690338135, -0.23116151988506317)",
            limit=1e-6,
        ),
        # The seed's 20 points came from jnp.linspace, which differs from NumPy's float32
        # linspace by up to 1 ulp (9.5e-7 at x = 12); |f''| <= 4.2 turns that into <= 4e-6,
        # plus the libraries' differences above: 2e-5 bounds both with margin.
        CheckSpec(
            "seed_grad_20_error",
            "max |f'(x) - the seed's JAX printout| at the 20 points",
            limit=2e-5,
        ),
        CheckSpec(
            "methods_agree",
            "max |difference| between this framework's gradient methods at the timed points",
            limit=1e-5,
        ),
    ),
    # The seed timed the 1000-point gradient "10 times": here that is 10 steady samples.
    repeat=10,
    warmup=1,
    timeout_s=1800.0,
    smoke={"points": 20},
    metrics=(VMAP_GRAD, JIT_VMAP_GRAD, GRAD_OF_SUM, SCALAR_LOOP, JIT_SCALAR_LOOP),
)
