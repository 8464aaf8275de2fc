"""The PyTorch training loop, like for like with Flax (suites/runtime/training_torch.py), without a GPU.

Memory baseline before any optimizer state; cuDNN's algorithm search on a GPU only, from just
before epoch 1; data=host copies pinned and asynchronous on a GPU; `--precision bf16` computes in
bf16 under autocast with float32 master weights; a compilation counter that cannot count says so.
What needs CUDA (pinned memory, cudnn, graphs) is a stand-in; the loops are real PyTorch on the CPU.
None of this has run on a GPU.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from suites.contract.registry import all_suites  # noqa: E402
from suites.runtime import cuda_graphs, training, training_torch  # noqa: E402
from suites.runtime.context import Context  # noqa: E402
from tests.test_cuda_graphs import FakeCuda, FusedAdam, install_fake_cuda  # noqa: E402

TINY = {"dataset": "synthetic", "train_samples": 96, "test_samples": 32, "epochs": 2, "batch_size": 32}
R18 = {**TINY, "image_size": 16, "batch_size": 16, "train_samples": 32, "test_samples": 16}
MLP = {"train_samples": 200, "test_samples": 50, "epochs": 2, "batch_size": 50, "drop_last": True}


def _ctx(suite: str, params: dict[str, Any], *, precision: str = "fp32", device_kind: str = "cpu") -> Context:
    spec = all_suites()[suite]
    return Context(spec, "pytorch", spec.resolve(params), repeat=1, warmup=0, device=torch.device("cpu"),
                   device_kind=device_kind, sync=lambda out: None, precision=precision)  # fmt: skip


def _run(suite: str, params: dict[str, Any], *, precision: str = "fp32") -> Context:
    ctx = _ctx(suite, params, precision=precision)
    __import__(f"suites.{suite}.impl_pytorch", fromlist=["run"]).run(ctx)
    return ctx


def _metric_names(ctx: Context) -> set[str]:
    return {m["name"] for m in ctx.metrics}


@pytest.fixture
def graphs(monkeypatch: pytest.MonkeyPatch) -> FakeCuda:
    """test_cuda_graphs' stand-in torch.cuda (a replay reruns the captured step), capture allowed on
    the CPU, and an Adam whose capturable form runs there."""
    fake = install_fake_cuda(monkeypatch)
    monkeypatch.setattr(cuda_graphs, "unavailable_reason", lambda device: None)
    monkeypatch.setattr(torch.optim, "Adam", FusedAdam)
    return fake


# ---------------------------------------------------------------------------------------------
# 1. Memory like for like: the baseline before any optimizer state, after the peak reset


class _Optimizers:
    """Every SGD/Adam built while patched in (weakly held: a probe's copy may die before the baseline)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.made: list[weakref.ref[Any]] = []
        for name in ("SGD", "Adam"):
            base = getattr(torch.optim, name)
            monkeypatch.setattr(torch.optim, name, self._recording(base))

    def _recording(self, base: type) -> type:
        made = self.made

        class Recorded(base):  # type: ignore[misc, valid-type]
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, **kwargs)
                made.append(weakref.ref(self))

        return Recorded

    def live(self) -> list[Any]:
        return [opt for opt in (ref() for ref in self.made) if opt is not None]


def _spy_baseline(monkeypatch: pytest.MonkeyPatch, optimizers: _Optimizers) -> list[str]:
    """Events in order: the baseline, the start and the end of training (with the optimizers alive
    then and their state entries) and the first-step probe."""
    events: list[str] = []
    baseline, train, probe = training.memory_baseline, training.train, training_torch.first_step_probe

    def spy_probe(*args: Any, **kwargs: Any) -> None:
        events.append("probe")
        probe(*args, **kwargs)

    def seen(what: str) -> None:
        live = optimizers.live()
        events.append(f"{what}: {len(live)} optimizer(s), {sum(len(opt.state) for opt in live)} state entries")

    def spy_baseline(device_bytes: int | None) -> training.MemoryBaseline:
        seen("baseline")
        return baseline(device_bytes)

    def spy_train(*args: Any, **kwargs: Any) -> training.History:
        seen("train")
        history = train(*args, **kwargs)
        events.append("trained: " + ("with" if any(opt.state for opt in optimizers.live()) else "no") + " state")
        return history

    monkeypatch.setattr(training, "memory_baseline", spy_baseline)
    monkeypatch.setattr(training, "train", spy_train)
    monkeypatch.setattr(training_torch, "first_step_probe", spy_probe)
    return events


@pytest.mark.parametrize(
    ("suite", "params"),
    [("mnist", TINY), ("cifar10", TINY), pytest.param("resnet18", R18, marks=pytest.mark.slow)],
)
def test_the_memory_baseline_comes_before_any_optimizer_state(
    monkeypatch: pytest.MonkeyPatch, suite: str, params: dict[str, Any]
) -> None:
    """PyTorch makes optimizer state in the first step: it must land above the baseline (the Flax
    loop takes its baseline before its optimizer exists). The first-step probe (a model copy, its
    optimizer and gradients) runs after training, as Flax's does: before the baseline it would grow
    the CPU's resident set, which training then reuses unseen."""
    optimizers = _Optimizers(monkeypatch)
    events = _spy_baseline(monkeypatch, optimizers)
    _run(suite, params)
    assert events == [
        "baseline: 1 optimizer(s), 0 state entries",
        "train: 1 optimizer(s), 0 state entries",
        "trained: with state",
        "probe",
    ]
    assert len(optimizers.made) == 2  # the training optimizer and the probe's


def test_the_probe_after_training_starts_from_the_initial_weights(monkeypatch: pytest.MonkeyPatch) -> None:
    """Its loss before the step is the initial loss on the first batch (the initial-logits check's,
    computed before training), not the trained model's."""
    initial: list[float] = []
    check = training.initial_logits_check

    def spy(ctx: Context, logits: Any, loss: float) -> None:
        initial.append(loss)
        check(ctx, logits, loss)

    monkeypatch.setattr(training, "initial_logits_check", spy)
    ctx = _run("mnist", {**TINY, "lr": 0.1})
    before, after = next(c["value"] for c in ctx.checks if c["name"] == "first_step_loss")
    trained = next(m["samples"][0] for m in ctx.metrics if m["name"] == "train loss (last epoch)")
    assert before == pytest.approx(initial[0], rel=1e-6) and abs(trained - before) > 1e-3


def test_the_gpu_baseline_is_read_after_the_peak_reset(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda: calls.append("reset"))
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda: calls.append("read") or 7 << 20)
    base = training_torch.memory_baseline(_ctx("mlp", MLP, device_kind="gpu"))
    assert calls == ["reset", "read"] and base.device_bytes == 7 << 20
    calls.clear()
    assert training_torch.memory_baseline(_ctx("mlp", MLP)).device_bytes is None and calls == []


# ---------------------------------------------------------------------------------------------
# 2. cuDNN's algorithm search: on a GPU, from just before epoch 1, restored afterwards


def test_conv_search_is_on_for_a_gpu_and_none_on_the_cpu() -> None:
    assert training_torch.conv_search("gpu") is True
    assert training_torch.conv_search("cpu") is None


def test_the_search_is_switched_on_around_training_only_and_recorded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.backends.cudnn, "benchmark", False)
    ctx = _ctx("mlp", MLP, device_kind="gpu")
    with training_torch.conv_algorithm_search(ctx):
        assert torch.backends.cudnn.benchmark is True
    assert torch.backends.cudnn.benchmark is False
    assert ctx.training["fairness"]["conv_algorithm_search"] is True and ctx.training["cudnn_benchmark"] is True
    cpu = _ctx("mlp", MLP)
    with training_torch.conv_algorithm_search(cpu):
        assert torch.backends.cudnn.benchmark is False  # the CPU: left alone
    assert cpu.training["fairness"]["conv_algorithm_search"] is None and cpu.training["cudnn_benchmark"] is False


@pytest.mark.parametrize(("suite", "params"), [("mnist", TINY), pytest.param("resnet18", R18, marks=pytest.mark.slow)])
def test_the_training_loops_search_during_the_epochs_only(
    monkeypatch: pytest.MonkeyPatch, suite: str, params: dict[str, Any]
) -> None:
    """With the GPU's decision standing in (True), the search is on in every epoch and off again
    for the first-step probe after training (the initial-logits check before it never had it)."""
    monkeypatch.setattr(torch.backends.cudnn, "benchmark", False)
    monkeypatch.setattr(training_torch, "conv_search", lambda kind: True)
    seen: dict[str, list[bool]] = {"probe": [], "epoch": []}
    probe, train = training_torch.first_step_probe, training.train

    def spy_probe(*args: Any, **kwargs: Any) -> None:
        seen["probe"].append(bool(torch.backends.cudnn.benchmark))
        probe(*args, **kwargs)

    def spy_train(*args: Any, run_epoch: Callable[[int], Any], **kwargs: Any) -> training.History:
        def epoch(e: int) -> Any:
            seen["epoch"].append(bool(torch.backends.cudnn.benchmark))
            return run_epoch(e)

        return train(*args, run_epoch=epoch, **kwargs)

    monkeypatch.setattr(training_torch, "first_step_probe", spy_probe)  # resnet18 imports it when it runs
    monkeypatch.setattr(training, "train", spy_train)
    ctx = _run(suite, params)
    assert seen == {"probe": [False], "epoch": [True, True]}
    assert torch.backends.cudnn.benchmark is False
    assert ctx.training["fairness"]["conv_algorithm_search"] is True


# ---------------------------------------------------------------------------------------------
# 3. data=host: pinned buffers and non_blocking copies on a GPU


def test_host_copy_is_async_only_for_host_data_on_a_gpu() -> None:
    assert training_torch.host_copy("gpu", True) == "async"
    assert training_torch.host_copy("gpu", False) is None
    assert training_torch.host_copy("cpu", True) is None
    assert training_torch.host_copy("cpu", False) is None


class _Pinning:
    """torch.empty without pinning (no CUDA here) and Tensor.to, both recorded."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.empty: list[dict[str, Any]] = []
        self.to: list[dict[str, Any]] = []
        empty, to = torch.empty, torch.Tensor.to

        def fake_empty(*args: Any, **kwargs: Any) -> Any:
            self.empty.append(dict(kwargs))
            return empty(*args, **{k: v for k, v in kwargs.items() if k != "pin_memory"})

        def recorded_to(tensor: Any, *args: Any, **kwargs: Any) -> Any:
            self.to.append(dict(kwargs))
            return to(tensor, *args, **kwargs)

        monkeypatch.setattr(torch, "empty", fake_empty)
        monkeypatch.setattr(torch.Tensor, "to", recorded_to)


def test_a_pinned_batch_is_gathered_into_pinned_memory_and_copied_without_blocking(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    src = torch.arange(40, dtype=torch.uint8).reshape(10, 2, 2)
    idx = torch.tensor([7, 0, 3])
    pinning = _Pinning(monkeypatch)
    out = training_torch.host_batch(src, idx, torch.device("cpu"), pinned=True)
    assert torch.equal(out, src[idx]) and out.dtype == torch.uint8
    assert pinning.empty == [{"dtype": torch.uint8, "pin_memory": True}]
    assert pinning.to == [{"non_blocking": True}]
    pinning.empty.clear()
    pinning.to.clear()
    plain = training_torch.host_batch(src, idx, torch.device("cpu"), pinned=False)
    assert torch.equal(plain, src[idx]) and pinning.empty == [] and pinning.to == [{}]


def _spy_host_batches(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    pinned: list[bool] = []
    host_batch = training_torch.host_batch

    def spy(src: Any, idx: Any, dev: Any, pin: bool) -> Any:
        pinned.append(pin)
        return host_batch(src, idx, dev, pin)

    monkeypatch.setattr(training_torch, "host_batch", spy)
    return pinned


def test_the_loop_copies_host_batches_pinned_exactly_when_host_copy_says_async(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pinned = _spy_host_batches(monkeypatch)
    cpu = _run("cifar10", {**TINY, "data": "host"})  # x, y and the augmentation parameters
    assert pinned and not any(pinned) and cpu.training["fairness"]["host_copy"] is None
    pinned.clear()
    pinning = _Pinning(monkeypatch)
    monkeypatch.setattr(training_torch, "host_copy", lambda kind, host: "async" if host else None)  # as on a GPU
    gpu = _run("cifar10", {**TINY, "data": "host"})
    assert len(pinned) == 2 * 3 * 3 and all(pinned)  # 2 epochs x 3 batches x (x, y, aux)
    assert len([e for e in pinning.empty if e.get("pin_memory")]) == len(pinned)
    assert gpu.training["fairness"]["host_copy"] == "async"
    assert any("pinned" in n for n in gpu.notes)
    pinned.clear()
    _run("cifar10", TINY)  # data=device: nothing to copy
    assert pinned == []


def test_the_cuda_graph_variant_copies_its_host_batches_pinned(
    graphs: FakeCuda, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(training_torch, "host_copy", lambda kind, host: "async" if host else None)
    _Pinning(monkeypatch)
    pinned = _spy_host_batches(monkeypatch)
    ctx = _run("mlp", {**MLP, "variant": "cuda-graph", "data": "host"})
    batches = MLP["train_samples"] // MLP["batch_size"]
    # the static inputs' shapes, then every replay's inputs: (x, y) per batch
    assert len(pinned) == 2 * (1 + MLP["epochs"] * batches) and all(pinned)
    assert ctx.training["fairness"]["host_copy"] == "async"


# ---------------------------------------------------------------------------------------------
# 4. --precision bf16: bf16 activations under autocast, float32 master weights


def _spy_logits(monkeypatch: pytest.MonkeyPatch) -> list[torch.dtype]:
    """The dtype of the logits every loss is computed from (initial check, probe, epochs)."""
    seen: list[torch.dtype] = []
    loss = training_torch.cross_entropy

    def spy(logits: Any, labels: Any) -> Any:
        seen.append(logits.dtype)
        out = loss(logits, labels)
        assert out.dtype == torch.float32  # the loss itself stays float32
        return out

    monkeypatch.setattr(training_torch, "cross_entropy", spy)
    return seen


def _model_outputs(monkeypatch: pytest.MonkeyPatch, models: list[Any]) -> list[tuple[bool, torch.dtype]]:
    """(training mode, output dtype) of every forward pass of the models the suite builds."""
    seen: list[tuple[bool, torch.dtype]] = []
    run = training_torch.run

    def spy(ctx: Context, **kwargs: Any) -> None:
        model = kwargs["model"]
        models.append(model)
        model.register_forward_hook(lambda m, args, out: seen.append((m.training, out.dtype)))
        run(ctx, **kwargs)

    monkeypatch.setattr(training_torch, "run", spy)
    return seen


def test_bf16_trains_and_evaluates_in_bf16_with_float32_master_weights_and_float32_checks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    logits = _spy_logits(monkeypatch)
    models: list[Any] = []
    outputs = _model_outputs(monkeypatch, models)
    ctx = _run("mnist", TINY, precision="bf16")
    f32, bf16 = torch.float32, torch.bfloat16
    # the initial check, 2 epochs x 3 batches, then the probe (before and after its step): the
    # checks in float32 (the workload's definition), the training in bf16
    assert logits == [f32] + [bf16] * 6 + [f32] * 2
    assert {mode for mode, dtype in outputs if dtype == bf16} == {True, False}  # training and evaluation
    (model,) = models
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    assert ctx.training["fairness"]["compute_dtype"] == "bfloat16"
    # The checks are the float32 run's, bit for bit: bf16 changes the training, not the workload.
    plain = _run("mnist", TINY, precision="fp32")
    assert plain.training["fairness"]["compute_dtype"] == "float32"
    checks = ("initial_logits", "first_step_loss", "first_step_weights", "param_count")
    assert {c["name"]: c["value"] for c in ctx.checks if c["name"] in checks} == {
        c["name"]: c["value"] for c in plain.checks if c["name"] in checks
    }


def test_bf16_keeps_the_input_pipeline_in_float32(monkeypatch: pytest.MonkeyPatch) -> None:
    """cifar10's augmentation (a resize by einsum, which autocast would run in bf16) happens before
    the model, in float32, as it does in Flax."""
    seen: list[torch.dtype] = []
    einsum = torch.einsum

    def spy(*args: Any) -> Any:
        out = einsum(*args)
        seen.append(out.dtype)
        return out

    monkeypatch.setattr(torch, "einsum", spy)
    logits = _spy_logits(monkeypatch)
    _run("cifar10", TINY, precision="bf16")
    assert seen and set(seen) == {torch.float32} and logits[1:-2] and set(logits[1:-2]) == {torch.bfloat16}


def _compile_with_dynamo_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """torch.compile through TorchDynamo with the eager backend: the real tracing, no C++ compile."""
    compile_ = torch.compile
    monkeypatch.setattr(torch, "compile", lambda fn, **kw: compile_(fn, **{**kw, "backend": "eager"}))


def test_bf16_in_the_compiled_variant(monkeypatch: pytest.MonkeyPatch) -> None:
    _compile_with_dynamo_only(monkeypatch)
    logits = _spy_logits(monkeypatch)
    ctx = _run("mlp", {**MLP, "variant": "compiled"}, precision="bf16")
    assert logits == [torch.float32] + [torch.bfloat16] * (2 * 4) + [torch.float32] * 2  # checks in float32
    values = {m["name"]: m["samples"] for m in ctx.metrics}
    assert values["compilations (first epoch)"][0] >= 1 and values["compilations (later epochs)"] == [0]
    assert ctx.training["compilations"]["observable"] is True


def test_bf16_in_the_captured_cuda_graph_step(graphs: FakeCuda, monkeypatch: pytest.MonkeyPatch) -> None:
    """The autocast region is inside the captured step (so a replay runs bf16 kernels), without
    autocast's weight cache, as PyTorch asks of autocast under graph capture."""
    logits = _spy_logits(monkeypatch)
    made: list[bool] = []
    autocast = training_torch.autocast

    def spy_autocast(ctx: Context, *, cache: bool = True) -> Any:
        made.append(cache)
        return autocast(ctx, cache=cache)

    monkeypatch.setattr(training_torch, "autocast", spy_autocast)
    ctx = _run("mlp", {**MLP, "variant": "cuda-graph"}, precision="bf16")
    assert set(logits[1:-2]) == {torch.bfloat16} and made and not any(made)
    assert graphs.log.count("capture begins") == 1
    assert ctx.training["fairness"]["compute_dtype"] == "bfloat16"


@pytest.mark.slow  # bf16 convolutions on this CPU: about 10 s
def test_bf16_resnet18_computes_in_bf16(monkeypatch: pytest.MonkeyPatch) -> None:
    from suites.resnet18 import models_torch

    seen: list[tuple[bool, torch.dtype]] = []
    models: list[Any] = []

    class Spied(models_torch.ResNet18):  # type: ignore[misc]
        def forward(self, x: Any) -> Any:
            out = super().forward(x)
            seen.append((self.training, out.dtype))
            return out

    monkeypatch.setattr(models_torch, "ResNet18", lambda: models.append(Spied()) or models[-1])
    ctx = _run("resnet18", R18, precision="bf16")
    assert {mode for mode, d in seen if d == torch.bfloat16} == {True, False}  # training and evaluation
    assert {p.dtype for m in models for p in m.parameters()} == {torch.float32}
    assert ctx.training["fairness"] == {"host_copy": None, "compute_dtype": "bfloat16", "conv_algorithm_search": None}
    assert seen[-1] == (True, torch.float32)  # the last forward: the initial-logits check, in float32


# ---------------------------------------------------------------------------------------------
# 5. A compilation counter that cannot count says so (interface (c))


def test_the_counter_counts_after_its_canary_twice_in_one_process() -> None:
    """Dynamo caches by code object: a second counter's canary must compile anew, not hit the cache."""
    for _ in range(2):
        counter = training_torch.CompileCounter()
        assert counter.why is None and isinstance(counter(), int)
        assert "canary" in counter.how


def test_a_missing_dynamo_counter_is_not_observable(monkeypatch: pytest.MonkeyPatch) -> None:
    from torch._dynamo import utils

    monkeypatch.setattr(utils, "counters", {})  # a release that moved or renamed it
    counter = training_torch.CompileCounter()
    assert counter() is None and "does not exist" in str(counter.why)


def test_a_counter_the_canary_does_not_move_is_not_observable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch, "compile", lambda fn, **kw: fn)  # a "compile" that compiles nothing
    counter = training_torch.CompileCounter()
    assert counter() is None and "did not move" in str(counter.why)


def test_a_failing_canary_is_not_observable(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken() -> None:
        raise RuntimeError("no backend")

    monkeypatch.setattr(training_torch, "_canary_compile", broken)
    counter = training_torch.CompileCounter()
    assert counter() is None and "RuntimeError: no backend" in str(counter.why)


def test_the_eager_counter_is_zero_without_a_canary(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(training_torch, "_canary_compile", lambda: pytest.fail("eager compiles nothing"))
    counter = training_torch.CompileCounter(compiles=False)
    assert counter() == 0 and counter.why is None and "eager" in counter.how


def test_an_unobservable_counter_reaches_the_result_as_such(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch, "compile", lambda fn, **kw: fn)
    ctx = _run("mlp", {**MLP, "variant": "compiled"})
    record = ctx.training["compilations"]
    assert record["observable"] is False and "did not move" in record["why"]
    assert not {"compilations (first epoch)", "compilations (later epochs)"} & _metric_names(ctx)
    eager = _run("mlp", MLP)
    assert eager.training["compilations"] == {"observable": True, "how": training_torch.CompileCounter(False).how}
