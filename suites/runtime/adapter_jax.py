"""JAX (and Flax on top of it): asynchronous dispatch, so every timed call ends in block_until_ready."""

from __future__ import annotations

import importlib.metadata as metadata
import importlib.util
import sys
from typing import Any

from suites.contract import precision
from suites.contract.errors import JobError
from suites.contract.settings import Settings, usable_cores
from suites.contract.settings import compute_dtype as settings_dtype

# Full float32 matmuls by default so JAX and PyTorch compute in the same precision on GPUs
# (JAX's "default" precision would use TF32 on Ampere+, PyTorch's matmul default does not).
MATMUL_PRECISION = "highest"
# `--precision`: jax_default_matmul_precision governs every dot and convolution of float32 arrays.
# bf16 keeps float32 ones at full precision: the bfloat16 is in the operands (the suites' layers
# are built with dtype=bfloat16, param_dtype=float32), not in a reduced float32 algorithm.
MATMUL_PRECISIONS = {"fp32": MATMUL_PRECISION, "tf32": "tensorfloat32", "bf16": MATMUL_PRECISION}
# What float32 matmuls do under each jax_default_matmul_precision, named as PyTorch's adapter does.
FLOAT32_MATMUL = {"highest": "float32", "float32": "float32", "tensorfloat32": "tf32", "bfloat16": "bf16"}


def configure(settings: Settings) -> dict[str, Any]:
    import jax

    jax.config.update("jax_enable_x64", settings.x64)
    jax.config.update("jax_default_matmul_precision", MATMUL_PRECISIONS[settings.precision])
    device(settings)  # fail early with the reason when the device is missing
    precision = str(jax.config.jax_default_matmul_precision)
    return {
        "jax_enable_x64": bool(jax.config.jax_enable_x64),
        "jax_default_matmul_precision": precision,
        "requested": settings.precision,
        # Comparable across frameworks (the table's footer lists them when they differ).
        "float32_matmul": FLOAT32_MATMUL.get(precision, precision),
        "compute_dtype": compute_dtype(settings),
        # XLA's CPU pool is sized from the cores this process may use (settings.pin_cores);
        # XLA_FLAGS thread options are recorded with the variables but do not bind.
        "compute_threads": usable_cores(),
    }


def compute_dtype(settings: Settings) -> str:
    """The dtype the suites' matmul and convolution operands are in (interface of `--precision`)."""
    return settings_dtype(settings.precision)


def device(settings: Settings) -> Any:
    import jax

    # This process's own device: in a data-parallel job (jax.distributed) jax.devices() lists every
    # rank's, and only the local ones can hold this process's arrays.
    if settings.device == "gpu":
        try:
            return jax.local_devices(backend="gpu")[0]
        except RuntimeError:
            seen = ", ".join(str(d) for d in jax.devices())
            raise JobError(f"--device gpu: JAX sees no GPU (devices: {seen}); install jax[cuda12]") from None
    return jax.local_devices(backend="cpu")[0]


def initialise(settings: Settings) -> None:
    import jax

    jax.block_until_ready(jax.device_put(0.0, device(settings)))


def compile_counter() -> Any:
    """XLA compilations so far in this process (jax.monitoring; None where the event is gone)."""
    from suites.runtime.training_jax import CompileCounter

    return CompileCounter()


def sync(out: Any) -> None:
    import jax

    jax.block_until_ready(out)


class LiveArrayBarrier:
    """Every live JAX array on every device (runtime/syncguard.py): JAX dispatches asynchronously
    on every backend, the CPU included."""

    def pending(self) -> bool:
        import jax

        for array in jax.live_arrays():
            try:
                if not array.is_deleted() and not array.is_ready():
                    return True
            except RuntimeError:  # deleted (donated) between the two calls
                continue
        return False

    def wait(self) -> None:
        import jax

        try:
            jax.block_until_ready(jax.live_arrays())
        except RuntimeError:  # an array deleted while listed: wait on the rest one by one
            for array in jax.live_arrays():
                if not array.is_deleted():
                    array.block_until_ready()
        jax.effects_barrier()


def barrier_for(settings: Settings) -> LiveArrayBarrier:
    return LiveArrayBarrier()


def holds_work(out: Any) -> bool:
    """Whether a timed callback's output contains an array the clock could have waited on."""
    import jax

    return any(isinstance(leaf, jax.Array) for leaf in jax.tree_util.tree_leaves(out))


def precision_probe(settings: Settings) -> dict[str, Any]:
    """Matmul and convolution of the probe operands as the suites compute them (contract/precision.py):
    on the job's device, under the configured matmul precision, and for bf16 with the operands cast
    to bfloat16 as a Flax layer with dtype=bfloat16 casts its input and float32 kernel. The
    convolution is NHWC/HWIO, Flax's layout."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    dtype = jnp.bfloat16 if compute_dtype(settings) == "bfloat16" else jnp.float32
    matmul, conv = precision.matmul_probe(), precision.conv_probe()
    dims = ("NHWC", "HWIO", "NHWC")

    def convolve(x: Any, w: Any) -> Any:
        return jax.lax.conv_general_dilated(x.astype(dtype), w.astype(dtype), (1, 1), "VALID", dimension_numbers=dims)

    dev = device(settings)
    with jax.default_device(dev):
        product = jax.jit(lambda a, b: jnp.matmul(a.astype(dtype), b.astype(dtype)))(
            jnp.asarray(matmul.lhs), jnp.asarray(matmul.rhs)
        )
        image = jax.jit(convolve)(
            jnp.asarray(conv.lhs.transpose(0, 2, 3, 1)), jnp.asarray(conv.rhs.transpose(2, 3, 1, 0))
        )
    found = np.asarray(product).astype(np.float64)
    found_conv = np.asarray(image).astype(np.float64).transpose(0, 3, 1, 2)  # back to NCHW
    return precision.measured_record(matmul.measure(found), conv.measure(found_conv))


def _installed(name: str) -> dict[str, str]:
    """The version of a library of the stack: the module's own if the job imported it, else its
    distribution's, without importing it (importing flax and optax only to read their versions cost a
    JAX job 0.48 s a round, a third of it; benchmarks/round_cost.py)."""
    module = sys.modules.get(name)
    if module is not None:
        return {name: getattr(module, "__version__", "unknown")}
    if importlib.util.find_spec(name) is None:
        return {}
    try:
        return {name: metadata.version(name)}
    except metadata.PackageNotFoundError:  # importable, but not an installed distribution
        return {name: "unknown"}


def environment(settings: Settings) -> dict[str, Any]:
    import jax
    import jaxlib

    versions = {"jax": jax.__version__, "jaxlib": jaxlib.__version__}
    for name in ("flax", "optax", "equinox", "numpy"):
        versions.update(_installed(name))
    dev = device(settings)
    return {
        "versions": versions,
        "device": {
            "kind": dev.platform,
            "name": getattr(dev, "device_kind", str(dev)),
            "count": len(jax.devices(dev.platform)),
        },
        "jax_backend": jax.default_backend(),
        # On GPUs the CUDA/ROCm runtime the client was built against, e.g. "cuda 12090".
        "platform_version": str(getattr(dev.client, "platform_version", "")) or None,
    }


def profiler(settings: Settings) -> Any:
    """jax.profiler for `--profile` (runtime/profile_jax.py)."""
    from suites.runtime.profile_jax import Profiler

    return Profiler()
