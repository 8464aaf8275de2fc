"""PyTorch: CUDA kernels run asynchronously, so timed calls end in torch.cuda.synchronize()."""

from __future__ import annotations

from typing import Any

from suites.contract import precision
from suites.contract.errors import JobError
from suites.contract.settings import Settings
from suites.contract.settings import compute_dtype as settings_dtype

_on_gpu = False


# `--precision` -> torch.set_float32_matmul_precision: float32 operands stay float32 (fp32) or may
# run on TF32 tensor cores (tf32). bf16 keeps float32 matmuls at full precision: the bfloat16 is
# in the operands, which the suites' models get under torch.autocast (training_torch.autocast).
FLOAT32_MATMUL_PRECISION = {"fp32": "highest", "tf32": "high", "bf16": "highest"}


def configure(settings: Settings) -> dict[str, Any]:
    global _on_gpu
    import torch

    if settings.threads is not None:
        torch.set_num_threads(settings.threads)
    # fp32 (default) and bf16: TF32 off, float32 means float32 in every framework (see
    # adapter_jax.MATMUL_PRECISION). tf32: cuBLAS and cuDNN may run float32 matmuls and
    # convolutions on TF32 tensor cores.
    tf32 = settings.precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.set_float32_matmul_precision(FLOAT32_MATMUL_PRECISION[settings.precision])
    # bf16 GEMMs accumulate in float32 throughout, as XLA's do: cuBLAS may otherwise reduce
    # split-K partial sums in bfloat16.
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    if settings.device == "gpu" and not torch.cuda.is_available():
        raise JobError("--device gpu: torch.cuda.is_available() is False; use a cuda12 image and --gpus")
    _on_gpu = settings.device == "gpu"
    return {
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "requested": settings.precision,
        "cuda_matmul_allow_tf32": bool(torch.backends.cuda.matmul.allow_tf32),
        "cudnn_allow_tf32": bool(torch.backends.cudnn.allow_tf32),
        "cuda_matmul_allow_bf16_reduced_precision_reduction": bool(
            torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction
        ),
        "torch_num_threads": torch.get_num_threads(),
        "torch_num_interop_threads": torch.get_num_interop_threads(),
        # Autotuned convolution algorithms change both speed and (slightly) results.
        "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
        "cudnn_deterministic": bool(torch.backends.cudnn.deterministic),
        # Comparable across frameworks (the table's footer lists them when they differ).
        "float32_matmul": float32_matmul(),
        "compute_dtype": compute_dtype(settings),
        "compute_threads": torch.get_num_threads(),
    }


def float32_matmul() -> str:
    """What a float32 matmul does now: TF32 when either switch allows it, bf16 under "medium"."""
    import torch

    setting = torch.get_float32_matmul_precision()
    if setting == "medium":
        return "bf16"
    return "tf32" if setting == "high" or torch.backends.cuda.matmul.allow_tf32 else "float32"


def compute_dtype(settings: Settings) -> str:
    """The dtype the suites' matmul and convolution operands are in (interface of `--precision`)."""
    return settings_dtype(settings.precision)


def device(settings: Settings) -> Any:
    import torch

    return torch.device("cuda" if settings.device == "gpu" else "cpu")


def initialise(settings: Settings) -> None:
    """The CUDA context is created by the first tensor on the device, not by `is_available()`."""
    import torch

    torch.zeros(1, device=device(settings))
    if settings.device == "gpu":
        torch.cuda.synchronize()


def compile_counter() -> Any:
    """Graphs TorchDynamo compiled so far in this process. Eager code never imports TorchDynamo: 0
    then, and no canary to pay for; once something has, a canary proves the counter moves (once)."""
    import sys

    proved: list[Any] = []

    def count() -> int | None:
        if "torch._dynamo" not in sys.modules:
            return 0
        if not proved:
            from suites.runtime.training_torch import CompileCounter

            proved.append(CompileCounter(compiles=True))
        return proved[0]()  # type: ignore[no-any-return]

    return count


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
    """Matmul and convolution of the probe operands as the suites compute them (contract/precision.py):
    on the job's device under the configured flags, and for bf16 inside torch.autocast, as the
    training loops run their models."""
    import torch

    matmul, conv = precision.matmul_probe(), precision.conv_probe()
    dev = device(settings)
    a, b, x, w = (torch.from_numpy(m).to(dev) for m in (matmul.lhs, matmul.rhs, conv.lhs, conv.rhs))
    bf16 = compute_dtype(settings) == "bfloat16"
    with torch.no_grad(), torch.autocast(device_type=dev.type, dtype=torch.bfloat16, enabled=bf16):
        product = a @ b
        image = torch.nn.functional.conv2d(x, w)
    found, found_conv = (t.double().cpu().numpy() for t in (product, image))
    return precision.measured_record(matmul.measure(found), conv.measure(found_conv))


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


def profiler(settings: Settings) -> Any:
    """torch.profiler for `--profile` (runtime/profile_torch.py): CUDA activity too on a GPU."""
    from suites.runtime.profile_torch import Profiler

    return Profiler(settings.device)
