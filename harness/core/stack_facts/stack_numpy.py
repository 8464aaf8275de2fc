"""NumPy/SciPy: CPU only, so no GPU checks; its probe reports versions only."""

from __future__ import annotations

from harness.core.stack_facts.facts import FrameworkFacts, Report, StackFacts


def _summary(report: Report) -> list[str]:
    return []  # the framework line and its Python say it all


STACK = StackFacts(
    stack="numpy",
    frameworks={"numpy": FrameworkFacts(colour="#1f77b4", package="numpy")},
    gpu=None,
    summary=_summary,
    build_gb={"cpu": 1.5, "cuda12": 1.5},  # its image: 0.6 GB, the same on both variants
)
