"""PyTorch: its CUDA build as torch reports it (torch.version.cuda, the arch list, cuDNN)."""

from __future__ import annotations

from harness.core.stack_facts.facts import (
    FrameworkFacts,
    GpuChecks,
    Report,
    StackFacts,
    as_dict,
    clean,
    kernels_text,
    strings,
)
from suites.contract.build_info import covers


def _build_problems(wanted: str, report: Report) -> list[str]:
    found = []
    cuda = report.get("cuda")
    if not (isinstance(cuda, str) and cuda.split(".")[0] == wanted):
        found.append(f"torch reports CUDA {clean(cuda)!s}, not {wanted}.x")
    if not strings(report.get("arch_list")):
        found.append("torch.cuda.get_arch_list() is empty: no GPU kernels in this build")
    if not report.get("cudnn"):
        found.append("torch finds no cuDNN")
    return found


def _kernel_problem(report: Report, capability: str) -> str | None:
    if (targets := strings(report.get("arch_list"))) and not covers(targets, capability):
        return f"torch was built for {' '.join(targets)} only"
    return None


def _summary(report: Report) -> list[str]:
    packages = as_dict(report.get("packages"))
    lines = []
    if report.get("cuda"):
        lines.append(
            f"CUDA {clean(report.get('cuda'))}, cuDNN {clean(report.get('cudnn'))}, NCCL {clean(report.get('nccl'))}, "
            f"triton {clean(packages.get('triton', 'absent'))}"
        )
        lines.append(f"torch.cuda.get_arch_list(): {' '.join(strings(report.get('arch_list'))) or 'empty'}")
        lines.append(f"cubins/PTX in libtorch_cuda.so: {kernels_text(report.get('kernels'))}")
    else:
        lines.append("CPU build (torch.version.cuda is None)")
    lines.append(f"C++ compiler for torch.compile: {clean(report.get('compiler') or 'none')}")
    return lines


STACK = StackFacts(
    stack="pytorch",
    frameworks={"pytorch": FrameworkFacts(colour="#9467bd", package="torch")},
    gpu=GpuChecks(build_problems=_build_problems, kernel_problem=_kernel_problem),
    summary=_summary,
    build_gb={"cpu": 3.5, "cuda12": 20.0},  # its images: 1.6 GB (cpu), 8.0 GB (cuda12)
    setting_names={"conv_algorithm_search": "cuDNN benchmark"},
)
