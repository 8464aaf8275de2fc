"""What the host knows of a stack and its frameworks, as one declaration per stack (stack_<name>.py).

The jobs know a framework through suites/contract/frameworks.py; the host knows more: how to read
its image's build probe (is a cuda12 image really a CUDA build, does it carry kernels for this
GPU), the colour it has in every picture, the package whose version is its version, and what it
calls a like-for-like setting. Each of those once sat in the module that used it, keyed by name,
so a new stack got no GPU checks and no colour without anyone noticing. Now a stack without its
declaration is refused by name (`of_stack`), and `harness/execute/contract.py` lists it as missing.

The probe's report comes from inside a container: every reader here takes it as untrusted JSON,
checks each field's type before use and makes text inert (`clean`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

Report = dict[str, Any]  # the build probe's JSON object (suites/contract/build_info.py), untrusted


def clean(value: Any, limit: int = 200) -> str:
    """Text from the container, safe to print on a terminal."""
    return re.sub(r"[^\x20-\x7e]", "?", str(value))[:limit]


def strings(value: Any) -> list[str]:
    return [clean(v, 40) for v in value] if isinstance(value, list) and all(isinstance(v, str) for v in value) else []


def as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def kernels_text(value: Any) -> str:
    kernels = as_dict(value)
    sm, ptx = strings(kernels.get("sm")), strings(kernels.get("ptx"))
    return " ".join(sm) + (f" + PTX {' '.join(ptx)}" if ptx else "") if sm or ptx else "none found"


@dataclass(frozen=True)
class GpuChecks:
    """How to read a GPU build of the stack's image from its probe report."""

    # (CUDA major wanted, report) -> why the image is not a CUDA build of that major (empty: it is)
    build_problems: Callable[[str, Report], list[str]]
    # (report, compute capability "9.0") -> why its kernels cannot run on that GPU, or None
    kernel_problem: Callable[[Report, str], str | None]


@dataclass(frozen=True)
class FrameworkFacts:
    colour: str  # its colour in every picture (PNG and site); red is kept for flags
    package: str  # the distribution whose version is the framework's version (torch for pytorch)


@dataclass(frozen=True)
class StackFacts:
    stack: str
    frameworks: Mapping[str, FrameworkFacts]  # every framework of suites/contract/frameworks.py in this stack
    # None: the stack has no GPU variant (its frameworks declare no gpu device; contract.py checks both agree)
    gpu: GpuChecks | None
    # report -> the stack's own lines in `build --verify` and `doctor` (versions, CUDA build, kernels)
    summary: Callable[[Report], list[str]]
    # variant -> GB of free disk a build of the image needs: the image itself (about half) and the
    # wheels and layers the build unpacks beside it. `doctor` counts only the images still to build.
    build_gb: Mapping[str, float]
    # like-for-like setting (`training.fairness`) -> what this stack calls it, so a reason names the knob
    setting_names: Mapping[str, str] = field(default_factory=dict)
