"""Test-only: a small train-like step with a known cost planted in it, so the tests can check that a
profile's attribution puts each cost in its category in both frameworks (docs/method.md, "Profiles")."""

from suites.contract.spec import CheckSpec, Param, SuiteSpec

PLANTS = ("none", "matmul", "sync", "sleep")

SPEC = SuiteSpec(
    name="profplant",
    description="test only: a dense layer's forward and backward, plus one planted cost (plant=...)",
    frameworks=("jax", "pytorch"),
    params=(
        Param("size", "int", 256, "rows and columns of the activations and the weight", min=8, max=4096),
        Param(
            "plant",
            "str",
            "none",
            "none; matmul: four more size x size matrix products, chained; sync: the step's output read back to the host "
            "in the middle of the step; sleep: time.sleep(sleep_ms) inside the step",
            choices=PLANTS,
        ),
        Param("sleep_ms", "float", 5.0, "plant=sleep: milliseconds asleep per step", min=0.0, max=1000.0),
    ),
    checks=(CheckSpec("output_sum", "sum of the step's output from the shared inputs", rtol=1e-4, atol=1e-3),),
    repeat=20,
    warmup=3,
    timeout_s=300,
    hidden=True,
    smoke={"size": 64},
    metrics=("step",),
)
