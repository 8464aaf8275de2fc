"""Seed 000 "MNIST": the same CNN trained in Flax NNX and PyTorch, VALID padding in both."""

from suites.runtime.spec import CheckSpec, SuiteSpec
from suites.runtime.training import FIRST_STEP_CHECKS, common_params

SPEC = SuiteSpec(
    name="mnist",
    precision_axis=True,
    description=(
        "CNN on MNIST (seed 000): Conv32-Conv64 3x3 VALID, MaxPool 2, Dropout .25, Dense 256, Dropout .5, "
        "Dense 10; SGD lr .01 momentum .9; one epoch = one sample (epoch 1 = first call)"
    ),
    frameworks=("flax", "pytorch"),
    params=common_params(
        datasets=("synthetic", "mnist"),
        dataset_help="synthetic: learnable MNIST-shaped data from the seed; mnist: `harness data fetch mnist`",
        epochs=10,
        batch_size=128,
        lr=0.01,
        drop_last=False,
    ),
    checks=(
        *FIRST_STEP_CHECKS,
        # The seed's Flax model used SAME padding (3.23 M parameters) against PyTorch's VALID
        # (2.38 M): a different model under the same name. Equal counts prove the same model.
        CheckSpec("param_count", "trainable parameters (the same architecture must give the same count)", rtol=0.0),
        # Different initialisers and dropout streams: final accuracies agree only within a band.
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
    unsupported={"numpy": "NumPy has no automatic differentiation to train a CNN with"},
    repeat=1,  # not used: training suites time epochs (see the epochs parameter)
    warmup=0,
    timeout_s=4 * 3600.0,
    smoke={
        "dataset": "synthetic",
        "train_samples": 1600,
        "test_samples": 500,
        "epochs": 2,
        "batch_size": 32,
        "drop_last": True,
    },
)
