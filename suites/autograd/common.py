"""What both autograd implementations share: the points, the metric names and the seed's numbers."""

from __future__ import annotations

from typing import Any

SEED_F_AT_3 = 1.7012903690338135
SEED_GRAD_AT_3 = -0.23116151988506317
# The seed's JAX printout of grad_f(x2) at x2 = jnp.linspace(0, 4 pi, 20) (float32).
SEED_GRAD_20 = (
    1.2, -0.9496601, -0.50640905, 1.2697529, 0.9948586, -1.435761, -2.4704502, -0.2117664,
    2.578496, 2.3742416, -0.08260958, -1.0845982, 0.44661242, 1.5158873, -0.1369658,
    -2.3538072, -1.6731402, 1.3973863, 2.9279408, 1.1999986,
)  # fmt: skip

# Metric names say the algorithm: rows with the same name are the same algorithm.
VMAP_GRAD = "vmap(grad)"
JIT_VMAP_GRAD = "jit(vmap(grad))"
GRAD_OF_SUM = "grad(sum f)"
SCALAR_LOOP = "scalar loop: grad per point"
JIT_SCALAR_LOOP = "scalar loop: jit(grad) per point"

DESCRIPTIONS = {
    VMAP_GRAD: "the scalar derivative mapped over the points (jax.vmap / torch.func.vmap), eager",
    JIT_VMAP_GRAD: "jax.jit(jax.vmap(jax.grad(f))): one compiled call",
    GRAD_OF_SUM: "gradient of sum(f(x)) with respect to the vector x: one reverse pass, eager",
    SCALAR_LOOP: "a Python loop with one reverse pass per point (the seed's PyTorch code); not vectorised",
    JIT_SCALAR_LOOP: "a Python loop calling a jitted scalar gradient once per point",
}


def timing_points(count: int) -> Any:
    import numpy as np

    return np.linspace(0.0, 10.0 * np.pi, count, dtype=np.float32)


def check_points() -> Any:
    import numpy as np

    return np.linspace(0.0, 4.0 * np.pi, 20, dtype=np.float32)


def seed_error(f_at_3: float, grad_at_3: float) -> float:
    return max(abs(f_at_3 - SEED_F_AT_3), abs(grad_at_3 - SEED_GRAD_AT_3))


def seed_grad_20_error(values: Any) -> float:
    return max(abs(float(v) - s) for v, s in zip(values, SEED_GRAD_20, strict=True))


def max_spread(results: list[Any]) -> float:
    """Largest elementwise difference between any method's result and the first one's."""
    import numpy as np

    first = np.asarray(results[0], dtype=np.float64)
    return max(float(np.max(np.abs(np.asarray(r, dtype=np.float64) - first))) for r in results)
