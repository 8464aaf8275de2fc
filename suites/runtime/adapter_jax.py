"""JAX (and Flax on top of it): asynchronous dispatch, so every timed call ends in block_until_ready."""

from __future__ import annotations

from typing import Any

from suites.runtime.errors import JobError
from suites.runtime.settings import Settings, usable_cores

# Full float32 matmuls by default so JAX and PyTorch compute in the same precision on GPUs
# (JAX's "default" precision would use TF32 on Ampere+, PyTorch's matmul default does not).
MATMUL_PRECISION = "highest"


def configure(settings: Settings) -> dict[str, Any]:
    import jax

    jax.config.update("jax_enable_x64", settings.x64)
    jax.config.update("jax_default_matmul_precision", MATMUL_PRECISION)
    device(settings)  # fail early with the reason when the device is missing
    precision = str(jax.config.jax_default_matmul_precision)
    return {
        "jax_enable_x64": bool(jax.config.jax_enable_x64),
        "jax_default_matmul_precision": precision,
        # Comparable across frameworks (the table's footer lists them when they differ).
        "float32_matmul": "float32" if precision in ("highest", "float32") else precision,
        # XLA's CPU pool is sized from the cores this process may use (settings.pin_cores);
        # XLA_FLAGS thread options are recorded with the variables but do not bind.
        "compute_threads": usable_cores(),
    }


def device(settings: Settings) -> Any:
    import jax

    if settings.device == "gpu":
        try:
            return jax.devices("gpu")[0]
        except RuntimeError:
            seen = ", ".join(str(d) for d in jax.devices())
            raise JobError(f"--device gpu: JAX sees no GPU (devices: {seen}); install jax[cuda12]") from None
    return jax.devices("cpu")[0]


def sync(out: Any) -> None:
    import jax

    jax.block_until_ready(out)


def environment(settings: Settings) -> dict[str, Any]:
    import jax
    import jaxlib

    versions = {"jax": jax.__version__, "jaxlib": jaxlib.__version__}
    for name in ("flax", "optax", "equinox", "numpy"):
        try:
            module = __import__(name)
            versions[name] = getattr(module, "__version__", "unknown")
        except ImportError:
            pass
    dev = device(settings)
    return {
        "versions": versions,
        "device": {
            "kind": dev.platform,
            "name": getattr(dev, "device_kind", str(dev)),
            "count": len(jax.devices(dev.platform)),
        },
        "jax_backend": jax.default_backend(),
    }
