"""Seed 002 "MLP": a 2-10-2 MLP on the blobs + circles toy set, where per-step overhead dominates."""

from suites.runtime.spec import CheckSpec, SuiteSpec
from suites.runtime.training import FIRST_STEP_CHECKS, common_params

SPEC = SuiteSpec(
    name="mlp",
    precision_axis=True,
    description=(
        "MLP Dense 10 / ReLU / Dense 2 on seed 002's toy set (blobs + circles, 80/20 split, no shuffle); "
        "Adam .01; dispatch overhead and compilations per epoch (jit vs eager)"
    ),
    frameworks=("flax", "pytorch"),
    params=common_params(
        datasets=("synthetic",),
        dataset_help="synthetic: seed 002's toy set (make_blobs + make_circles definitions), generated from the seed",
        epochs=10,
        batch_size=128,
        lr=0.01,
        drop_last=False,
    ),
    checks=(
        *FIRST_STEP_CHECKS,
        CheckSpec("param_count", "trainable parameters (2*10+10 + 10*2+2 = 52)", rtol=0.0),
        # Both frameworks start from the same NumPy-drawn weights (runtime/training.py), so their
        # logits before any step agree to float32 rounding only if the two models are one function.
        CheckSpec(
            "initial_logits",
            "logits of the shared initial weights on the first 4 training samples, dropout off",
            rtol=1e-3,
            atol=1e-5,
        ),
        CheckSpec("test_accuracy", "test accuracy after the last epoch, %", rtol=0.0, atol=5.0),
    ),
    unsupported={"numpy": "NumPy has no automatic differentiation to train an MLP with"},
    repeat=1,  # not used: training suites time epochs (see the epochs parameter)
    warmup=0,
    timeout_s=3600.0,
    smoke={"epochs": 3},
)
