"""Framework names (as typed on the command line) -> the stack (image) they run in.

Adding a framework means one entry here, an adapter module beside it, and
`impl_<framework>.py` modules in the suites that support it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Framework:
    name: str
    stack: str
    adapter: str  # module with configure / sync / environment, imported only inside the job
    description: str


FRAMEWORKS: dict[str, Framework] = {
    f.name: f
    for f in (
        Framework("numpy", "numpy", "suites.runtime.adapter_numpy", "NumPy/SciPy, eager, host CPU"),
        Framework("jax", "jax", "suites.runtime.adapter_jax", "JAX (jit, grad, vmap)"),
        Framework("flax", "jax", "suites.runtime.adapter_jax", "Flax NNX + Optax on JAX"),
        Framework("pytorch", "pytorch", "suites.runtime.adapter_pytorch", "PyTorch (eager, torch.compile)"),
    )
}

STACKS: tuple[str, ...] = tuple(sorted({f.stack for f in FRAMEWORKS.values()}))
