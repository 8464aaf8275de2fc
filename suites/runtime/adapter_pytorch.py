"""PyTorch: CUDA kernels run asynchronously, so timed calls end in torch.cuda.synchronize()."""

from __future__ import annotations

from typing import Any

from suites.runtime import precision
from suites.runtime.errors import JobError
from suites.runtime.settings import Settings

_on_gpu = False


FLOAT32_MATMUL_PRECISION = {"fp32": "highest", "tf32": "high", "bf16": "medium"}


def configure(settings: Settings) -> dict[str, Any]:
    global _on_gpu
    import torch

    if settings.threads is not None:
        torch.set_num_threads(settings.threads)
    # fp32 (default): TF32 off, float32 means float32 in every framework (see
    # adapter_jax.MATMUL_PRECISION). tf32/bf16 (`--precision`): "high"/"medium" let cuBLAS use
    # TF32/bf16 internally for float32 matmuls; cuDNN convolutions have a TF32 switch only, so a
    # bf16 request leaves them at TF32, which the precision probe then reports.
    reduced = settings.precision != "fp32"
    torch.backends.cuda.matmul.allow_tf32 = reduced
    torch.backends.cudnn.allow_tf32 = reduced
    torch.set_float32_matmul_precision(FLOAT32_MATMUL_PRECISION[settings.precision])
    if settings.device == "gpu" and not torch.cuda.is_available():
        raise JobError("--device gpu: torch.cuda.is_available() is False; use a cuda12 image and --gpus")
    _on_gpu = settings.device == "gpu"
    return {
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "requested": settings.precision,
        "cuda_matmul_allow_tf32": bool(torch.backends.cuda.matmul.allow_tf32),
        "cudnn_allow_tf32": bool(torch.backends.cudnn.allow_tf32),
        "torch_num_threads": torch.get_num_threads(),
        "torch_num_interop_threads": torch.get_num_interop_threads(),
        # Autotuned convolution algorithms change both speed and (slightly) results.
        "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
        "cudnn_deterministic": bool(torch.backends.cudnn.deterministic),
        # Comparable across frameworks (the table's footer lists them when they differ).
        "float32_matmul": {"highest": "float32", "high": "tf32", "medium": "bf16"}.get(
            torch.get_float32_matmul_precision(), "tf32"
        )
        if not (torch.get_float32_matmul_precision() == "highest" and torch.backends.cuda.matmul.allow_tf32)
        else "tf32",
        "compute_threads": torch.get_num_threads(),
    }


def device(settings: Settings) -> Any:
    import torch

    return torch.device("cuda" if settings.device == "gpu" else "cpu")


def initialise(settings: Settings) -> None:
    """The CUDA context is created by the first tensor on the device, not by `is_available()`."""
    import torch

    torch.zeros(1, device=device(settings))
    if settings.device == "gpu":
        torch.cuda.synchronize()


def sync(out: Any) -> None:
    if _on_gpu:
        import torch

        torch.cuda.synchronize()


class CudaBarrier:
    """Kernels queued on the GPU (runtime/syncguard.py). `pending` asks each device's current
    stream without blocking; `wait` is `torch.cuda.synchronize()`, which covers every stream."""

    def pending(self) -> bool:
        import torch

        return any(not torch.cuda.current_stream(d).query() for d in range(torch.cuda.device_count()))

    def wait(self) -> None:
        import torch

        torch.cuda.synchronize()


def barrier_for(settings: Settings) -> CudaBarrier | None:
    """A device-wide barrier where work can outlive a call (CUDA); None on the synchronous CPU."""
    return CudaBarrier() if settings.device == "gpu" else None


def holds_work(out: Any) -> bool:
    """Whether a timed callback's output contains a tensor the clock could have waited on."""
    import torch

    return any(isinstance(leaf, torch.Tensor) for leaf in leaves(out))


def leaves(tree: Any) -> list[Any]:
    if isinstance(tree, (list, tuple)):
        return [leaf for item in tree for leaf in leaves(item)]
    if isinstance(tree, dict):
        return [leaf for item in tree.values() for leaf in leaves(item)]
    return [tree]


def precision_probe(settings: Settings) -> dict[str, Any]:
    """Matmul and convolution of the probe operands under this job's settings (runtime/precision.py)."""
    import torch

    a_rows, b_rows = precision.identity_operands()
    dev = device(settings)
    a = torch.tensor(a_rows, dtype=torch.float32, device=dev)
    b = torch.tensor(b_rows, dtype=torch.float32, device=dev)
    with torch.no_grad():
        product = a @ b
        # NCHW input (1, C, H, 1) with C = the columns of A, OIHW kernel = identity over channels.
        conv = torch.nn.functional.conv2d(a.T[None, :, :, None].contiguous(), b[:, :, None, None].contiguous())
    column = product[: precision.MAX_BITS + 1, 0].double().cpu().tolist()
    conv_column = conv[0, 0, : precision.MAX_BITS + 1, 0].double().cpu().tolist()
    return precision.measured_record(column, conv_column)


def environment(settings: Settings) -> dict[str, Any]:
    import torch

    versions = {"torch": torch.__version__, "cuda": torch.version.cuda or None}
    try:
        import numpy

        versions["numpy"] = numpy.__version__
    except ImportError:
        pass
    if settings.device == "gpu":
        props = torch.cuda.get_device_properties(0)
        dev = {
            "kind": "gpu",
            "name": props.name,
            "count": torch.cuda.device_count(),
            "compute_capability": f"{props.major}.{props.minor}",
            "memory_bytes": props.total_memory,
            "cudnn": torch.backends.cudnn.version(),
        }
    else:
        dev = {"kind": "cpu", "name": "host CPU"}
    return {
        "versions": versions,
        "device": dev,
        "parallel": {"openmp": torch.backends.openmp.is_available(), "mkl": torch.backends.mkl.is_available()},
    }
