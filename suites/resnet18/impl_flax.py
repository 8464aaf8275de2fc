"""ResNet18 in Flax NNX: one jitted train step (split/merge, donated state) called per batch.

The step follows runtime/training_jax.py's fast path (data on the device, the step gathers
its own batch) with a one-logit head and BatchNorm statistics carried in the state. Around it,
the measurements that answer seed 004: what the cold first epoch spends on compilation versus
compute, how long moving the data to the device takes, and the allocator's peak memory next to
what JAX's preallocation would have reserved.
"""

from __future__ import annotations

import time
from typing import Any

from suites.contract.inference import inferring
from suites.contract.ranks import data_parallel
from suites.resnet18 import common, infer_flax
from suites.runtime.context import Context, Readings


class CompileClock:
    """Intervals JAX spent tracing, lowering and compiling; nested ones are counted once.

    JAX's own timers are private jax.monitoring events (runtime/training_jax.py): a canary compilation
    at construction checks that all three still arrive. If one does not, the clock answers None
    (compilations and seconds alike) and `why` names the missing events: a missing timer would
    otherwise read as "no compilation" and move its seconds into the cold epoch's compute.
    """

    how = "XLA executables built, from jax.monitoring backend_compile_duration events (a persistent-cache hit counts)"

    def __init__(self) -> None:
        import jax

        from suites.runtime import training_jax

        # Read now, so a test can rename the events before construction.
        events = (training_jax.TRACE_EVENT, training_jax.LOWERING_EVENT, training_jax.BACKEND_COMPILE_EVENT)
        self.intervals: list[tuple[float, float]] = []
        self.compiles = 0
        seen: set[str] = set()

        def listen(event: str, duration: float, **kwargs: Any) -> None:
            seen.add(event)
            if event in events:
                end = time.perf_counter()
                self.intervals.append((end - duration, end))
                if event == events[-1]:
                    self.compiles += 1

        jax.monitoring.register_event_duration_secs_listener(listen)
        training_jax.compile_canary()
        self.why = training_jax.unseen_events(seen, events)
        self.intervals.clear()  # the canary is not the suite's
        self.compiles = 0

    def __call__(self) -> int | None:
        return None if self.why else self.compiles

    def seconds(self, start: int, stop: int | None = None) -> float | None:
        """Length of the union of intervals[start:stop]; None when the timers cannot be observed."""
        if self.why:
            return None
        total, reach = 0.0, float("-inf")
        for lo, hi in sorted(self.intervals[start:stop]):
            if hi <= reach:
                continue
            total += hi - max(lo, reach)
            reach = hi
        return total


def binary_loss(logits: Any, labels: Any) -> Any:
    """Mean sigmoid binary cross-entropy, in float32 whatever the logits' dtype (bfloat16 under
    `--precision bf16`, where PyTorch's autocast also runs the loss in float32)."""
    import jax.numpy as jnp
    import optax

    return jnp.mean(optax.sigmoid_binary_cross_entropy(logits.astype(jnp.float32), labels))


def run(ctx: Context) -> None:
    import jax
    import jax.numpy as jnp
    import numpy as np
    import optax
    from flax import nnx

    from suites.contract.datasets import batch_starts
    from suites.resnet18.models_flax import build, prepare, torch_name
    from suites.runtime import profiling, training
    from suites.runtime.training_jax import (
        PEAK_HOW,
        allocator_stats,
        compute_dtype,
        first_step_probe,
        float32_compute,
        initial_state,
        model_from,
        record_fairness,
        summary_rows,
    )

    p = ctx.params
    if inferring(p):
        infer_flax.run(ctx)
        return
    if data_parallel(p):
        _parallel(ctx)
        return
    clock = CompileClock()
    images, orders = common.load(ctx)
    batch, epochs = int(p["batch_size"]), int(p["epochs"])
    dev = ctx.device
    dtype = compute_dtype(ctx)
    ctx.training["data"] = "device"
    record_fairness(ctx, host_data=False)

    # Moving the data: the cold first copy, then repeated copies of the same arrays. The previous
    # copy is dropped before the next one, so the device never holds two copies of the dataset
    # (JAX cannot reset its peak counter: a second copy would stay in the peak for good).
    host = (images.train_x, images.train_y, images.test_x, images.test_y, orders)
    nbytes = sum(int(a.nbytes) for a in host)
    probes: list[Any] = []
    transfers: list[float] = []
    readings = Readings()
    arrays: Any = None
    for _ in range(3):
        arrays = None
        readings.start()  # outside the clock
        start = time.perf_counter()
        arrays = jax.device_put(host, dev)
        jax.block_until_ready(arrays)
        transfers.append(time.perf_counter() - start)
        readings.stop()
        probes.append(ctx.probe_escape())  # outside the clock
    assert arrays is not None
    train_x, train_y, test_x, test_y, orders_dev = arrays

    weights = common.init_weights(int(p["seed"]))
    model = build(int(p["seed"]), dtype, weights)
    n_params = int(sum(x.size for x in jax.tree.leaves(nnx.state(model, nnx.Param))))
    sgd = optax.sgd(p["lr"], momentum=common.SGD_MOMENTUM)
    tx = optax.adam(p["lr"]) if p["optimizer"] == "adam" else sgd

    model.train()
    initial = initial_state(model)  # for the first-step probe, run after training
    # The baseline before the optimiser exists: PyTorch creates its optimiser state inside epoch 1,
    # so here too it lands above the baseline, in the training peak.
    before = allocator_stats(dev, ctx.device_kind)
    baseline = training.memory_baseline(before[0] if before else None)
    optimizer = nnx.Optimizer(model, tx, wrt=nnx.Param)
    graphdef, state = nnx.split((model, optimizer))
    leaves, treedef = jax.tree.flatten(jax.device_put(state, dev))
    n = len(images.train_y)
    starts, tail = batch_starts(n, batch, bool(p["drop_last"]))
    if not starts:
        raise ValueError(f"batch_size {batch} is larger than the {n} training samples")

    def make_step(size: int) -> Any:
        def step(leaves: list[Any], totals: Any, xs: Any, ys: Any, order: Any, e: Any, start: Any) -> Any:
            idx = jax.lax.dynamic_slice(order, (e, start), (1, size))[0]
            xb, yb = prepare(xs[idx]), ys[idx].astype(jnp.float32)
            model, optimizer = nnx.merge(graphdef, jax.tree.unflatten(treedef, leaves))

            def loss_fn(m: Any) -> tuple[Any, Any]:
                logits = m(xb)
                return binary_loss(logits, yb), logits

            (loss, logits), grads = nnx.value_and_grad(loss_fn, has_aux=True)(model)
            with jax.named_scope("optimizer"):  # names its operations for a profile (metadata only)
                optimizer.update(model, grads)
            correct = jnp.sum((logits > 0).astype(jnp.float32) == yb).astype(jnp.float32)
            totals = totals + jnp.stack([loss * size, correct])
            return jax.tree.leaves(nnx.state((model, optimizer))), totals

        return jax.jit(step, donate_argnums=(0,))

    step_fn = make_step(batch)
    tail_fn = make_step(tail) if tail else None
    zeros = jax.device_put(jnp.zeros(2, jnp.float32), dev)
    used = n if tail else len(starts) * batch
    marks: list[tuple[int, int]] = []  # compile-interval indices at the start and end of each epoch's dispatch

    def run_epoch(e: int) -> Any:
        nonlocal leaves
        begin = len(clock.intervals)
        totals = zeros
        for start in starts:
            leaves, totals = step_fn(leaves, totals, train_x, train_y, orders_dev, e, start)
        if tail_fn is not None:
            leaves, totals = tail_fn(leaves, totals, train_x, train_y, orders_dev, e, len(starts) * batch)
        marks.append((begin, len(clock.intervals)))  # compilation happens while dispatching
        return leaves, totals

    def read(out: Any) -> tuple[float, float]:
        loss_sum, correct = (float(v) for v in jax.device_get(out[1]))
        return loss_sum / used, 100.0 * correct / used

    probe_model, _ = nnx.merge(graphdef, jax.tree.unflatten(treedef, leaves))
    probe_model.eval()
    eval_graph = nnx.split(probe_model)[0]

    @jax.jit
    def count_correct(state: Any, x: Any, y: Any) -> Any:
        logits = nnx.merge(eval_graph, state)(prepare(x))
        return jnp.sum((logits > 0) == (y > 0))

    m_test = len(images.test_y)
    eval_batch = max(batch, 1)

    def evaluate() -> float:
        current, _ = nnx.merge(graphdef, jax.tree.unflatten(treedef, leaves))
        current.eval()  # BatchNorm from its running statistics
        state = nnx.state(current)
        total = sum(
            count_correct(state, test_x[lo : lo + eval_batch], test_y[lo : lo + eval_batch])
            for lo in range(0, m_test, eval_batch)
        )
        return 100.0 * int(total) / m_test

    with jax.default_device(dev):
        history = training.train(
            ctx, epochs=epochs, run_epoch=run_epoch, read=read, samples_per_epoch=used, compilations=clock,
            evaluate=evaluate, target=training.target_of(ctx), curve=training.curve_of(ctx),
        )  # fmt: skip
    after = allocator_stats(dev, ctx.device_kind)
    training.record(ctx, history, flops_per_sample=common.flops_per_sample(int(p["image_size"])))
    common.record_transfer(ctx, transfers, nbytes, probes, readings)
    if history.steady:
        common.record_cold_split(
            ctx, history.first.seconds, clock.seconds(*marks[0]), [e.seconds for e in history.steady], transfers[0],
            why=clock.why or "",
        )  # fmt: skip

    training.record_peak_memory(
        ctx,
        baseline=baseline,
        device_peak=after[1] if after else None,
        how=PEAK_HOW,
        peak_before=before[1] if before else None,
    )
    # The first optimiser step on the first batch, from the initial weights (BatchNorm on batch
    # statistics, as in training), now that the peak has been read.
    first_idx = np.asarray(orders[0, :batch])
    x_first, y_first = train_x[first_idx], train_y[first_idx].astype(jnp.float32)

    def snapshot(m: Any) -> dict[str, Any]:
        flat, _ = jax.tree_util.tree_flatten_with_path(nnx.state(m, nnx.Param))
        return {torch_name(path): np.asarray(leaf) for path, leaf in flat}

    start = model_from(graphdef, jax.tree.unflatten(treedef, leaves), initial, dev)
    with jax.default_device(dev), float32_compute(start):  # the checks in float32 whatever --precision
        first_step_probe(
            ctx,
            model=start,
            tx=tx,
            loss_of=lambda m: binary_loss(m(prepare(x_first)), y_first),
            snapshot=snapshot,
            order=[name for name, _ in common.param_shapes()],
            lr=float(p["lr"]),
            train_mode=True,
        )
    stats = dev.memory_stats() if ctx.device_kind == "gpu" else None
    if stats:
        # bytes_limit is the BFC allocator's ceiling, MEM_FRACTION (default .75) x the card's
        # memory: exactly what preallocation would grab at the first operation, and what
        # nvidia-smi would then show whatever the model needs.
        common.record_memory_extras(
            ctx,
            reserve_bytes=int(stats.get("bytes_limit", 0)) or None,
            label="preallocation would reserve",
            description="memory_stats()['bytes_limit']: what XLA_PYTHON_CLIENT_PREALLOCATE=true reserves up front",
        )

    accuracy = history.evaluations[-1].accuracy if history.evaluations else evaluate()
    training.record_accuracy(ctx, accuracy)
    ctx.check("param_count", n_params)

    # The same model, numerically: logits of the untrained network (shared initial weights, batch
    # statistics as in training) on the first test images, compared with the other framework.
    fresh = build(int(p["seed"]), jnp.float32, weights)  # float32 whatever --precision (float32_compute)
    fresh.train()
    probe = jax.device_put(common.probe_batch(images), dev)
    logits = nnx.jit(lambda m, x: m(prepare(x)))(fresh, probe)  # nnx.jit: BatchNorm updates its statistics
    ctx.check("initial_logits", [float(v) for v in np.asarray(logits, dtype=np.float32)])

    if p["artifacts"]:
        model, _ = nnx.merge(graphdef, jax.tree.unflatten(treedef, leaves))
        training.write_artifact(ctx, "model_summary.txt", training.model_summary(common.TITLE, summary_rows(model)))

    # Last: the step donates the state it is given, so nothing may read `leaves` after it.
    profiled = [leaves, zeros]

    def at(start: int) -> Any:
        def call() -> Any:
            profiled[0], profiled[1] = step_fn(profiled[0], profiled[1], train_x, train_y, orders_dev, 0, start)
            return profiled

        return call

    def programs() -> list[str]:
        return [step_fn.lower(leaves, zeros, train_x, train_y, orders_dev, 0, starts[0]).compile().as_text()]

    calls = [at(start) for start in starts]
    ctx.profile("epoch", profiling.cycle(calls), steps_per_sample=len(starts) + (1 if tail else 0), programs=programs)


def _parallel(ctx: Context) -> None:
    """One program over the device mesh: BatchNorm's statistics are the global batch's by construction."""
    import jax.numpy as jnp
    import optax

    from suites.resnet18.models_flax import build, prepare
    from suites.resnet18.spec import PARALLEL_CURVE_STEPS
    from suites.runtime import data_parallel as dp
    from suites.runtime import dp_jax

    p = ctx.params
    images, _ = common.load(ctx)
    weights = common.init_weights(int(p["seed"]))

    def make() -> Any:
        model = build(int(p["seed"]), jnp.float32, weights)
        model.train()  # BatchNorm on batch statistics, as the suite trains
        return model

    def loss(m: Any, x: Any, y: Any) -> Any:
        return binary_loss(m(prepare(x)), y.astype(jnp.float32))

    tx = optax.adam(p["lr"]) if p["optimizer"] == "adam" else optax.sgd(p["lr"], momentum=common.SGD_MOMENTUM)
    recipe = dp.Recipe(
        build=make,
        loss=loss,
        optimizer=lambda _: tx,
        lr=lambda s: float(p["lr"]),
        rows=dp.image_rows(images.train_x, images.train_y, int(p["seed"])),
        flops_per_row=common.flops_per_sample(int(p["image_size"])),
        curve_steps=PARALLEL_CURVE_STEPS,
    )
    dp.run(ctx, recipe, dp_jax.JaxLoop)
    ctx.note("data-parallel BatchNorm: statistics over the global batch (one program over the sharded batch)")
