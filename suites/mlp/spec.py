"""Seed 002 "MLP": a 2-10-2 MLP on the blobs + circles toy set, where per-step overhead dominates."""

from suites.contract.training_spec import common_params, training_suite

SPEC = training_suite(
    name="mlp",
    description=(
        "MLP Dense 10 / ReLU / Dense 2 on seed 002's toy set (blobs + circles, 80/20 split, no shuffle); "
        "Adam .01; dispatch overhead and compilations per epoch (jit vs eager)"
    ),
    model="an MLP",
    params=common_params(
        datasets=("synthetic",),
        dataset_help="synthetic: seed 002's toy set (make_blobs + make_circles definitions), generated from the seed",
        epochs=10,
        batch_size=128,
        lr=0.01,
        drop_last=False,
    ),
    param_count="2*10+10 + 10*2+2 = 52",
    timeout_s=3600.0,
    smoke={"epochs": 3},
)
