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

import itertools
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from suites.contract.datasets import batch_starts
from suites.runtime import profiling, training
from suites.runtime.context import Context

EVAL_BATCH = 1000


# JAX's own trace / lower / compile timers (jax._src.dispatch). Private names: a release may rename
# or drop them, which every listener below detects with a canary instead of counting zero.
TRACE_EVENT = "/jax/core/compile/jaxpr_trace_duration"
LOWERING_EVENT = "/jax/core/compile/jaxpr_to_mlir_module_duration"
BACKEND_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"

_canaries = itertools.count(1)


def compile_canary() -> None:
    """jit-compile (and run) a program never compiled before in this process.

    A fresh function object is traced again, and its own constant makes it a new program too,
    so no cache in front of the compiler can answer for it.
    """
    import jax
    import numpy as np

    offset = float(next(_canaries))

    def canary(x: Any) -> Any:
        return x * 2.0 + offset

    jax.block_until_ready(jax.jit(canary)(np.float32(0.0)))


def unseen_events(seen: set[str], needed: Sequence[str]) -> str | None:
    """Why a listener cannot observe compilations: the events the canary's compilation did not emit."""
    import jax

    missing = [name for name in needed if name not in seen]
    if not missing:
        return None
    return (
        f"jax {jax.__version__} emitted no {', '.join(missing)} event while a fresh function compiled "
        "(private jax.monitoring names, renamed or dropped in this release)"
    )


class CompileCounter:
    """Counts XLA compilations (jitted functions, and each primitive when running eagerly).

    Built on a private jax.monitoring event: a canary compilation at construction checks that the
    event still arrives; if not, __call__ answers None and `why` says which event is missing.
    """

    how = f"XLA executables built, from jax.monitoring {BACKEND_COMPILE_EVENT} events (a persistent-cache hit counts)"

    def __init__(self) -> None:
        import jax

        self.count = 0
        seen: set[str] = set()
        backend = BACKEND_COMPILE_EVENT  # read now, so a test can rename the event before construction

        def listen(event: str, duration: float, **kwargs: Any) -> None:
            seen.add(event)
            if event == backend:
                self.count += 1

        jax.monitoring.register_event_duration_secs_listener(listen)
        compile_canary()
        self.why = unseen_events(seen, (backend,))
        self.count = 0  # the canary is not the suite's

    def __call__(self) -> int | None:
        return None if self.why else self.count


def jax_variant(variant: str) -> str:
    if variant == "cuda-graph":
        from suites.contract.errors import Skip

        # XLA already compiles the whole step into one executable (and on GPUs may launch it
        # through CUDA graphs itself): there is no separate Flax variant to compare.
        raise Skip("variant=cuda-graph captures a PyTorch step as a CUDA graph; Flax's jit step is already one "
                   "compiled program (compare it with variant=default)")  # fmt: skip
    return {"default": "jit", "compiled": "jit", "eager": "eager", "scan": "scan"}[variant]


DATA_NOTES = {
    "device": "data=device: dataset, sample orders and augmentation parameters resident on the device; "
    "a step gathers its own batch",
    "host": "data=host: each step gathers its batch from NumPy arrays on the host and copies it to the device "
    "(jax.device_put, asynchronous)",
}

VARIANT_NOTES = {
    "jit": "flax variant jit: jax.jit of one train step (split/merge; state donated on GPUs), data on the device",
    "scan": "flax variant scan: jax.jit of a whole epoch as lax.scan over the batches, data on the device",
    "eager": "flax variant eager: the same train step without jit (op-by-op dispatch)",
}


@dataclass
class DeviceData:
    """The run's arrays. `aux`: per-epoch, per-sample augmentation parameters or None.

    `host` False (data=device): everything on the device; aux flattened to (epochs * n, k), row
    e * n + i for sample i in epoch e. `host` True (data=host): the training arrays, orders and
    aux (epochs, n, k) stay NumPy arrays on the host and every step gathers and copies its batch;
    the test split is on the device either way (evaluation is not what data=host measures).
    """

    train_x: Any
    train_y: Any
    test_x: Any
    test_y: Any
    orders: Any  # (epochs, n) int32
    aux: Any = None
    host: bool = False


def to_device(ctx: Context, train_x: Any, train_y: Any, test_x: Any, test_y: Any, orders: Any, aux: Any) -> DeviceData:
    import jax

    def put(a: Any) -> Any:
        return None if a is None else jax.device_put(a, ctx.device)

    if ctx.params.get("data", "device") == "host":
        data = DeviceData(train_x, train_y, put(test_x), put(test_y), orders, aux, host=True)
    else:
        flat_aux = None if aux is None else aux.reshape(-1, aux.shape[-1])
        data = DeviceData(put(train_x), put(train_y), put(test_x), put(test_y), put(orders), put(flat_aux))
    jax.block_until_ready([a for a in vars(data).values() if isinstance(a, jax.Array)])
    return data


def cross_entropy(logits: Any, labels: Any) -> Any:
    """Mean negative log-likelihood of log-softmax(logits): the seed's log-softmax + NLL.

    In float32 whatever the logits' dtype: bfloat16 logits (`--precision bf16`) are cast first, as
    PyTorch's autocast runs its losses in float32.
    """
    import jax
    import jax.numpy as jnp

    logp = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
    return -jnp.mean(jnp.take_along_axis(logp, labels[:, None], axis=-1))


def compute_dtype(ctx: Context) -> Any:
    """The dtype the layers compute in: bfloat16 operands under `--precision bf16` (float32 parameters
    and accumulation, like PyTorch's autocast), float32 otherwise."""
    import jax.numpy as jnp

    return jnp.bfloat16 if ctx.precision == "bf16" else jnp.float32


AUTOTUNE_FLAG = "xla_gpu_autotune_level"


def xla_autotuning(xla_flags: str) -> bool:
    """Whether XLA:GPU autotunes (times candidate convolution / GEMM algorithms while compiling):
    on unless XLA_FLAGS sets --xla_gpu_autotune_level=0 (the last setting wins, as XLA parses them)."""
    level: str | None = None
    for token in xla_flags.split():
        name, _, value = token.lstrip("-").partition("=")
        if name == AUTOTUNE_FLAG:
            level = value
    if level is None:
        return True  # XLA's default level autotunes
    try:
        return int(level) != 0
    except ValueError:
        return True  # XLA refuses such a flag when it starts: this job would not have got here


def record_fairness(ctx: Context, *, host_data: bool) -> None:
    """The result's `training.fairness` (runtime/training.py): XLA:GPU picks convolution algorithms
    by timing them (PyTorch's counterpart is cudnn.benchmark); XLA:CPU searches none."""
    search = xla_autotuning(os.environ.get("XLA_FLAGS", "")) if ctx.device_kind == "gpu" else None
    training.record_fairness(
        ctx, conv_algorithm_search=search, host_copy=training.host_copy(ctx.device_kind, host_data)
    )


def allocator_stats(device: Any, device_kind: str) -> tuple[int, int] | None:
    """(bytes in use, peak bytes in use) of a GPU's allocator; None on the CPU, where the host's
    resident set is measured instead, or where the backend keeps no statistics."""
    if device_kind != "gpu":
        return None
    stats = device.memory_stats() or {}
    in_use, peak = stats.get("bytes_in_use"), stats.get("peak_bytes_in_use")
    if not isinstance(in_use, int) or not isinstance(peak, int):
        return None
    return in_use, peak


@contextmanager
def float32_compute(model: Any) -> Iterator[Any]:
    """`model` computing in float32 while the block runs (every layer's `dtype`, restored after).

    The checks are the workload's definition (same model, weights, optimiser and data), so both
    frameworks compute them in float32 whatever `--precision`: in bf16 two frameworks agree only
    to bf16 rounding, which would blunt every check to "grossly different". The bf16 arithmetic
    itself is shown by the precision probe and by training.
    """
    import jax.numpy as jnp
    from flax import nnx

    # nnx.iter_modules in newer Flax releases (0.12.8 has both); Module.iter_modules in older ones.
    walk = nnx.iter_modules(model) if hasattr(nnx, "iter_modules") else model.iter_modules()
    layers = [m for _, m in walk if getattr(m, "dtype", None) is not None]
    saved = [m.dtype for m in layers]
    for m in layers:
        m.dtype = jnp.float32
    try:
        yield model
    finally:
        for m, dtype in zip(layers, saved, strict=True):
            m.dtype = dtype


def initial_state(model: Any) -> Any:
    """A host (NumPy) copy of the model's weights and statistics: the first-step probe runs from it
    after training, so its copy and step never raise the device's peak before the baseline."""
    import jax
    from flax import nnx

    return jax.device_get(nnx.state(model, nnx.Any(nnx.Param, nnx.BatchStat)))


def model_from(graphdef: Any, state: Any, initial: Any, device: Any) -> Any:
    """The trained (model, optimiser) pair's model with `initial` put back: the initial model again,
    in arrays of its own (the training state is left as it is)."""
    import jax
    from flax import nnx

    model, _ = nnx.merge(graphdef, state)
    nnx.update(model, jax.device_put(initial, device))
    return model


def param_count(model: Any) -> int:
    import jax
    from flax import nnx

    return int(sum(x.size for x in jax.tree.leaves(nnx.state(model, nnx.Param))))


def load_weights(model: Any, weights: dict[str, tuple[Any, Any]]) -> None:
    """Shared NumPy initial weights (training.initial_weights) into the NNX layers of the same names."""
    import jax.numpy as jnp

    for name, (kernel, bias) in weights.items():
        layer = getattr(model, name)
        if tuple(layer.kernel[...].shape) != kernel.shape:
            raise ValueError(f"layer {name}: kernel {layer.kernel[...].shape} but the shared init is {kernel.shape}")
        layer.kernel[...] = jnp.asarray(kernel)
        layer.bias[...] = jnp.asarray(bias)


def summary_rows(model: Any) -> list[tuple[str, tuple[int, ...]]]:
    import jax
    from flax import nnx

    flat, _ = jax.tree_util.tree_flatten_with_path(nnx.state(model, nnx.Param))
    rows = []
    for path, leaf in flat:
        name = ".".join(str(getattr(k, "key", getattr(k, "name", k))) for k in path)
        rows.append((name, tuple(int(d) for d in leaf.shape)))
    return rows


def _params_by_name(model: Any, names: Sequence[str]) -> dict[str, Any]:
    """Kernel and bias of each named layer, as NumPy arrays (layer.kernel / layer.bias)."""
    import numpy as np

    out = {}
    for name in names:
        layer = getattr(model, name)
        out[f"{name}.kernel"] = np.asarray(layer.kernel[...])
        out[f"{name}.bias"] = np.asarray(layer.bias[...])
    return out


def first_step_probe(
    ctx: Context,
    *,
    model: Any,
    tx: Any,
    loss_of: Callable[[Any], Any],
    snapshot: Callable[[Any], dict[str, Any]],
    order: Sequence[str],
    lr: float,
    train_mode: bool = False,
) -> None:
    """One optimiser step (the suite's own `tx`) on a copy of the model: the first-step checks.

    The copy leaves the training model at its initial weights; eval mode (no dropout) unless
    `train_mode` (BatchNorm on batch statistics, as resnet18 trains).
    """
    from flax import nnx

    probe = nnx.clone(model)  # its own Variables: merge(split(model)) would share them with the model
    probe.train() if train_mode else probe.eval()
    optimizer = nnx.Optimizer(probe, tx, wrt=nnx.Param)
    before = snapshot(probe)

    # Compiled (two small programs): op-by-op dispatch compiles every primitive and took 25 s
    # for the mnist CNN on the development CPU, against a few seconds here.
    def step(m: Any, opt: Any) -> tuple[Any, Any]:
        loss, grads = nnx.value_and_grad(loss_of)(m)
        opt.update(m, grads)
        return loss, loss_of(m)

    loss, loss_after = nnx.jit(step)(probe, optimizer)
    after = snapshot(probe)
    loss_after = float(loss_after)
    training.first_step_checks(
        ctx, loss_before=float(loss), loss_after=loss_after, before=before, after=after, order=order, lr=lr
    )


PEAK_HOW = (
    "jax Device.memory_stats() peak_bytes_in_use minus bytes_in_use before the optimiser state was created, "
    "XLA_PYTHON_CLIENT_PREALLOCATE=false"
)


def run(
    ctx: Context,
    *,
    model: Any,
    tx: Any,
    prepare: Callable[[Any, Any], Any],
    data: DeviceData,
    recipe: training.Recipe,
) -> None:
    """Train, evaluate and record every training metric and check for one flax job."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from flax import nnx

    from suites.contract.errors import Skip

    mode = jax_variant(recipe.variant)
    if mode == "scan" and data.host:
        raise Skip("variant=scan runs a whole epoch on the device; data=host feeds batches from Python per step")
    ctx.note(VARIANT_NOTES[mode])
    ctx.note(DATA_NOTES["host" if data.host else "device"])
    ctx.training["data"] = "host" if data.host else "device"
    if mode == "scan" and ctx.device_kind == "cpu":
        ctx.note(
            "XLA:CPU runs convolutions inside a while loop without its fast path (jax-ml/jax#12868): "
            "on a CPU the scan variant of a CNN is far slower than the per-step jit (35x for mnist here)"
        )
    counter = CompileCounter()
    record_fairness(ctx, host_data=data.host)
    n_params = param_count(model)
    load_weights(model, training.initial_weights(recipe.layers, recipe.seed))
    first_idx = np.asarray(data.orders[0, : recipe.batch])  # the first batch, wherever the data lives
    x_first, y_first = jax.device_put((data.train_x[first_idx], data.train_y[first_idx]), ctx.device)
    with jax.default_device(ctx.device):
        model.eval()  # dropout off: the initial loss is a deterministic function of the weights
        with float32_compute(model):  # the checks in float32 whatever --precision (see float32_compute)
            logits = model(prepare(x_first, None)).astype(jnp.float32)
        loss = float(cross_entropy(logits, y_first))
        training.initial_logits_check(ctx, jax.device_get(logits[: training.PROBE_SAMPLES]).tolist(), loss)
        model.train()
    initial = initial_state(model)
    # The baseline before the optimiser exists: PyTorch creates its optimiser state inside epoch 1,
    # so here too it lands above the baseline, in the training peak.
    before = allocator_stats(ctx.device, ctx.device_kind)
    baseline = training.memory_baseline(before[0] if before else None)
    optimizer = nnx.Optimizer(model, tx, wrt=nnx.Param)
    graphdef, state = nnx.split((model, optimizer))
    leaves, treedef = jax.tree.flatten(state)  # a flat list: cheapest pytree to pass per call
    # Committed to the device like the step's outputs: otherwise call 2 sees a different
    # placement than call 1 and compiles the step a second time.
    leaves = jax.device_put(leaves, ctx.device)
    n = int(data.train_y.shape[0])
    starts, tail = batch_starts(n, recipe.batch, recipe.drop_last)
    if not starts:
        raise ValueError(f"batch_size {recipe.batch} is larger than the {n} training samples")

    def train_on(leaves: list[Any], totals: Any, xb: Any, yb: Any, ab: Any, size: int) -> tuple[Any, Any]:
        model, optimizer = nnx.merge(graphdef, jax.tree.unflatten(treedef, leaves))

        def loss_fn(m: Any) -> tuple[Any, Any]:
            logits = m(prepare(xb, ab))
            return cross_entropy(logits, yb), logits

        (loss, logits), grads = nnx.value_and_grad(loss_fn, has_aux=True)(model)
        with jax.named_scope("optimizer"):  # names its operations for a profile (metadata only)
            optimizer.update(model, grads)
        correct = jnp.sum(jnp.argmax(logits, axis=-1) == yb).astype(jnp.float32)
        totals = totals + jnp.stack([loss * size, correct])
        return jax.tree.leaves(nnx.state((model, optimizer))), totals

    def make_step(size: int) -> Callable[..., Any]:
        def step(leaves: list[Any], totals: Any, x_all: Any, y_all: Any, orders: Any, aux: Any, e: Any, start: Any):  # type: ignore[no-untyped-def]
            idx = jax.lax.dynamic_slice(orders, (e, start), (1, size))[0]
            ab = None if aux is None else aux[e * n + idx]
            return train_on(leaves, totals, x_all[idx], y_all[idx], ab, size)

        return step

    def make_host_step(size: int) -> Callable[..., Any]:
        def step(leaves: list[Any], totals: Any, xb: Any, yb: Any, ab: Any):  # type: ignore[no-untyped-def]
            return train_on(leaves, totals, xb, yb, ab, size)

        return step

    full_step, tail_step = make_step(recipe.batch), make_step(tail) if tail else None
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

    def compiled(fn: Any) -> Any:
        return fn if mode == "eager" or fn is None else jax.jit(fn, donate_argnums=donate)

    if data.host:
        step_fn, tail_fn = compiled(make_host_step(recipe.batch)), compiled(make_host_step(tail) if tail else None)
        epoch_fn = None
    else:
        step_fn, tail_fn = compiled(full_step), compiled(tail_step)
        epoch_fn = jax.jit(scan_epoch, donate_argnums=donate) if mode == "scan" else None

    zeros = jax.device_put(jnp.zeros(2, jnp.float32), ctx.device)  # made before the clock: not a compile
    args = (data.train_x, data.train_y, data.orders, data.aux)
    used = n if tail else len(starts) * recipe.batch
    spans = [(s, recipe.batch) for s in starts] + ([(len(starts) * recipe.batch, tail)] if tail else [])

    def host_batch(e: int, start: int, size: int) -> tuple[Any, Any, Any]:
        """data=host: gather one batch from the NumPy arrays and copy it to the device (asynchronously)."""
        idx = data.orders[e, start : start + size]
        ab = None if data.aux is None else data.aux[e, idx]
        return jax.device_put((data.train_x[idx], data.train_y[idx], ab), ctx.device)  # type: ignore[no-any-return]

    def run_epoch(e: int) -> Any:
        nonlocal leaves
        totals = zeros
        if data.host:
            for (start, size), fn in zip(spans, [step_fn] * len(starts) + [tail_fn], strict=False):
                leaves, totals = fn(leaves, totals, *host_batch(e, start, size))
            return leaves, totals
        if epoch_fn is not None:
            leaves, totals = epoch_fn(leaves, totals, *args, e)
        else:
            for start in starts:
                leaves, totals = step_fn(leaves, totals, *args, e, start)
        if tail_fn is not None:
            leaves, totals = tail_fn(leaves, totals, *args, e, len(starts) * recipe.batch)
        return leaves, totals

    def read(out: Any) -> tuple[float, float]:
        loss_sum, correct = (float(v) for v in jax.device_get(out[1]))
        return loss_sum / used, 100.0 * correct / used

    # Evaluation (after training, and after every epoch with target_accuracy): dropout off, the
    # correct counts summed on the device and read once.
    eval_model, _ = nnx.merge(graphdef, jax.tree.unflatten(treedef, leaves))
    eval_model.eval()
    eval_graph = nnx.split(eval_model)[0]

    def count_correct(state: Any, x: Any, y: Any) -> Any:
        m = nnx.merge(eval_graph, state)
        return jnp.sum(jnp.argmax(m(prepare(x, None)), axis=-1) == y)

    counted = count_correct if mode == "eager" else jax.jit(count_correct)
    m_test = int(data.test_y.shape[0])

    def evaluate() -> float:
        current, _ = nnx.merge(graphdef, jax.tree.unflatten(treedef, leaves))
        current.eval()
        state = nnx.state(current)
        total = sum(
            counted(state, data.test_x[lo : lo + EVAL_BATCH], data.test_y[lo : lo + EVAL_BATCH])
            for lo in range(0, m_test, EVAL_BATCH)
        )
        return 100.0 * int(total) / m_test

    target = training.target_of(ctx)
    with jax.default_device(ctx.device):
        history = training.train(
            ctx, epochs=recipe.epochs, run_epoch=run_epoch, read=read, samples_per_epoch=used, compilations=counter,
            evaluate=evaluate, target=target, curve=training.curve_of(ctx),
        )  # fmt: skip
    after = allocator_stats(ctx.device, ctx.device_kind)
    training.record(ctx, history, flops_per_sample=recipe.flops_per_sample, variant=mode)
    training.record_peak_memory(
        ctx,
        baseline=baseline,
        device_peak=after[1] if after else None,
        how=PEAK_HOW,
        peak_before=before[1] if before else None,
    )
    # The first-step checks, from the initial weights, now that the peak has been read.
    names = [layer.name for layer in recipe.layers]
    with jax.default_device(ctx.device):
        start = model_from(graphdef, jax.tree.unflatten(treedef, leaves), initial, ctx.device)
        with float32_compute(start):
            first_step_probe(
                ctx,
                model=start,
                tx=tx,
                loss_of=lambda m: cross_entropy(m(prepare(x_first, None)), y_first),
                snapshot=lambda m: _params_by_name(m, names),
                order=[f"{n}.{part}" for n in names for part in ("kernel", "bias")],
                lr=recipe.lr,
            )
    accuracy = history.evaluations[-1].accuracy if history.evaluations else evaluate()
    training.record_accuracy(ctx, accuracy)
    ctx.check("param_count", n_params)

    if recipe.artifacts:
        model, optimizer = nnx.merge(graphdef, jax.tree.unflatten(treedef, leaves))
        training.write_artifact(ctx, "model_summary.txt", training.model_summary(recipe.title, summary_rows(model)))
        if not data.host:
            probe = (jax.tree.leaves(nnx.state((model, optimizer))), zeros, *args, 0, 0)
            training.write_artifact(ctx, "train_step.jaxpr.txt", str(jax.make_jaxpr(full_step)(*probe)))
            lowered = jax.jit(full_step).lower(*probe)
            training.write_artifact(ctx, "train_step.stablehlo.txt", lowered.as_text())
            training.write_artifact(ctx, "train_step.hlo.txt", lowered.compile().as_text())
    # Last: on a GPU the step donates the state it is given, so nothing may read `leaves` after it.
    _profile(ctx, mode, step_fn, leaves, zeros, data, args, starts, recipe.batch, len(spans), host_batch)


def _profile(
    ctx: Context,
    mode: str,
    step_fn: Any,
    leaves: list[Any],
    zeros: Any,
    data: DeviceData,
    args: tuple[Any, ...],
    starts: Sequence[int],
    batch: int,
    per_epoch: int,
    host_batch: Callable[[int, int, int], tuple[Any, Any, Any]],
) -> None:
    """`--profile`: steps of the epoch's own jitted step, on copies of the state (the recorded training
    is not touched); every full batch of epoch 1 in turn."""
    if mode == "scan":
        ctx.profile("epoch", None, steps_per_sample=per_epoch, unavailable="variant=scan runs a whole epoch as one "
                    "program, with no step of its own: profile variant=jit")  # fmt: skip
        return
    state = [leaves, zeros]

    def at(start: int) -> Callable[[], Any]:
        def call() -> Any:
            batch_args = host_batch(0, start, batch) if data.host else (*args, 0, start)
            state[0], state[1] = step_fn(state[0], state[1], *batch_args)
            return state

        return call

    def programs() -> list[str]:
        if mode == "eager":  # op by op: no program of its own
            return []
        batch_args = host_batch(0, starts[0], batch) if data.host else (*args, 0, starts[0])
        return [step_fn.lower(leaves, zeros, *batch_args).compile().as_text()]

    calls = [at(start) for start in starts]
    ctx.profile("epoch", profiling.cycle(calls), steps_per_sample=per_epoch, programs=programs)
