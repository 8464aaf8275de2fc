from __future__ import annotations

import time
from typing import Any

from suites.contract.inference import inferring
from suites.contract.ranks import data_parallel
from suites.runtime.context import Context


def run(ctx: Context) -> None:
    import jax
    import jax.numpy as jnp
    import numpy as np
    import optax
    from flax import nnx

    from suites.gpt import common
    from suites.gpt.models_flax import GPT, export, load
    from suites.runtime import profiling, training, training_jax

    cfg = common.config(ctx)
    if inferring(ctx.params):
        from suites.gpt import serve_flax

        serve_flax.run(ctx, cfg)
        return
    if data_parallel(ctx.params):
        _parallel(ctx, cfg)
        return
    ctx.note("flax variant jit: jax.jit of one train step (split/merge; state donated on GPUs), batches gathered "
             "on the device")  # fmt: skip
    text = common.load(ctx, cfg)
    dev = ctx.device
    train_tokens, val_tokens, offsets, val_offsets = jax.device_put(
        (text.train.astype(np.int32), text.test.astype(np.int32), common.offsets(cfg, len(text.train)),
         common.val_offsets(cfg, len(text.test))), dev,
    )  # fmt: skip
    window = jnp.arange(cfg.block_size + 1)
    lrs = jnp.asarray(common.schedule(cfg), jnp.float32)
    weights = common.initial_weights(cfg)
    counter = training_jax.CompileCounter()
    training_jax.record_fairness(ctx, host_data=False)

    def learning_rate(count: Any) -> Any:
        return lrs[jnp.minimum(count, len(lrs) - 1)]

    def transform() -> Any:
        return adamw(cfg, learning_rate)

    def batch(tokens: Any, starts: Any) -> tuple[Any, Any]:
        rows = tokens[starts[:, None] + window]  # (batch, block_size + 1): inputs and next-byte targets
        return rows[:, :-1], rows[:, 1:]

    def loss_of(m: Any, xb: Any, yb: Any) -> Any:
        return optax.softmax_cross_entropy_with_integer_labels(m(xb).astype(jnp.float32), yb).mean()

    def stepper(model: GPT) -> tuple[Any, list[Any], Any]:
        """The jitted step of `model` and a fresh AdamW: (step, state leaves, graph) for split/merge."""
        graphdef, state = nnx.split((model, nnx.Optimizer(model, transform(), wrt=nnx.Param)))
        leaves, treedef = jax.tree.flatten(state)

        def step(leaves: list[Any], total: Any, tokens: Any, offsets: Any, e: Any, j: Any) -> Any:
            m, opt = nnx.merge(graphdef, jax.tree.unflatten(treedef, leaves))
            loss, grads = nnx.value_and_grad(loss_of)(m, *batch(tokens, offsets[e, j]))
            with jax.named_scope("optimizer"):  # names its operations for a profile (metadata only)
                opt.update(m, grads)
            return jax.tree.leaves(nnx.state((m, opt))), total + loss, loss

        donate = (0,) if ctx.device_kind == "gpu" else ()  # in place on a GPU (as runtime/training_jax.py)
        return jax.jit(step, donate_argnums=donate), jax.device_put(leaves, dev), (graphdef, treedef)

    def model_of(leaves: list[Any], graph: Any) -> Any:
        return nnx.merge(graph[0], jax.tree.unflatten(graph[1], leaves))[0]

    model = GPT(cfg, nnx.Rngs(params=cfg.seed, dropout=cfg.seed + 1), dtype=training_jax.compute_dtype(ctx))
    load(model, weights)
    n_params = training_jax.param_count(model)
    before = training_jax.allocator_stats(dev, ctx.device_kind)
    baseline = training.memory_baseline(before[0] if before else None)
    step, leaves, graph = stepper(model)
    zero = jax.device_put(jnp.zeros((), jnp.float32), dev)  # made before the clock: not a compile
    attention = _attention_kernel(ctx, cfg, step, (leaves, zero, train_tokens, offsets, 0, 0))
    ctx.training["attention"] = attention
    ctx.training["data"] = "device"  # every window is gathered on the device from the resident bytes
    ctx.note(f"attention: {attention}")
    first_step: list[float] = []

    def run_interval(e: int) -> Any:
        nonlocal leaves
        total = zero
        began = time.perf_counter()
        for j in range(cfg.steps):
            leaves, total, loss = step(leaves, total, train_tokens, offsets, e, j)
            if e == 0 and j == 0:  # the first step alone: trace and compile (inside interval 1's clock)
                ctx.sync(loss)
                first_step.append(time.perf_counter() - began)
        return leaves, total

    def val_sum(leaves: list[Any], starts: Any) -> Any:
        m = model_of(leaves, graph)
        m.eval()  # dropout off
        return loss_of(m, *batch(val_tokens, starts)) * starts.shape[0]

    val_jit = jax.jit(val_sum)

    def evaluate() -> float:
        chunks = [val_offsets[lo : lo + cfg.batch] for lo in range(0, int(val_offsets.shape[0]), cfg.batch)]
        return float(sum(val_jit(leaves, c) for c in chunks)) / int(val_offsets.shape[0])

    with jax.default_device(dev):
        history = common.train(ctx, cfg, run_interval=run_interval, read=lambda out: float(out[1]) / cfg.steps,
                               compilations=counter, evaluate=evaluate)  # fmt: skip
    after_stats = training_jax.allocator_stats(dev, ctx.device_kind)
    common.record(ctx, cfg, history, first_step=first_step[0], variant="jit")
    training.record_peak_memory(
        ctx,
        baseline=baseline,
        device_peak=after_stats[1] if after_stats else None,
        how=training_jax.PEAK_HOW,
        peak_before=before[1] if before else None,
    )
    common.record_val_loss(ctx, history.evaluations[-1].accuracy if history.evaluations else evaluate())

    # The checks, in float32 from the initial weights on a model of their own, once the peak is read.
    with jax.default_device(dev):
        began = time.perf_counter()
        probe = GPT(cfg, nnx.Rngs(params=cfg.seed, dropout=cfg.seed + 1), dtype=jnp.float32)
        load(probe, weights)
        probe.eval()  # dropout off: the probe is a deterministic function of the weights and batches
        x0, y0 = batch(train_tokens, offsets[0, 0])
        logits = jax.device_get(probe(x0[:1])[0, : common.PROBE_POSITIONS, : common.PROBE_LOGITS]).tolist()
        before_w = export(probe)
        probe_step, state, probe_graph = stepper(probe)
        flat = offsets.reshape(1, -1, cfg.batch)
        losses: list[float] = []
        after_w: dict[str, Any] = {}
        loss_after = 0.0
        for s in range(common.PROBE_STEPS):
            state, _, loss = probe_step(state, zero, train_tokens, flat, 0, s % flat.shape[1])
            losses.append(float(loss))
            if s == 0:
                # Said live: the float32 step is a compilation of its own (on a GPU, with its own
                # autotuning), and a session with a time limit needs to see where the time went.
                ctx.progress(
                    f"float32 probe: first step done {time.perf_counter() - began:.1f} s after the probe began"
                )
                stepped = model_of(state, probe_graph)
                after_w = export(stepped)
                loss_after = float(loss_of(stepped, x0, y0))
    common.probe_checks(ctx, logits=logits, losses=losses, loss_after=loss_after, before=before_w, after=after_w,
                        cfg=cfg, n_params=n_params)  # fmt: skip

    # Last (on a GPU the step donates the state it is given): steps of interval 1's batches, on the trained state.
    profiled = [leaves, zero]

    def at(j: int) -> Any:
        def call() -> Any:
            profiled[0], profiled[1], _ = step(profiled[0], profiled[1], train_tokens, offsets, 0, j)
            return profiled

        return call

    def programs() -> list[str]:
        return [step.lower(leaves, zero, train_tokens, offsets, 0, 0).compile().as_text()]

    calls = [at(j) for j in range(cfg.steps)]
    ctx.profile("train step", profiling.cycle(calls), steps_per_sample=1.0, programs=programs)


def adamw(cfg: Any, learning_rate: Any) -> Any:
    """AdamW with decay on the matrices only (the same set as PyTorch's groups), clipping first."""
    import jax
    import optax

    from suites.gpt import common

    decay = optax.adamw(learning_rate, b1=common.BETAS[0], b2=common.BETAS[1], eps=common.EPS,
                        weight_decay=cfg.weight_decay, mask=lambda p: jax.tree.map(lambda x: x.ndim >= 2, p))  # fmt: skip
    return optax.chain(optax.clip_by_global_norm(cfg.grad_clip), decay) if cfg.grad_clip > 0 else decay


def _parallel(ctx: Context, cfg: Any) -> None:
    """One program over the device mesh, processes joined by jax.distributed (suites/runtime/data_parallel.py)."""
    import jax.numpy as jnp
    import optax
    from flax import nnx

    from suites.gpt import common
    from suites.gpt.models_flax import GPT, load
    from suites.runtime import data_parallel as dp
    from suites.runtime import dp_jax

    text = common.load(ctx, cfg)
    weights = common.initial_weights(cfg)
    shape = dp.shape_of(ctx)
    lrs = common.parallel_lrs(cfg, shape.total_steps)
    table = jnp.asarray(lrs, jnp.float32)

    def build() -> Any:
        model = GPT(cfg, nnx.Rngs(params=cfg.seed, dropout=cfg.seed + 1), dtype=jnp.float32)
        load(model, weights)
        model.eval()  # dropout off
        return model

    def loss(m: Any, xb: Any, yb: Any) -> Any:
        return optax.softmax_cross_entropy_with_integer_labels(m(xb).astype(jnp.float32), yb).mean()

    recipe = dp.Recipe(
        build=build,
        loss=loss,
        optimizer=lambda _: adamw(cfg, lambda count: table[jnp.minimum(count, len(lrs) - 1)]),
        lr=lambda s: lrs[min(s, len(lrs) - 1)],
        rows=lambda s, n: common.parallel_rows(cfg, text.train, s, n),
        unit="tokens",
        items_per_row=cfg.block_size,
        flops_per_row=common.flops_per_token(cfg) * cfg.block_size,
    )
    dp.run(ctx, recipe, dp_jax.JaxLoop)


def _attention_kernel(ctx: Context, cfg: Any, step: Any, args: tuple[Any, ...]) -> str:
    """Which attention code runs: written out, or what jax.nn.dot_product_attention chose when it
    traced the step (on a GPU: cuDNN's fused kernel, a custom call in the lowered program, or XLA's
    own composition). Lowering traces only, it does not compile."""
    if cfg.attention == "manual":
        return "manual: einsum, causal mask, softmax, einsum"
    if ctx.device_kind != "gpu":
        return "fused: jax.nn.dot_product_attention, XLA's composition (the only implementation on a CPU)"
    text = step.lower(*args).as_text()
    kernel = "cuDNN fused kernel" if "cudnn" in text.lower() else "XLA's composition"
    return f"fused: jax.nn.dot_product_attention, {kernel}"
