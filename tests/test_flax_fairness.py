"""The Flax side of issue 24 on the CPU: what a GPU run would record, with stand-ins only where a GPU is needed.

Memory like for like (the baseline before the optimiser state exists, the first-step probe after the
peak is read, an unresettable peak that did not grow reported as not observable), compilation
counters that fail loudly when JAX's private events go missing, XLA autotuning and the host copy
recorded as fairness settings, and `--precision bf16` computing in bfloat16 with float32 parameters.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterator
from typing import Any

import pytest

from suites.contract.registry import all_suites
from suites.runtime import training, training_jax
from suites.runtime.context import Context

MIB = 1 << 20
TINY_MLP: dict[str, Any] = {"train_samples": 64, "test_samples": 32, "epochs": 2, "batch_size": 32, "curve": False}


def _ctx(suite: str = "mlp", params: dict[str, Any] | None = None, **kw: Any) -> Context:
    import jax

    spec = all_suites()[suite]
    kw.setdefault("device_kind", "cpu")
    return Context(spec, "flax", spec.resolve(params or {}), repeat=1, warmup=0, device=jax.devices("cpu")[0],
                   sync=jax.block_until_ready, **kw)  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Item 4: XLA autotuning and the host copy, recorded.


@pytest.mark.parametrize(
    ("flags", "searches"),
    [
        ("", True),  # XLA's default level autotunes
        ("--xla_gpu_autotune_level=0", False),
        ("--xla_gpu_autotune_level=4", True),
        ("--xla_gpu_autotune_level=1", True),
        ("--xla_dump_to=/tmp/x --xla_gpu_autotune_level=0 --xla_gpu_enable_triton_gemm=false", False),
        ("--xla_gpu_autotune_level=0 --xla_gpu_autotune_level=2", True),  # the last one wins
        ("--xla_gpu_autotune_level=2 --xla_gpu_autotune_level=0", False),
        ("--xla_gpu_autotune_level_extra=0", True),  # another flag's name, not this one
    ],
)
def test_xla_autotuning_is_on_unless_xla_flags_set_level_0(flags: str, searches: bool) -> None:
    assert training_jax.xla_autotuning(flags) is searches


def test_fairness_settings_on_a_cpu_are_none() -> None:
    ctx = _ctx()
    training_jax.record_fairness(ctx, host_data=True)
    assert ctx.training["fairness"] == {"conv_algorithm_search": None, "host_copy": None, "compute_dtype": "float32"}


@pytest.mark.parametrize(
    ("flags", "host_data", "expected"),
    [
        ("", True, {"conv_algorithm_search": True, "host_copy": "async"}),
        ("--xla_gpu_autotune_level=0", False, {"conv_algorithm_search": False, "host_copy": None}),
    ],
)
def test_fairness_settings_on_a_gpu(
    monkeypatch: pytest.MonkeyPatch, flags: str, host_data: bool, expected: dict[str, Any]
) -> None:
    """Only the device kind is a stand-in: the settings are read from XLA_FLAGS and the data pipeline."""
    monkeypatch.setenv("XLA_FLAGS", flags)
    ctx = _ctx(device_kind="gpu", precision="bf16")
    ctx.training["fairness"] = {"set_by_someone_else": 1}  # kept: the record is merged, not replaced
    training_jax.record_fairness(ctx, host_data=host_data)
    assert ctx.training["fairness"] == {**expected, "compute_dtype": "bfloat16", "set_by_someone_else": 1}


# ---------------------------------------------------------------------------------------------
# Item 3: compilation counters that cannot observe compilations say so.


def test_the_compile_counter_counts_after_its_canary() -> None:
    import jax
    import numpy as np

    counter = training_jax.CompileCounter()
    assert counter() == 0 and counter.why is None  # the canary's own compilation is not counted
    jax.jit(lambda x: x - 3.0)(np.float32(1.0)).block_until_ready()
    assert counter() == 1


def test_a_compile_counter_whose_event_never_arrives_answers_none_and_why(monkeypatch: pytest.MonkeyPatch) -> None:
    import jax
    import numpy as np

    monkeypatch.setattr(training_jax, "BACKEND_COMPILE_EVENT", "/jax/core/compile/renamed_in_a_later_release")
    counter = training_jax.CompileCounter()
    jax.jit(lambda x: x - 4.0)(np.float32(1.0)).block_until_ready()
    assert counter() is None
    assert counter.why is not None and "renamed_in_a_later_release" in counter.why


def test_an_unobservable_counter_leaves_no_compilation_rows_in_the_result(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(training_jax, "BACKEND_COMPILE_EVENT", "/jax/never/emitted")
    counter = training_jax.CompileCounter()
    ctx = _ctx()
    clock = iter(range(1000))
    monkeypatch.setattr(time, "perf_counter", lambda: float(next(clock)))
    history = training.train(ctx, epochs=2, run_epoch=lambda e: e, read=lambda out: (1.0, 50.0), samples_per_epoch=8,
                             compilations=counter)  # fmt: skip
    training.record(ctx, history)
    assert ctx.training["compilations"]["observable"] is False
    assert "/jax/never/emitted" in ctx.training["compilations"]["why"]
    assert not {m["name"] for m in ctx.metrics} & {"compilations (first epoch)", "compilations (later epochs)"}


def _compile_clock() -> Any:
    from suites.resnet18.impl_flax import CompileClock

    return CompileClock()


def test_the_compile_clock_times_compilations_after_its_canary() -> None:
    import jax
    import numpy as np

    clock = _compile_clock()
    assert clock() == 0 and clock.intervals == [] and clock.why is None
    jax.jit(lambda x: x * 5.0)(np.float32(1.0)).block_until_ready()
    seconds = clock.seconds(0)
    assert clock() == 1 and seconds is not None and seconds > 0


@pytest.mark.parametrize("event", ["TRACE_EVENT", "LOWERING_EVENT", "BACKEND_COMPILE_EVENT"])
def test_a_compile_clock_missing_any_timer_reports_not_observable(monkeypatch: pytest.MonkeyPatch, event: str) -> None:
    monkeypatch.setattr(training_jax, event, f"/jax/core/compile/gone_{event.lower()}")
    clock = _compile_clock()
    assert clock() is None and clock.seconds(0) is None
    assert f"gone_{event.lower()}" in clock.why


def test_the_cold_split_without_a_compilation_time_has_no_compilation_row() -> None:
    from suites.resnet18 import common

    ctx = _ctx("resnet18")
    common.record_cold_split(ctx, 3.0, None, [1.0, 1.0], 0.1, why="no backend_compile_duration event")
    names = {m["name"] for m in ctx.metrics}
    assert "cold epoch: compilation" not in names and "cold epoch: compute" not in names  # never a 0
    assert "cold epoch / warm epoch" in names
    assert ctx.training["cold_split"] == {"compilation": "not observable", "why": "no backend_compile_duration event"}
    observed = _ctx("resnet18")
    common.record_cold_split(observed, 3.0, 2.0, [1.0, 1.0], 0.1)
    values = {m["name"]: m["samples"][0] for m in observed.metrics}
    assert values["cold epoch: compilation"] == 2.0 and values["cold epoch: compute"] == 1.0


# ---------------------------------------------------------------------------------------------
# Item 2: the memory baseline before the optimiser state, the probe after the peak.


class ScriptedDevice:
    """A stand-in for a GPU's jax Device: memory_stats() answers the scripted dicts in turn."""

    def __init__(self, stats: list[dict[str, int]]) -> None:
        self.stats: Iterator[dict[str, int]] = iter(stats)

    def memory_stats(self) -> dict[str, int]:
        return next(self.stats)


def test_allocator_stats_reads_a_gpu_and_leaves_the_cpu_to_the_host() -> None:
    device = ScriptedDevice([{"bytes_in_use": 5, "peak_bytes_in_use": 9, "bytes_limit": 100}])
    assert training_jax.allocator_stats(device, "gpu") == (5, 9)
    assert training_jax.allocator_stats(device, "cpu") is None  # not even asked
    assert training_jax.allocator_stats(ScriptedDevice([{}]), "gpu") is None  # a backend keeping no statistics
    assert training_jax.allocator_stats(ScriptedDevice([{"bytes_in_use": 5}]), "gpu") is None  # no peak kept


TINY_RESNET: dict[str, Any] = {"dataset": "synthetic", "train_samples": 16, "test_samples": 8, "epochs": 2, "batch_size": 16,
               "image_size": 16, "curve": False}  # fmt: skip


def _spied_run(
    monkeypatch: pytest.MonkeyPatch, stats: list[dict[str, int]], suite: str = "mlp"
) -> tuple[Context, list[str]]:
    """The real flax job on the CPU, its allocator a scripted GPU's, every memory step logged."""
    import importlib

    from flax import nnx

    impl = importlib.import_module(f"suites.{suite}.impl_flax")

    events: list[str] = []
    device, read = ScriptedDevice(stats), training_jax.allocator_stats

    def allocator_stats(dev: Any, kind: str) -> tuple[int, int] | None:
        events.append("stats")
        return read(device, "gpu")

    monkeypatch.setattr(training_jax, "allocator_stats", allocator_stats)

    def spy(name: str, fn: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            events.append(name)
            return fn(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(training, "memory_baseline", spy("baseline", training.memory_baseline))
    monkeypatch.setattr(training, "record_peak_memory", spy("peak", training.record_peak_memory))
    monkeypatch.setattr(training_jax, "first_step_probe", spy("probe", training_jax.first_step_probe))

    class SpyOptimizer(nnx.Optimizer):  # type: ignore[misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            events.append("optimizer")
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(nnx, "Optimizer", SpyOptimizer)
    ctx = _ctx(suite, TINY_RESNET if suite == "resnet18" else TINY_MLP)
    impl.run(ctx)
    return ctx, events


@pytest.mark.parametrize("suite", ["mlp", pytest.param("resnet18", marks=pytest.mark.slow)])
def test_the_baseline_comes_before_the_optimiser_and_the_probe_after_the_peak(
    monkeypatch: pytest.MonkeyPatch, suite: str
) -> None:
    ctx, events = _spied_run(
        monkeypatch,
        [
            {"bytes_in_use": 100 * MIB, "peak_bytes_in_use": 300 * MIB},  # at the baseline
            {"bytes_in_use": 110 * MIB, "peak_bytes_in_use": 500 * MIB},  # after training
        ],
        suite,
    )
    # The optimiser state is created above the baseline (as PyTorch creates it inside epoch 1); the
    # first-step probe (its model copy, its own optimiser) only once the peak has been read.
    assert events[:3] == ["stats", "baseline", "optimizer"], events
    assert events.index("stats", 1) < events.index("peak") < events.index("probe") < len(events) - 1
    assert events[events.index("probe") + 1] == "optimizer"  # the probe's own, after the peak
    values = {m["name"]: m["samples"][0] for m in ctx.metrics}
    assert values["peak memory above baseline"] == 400.0 and values["memory before training"] == 100.0
    assert ctx.training["memory"]["peak"] == "observed"
    assert {c["name"] for c in ctx.checks} >= {"first_step_loss", "first_step_weights", "initial_logits"}


def test_a_gpu_peak_that_did_not_grow_during_training_is_not_observable(monkeypatch: pytest.MonkeyPatch) -> None:
    ctx, _ = _spied_run(
        monkeypatch,
        [
            {"bytes_in_use": 100 * MIB, "peak_bytes_in_use": 900 * MIB},  # a data copy peaked before training
            {"bytes_in_use": 110 * MIB, "peak_bytes_in_use": 900 * MIB},
        ],
    )
    names = {m["name"] for m in ctx.metrics}
    assert "peak memory above baseline" not in names and "memory before training" in names
    assert ctx.training["memory"]["peak"] == "not observable" and "900.0 MiB" in ctx.training["memory"]["why"]


def test_the_first_step_checks_come_from_the_initial_weights_after_training() -> None:
    """The probe runs after training, from the host copy of the initial state: its checks are those
    of the initial weights, exactly what the probe computed before training began."""
    import jax
    import optax
    from flax import nnx

    from suites.mlp.common import LAYERS

    class MLP(nnx.Module):
        def __init__(self) -> None:
            self.hidden, self.out = nnx.Linear(2, 10, rngs=nnx.Rngs(0)), nnx.Linear(10, 2, rngs=nnx.Rngs(1))

        def __call__(self, v: Any) -> Any:
            return self.out(nnx.relu(self.hidden(v)))

    names = [layer.name for layer in LAYERS]
    order = [f"{n}.{part}" for n in names for part in ("kernel", "bias")]
    x = jax.numpy.ones((4, 2)) * jax.numpy.arange(4.0)[:, None]
    y = jax.numpy.asarray([0, 1, 0, 1])

    def checks(model: Any) -> list[Any]:
        ctx = _ctx()
        training_jax.first_step_probe(
            ctx, model=model, tx=optax.adam(0.1), loss_of=lambda m: training_jax.cross_entropy(m(x), y),
            snapshot=lambda m: training_jax._params_by_name(m, names), order=order, lr=0.1,
        )  # fmt: skip
        return ctx.checks

    model = MLP()
    expected = checks(model)
    initial = training_jax.initial_state(model)
    optimizer = nnx.Optimizer(model, optax.adam(0.1), wrt=nnx.Param)
    graphdef, state = nnx.split((model, optimizer))
    for _ in range(3):  # "training" moves the weights away from the initial ones
        m, o = nnx.merge(graphdef, state)
        o.update(m, nnx.grad(lambda m: training_jax.cross_entropy(m(x), y))(m))
        state = nnx.state((m, o))
    assert checks(nnx.merge(graphdef, state)[0]) != expected  # the trained model's checks differ
    assert checks(training_jax.model_from(graphdef, state, initial, jax.devices("cpu")[0])) == expected


# ---------------------------------------------------------------------------------------------
# Item 5: real bf16.


def _conv_and_dot_operands(jaxpr: Any) -> list[tuple[str, list[str]]]:
    """(primitive, operand dtypes) of every convolution and matmul, nested jaxprs included."""
    found: list[tuple[str, list[str]]] = []
    for eqn in jaxpr.eqns:
        if eqn.primitive.name in ("conv_general_dilated", "dot_general"):
            found.append((eqn.primitive.name, [str(v.aval.dtype) for v in eqn.invars]))
        for param in eqn.params.values():
            for sub in param if isinstance(param, (list, tuple)) else [param]:
                inner = getattr(sub, "jaxpr", sub)
                if hasattr(inner, "eqns"):
                    found += _conv_and_dot_operands(inner)
    return found


def _forward_ops(model: Any, x: Any) -> list[tuple[str, list[str]]]:
    import jax
    from flax import nnx

    graphdef, state = nnx.split(model)
    closed = jax.make_jaxpr(lambda s, v: nnx.merge(graphdef, s)(v))(state, x)
    return _conv_and_dot_operands(closed.jaxpr)


def _param_dtypes(model: Any) -> set[str]:
    import jax
    from flax import nnx

    return {str(leaf.dtype) for leaf in jax.tree.leaves(nnx.state(model, nnx.Param))}


@pytest.mark.parametrize("suite", ["mnist", "cifar10", "resnet18"])
def test_bf16_models_compute_in_bfloat16_with_float32_parameters(suite: str) -> None:
    """Tracing only (no compilation): every convolution and matmul of the forward pass takes
    bfloat16 operands, the parameters stay float32; float32 mode stays float32 throughout."""
    import importlib

    import jax.numpy as jnp
    from flax import nnx

    models = importlib.import_module(f"suites.{suite}.models_flax")
    shape = {"mnist": (2, 28, 28, 1), "cifar10": (2, 32, 32, 3), "resnet18": (2, 16, 16, 3)}[suite]
    x = jnp.zeros(shape, jnp.float32)

    def build(dtype: Any) -> Any:
        return models.ResNet18(nnx.Rngs(0), dtype) if suite == "resnet18" else models.CNN(nnx.Rngs(0), dtype=dtype)

    for dtype, name in ((jnp.bfloat16, "bfloat16"), (jnp.float32, "float32")):
        model = nnx.eval_shape(functools.partial(build, dtype))  # abstract: nothing initialised or compiled
        ops = _forward_ops(model, x)
        assert {op for op, _ in ops} >= {"conv_general_dilated", "dot_general"}, ops
        assert all(dtypes == [name, name] for _, dtypes in ops), ops
        assert _param_dtypes(model) == {"float32"}


def test_a_bf16_training_run_steps_in_bfloat16_with_float32_master_weights(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """The real mlp flax job on the CPU under --precision bf16: its compiled train step multiplies
    bfloat16 operands, its parameters and optimiser state are float32, its checks are computed in
    float32 (the same values as a float32 run's) and the layers compute in bf16 again afterwards."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from flax import nnx

    from suites.mlp import impl_flax

    optimisers: list[tuple[Any, Any]] = []

    class SpyOptimizer(nnx.Optimizer):  # type: ignore[misc]
        def __init__(self, model: Any, *args: Any, **kwargs: Any) -> None:
            super().__init__(model, *args, **kwargs)
            optimisers.append((model, self))

    monkeypatch.setattr(nnx, "Optimizer", SpyOptimizer)
    ctx = _ctx("mlp", {**TINY_MLP, "artifacts": True}, precision="bf16", artifacts_dir=tmp_path)
    impl_flax.run(ctx)
    assert ctx.training["fairness"]["compute_dtype"] == "bfloat16"
    step = (tmp_path / "train_step.jaxpr.txt").read_text()
    dots = [line for line in step.splitlines() if "dot_general" in line]
    assert dots and all("bf16[" in line for line in dots), dots
    model, optimiser = optimisers[0]  # the training pair (the probe's comes after training)
    assert _param_dtypes(model) == {"float32"}
    moments = [leaf for leaf in jax.tree.leaves(nnx.state(optimiser, nnx.OptState)) if leaf.ndim]  # not the counts
    assert moments and {str(leaf.dtype) for leaf in moments} == {"float32"}  # Adam's, float32 like the weights
    assert all(np.isfinite(m["samples"]).all() for m in ctx.metrics)
    # The checks are the float32 run's, bit for bit: bf16 changes the training, not the workload's
    # definition the checks compare (float32_compute).
    plain = _ctx("mlp", TINY_MLP, precision="fp32")
    impl_flax.run(plain)
    names = ("initial_logits", "first_step_loss", "first_step_weights", "param_count")
    assert {c["name"]: c["value"] for c in ctx.checks if c["name"] in names} == {
        c["name"]: c["value"] for c in plain.checks if c["name"] in names
    }
    assert all(m.dtype == jnp.bfloat16 for _, m in nnx.iter_modules(model) if isinstance(m, nnx.Linear))


def test_the_losses_run_in_float32_on_bfloat16_logits() -> None:
    """As PyTorch's autocast runs its losses in float32: log-softmax in bfloat16 would round the loss."""
    import jax.numpy as jnp
    import numpy as np

    from suites.resnet18.impl_flax import binary_loss

    logits = jnp.asarray(np.linspace(-3.0, 3.0, 30).reshape(3, 10), jnp.bfloat16)
    labels = jnp.asarray([1, 4, 9])
    loss = training_jax.cross_entropy(logits, labels)
    assert loss.dtype == jnp.float32
    assert float(loss) == float(training_jax.cross_entropy(logits.astype(jnp.float32), labels))
    binary = binary_loss(logits[:, 0], jnp.asarray([1.0, 0.0, 1.0]))
    assert binary.dtype == jnp.float32


class Built(Exception):
    """Stops a job once its model exists."""


@pytest.mark.parametrize(
    ("suite", "precision", "dtype"),
    [(suite, "bf16", "bfloat16") for suite in ("mlp", "mnist", "cifar10", "resnet18")] + [("mlp", "fp32", "float32")],
)
def test_every_flax_training_suite_builds_its_model_in_the_jobs_compute_dtype(
    monkeypatch: pytest.MonkeyPatch, suite: str, precision: str, dtype: str
) -> None:
    import importlib

    import numpy as np
    from flax import nnx

    built: list[Any] = []

    def stop_at_training(ctx: Context, *, model: Any, **kwargs: Any) -> None:
        built.append(model)
        raise Built

    class StopOptimizer(nnx.Optimizer):  # type: ignore[misc]
        def __init__(self, model: Any, *args: Any, **kwargs: Any) -> None:
            built.append(model)
            raise Built

    monkeypatch.setattr(training_jax, "run", stop_at_training)
    monkeypatch.setattr(nnx, "Optimizer", StopOptimizer)  # resnet18 has a loop of its own
    tiny: dict[str, Any] = {"mlp": TINY_MLP, "resnet18": TINY_RESNET}.get(suite, {**TINY_MLP, "dataset": "synthetic"})
    with pytest.raises(Built):
        importlib.import_module(f"suites.{suite}.impl_flax").run(_ctx(suite, tiny, precision=precision))
    layers = [m for _, m in nnx.iter_modules(built[0]) if isinstance(m, (nnx.Conv, nnx.Linear, nnx.BatchNorm))]
    assert layers and {np.dtype(m.dtype).name for m in layers} == {dtype}
    assert {np.dtype(m.param_dtype).name for m in layers} == {"float32"}
