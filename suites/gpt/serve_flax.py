"""GPT inference in Flax NNX: `mode=infer` (the forward pass over whole sequences, one `jax.jit`) and
`mode=generate` (greedy decoding with a static KV cache, decode_flax.py: one jit for the prefill, one
for the decode step, the cache donated so it is updated in place). The jitted functions take the
model's state as an argument, as a served model's parameters are; every input is on the device
before a clock starts."""

from __future__ import annotations

from typing import Any

from suites.gpt import common, generation
from suites.runtime.context import Context


def run(ctx: Context, cfg: common.Config) -> None:
    import jax
    from flax import nnx

    from suites.runtime import training_jax

    text = common.load(ctx, cfg)
    ctx.note("flax inference: jax.jit of the forward pass (the model's state an argument), evaluation mode")

    def built(dtype: Any) -> tuple[Any, Any]:
        from suites.gpt.models_flax import GPT, load

        model = GPT(cfg, nnx.Rngs(params=cfg.seed, dropout=cfg.seed + 1), dtype=dtype)
        load(model, common.initial_weights(cfg))
        model.eval()  # dropout off
        graphdef, state = nnx.split(model)
        return graphdef, jax.device_put(state, ctx.device)

    import jax.numpy as jnp

    if ctx.params["mode"] == "infer":
        _infer(ctx, cfg, text, built(jnp.float32), built(training_jax.compute_dtype(ctx)))
    else:
        _generate(ctx, cfg, text, built(jnp.float32), built(training_jax.compute_dtype(ctx)))


def _infer(ctx: Context, cfg: common.Config, text: Any, exact: tuple[Any, Any], typed: tuple[Any, Any]) -> None:
    import jax
    import numpy as np
    from flax import nnx

    def forward_of(graphdef: Any) -> Any:
        return jax.jit(lambda state, x: nnx.merge(graphdef, state)(x))

    check = forward_of(exact[0])
    logits = check(exact[1], jax.device_put(generation.sequences(cfg, text, 1).astype(np.int32), ctx.device))
    corner = np.asarray(logits, dtype=np.float32)[0, : common.PROBE_POSITIONS, : common.PROBE_LOGITS]
    ctx.check("infer_outputs", [float(v) for v in corner.reshape(-1)])
    forward, state = forward_of(typed[0]), typed[1]

    def request(batch: int) -> Any:
        x = jax.device_put(generation.sequences(cfg, text, batch).astype(np.int32), ctx.device)
        return lambda: forward(state, x)

    generation.infer(ctx, cfg, request, " (jax.jit)")


def _step(graphdef: Any) -> Any:
    """The jitted prefill and decode step over (state, cache, tokens, start): logits' argmax and the cache,
    the cache donated (updated in place, as a server keeps it)."""
    import jax
    import jax.numpy as jnp
    from flax import nnx

    from suites.gpt import decode_flax

    def step(state: Any, cache: Any, tokens: Any, start: Any) -> tuple[Any, Any, Any]:
        logits, cache = decode_flax.forward(nnx.merge(graphdef, state), cache, tokens, start)
        return jnp.argmax(logits[:, -1], axis=-1), logits, cache

    return jax.jit(step, donate_argnums=(1,))


def _generate(ctx: Context, cfg: common.Config, text: Any, exact: tuple[Any, Any], typed: tuple[Any, Any]) -> None:
    import jax
    import jax.numpy as jnp
    import numpy as np
    from flax import nnx

    from suites.gpt import decode_flax
    from suites.runtime import training_jax

    batch, prompt_len, new = generation.shape(ctx)
    dev = ctx.device
    prompt = jax.device_put(generation.prompts(cfg, text, batch, prompt_len).astype(np.int32), dev)

    # The checks, float32: greedy tokens and each step's logits from the cache, then the uncached forward pass.
    graphdef, state = exact
    step = _step(graphdef)
    cache = decode_flax.empty_cache(nnx.merge(graphdef, state), batch, prompt_len + new, jnp.float32)
    token, logits, cache = step(state, cache, prompt, jnp.int32(0))
    tokens, cached = [token], [logits[:, -1]]
    for j in range(new - 1):
        token, logits, cache = step(state, cache, token[:, None], jnp.int32(prompt_len + j))
        tokens.append(token)
        cached.append(logits[:, -1])
    generated = np.stack([np.asarray(t) for t in tokens], axis=1)
    seen = jnp.concatenate([prompt, jnp.asarray(generated[:, :-1], jnp.int32)], axis=1)
    full = jax.jit(lambda s, x: nnx.merge(graphdef, s)(x))(state, seen)[:, prompt_len - 1 :]
    stepped = np.stack([np.asarray(c, dtype=np.float32) for c in cached], axis=1)
    generation.record_checks(ctx, generated, stepped, np.asarray(full, dtype=np.float32))

    graphdef, state = typed
    step = _step(graphdef)
    dtype = training_jax.compute_dtype(ctx)
    held: dict[str, Any] = {
        "cache": decode_flax.empty_cache(nnx.merge(graphdef, state), batch, prompt_len + new, dtype)
    }
    starts = [jax.device_put(jnp.int32(prompt_len + j), dev) for j in range(new)]  # on the device before any clock
    zero = jax.device_put(jnp.int32(0), dev)

    def prefill() -> Any:
        token, _, held["cache"] = step(state, held["cache"], prompt, zero)
        held["token"], held["j"] = token, 0
        return token

    def decode() -> Any:
        j = held["j"]
        token, _, held["cache"] = step(state, held["cache"], held["token"][:, None], starts[j])
        held["token"], held["j"] = token, (j + 1) % new
        return token

    generation.generate(ctx, cfg, prefill, decode)
