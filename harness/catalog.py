"""The host's view of suites and frameworks, with user-facing errors for unknown names."""

from __future__ import annotations

from harness.errors import HarnessError
from suites.runtime.frameworks import FRAMEWORKS, Framework
from suites.runtime.registry import all_suites
from suites.runtime.spec import SuiteSpec


def visible_suites(include_hidden: bool = False) -> dict[str, SuiteSpec]:
    return {n: s for n, s in all_suites().items() if include_hidden or not s.hidden}


def get_suite(name: str) -> SuiteSpec:
    suites = all_suites()
    if name not in suites:
        valid = ", ".join(visible_suites())
        raise HarnessError(f"unknown suite {name!r}; choose one of: {valid} (see `harness list`)")
    return suites[name]


def get_framework(suite: SuiteSpec, name: str) -> Framework:
    if name not in suite.all_frameworks or name not in FRAMEWORKS:
        valid = ", ".join(suite.all_frameworks)
        raise HarnessError(f"unknown framework {name!r} for suite {suite.name}; choose from: {valid}")
    return FRAMEWORKS[name]
