"""JAX (and Flax on it): its CUDA build is the jax-cudaNN plugin's, and XLA compiles kernels with ptxas."""

from __future__ import annotations

import re

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


def _plugins(report: Report) -> dict[str, dict[str, object]]:
    return {k: as_dict(v) for k, v in report.items() if re.fullmatch(r"cuda\d+_plugin", k)}


def _build_problems(wanted: str, report: Report) -> list[str]:
    found = []
    if (plugin := _plugins(report).get(f"cuda{wanted}_plugin")) is None:
        found.append(f"no jax-cuda{wanted}-plugin package")
    else:
        build = plugin.get("cuda_build")
        if not (isinstance(build, str) and build.split(".")[0] == wanted):
            found.append(f"the CUDA plugin was built against CUDA {clean(build)}, not {wanted}.x")
        if not strings(as_dict(plugin.get("kernels")).get("sm")):
            found.append("the CUDA plugin carries no GPU kernels")
    if not strings(as_dict(report.get("ptxas")).get("targets")):
        found.append("no ptxas in the image (XLA compiles its GPU kernels with it)")
    return found


def _kernel_problem(report: Report, capability: str) -> str | None:
    if (ptxas := strings(as_dict(report.get("ptxas")).get("targets"))) and not covers(ptxas, capability):
        return f"the image's ptxas cannot compile for compute capability {capability}"
    for name, plugin in _plugins(report).items():
        kernels = as_dict(plugin.get("kernels"))
        if (targets := strings(kernels.get("sm")) + strings(kernels.get("ptx"))) and not covers(targets, capability):
            return f"the {name.replace('_', '-')} carries kernels for {' '.join(targets)} only"
    return None


def _span(targets: list[str]) -> str:
    plain = [t for t in targets if re.fullmatch(r"sm_\d+", t)]
    return f"{plain[0]}..{plain[-1]} ({len(targets)} targets)" if plain else "none"


def _summary(report: Report) -> list[str]:
    packages = as_dict(report.get("packages"))
    lines = []
    for name, plugin in sorted(_plugins(report).items()):
        major = name.removeprefix("cuda").removesuffix("_plugin")
        lines.append(
            f"jax-cuda{major}-plugin {clean(packages.get(f'jax-cuda{major}-plugin'))}, "
            f"jax-cuda{major}-pjrt {clean(packages.get(f'jax-cuda{major}-pjrt'))}: built against CUDA "
            f"{clean(plugin.get('cuda_build'))}, cuDNN {clean(plugin.get('cudnn_build'))}; loads CUDA "
            f"{clean(plugin.get('cuda_runtime'))}, cuDNN {clean(plugin.get('cudnn_runtime'))}"
        )
        lines.append(f"cubins/PTX in the PJRT plugin: {kernels_text(plugin.get('kernels'))}")
    if "ptxas" in report:
        ptxas = as_dict(report.get("ptxas"))
        lines.append(
            f"ptxas {clean(ptxas.get('version'))} (XLA's kernel compiler) targets {_span(strings(ptxas.get('targets')))}"
        )
    return lines


STACK = StackFacts(
    stack="jax",
    frameworks={
        "jax": FrameworkFacts(colour="#ff7f0e", package="jax"),
        "flax": FrameworkFacts(colour="#2ca02c", package="flax"),
    },
    gpu=GpuChecks(build_problems=_build_problems, kernel_problem=_kernel_problem),
    summary=_summary,
    build_gb={"cpu": 3.0, "cuda12": 16.0},  # its images: 1.1 GB (cpu), 6.3 GB (cuda12)
    setting_names={"conv_algorithm_search": "XLA autotuning"},
)
