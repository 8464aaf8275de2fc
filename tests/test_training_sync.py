"""No host synchronisation inside a training epoch, and the epoch's one sync on the training state.

Each training job runs in this process at a tiny size with a recording `sync` in its Context and
spies on every call that makes the host wait for the device (torch.cuda.synchronize, .item(),
.cpu(), .tolist(), float(t), torch.tensor(..., device=...), jax.device_get, block_until_ready,
np.asarray of a jax.Array). On a CPU these calls are cheap, so only a spy can see them; on a GPU
each one stalls the pipeline every step. Calls made by the project's code count (a framework's
own internals are its idiomatic behaviour). The recording sync must then be called once per epoch
with exactly what the epoch returned: removing `ctx.sync(out)` from runtime/training.py fails here.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from suites.contract.frameworks import FRAMEWORKS
from suites.contract.registry import all_suites, implementation_module
from suites.contract.settings import Settings
from suites.runtime import training
from suites.runtime.context import Context
from tests.conftest import REPO

pytestmark = pytest.mark.slow
# The project's code, not the whole checkout: a virtual environment inside it (.venv, as CI
# makes) holds the frameworks, whose internals are theirs.
OWN_CODE = tuple(str(REPO / folder) + "/" for folder in ("suites", "harness"))

TINY = {"dataset": "synthetic", "train_samples": 64, "test_samples": 16, "batch_size": 32, "epochs": 2}
CASES = [
    ("mnist", "pytorch", TINY),
    ("mnist", "pytorch", {**TINY, "data": "host"}),
    ("cifar10", "pytorch", TINY),
    ("resnet18", "pytorch", {**TINY, "image_size": 16, "batch_size": 16}),
    ("mnist", "flax", TINY),
    ("mlp", "flax", {"train_samples": 256, "test_samples": 64, "epochs": 2, "data": "host"}),
]


class Spy:
    def __init__(self) -> None:
        self.inside = False
        self.inside_calls: list[str] = []
        self.outs: list[Any] = []
        self.synced: list[Any] = []

    def wrap(self, name: str, original: Callable[..., Any], when: Callable[..., bool] = lambda *a, **k: True) -> Any:
        def spy(*args: Any, **kwargs: Any) -> Any:
            caller = sys._getframe(1).f_code.co_filename
            # The project's own code only: the frameworks' internals are theirs (PyTorch's Adam
            # keeps its step counter on the CPU on purpose and reads it with .item()).
            if self.inside and when(*args, **kwargs) and caller.startswith(OWN_CODE):
                self.inside_calls.append(f"{name} from {Path(caller).relative_to(REPO)}")
            return original(*args, **kwargs)

        return spy

    def sync(self, out: Any) -> None:
        self.synced.append(out)


def _patch_torch(spy: Spy, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    monkeypatch.setattr(torch.cuda, "synchronize", spy.wrap("torch.cuda.synchronize", torch.cuda.synchronize))
    for name in ("item", "cpu", "tolist", "numpy", "__float__", "__int__", "__bool__"):
        monkeypatch.setattr(torch.Tensor, name, spy.wrap(f"Tensor.{name}", getattr(torch.Tensor, name)))
    # A tensor built from host values on a device is a host-to-device copy (synchronous on CUDA).
    monkeypatch.setattr(
        torch, "tensor", spy.wrap("torch.tensor(device=...)", torch.tensor, lambda *a, **k: k.get("device") is not None)
    )


def _patch_jax(spy: Spy, monkeypatch: pytest.MonkeyPatch) -> None:
    import jax
    from jax._src.array import ArrayImpl

    monkeypatch.setattr(jax, "device_get", spy.wrap("jax.device_get", jax.device_get))
    monkeypatch.setattr(jax, "block_until_ready", spy.wrap("jax.block_until_ready", jax.block_until_ready))
    for name in ("__float__", "__int__", "__bool__", "__array__", "item", "tolist", "block_until_ready"):
        monkeypatch.setattr(ArrayImpl, name, spy.wrap(f"Array.{name}", getattr(ArrayImpl, name)))


def _run(suite: str, framework: str, params: dict[str, Any], spy: Spy, tmp_path: Path) -> Context:
    spec = all_suites()[suite]
    fw = FRAMEWORKS[framework]
    adapter = importlib.import_module(fw.adapter)
    settings = Settings(device="cpu", threads=None, x64=spec.x64)
    adapter.configure(settings)
    ctx = Context(
        spec, framework, spec.resolve(params), repeat=1, warmup=0, device=adapter.device(settings),
        device_kind="cpu", sync=spy.sync, artifacts_dir=tmp_path,
    )  # fmt: skip
    importlib.import_module(implementation_module(suite, framework)).run(ctx)
    return ctx


@pytest.mark.parametrize(("suite", "framework", "params"), CASES, ids=[f"{s}-{f}-{p.get('data', 'device')}"
                                                                      for s, f, p in CASES])  # fmt: skip
def test_no_sync_inside_an_epoch_and_one_sync_per_epoch_on_the_state(
    suite: str, framework: str, params: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spy = Spy()
    real_train = training.train

    def spied_train(ctx: Context, *, run_epoch: Callable[[int], Any], **kwargs: Any) -> training.History:
        def epoch(e: int) -> Any:
            spy.inside = True
            try:
                out = run_epoch(e)
            finally:
                spy.inside = False
            spy.outs.append(out)
            return out

        return real_train(ctx, run_epoch=epoch, **kwargs)

    monkeypatch.setattr(training, "train", spied_train)
    (_patch_torch if framework == "pytorch" else _patch_jax)(spy, monkeypatch)
    ctx = _run(suite, framework, params, spy, tmp_path)
    assert spy.inside_calls == [], f"host synchronisation inside an epoch: {sorted(set(spy.inside_calls))}"
    assert len(spy.outs) == params["epochs"]
    for out in spy.outs:  # each epoch's state, synchronised by the Context's sync exactly once
        assert sum(1 for synced in spy.synced if synced is out) == 1
    assert any(m["name"] == "epoch" for m in ctx.metrics)
