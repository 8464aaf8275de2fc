"""Test-only: times `fwh_plant.work()` from an installed package, so `harness bisect` can find a planted slowdown."""

from suites.contract.spec import Param, SuiteSpec

SPEC = SuiteSpec(
    name="plant",
    description="test only: times fwh_plant.work() from whichever version of fwh_plant is installed",
    frameworks=("numpy",),
    params=(
        Param(
            "stand_in",
            "bool",
            False,
            "time a built-in stand-in when fwh_plant is not installed (smoke runs) instead of skipping",
        ),
    ),
    repeat=5,
    warmup=1,
    timeout_s=120,
    hidden=True,
    smoke={"stand_in": True},
    metrics=("work",),
)
