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
    "NVIDIA_TF32_OVERRIDE",
    "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE",
    "PYTORCH_CUDA_ALLOC_CONF",
    "OPENBLAS_CORETYPE",
    "OPENBLAS_L2_SIZE",
)


@dataclass(frozen=True)
class Settings:
    device: str  # cpu | gpu
    threads: int | None
    x64: bool


def apply_environment(settings: Settings) -> None:
    """Environment that frameworks read at import time: must run before any framework import."""
    if settings.threads is not None:
        n = str(settings.threads)
        for name in THREAD_VARIABLES:
            os.environ[name] = n
        # XLA's CPU client sizes its intra-op Eigen pool from this flag.
        flags = os.environ.get("XLA_FLAGS", "")
        extra = f"--xla_cpu_multi_thread_eigen={'true' if settings.threads > 1 else 'false'}"
        extra += f" intra_op_parallelism_threads={n}"
        os.environ["XLA_FLAGS"] = (flags + " " + extra).strip()
    # Memory is measured through the allocator, so JAX must not grab most of the card up front.
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    if settings.device == "cpu":
        os.environ.setdefault("JAX_PLATFORMS", "cpu")


def recorded_variables() -> dict[str, str]:
    return {k: os.environ[k] for k in RECORDED_VARIABLES if k in os.environ}
