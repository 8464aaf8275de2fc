"""Test-only fault injection: every way a job can go wrong, on every stack (hidden from `list`)."""

from suites.contract.spec import Param, SuiteSpec

MODES = ("ok", "crash", "hang", "oom", "garbage-output", "no-output", "slow-start")

SPEC = SuiteSpec(
    name="fault",
    description="test only: a job that crashes, hangs, runs out of memory or writes a bad result",
    frameworks=("numpy", "jax", "pytorch"),
    params=(
        Param("mode", "str", "ok", "what goes wrong", choices=MODES),
        Param("target", "str", "all", "which framework's job goes wrong", choices=("all", "numpy", "jax", "pytorch")),
        Param("delay_s", "float", 2.0, "slow-start: seconds before the work starts", min=0, max=3600),
        Param("oom_cap_mb", "int", 4096, "oom: give up (failed) if no limit stopped us by then", min=1),
        Param("work", "int", 1000, "ok: the timed call sums range(work)", min=1, max=10**9),
    ),
    repeat=3,
    warmup=0,
    timeout_s=120,
    hidden=True,
    smoke={"mode": "ok"},
    metrics=("noop",),
)
