"""Predictive coding in plain JAX + optax (no equinox, no pcax).

Why plain JAX: the network is three affine maps and an energy; parameters and value nodes are
pytrees of arrays, the x-steps are `jax.grad` with respect to the nodes and the w-step
`jax.grad` with respect to the weights, exactly the two gradients pcax's filters select.
Equinox would add a dependency to the jax image for a container of six arrays, and pcax 0.5.0's
API (the tutorial's) no longer installs against current JAX.

Variants: `per-batch` jits one training step and calls it from Python once per batch (the
tutorial's `train_on_batch`); `low-overhead` jits a whole epoch as one `lax.scan` over the
batches, so an epoch is one dispatch. Both run the same step function on data that already
lives on the device; the step gathers its own batch from the epoch's sample order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from suites.pc import common
from suites.runtime.context import Context

HOW = {
    "per-batch": "jax.jit of one training step (forward init, T x-steps unrolled, Adam w-step), "
    "called from Python per batch, state donated",
    "low-overhead": "jax.jit of the whole epoch: lax.scan over the batches of the same step, one dispatch per epoch",
}


def run(ctx: Context) -> None:
    import jax
    import jax.numpy as jnp
    import numpy as np
    import optax

    from suites.runtime import profiling, training
    from suites.runtime.training_jax import CompileCounter

    p = ctx.params
    data = common.load(ctx)
    steps_t, x_lr, batch = int(p["T"]), float(p["x_lr"]), data.batch
    hidden_layers = int(p["layers"])
    tx = optax.adam(float(p["w_lr"]), b1=common.ADAM_B1, b2=common.ADAM_B2, eps=common.ADAM_EPS)
    dev = ctx.device

    def put(a: Any) -> Any:
        return jax.device_put(a, dev)

    x_all, t_all, y_all = put(data.train_x), put(data.train_t), put(data.train_y)
    orders, test_x = put(data.orders), put(data.test_x)
    jax.block_until_ready((x_all, t_all, y_all, orders, test_x))

    def energy(free: list[Any], params: list[tuple[Any, Any]], x0: Any, target: Any) -> Any:
        """Sum over the batch of sum_l 0.5 ||x_l - u_l||^2; each layer reads the previous node's x."""
        x, total = x0, jnp.zeros((), jnp.float32)
        for layer, (w, b) in enumerate(params):
            a = x @ w + b
            hidden = layer < hidden_layers
            u = jnp.tanh(a) if hidden else a
            node = free[layer] if hidden else target
            total = total + 0.5 * jnp.sum((node - u) ** 2)
            x = node
        return total

    def forward(params: list[tuple[Any, Any]], x0: Any) -> tuple[list[Any], Any]:
        """Forward initialisation: each free node takes its prediction u; returns (nodes, u_L)."""
        nodes, x = [], x0
        for w, b in params[:-1]:
            x = jnp.tanh(x @ w + b)
            nodes.append(x)
        w, b = params[-1]
        return nodes, x @ w + b

    grad_x = jax.value_and_grad(energy, argnums=0)
    grad_w = jax.value_and_grad(energy, argnums=1)

    def train_batch(params: Any, opt_state: Any, x0: Any, target: Any, labels: Any) -> tuple[Any, ...]:
        free, out = forward(params, x0)
        correct = jnp.sum(jnp.argmax(out, axis=-1) == labels).astype(jnp.float32)

        # A Python loop, unrolled into the compiled step as in the tutorial: XLA then computes
        # u_1 = tanh(x_0 W_1 + b_1), which no x-step changes, once instead of T + 1 times (CSE).
        energies = []
        for _ in range(steps_t):
            value, grads = grad_x(free, params, x0, target)
            free = [n - x_lr * g for n, g in zip(free, grads, strict=True)]  # plain SGD
            energies.append(value)
        value, grads = grad_w(free, params, x0, target)
        updates, opt_state = tx.update(grads, opt_state, params)
        params = optax.apply_updates(params, updates)
        return params, opt_state, jnp.stack([*energies, value]), correct

    # The data arrays are arguments, not closed-over constants: a closure would bake them into
    # the compiled program.
    def step(
        params: Any, opt_state: Any, totals: Any, xs: Any, ts: Any, ys: Any, orders_: Any, e: Any, start: Any
    ) -> tuple[Any, ...]:
        idx = jax.lax.dynamic_slice(orders_, (e, start), (1, batch))[0]
        params, opt_state, energies, correct = train_batch(params, opt_state, xs[idx], ts[idx], ys[idx])
        return params, opt_state, totals + jnp.stack([energies[-1], correct]), energies

    def epoch(
        params: Any, opt_state: Any, totals: Any, xs: Any, ts: Any, ys: Any, orders_: Any, e: Any, starts: Any
    ) -> tuple[Any, ...]:
        def body(carry: tuple[Any, Any, Any], start: Any) -> tuple[tuple[Any, Any, Any], Any]:
            params, opt_state, totals, energies = step(*carry, xs, ts, ys, orders_, e, start)
            return (params, opt_state, totals), energies

        (params, opt_state, totals), energies = jax.lax.scan(body, (params, opt_state, totals), starts)
        return params, opt_state, totals, energies

    # Donating the state lets XLA update weights and Adam moments in place.
    step_fn = jax.jit(step, donate_argnums=(0, 1))
    epoch_fn = jax.jit(epoch, donate_argnums=(0, 1))

    @jax.jit
    def predict(params: Any, x: Any) -> Any:
        return jnp.argmax(forward(params, x)[1], axis=-1)

    init = common.init_weights(p)

    def fresh() -> tuple[Any, Any]:
        params = [(put(w), put(b)) for w, b in init]
        # Committed to the device like the step's outputs: an uncommitted Adam state (what
        # tx.init returns) is another call signature, so the second call would compile again.
        return params, put(tx.init(params))

    zeros = put(np.zeros(2, np.float32))
    starts = put(np.asarray(data.starts, dtype=np.int32))
    used = len(data.starts) * batch
    arrays = (x_all, t_all, y_all, orders)
    counter = CompileCounter()

    def make_epoch(variant: str, state: list[Any]) -> Callable[[int], Any]:
        def run_epoch(e: int) -> Any:
            params, opt_state = state
            totals = zeros
            if variant == "low-overhead":
                params, opt_state, totals, _ = epoch_fn(params, opt_state, totals, *arrays, e, starts)
            else:
                for start in data.starts:
                    params, opt_state, totals, _ = step_fn(params, opt_state, totals, *arrays, e, start)
            state[:] = [params, opt_state]
            return params, opt_state, totals

        return run_epoch

    def read(out: Any) -> tuple[float, float]:
        energy_sum, correct = (float(v) for v in jax.device_get(out[2]))
        return energy_sum / used, 100.0 * correct / used

    histories: dict[str, Any] = {}
    chosen = common.variants(p)
    with jax.default_device(dev):
        for variant in chosen:
            ctx.progress(f"variant {variant}: {HOW[variant]} ('loss' = mean energy after the x-steps)")
            state = list(fresh())
            history = training.train(
                ctx,
                epochs=int(p["epochs"]),
                run_epoch=make_epoch(variant, state),
                read=read,
                samples_per_epoch=used,
                compilations=counter,
            )
            predicted = np.asarray(predict(state[0], test_x))
            accuracy = 100.0 * float(np.mean(predicted == data.test_y))
            common.record_variant(ctx, variant, history, accuracy, HOW[variant])
            histories[variant] = history
        common.record_speedup(ctx, histories)
        ctx.check("test_accuracy", accuracy)

        # Agreement: the first batch of epoch 1 from the initial weights, through each variant's
        # own compiled code (the low-overhead one as a one-batch scan). Run after training so
        # these compilations stay out of the timed first epochs.
        first: dict[str, common.FirstStep] = {}
        for variant in chosen:
            params, opt_state = fresh()
            if variant == "low-overhead":
                one = put(np.zeros(1, np.int32))
                params, opt_state, _, energies = epoch_fn(params, opt_state, zeros, *arrays, 0, one)
                energies = energies[0]
            else:
                params, opt_state, _, energies = step_fn(params, opt_state, zeros, *arrays, 0, 0)
            mu = opt_state[0].mu  # after one step mu = (1 - b1) * grad
            first[variant] = common.FirstStep(
                energies=[float(v) for v in np.asarray(energies)],
                grads=[np.asarray(g) / (1.0 - common.ADAM_B1) for layer in mu for g in layer],
                weights=[np.asarray(a) for layer in params for a in layer],
            )
        common.record_first_step(ctx, first)

        # Last: the per-batch variant's own step, from fresh weights (the step donates what it is given);
        # the low-overhead one runs a whole epoch as one program, with no step of its own.
        for variant in chosen:
            label = f"epoch [{variant}]"
            if variant != "per-batch":
                ctx.profile(label, None, steps_per_sample=len(data.starts), unavailable="one lax.scan per epoch")
                continue
            profiled = [*fresh()]

            def at(start: int, profiled: list[Any] = profiled) -> Callable[[], Any]:
                def call() -> Any:
                    profiled[0], profiled[1], _, out = step_fn(profiled[0], profiled[1], zeros, *arrays, 0, start)
                    return out

                return call

            def programs() -> list[str]:
                params, opt_state = fresh()
                return [step_fn.lower(params, opt_state, zeros, *arrays, 0, data.starts[0]).compile().as_text()]

            calls = [at(start) for start in data.starts]
            ctx.profile(label, profiling.cycle(calls), steps_per_sample=len(data.starts), programs=programs)
