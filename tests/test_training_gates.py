"""The first-step checks bite: a wrong learning rate or Adam eps in one framework fails the agreement
gate, float32 rounding between the two frameworks does not.

Both frameworks take one optimiser step from the shared initial weights on the same batch through
the suites' own probe code (runtime/training_jax.first_step_probe, training_torch.first_step_probe);
their checks go through the harness's real gate (harness/assessment.evaluate) with the suite's tolerances.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from harness.judge.assessment import evaluate
from harness.store.run_folder import Run
from suites.contract.datasets import synthetic_images
from suites.contract.registry import all_suites
from suites.runtime import training
from suites.runtime.context import Context
from tests.factories import result

BATCH = 32


def _batch(shape: tuple[int, int, int]) -> tuple[Any, Any]:
    data = synthetic_images(shape, 10, BATCH, 4, seed=0, like="test")
    return data.train_x, data.train_y


def _ctx(suite: str, framework: str) -> Context:
    return Context(all_suites()[suite], framework, {}, repeat=1, warmup=0, device=None, device_kind="cpu",
                   sync=lambda out: None)  # fmt: skip


def flax_checks(suite: str, *, lr: float, eps: float = 1e-8) -> list[dict[str, Any]]:
    import jax.numpy as jnp
    import optax
    from flax import nnx

    from suites.runtime import training_jax

    if suite == "cifar10":
        from suites.cifar10 import common, models_flax

        model, tx, shape = models_flax.CNN(nnx.Rngs(0)), optax.adam(lr, eps=eps), common.SHAPE
    else:
        from suites.mnist import common, models_flax  # type: ignore[no-redef]

        model, tx, shape = models_flax.CNN(nnx.Rngs(0, dropout=1)), optax.sgd(lr, momentum=0.9), common.SHAPE
    training_jax.load_weights(model, training.initial_weights(common.LAYERS, 0))
    x, y = _batch(shape)
    xb, yb = jnp.asarray(x), jnp.asarray(y)
    names = [layer.name for layer in common.LAYERS]
    ctx = _ctx(suite, "flax")
    training_jax.first_step_probe(
        ctx, model=model, tx=tx,
        loss_of=lambda m: training_jax.cross_entropy(m(models_flax.prepare(xb, None)), yb),
        snapshot=lambda m: training_jax._params_by_name(m, names),
        order=[f"{n}.{part}" for n in names for part in ("kernel", "bias")], lr=SUITE_LR[suite],
    )  # fmt: skip
    return ctx.checks


def torch_checks(suite: str, *, lr: float, eps: float = 1e-8) -> list[dict[str, Any]]:
    import torch
    import torch.nn.functional as F

    from suites.runtime import training_torch

    if suite == "cifar10":
        from suites.cifar10 import common, models_torch

        model = models_torch.CNN()
        optimizer: Any = torch.optim.Adam(model.parameters(), lr=lr, eps=eps)
        prepare = models_torch.make_prepare("cpu")
    else:
        from suites.mnist import common, models_torch  # type: ignore[no-redef]

        model = models_torch.CNN()
        optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
        prepare = models_torch.prepare
    training_torch.load_weights(model, training.initial_weights(common.LAYERS, 0), common.LAYERS)
    x, y = _batch(common.SHAPE)
    xb, yb = torch.from_numpy(x).permute(0, 3, 1, 2).contiguous(), torch.from_numpy(y).long()
    names = [layer.name for layer in common.LAYERS]
    ctx = _ctx(suite, "pytorch")
    training_torch.first_step_probe(
        ctx, model=model, optimizer=optimizer, loss_of=lambda m: F.cross_entropy(m(prepare(xb, None)), yb),
        order=[f"{n}.{part}" for n in names for part in ("weight", "bias")], lr=SUITE_LR[suite],
    )  # fmt: skip
    return ctx.checks


SUITE_LR = {"cifar10": 1e-4, "mnist": 0.01}  # the suites' defaults


def _gate(tmp_path: Path, flax: list[dict[str, Any]], pytorch: list[dict[str, Any]]) -> dict[str, bool]:
    run = Run(tmp_path, {"baseline": "flax", "suite": "x"}, {"flax": result("flax", [], flax),
                                                            "pytorch": result("pytorch", [], pytorch)})  # fmt: skip
    return {row.name: row.passed["pytorch"] for row in evaluate(run) if row.name.startswith("first_step")}


@pytest.fixture(scope="module")
def reference() -> dict[str, list[dict[str, Any]]]:
    return {suite: flax_checks(suite, lr=lr) for suite, lr in SUITE_LR.items()}


@pytest.mark.parametrize("suite", ["cifar10", "mnist"])
def test_the_same_step_in_both_frameworks_passes(suite: str, reference: dict[str, Any], tmp_path: Path) -> None:
    passed = _gate(tmp_path, reference[suite], torch_checks(suite, lr=SUITE_LR[suite]))
    assert passed == {"first_step_loss": True, "first_step_weights": True}
    loss = next(c for c in reference[suite] if c["name"] == "first_step_loss")["value"]
    assert loss[1] < loss[0]  # the step lowers the loss on its own batch


@pytest.mark.parametrize(
    ("suite", "change"),
    [
        ("cifar10", {"lr": 1e-4 * 1.01}),  # a learning rate 1 % off
        ("cifar10", {"lr": 1e-4, "eps": 1e-7}),  # Keras's Adam eps instead of PyTorch's and optax's 1e-8
        ("mnist", {"lr": 0.01 * 1.01}),
    ],
    ids=["cifar10-lr", "cifar10-adam-eps", "mnist-lr"],
)
def test_a_wrong_learning_rate_or_adam_eps_in_one_framework_fails_the_gate(
    suite: str, change: dict[str, float], reference: dict[str, Any], tmp_path: Path
) -> None:
    passed = _gate(tmp_path, reference[suite], torch_checks(suite, **change))
    assert passed["first_step_weights"] is False
    assert not all(passed.values())


def test_first_step_values_are_layout_independent_norms() -> None:
    """||W|| and ||W - W0|| / lr per tensor: a transposed kernel reports the same numbers."""
    ctx = _ctx("mlp", "flax")
    w0 = np.arange(6, dtype=np.float32).reshape(2, 3)
    w1 = w0 + 0.5
    training.first_step_checks(ctx, loss_before=1.0, loss_after=0.5, before={"a": w0}, after={"a": w1}, order=["a"],
                               lr=0.5)  # fmt: skip
    transposed = _ctx("mlp", "pytorch")
    training.first_step_checks(transposed, loss_before=1.0, loss_after=0.5, before={"a": w0.T}, after={"a": w1.T},
                               order=["a"], lr=0.5)  # fmt: skip
    values = next(c for c in ctx.checks if c["name"] == "first_step_weights")["value"]
    assert values == next(c for c in transposed.checks if c["name"] == "first_step_weights")["value"]
    assert values[1] == pytest.approx(np.sqrt(6) * 0.5 / 0.5)


def test_the_probe_leaves_the_training_model_at_its_initial_weights() -> None:
    import jax.numpy as jnp
    import numpy as np
    import optax
    import torch
    from flax import nnx

    from suites.mlp.common import LAYERS
    from suites.runtime import training_jax, training_torch

    names = [layer.name for layer in LAYERS]
    x = jnp.asarray(np.random.default_rng(0).normal(size=(8, 2)), jnp.float32)
    y = jnp.asarray(np.arange(8) % 2)

    class MLP(nnx.Module):
        def __init__(self) -> None:
            self.hidden, self.out = nnx.Linear(2, 10, rngs=nnx.Rngs(0)), nnx.Linear(10, 2, rngs=nnx.Rngs(1))

        def __call__(self, v: Any) -> Any:
            return self.out(nnx.relu(self.hidden(v)))

    model = MLP()
    before = training_jax._params_by_name(model, names)
    training_jax.first_step_probe(
        _ctx("mlp", "flax"), model=model, tx=optax.adam(0.1), loss_of=lambda m: training_jax.cross_entropy(m(x), y),
        snapshot=lambda m: training_jax._params_by_name(m, names), order=sorted(before), lr=0.1,
    )  # fmt: skip
    after = training_jax._params_by_name(model, names)
    assert all(np.array_equal(before[k], after[k]) for k in before)

    net = torch.nn.Sequential(torch.nn.Linear(2, 10), torch.nn.ReLU(), torch.nn.Linear(10, 2))
    start = {k: v.clone() for k, v in net.state_dict().items()}
    opt = torch.optim.Adam(net.parameters(), lr=0.1)
    xt, yt = torch.from_numpy(np.array(x)), torch.from_numpy(np.array(y)).long()
    training_torch.first_step_probe(
        _ctx("mlp", "pytorch"), model=net, optimizer=opt,
        loss_of=lambda m: torch.nn.functional.cross_entropy(m(xt), yt), order=sorted(start), lr=0.1,
    )  # fmt: skip
    assert all(torch.equal(start[k], v) for k, v in net.state_dict().items()) and not opt.state
