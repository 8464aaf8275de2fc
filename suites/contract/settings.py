"""The fairness settings of one job, applied before the framework is imported."""

from __future__ import annotations

import os
from dataclasses import dataclass

# Every thread pool a CPU framework may use; set to the same value for all frameworks.
THREAD_VARIABLES = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
)

# Environment variables that change what a number means; recorded in every result.
RECORDED_VARIABLES = THREAD_VARIABLES + (
    "XLA_FLAGS",
    "XLA_PYTHON_CLIENT_PREALLOCATE",
    "XLA_PYTHON_CLIENT_MEM_FRACTION",
    "XLA_PYTHON_CLIENT_ALLOCATOR",
    "JAX_PLATFORMS",
    "JAX_ENABLE_X64",
    "JAX_DEFAULT_MATMUL_PRECISION",
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "NVIDIA_TF32_OVERRIDE",
    "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE",
    "PYTORCH_CUDA_ALLOC_CONF",
    # a data-parallel job's planted fault (contract/ranks.py): a planted straggler is never a record
    "HARNESS_RANK_FAULT",
    "OPENBLAS_CORETYPE",
    "OPENBLAS_L2_SIZE",
)
# Where the compiler caches were: recorded apart (`environment.caches`), since cold folders are
# fresh per job and would otherwise make every two runs "differ".
CACHE_VARIABLES = ("JAX_COMPILATION_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")

CACHE_MODES = ("cold", "warm")
# The arithmetic of matmuls and convolutions (`--precision`), set the same way in every framework
# and verified by the precision probe (contract/precision.py):
#   fp32  float32 operands, float32 arithmetic (TF32 off, matmul precision "highest"): the default
#         for fair comparisons.
#   tf32  float32 operands, TensorFloat-32 tensor cores allowed for them (a GPU's choice per kernel).
#   bf16  real bfloat16: bfloat16 operands with float32 accumulation and float32 master weights
#         (PyTorch: torch.autocast; Flax: dtype=bfloat16, param_dtype=float32 layers); float32
#         matmuls left elsewhere stay at full precision. A job is in this mode when
#         `Settings.precision == "bf16"`.
# On a CPU, fp32 and tf32 compute alike (no TF32 unit); bf16 does round the operands.
PRECISIONS = ("fp32", "tf32", "bf16")


def compute_dtype(precision: str) -> str:
    """The dtype a job's matmul and convolution operands are in: bfloat16 under bf16, else float32."""
    return "bfloat16" if precision == "bf16" else "float32"


@dataclass(frozen=True)
class Settings:
    device: str  # cpu | gpu
    threads: int | None
    x64: bool
    # cold: every compiler cache starts empty (a fresh folder per job); warm: JAX's persistent
    # compilation cache and Inductor/Triton's caches live in `cache_dir`, kept between jobs.
    cache: str = "cold"
    cache_dir: str | None = None
    precision: str = "fp32"


def apply_caches(settings: Settings, scratch: str) -> None:
    """Point every compiler cache at the warm folder, or at the empty `scratch` folder (cold).

    Cold also drops a JAX cache folder inherited from the user's environment: otherwise a
    "first call" could silently be a cache hit.
    """
    if settings.cache == "warm" and settings.cache_dir:
        root = settings.cache_dir
        os.environ["JAX_COMPILATION_CACHE_DIR"] = os.path.join(root, "jax")
        # Cache every compilation, not just the slow ones (JAX's defaults skip anything under 1 s).
        os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
        os.environ["JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"] = "0"
    else:
        root = scratch
        os.environ.pop("JAX_COMPILATION_CACHE_DIR", None)
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(root, "inductor")
    os.environ["TRITON_CACHE_DIR"] = os.path.join(root, "triton")


def apply_environment(settings: Settings) -> None:
    """Environment that frameworks read at import time: must run before any framework import."""
    if settings.threads is not None:
        n = str(settings.threads)
        for name in THREAD_VARIABLES:
            os.environ[name] = n
        # The one limit every framework obeys, XLA's CPU client included: it sizes its pool
        # from the cores this process may run on, and ignores the flags below (measured with
        # jaxlib 0.10.2; see README "Threads").
        pin_cores(settings.threads)
        # Kept for older XLA releases, where these flags did limit the intra-op Eigen pool.
        flags = os.environ.get("XLA_FLAGS", "")
        extra = f"--xla_cpu_multi_thread_eigen={'true' if settings.threads > 1 else 'false'}"
        extra += f" intra_op_parallelism_threads={n}"
        os.environ["XLA_FLAGS"] = (flags + " " + extra).strip()
    # Memory is measured through the allocator, so JAX must not grab most of the card up front.
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    if settings.device == "cpu":
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
    else:
        # CUDA numbers GPUs fastest-first by default, NVML by PCI bus: in PCI order both agree,
        # so the energy meter reads the GPU the framework computes on (runtime/nvml.py).
        os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")


def pin_cores(threads: int) -> list[int] | None:
    """Restrict this process to its first `threads` usable cores; returns the cores now usable.

    Only narrows: asking for more threads than usable cores leaves the affinity alone (the
    frameworks then oversubscribe, which the recorded thread counts show). None where the
    OS has no affinity API (macOS, Windows): there the thread variables are all there is.
    """
    if not hasattr(os, "sched_setaffinity"):
        return None
    usable = sorted(os.sched_getaffinity(0))
    if threads < len(usable):
        os.sched_setaffinity(0, usable[:threads])
    return sorted(os.sched_getaffinity(0))


def usable_cores() -> int | None:
    """Cores this process may run on (after `pin_cores`); what XLA's CPU pool is sized from."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count()


def recorded_variables() -> dict[str, str]:
    return {k: os.environ[k] for k in RECORDED_VARIABLES if k in os.environ}


def recorded_caches(settings: Settings) -> dict[str, str | None]:
    found: dict[str, str | None] = {"mode": settings.cache}
    found.update({k: os.environ.get(k) for k in CACHE_VARIABLES})
    return found
