"""Flax NNX training loop shared by the training suites (imported only inside a flax job).

Fast path, following Flax's performance guide: the model and optimiser are split once into a
graph definition and a flat list of arrays, and a pure train step (merge, forward, backward,
update, split) is compiled with `jax.jit` (state donated on GPUs), so a step costs one dispatch
and no Python graph traversal. The whole dataset, the per-epoch sample orders and any augmentation
parameters live on the device; the step gathers its own batch, so nothing crosses to the host
inside an epoch.

Variants: `jit` (one compiled step, called once per batch), `scan` (a whole epoch in one
compiled `lax.scan`), `eager` (the same step without jit: op-by-op dispatch). A last partial
batch has another shape, so it compiles once more -- counted, like the seed's cache size of 2.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from suites.runtime import training
from suites.runtime.context import Context
from suites.runtime.datasets import batch_starts

EVAL_BATCH = 1000


class CompileCounter:
    """Counts XLA compilations (jitted functions, and each primitive when running eagerly)."""

    def __init__(self) -> None:
        import jax

        self.count = 0

        def listen(event: str, duration: float, **kwargs: Any) -> None:
            if event == "/jax/core/compile/backend_compile_duration":
                self.count += 1

        jax.monitoring.register_event_duration_secs_listener(listen)

    def __call__(self) -> int:
        return self.count


def jax_variant(variant: str) -> str:
    return {"default": "jit", "compiled": "jit", "eager": "eager", "scan": "scan"}[variant]


VARIANT_NOTES = {
    "jit": "flax variant jit: jax.jit of one train step (split/merge; state donated on GPUs), data on the device",
    "scan": "flax variant scan: jax.jit of a whole epoch as lax.scan over the batches, data on the device",
    "eager": "flax variant eager: the same train step without jit (op-by-op dispatch)",
}


@dataclass
class DeviceData:
    """Arrays already on the device. `aux`: per-epoch, per-sample augmentation parameters or None."""

    train_x: Any
    train_y: Any
    test_x: Any
    test_y: Any
    orders: Any  # (epochs, n) int32
    aux: Any = None  # (epochs * n, k) float32, row e * n + i belongs to sample i in epoch e


def to_device(ctx: Context, train_x: Any, train_y: Any, test_x: Any, test_y: Any, orders: Any, aux: Any) -> DeviceData:
    import jax

    def put(a: Any) -> Any:
        return None if a is None else jax.device_put(a, ctx.device)

    flat_aux = None if aux is None else aux.reshape(-1, aux.shape[-1])
    data = DeviceData(put(train_x), put(train_y), put(test_x), put(test_y), put(orders), put(flat_aux))
    jax.block_until_ready([a for a in vars(data).values() if a is not None])
    return data


def cross_entropy(logits: Any, labels: Any) -> Any:
    """Mean negative log-likelihood of log-softmax(logits): the seed's log-softmax + NLL."""
    import jax
    import jax.numpy as jnp

    logp = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.mean(jnp.take_along_axis(logp, labels[:, None], axis=-1))


def param_count(model: Any) -> int:
    import jax
    from flax import nnx

    return int(sum(x.size for x in jax.tree.leaves(nnx.state(model, nnx.Param))))


def load_weights(model: Any, weights: dict[str, tuple[Any, Any]]) -> None:
    """Shared NumPy initial weights (training.initial_weights) into the NNX layers of the same names."""
    import jax.numpy as jnp

    for name, (kernel, bias) in weights.items():
        layer = getattr(model, name)
        if tuple(layer.kernel.value.shape) != kernel.shape:
            raise ValueError(f"layer {name}: kernel {layer.kernel.value.shape} but the shared init is {kernel.shape}")
        layer.kernel.value = jnp.asarray(kernel)
        layer.bias.value = jnp.asarray(bias)


def summary_rows(model: Any) -> list[tuple[str, tuple[int, ...]]]:
    import jax
    from flax import nnx

    flat, _ = jax.tree_util.tree_flatten_with_path(nnx.state(model, nnx.Param))
    rows = []
    for path, leaf in flat:
        name = ".".join(str(getattr(k, "key", getattr(k, "name", k))) for k in path)
        rows.append((name, tuple(int(d) for d in leaf.shape)))
    return rows


def run(
    ctx: Context,
    *,
    model: Any,
    tx: Any,
    prepare: Callable[[Any, Any], Any],
    data: DeviceData,
    layers: Sequence[training.Layer],
    seed: int,
    batch: int,
    drop_last: bool,
    epochs: int,
    variant: str,
    artifacts: bool,
    flops_per_sample: float | None,
    title: str,
) -> None:
    """Train, evaluate and record every training metric and check for one flax job."""
    import jax
    import jax.numpy as jnp
    from flax import nnx

    mode = jax_variant(variant)
    ctx.note(VARIANT_NOTES[mode])
    if mode == "scan" and ctx.device_kind == "cpu":
        ctx.note(
            "XLA:CPU runs convolutions inside a while loop without its fast path (jax-ml/jax#12868): "
            "on a CPU the scan variant of a CNN is far slower than the per-step jit (35x for mnist here)"
        )
    counter = CompileCounter()
    n_params = param_count(model)
    load_weights(model, training.initial_weights(layers, seed))
    with jax.default_device(ctx.device):
        model.eval()  # dropout off: the initial loss is a deterministic function of the weights
        first = data.orders[0, :batch]
        logits = model(prepare(data.train_x[first], None))
        loss = float(cross_entropy(logits, data.train_y[first]))
        training.initial_logits_check(ctx, jax.device_get(logits[: training.PROBE_SAMPLES]).tolist(), loss)
        model.train()
    optimizer = nnx.Optimizer(model, tx, wrt=nnx.Param)
    graphdef, state = nnx.split((model, optimizer))
    leaves, treedef = jax.tree.flatten(state)  # a flat list: cheapest pytree to pass per call
    # Committed to the device like the step's outputs: otherwise call 2 sees a different
    # placement than call 1 and compiles the step a second time.
    leaves = jax.device_put(leaves, ctx.device)
    n = int(data.train_y.shape[0])
    starts, tail = batch_starts(n, batch, drop_last)
    if not starts:
        raise ValueError(f"batch_size {batch} is larger than the {n} training samples")

    def make_step(size: int) -> Callable[..., Any]:
        def step(leaves: list[Any], totals: Any, x_all: Any, y_all: Any, orders: Any, aux: Any, e: Any, start: Any):  # type: ignore[no-untyped-def]
            idx = jax.lax.dynamic_slice(orders, (e, start), (1, size))[0]
            xb, yb = x_all[idx], y_all[idx]
            ab = None if aux is None else aux[e * n + idx]
            model, optimizer = nnx.merge(graphdef, jax.tree.unflatten(treedef, leaves))

            def loss_fn(m: Any) -> tuple[Any, Any]:
                logits = m(prepare(xb, ab))
                return cross_entropy(logits, yb), logits

            (loss, logits), grads = nnx.value_and_grad(loss_fn, has_aux=True)(model)
            optimizer.update(model, grads)
            correct = jnp.sum(jnp.argmax(logits, axis=-1) == yb).astype(jnp.float32)
            totals = totals + jnp.stack([loss * size, correct])
            return jax.tree.leaves(nnx.state((model, optimizer))), totals

        return step

    full_step, tail_step = make_step(batch), make_step(tail) if tail else None
    starts_arr = jnp.asarray(starts, dtype=jnp.int32)

    def scan_epoch(leaves: list[Any], totals: Any, x_all: Any, y_all: Any, orders: Any, aux: Any, e: Any):  # type: ignore[no-untyped-def]
        def body(carry: Any, start: Any) -> tuple[Any, None]:
            return full_step(*carry, x_all, y_all, orders, aux, e, start), None

        (leaves, totals), _ = jax.lax.scan(body, (leaves, totals), starts_arr)
        return leaves, totals

    # Donating the state lets XLA update parameters in place: on a GPU that saves a copy of the
    # model and optimiser state. On XLA:CPU it measured 2-3 % slower for the mnist step (in-process
    # A/B, 14 interleaved rounds), so the CPU keeps separate output buffers.
    donate = (0,) if ctx.device_kind == "gpu" else ()
    if mode == "eager":
        step_fn, tail_fn, epoch_fn = full_step, tail_step, None
    else:
        step_fn = jax.jit(full_step, donate_argnums=donate)
        tail_fn = jax.jit(tail_step, donate_argnums=donate) if tail_step else None
        epoch_fn = jax.jit(scan_epoch, donate_argnums=donate) if mode == "scan" else None

    zeros = jax.device_put(jnp.zeros(2, jnp.float32), ctx.device)  # made before the clock: not a compile
    args = (data.train_x, data.train_y, data.orders, data.aux)
    used = n if tail else len(starts) * batch

    def run_epoch(e: int) -> Any:
        nonlocal leaves
        totals = zeros
        if epoch_fn is not None:
            leaves, totals = epoch_fn(leaves, totals, *args, e)
        else:
            for start in starts:
                leaves, totals = step_fn(leaves, totals, *args, e, start)
        if tail_fn is not None:
            leaves, totals = tail_fn(leaves, totals, *args, e, len(starts) * batch)
        return leaves, totals

    def read(out: Any) -> tuple[float, float]:
        loss_sum, correct = (float(v) for v in jax.device_get(out[1]))
        return loss_sum / used, 100.0 * correct / used

    host_reset = training.reset_host_peak()
    with jax.default_device(ctx.device):
        history = training.train(
            ctx, epochs=epochs, run_epoch=run_epoch, read=read, samples_per_epoch=used, compilations=counter
        )
    training.record(ctx, history, flops_per_sample=flops_per_sample)
    stats = ctx.device.memory_stats() if ctx.device_kind == "gpu" else None
    training.record_peak_memory(
        ctx,
        device_bytes=int(stats["peak_bytes_in_use"]) if stats else None,
        host_reset=host_reset,
        how="jax Device.memory_stats() peak_bytes_in_use, XLA_PYTHON_CLIENT_PREALLOCATE=false",
    )

    model, optimizer = nnx.merge(graphdef, jax.tree.unflatten(treedef, leaves))
    model.eval()  # dropout off
    eval_graph, eval_state = nnx.split(model)

    def count_correct(state: Any, x: Any, y: Any) -> Any:
        m = nnx.merge(eval_graph, state)
        return jnp.sum(jnp.argmax(m(prepare(x, None)), axis=-1) == y)

    counted = count_correct if mode == "eager" else jax.jit(count_correct)
    m_test = int(data.test_y.shape[0])
    correct = sum(
        int(counted(eval_state, data.test_x[lo : lo + EVAL_BATCH], data.test_y[lo : lo + EVAL_BATCH]))
        for lo in range(0, m_test, EVAL_BATCH)
    )
    training.record_accuracy(ctx, 100.0 * correct / m_test)
    ctx.check("param_count", n_params)

    if artifacts:
        training.write_artifact(ctx, "model_summary.txt", training.model_summary(title, summary_rows(model)))
        probe = (jax.tree.leaves(nnx.state((model, optimizer))), zeros, *args, 0, 0)
        training.write_artifact(ctx, "train_step.jaxpr.txt", str(jax.make_jaxpr(full_step)(*probe)))
        lowered = jax.jit(full_step).lower(*probe)
        training.write_artifact(ctx, "train_step.stablehlo.txt", lowered.as_text())
        training.write_artifact(ctx, "train_step.hlo.txt", lowered.compile().as_text())
