"""The test-only perturbation's parameters (suites/runtime/perturb.py applies them in the job).

Declared here because a suite's spec lists them, and the host reads every spec.
"""

from __future__ import annotations

from suites.contract.frameworks import FRAMEWORKS
from suites.contract.spec import Param

PARAMS: tuple[Param, ...] = (
    Param(
        "perturb",
        "float",
        0.0,
        "TEST ONLY: add perturb * max(1, |v|) to every check value v of perturb_framework",
        min=-1.0,
        max=1.0,
    ),
    Param(
        "perturb_framework",
        "str",
        "none",
        "TEST ONLY: the framework whose check values are perturbed",
        choices=("none", *FRAMEWORKS),
    ),
)
