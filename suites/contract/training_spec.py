"""The spec lines every training suite shares (mnist, cifar10, mlp, resnet18): their parameters, the
first-step checks and the whole spec of a suite that trains one model in flax and pytorch.

Part of the contract: the host reads these through each suite's spec.py, the job's training loops
(suites/runtime/training*.py) read the parameters they declare.
"""

from __future__ import annotations

from suites.contract import ranks
from suites.contract.datasets import AUTO
from suites.contract.spec import CheckSpec, Param, ParamValue, SuiteSpec

# Shared by every training suite so `harness run --param` reads the same everywhere.
VARIANTS = ("default", "eager", "compiled", "scan", "cuda-graph")
VARIANT_HELP = (
    "default: each framework's idiomatic fast path (flax: jax.jit of one train step; pytorch: eager); "
    "eager: no compilation (flax op by op, pytorch eager); compiled: flax jit step, pytorch torch.compile; "
    "scan: flax jits a whole epoch with lax.scan (pytorch: skipped); "
    "cuda-graph: pytorch captures the whole step as one CUDA graph, --device gpu only (flax: skipped)"
)


DATA_PIPELINES = ("device", "host")
DATA_HELP = (
    "device: the whole dataset resident on the device, a step gathers its own batch (no host work per step); "
    "host: batches gathered from NumPy arrays on the host and copied to the device every step "
    "(how much of a gap is input pipeline)"
)


def common_params(
    *,
    datasets: tuple[str, ...],
    dataset_help: str,
    epochs: int,
    batch_size: int,
    lr: float,
    drop_last: bool,
    seed: int = 42,
) -> tuple[Param, ...]:
    """The parameters every training suite shares, with the same names, ranges and meanings.

    A suite with a real dataset defaults to `dataset=auto`: the real data when it is in the
    data folder, else a one-line refusal naming the fetch command and `dataset=synthetic`.
    """
    real = [d for d in datasets if d != "synthetic"]
    choices = (AUTO, *datasets) if real else datasets
    help_text = (f"auto: {real[0]} when it is in the data folder (else the run stops and names the fetch command); "
                 + dataset_help) if real else dataset_help  # fmt: skip
    return (
        Param("dataset", "str", choices[0], help_text, choices=choices),
        Param(
            "epochs",
            "int",
            epochs,
            "training epochs (the most, with target_accuracy); epoch 1 (compilation) is reported apart",
            min=2,
            max=1000,
        ),  # fmt: skip
        Param("batch_size", "int", batch_size, "samples per training step", min=1, max=65536),
        Param("lr", "float", lr, "learning rate", min=0.0, max=10.0),
        Param(
            "seed",
            "int",
            seed,
            "seed of the data (synthetic), split, sample orders and model init",
            min=0,
            max=2**31 - 1,
        ),  # fmt: skip
        Param("drop_last", "bool", drop_last, "skip the last partial batch of each epoch (one compilation less)"),
        Param("train_samples", "int", 0, "use the first N training samples (0: all)", min=0, max=10_000_000),
        Param("test_samples", "int", 0, "use the first N test samples (0: all)", min=0, max=10_000_000),
        Param("variant", "str", "default", VARIANT_HELP, choices=VARIANTS),
        Param("artifacts", "bool", False, "write the model summary (and jaxpr/HLO of the JAX train step)"),
        Param(
            "target_accuracy",
            "float",
            0.0,
            "time-to-accuracy: evaluate the test split after every epoch (outside the training clock) and stop at "
            "the first epoch reaching this percentage; 0: off (train all epochs, evaluate once)",
            min=0.0,
            max=100.0,
        ),
        Param(
            "curve",
            "bool",
            True,
            "learning curve: evaluate the test split after every epoch, outside the training clock "
            "(false: once at the end)",
        ),
        Param("data", "str", "device", DATA_HELP, choices=DATA_PIPELINES),
    )


# Checks of the first optimiser step from the shared initial weights, on the first batch with
# dropout off. Measured flax vs pytorch (cifar10 CNN, Adam, CPU): loss 2e-7 and ||W - W0|| 1.3e-5
# apart (Adam's g / (|g| + eps) magnifies rounding for the smallest gradients). A learning rate
# 0.1 % off moves the weights check by 1e-3 and the loss by 1.4e-5; Adam eps 1e-7 (Keras's) instead
# of 1e-8 moves the weights by 3.8e-3: all fail these tolerances, float32 rounding does not.
def first_step_specs(
    *,
    loss_rtol: float = 1e-5,
    loss_atol: float = 1e-6,
    weights_rtol: float = 5e-4,
) -> tuple[CheckSpec, CheckSpec]:
    """The two first-step checks; a suite whose forward pass amplifies rounding (BatchNorm over
    few values) loosens the loss tolerance, never the weights'."""
    return (
        CheckSpec(
            "first_step_loss",
            "loss on the first batch before and after one optimiser step from the shared initial weights (dropout off)",
            rtol=loss_rtol,
            atol=loss_atol,
        ),
        CheckSpec(
            "first_step_weights",
            "per weight tensor after that step: its L2 norm, then ||W - W0|| / lr (the step's size)",
            rtol=weights_rtol,
            atol=1e-6,
        ),
    )


FIRST_STEP_CHECKS = first_step_specs()


def training_suite(
    *,
    name: str,
    description: str,
    model: str,
    params: tuple[Param, ...],
    param_count: str,
    timeout_s: float,
    smoke: dict[str, ParamValue],
    parallel: bool = False,
) -> SuiteSpec:
    """The spec of a suite that trains one model in flax and pytorch from the same NumPy-drawn weights
    (mnist, cifar10, mlp): what they share is written once here. The checks: the first step
    (FIRST_STEP_CHECKS), the parameter count (`param_count` says what it must be), the logits before
    any step (equal only if the two models are one function) and the final test accuracy (within a
    band: the dropout streams differ). Epochs are timed, so repeat and warmup are not used.
    `model` names it in numpy's skip reason ("a CNN"). `parallel`: the suite has a data-parallel loop
    (contract/ranks.py: its parameters and checks join the suite's)."""
    if parallel:
        params = (*params, *ranks.parallel_params())
        smoke = {**smoke, **ranks.PARALLEL_SMOKE}
    return SuiteSpec(
        name=name,
        precision_axis=True,
        description=description,
        frameworks=("flax", "pytorch"),
        params=params,
        checks=(
            *FIRST_STEP_CHECKS,
            CheckSpec("param_count", f"trainable parameters ({param_count})", rtol=0.0),
            CheckSpec(
                "initial_logits",
                "logits of the shared initial weights on the first 4 training samples, evaluation mode (no dropout)",
                rtol=1e-3,
                atol=1e-5,
            ),
            CheckSpec("test_accuracy", "test accuracy after the last epoch, %", rtol=0.0, atol=5.0),
            *(ranks.parallel_checks() if parallel else ()),
        ),
        constraint=ranks.batch_problem if parallel else None,
        unsupported={"numpy": f"NumPy has no automatic differentiation to train {model} with"},
        repeat=1,  # not used: training suites time epochs (see the epochs parameter)
        warmup=0,
        timeout_s=timeout_s,
        smoke=smoke,
    )
