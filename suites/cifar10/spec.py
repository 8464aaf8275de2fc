"""Seed 002 "CNN": a small CNN on CIFAR-10 with flip + random-resized-crop augmentation."""

from suites.runtime.spec import CheckSpec, SuiteSpec
from suites.runtime.training import FIRST_STEP_CHECKS, common_params

SPEC = SuiteSpec(
    name="cifar10",
    precision_axis=True,
    description=(
        "CNN on CIFAR-10 (seed 002): Conv32 / avg-pool / Conv64 / avg-pool / Dense 256 / Dense 10 (SAME padding), "
        "Adam 1e-4, flip + random resized crop on the device; 45k/5k split, test accuracy on the 10k test set"
    ),
    frameworks=("flax", "pytorch"),
    params=common_params(
        datasets=("synthetic", "cifar10"),
        dataset_help="synthetic: learnable CIFAR-10-shaped data from the seed; cifar10: `harness data fetch cifar10`",
        epochs=5,
        batch_size=128,
        lr=1e-4,
        drop_last=True,  # the seed's training loader dropped the last partial batch
    ),
    checks=(
        *FIRST_STEP_CHECKS,
        CheckSpec("param_count", "trainable parameters (the same architecture must give the same count)", rtol=0.0),
        # Shared NumPy initial weights (runtime/training.py): equal logits before any step = one function.
        CheckSpec(
            "initial_logits",
            "logits of the shared initial weights on the first 4 training samples",
            rtol=1e-3,
            atol=1e-5,
        ),
        CheckSpec("test_accuracy", "test accuracy after the last epoch, %", rtol=0.0, atol=5.0),
    ),
    unsupported={"numpy": "NumPy has no automatic differentiation to train a CNN with"},
    repeat=1,  # not used: training suites time epochs (see the epochs parameter)
    warmup=0,
    timeout_s=4 * 3600.0,
    smoke={
        "dataset": "synthetic",
        "train_samples": 512,
        "test_samples": 200,
        "epochs": 2,
        "batch_size": 64,
        "lr": 0.002,
    },
)
