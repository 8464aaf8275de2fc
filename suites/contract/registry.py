"""Suites are found by convention: every package `suites/<name>/` with a `spec.py` defining SPEC.

Adding a suite touches no central list. `impl_<framework>.py` in the same folder holds
that framework's implementation, imported only inside the job.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache
from pathlib import Path

from suites.contract.spec import SuiteSpec

SUITES_DIR = Path(__file__).resolve().parent.parent


@lru_cache(maxsize=1)
def all_suites() -> dict[str, SuiteSpec]:
    found: dict[str, SuiteSpec] = {}
    for info in sorted(pkgutil.iter_modules([str(SUITES_DIR)]), key=lambda m: m.name):
        if not info.ispkg or info.name.startswith("_") or info.name in ("contract", "runtime"):
            continue
        if not (SUITES_DIR / info.name / "spec.py").exists():
            continue
        module = importlib.import_module(f"suites.{info.name}.spec")
        spec = module.SPEC
        if not isinstance(spec, SuiteSpec) or spec.name != info.name:
            raise TypeError(f"suites/{info.name}/spec.py must define SPEC = SuiteSpec(name={info.name!r}, ...)")
        found[spec.name] = spec
    return found


def implementation_module(suite: str, framework: str) -> str:
    return f"suites.{suite}.impl_{framework}"
