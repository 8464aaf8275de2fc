"""Seed 002 "CNN": a small CNN on CIFAR-10 with flip + random-resized-crop augmentation."""

from suites.contract.training_spec import common_params, training_suite

SPEC = training_suite(
    name="cifar10",
    description=(
        "CNN on CIFAR-10 (seed 002): Conv32 / avg-pool / Conv64 / avg-pool / Dense 256 / Dense 10 (SAME padding), "
        "Adam 1e-4, flip + random resized crop on the device; 45k/5k split, test accuracy on the 10k test set"
    ),
    model="a CNN",
    params=common_params(
        datasets=("synthetic", "cifar10"),
        dataset_help="synthetic: learnable CIFAR-10-shaped data from the seed; cifar10: `harness data fetch cifar10`",
        epochs=5,
        batch_size=128,
        lr=1e-4,
        drop_last=True,  # the seed's training loader dropped the last partial batch
    ),
    param_count="the same architecture must give the same count",
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
