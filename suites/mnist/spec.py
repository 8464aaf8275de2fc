"""Seed 000 "MNIST": the same CNN trained in Flax NNX and PyTorch, VALID padding in both."""

from suites.contract.training_spec import common_params, training_suite

SPEC = training_suite(
    name="mnist",
    description=(
        "CNN on MNIST (seed 000): Conv32-Conv64 3x3 VALID, MaxPool 2, Dropout .25, Dense 256, Dropout .5, "
        "Dense 10; SGD lr .01 momentum .9; one epoch = one sample (epoch 1 = first call)"
    ),
    model="a CNN",
    params=common_params(
        datasets=("synthetic", "mnist"),
        dataset_help="synthetic: learnable MNIST-shaped data from the seed; mnist: `harness data fetch mnist`",
        epochs=10,
        batch_size=128,
        lr=0.01,
        drop_last=False,
    ),
    # The seed's Flax model used SAME padding (3.23 M parameters) against PyTorch's VALID
    # (2.38 M): a different model under the same name. Equal counts prove the same model.
    param_count="the same architecture must give the same count",
    timeout_s=4 * 3600.0,
    smoke={
        "dataset": "synthetic",
        "train_samples": 1600,
        "test_samples": 500,
        "epochs": 2,
        "batch_size": 32,
        "drop_last": True,
    },
    parallel=True,
)
