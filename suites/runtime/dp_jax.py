"""JAX's data-parallel loop: one program over a device mesh, the batch axis sharded and the state
replicated (jit with shardings; XLA inserts the gradient all-reduce), the processes joined by
`jax.distributed` (gloo collectives on a CPU, NCCL on GPUs); runtime/data_parallel.py drives it.

The loss is the mean over the global batch, as on one device: the N-way step is the 1-way step
up to the order of the sum.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Sequence
from typing import Any

from suites.contract.ranks import Ranks
from suites.runtime.data_parallel import Recipe, Shape

HOST_BYTES = 256


def initialise(ranks: Ranks, device_kind: str, timeout_s: float) -> None:
    """Join the other processes before any backend starts (jax.distributed must come first)."""
    import jax

    if ranks.world <= 1:
        return
    if device_kind == "cpu":
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(
        coordinator_address=ranks.coordinator,
        num_processes=ranks.world,
        process_id=ranks.rank,
        initialization_timeout=int(max(30.0, min(timeout_s, 600.0))),
    )


def _split(recipe: Recipe, model: Any) -> tuple[Any, Any, list[Any]]:
    import jax
    from flax import nnx

    graphdef, state = nnx.split((model, nnx.Optimizer(model, recipe.optimizer(model), wrt=nnx.Param)))
    leaves, treedef = jax.tree.flatten(state)
    return graphdef, treedef, leaves


class JaxLane:
    def __init__(self, recipe: Recipe, model: Any, batches: list[tuple[Any, ...]], put: Callable[[Any], Any],
                 shardings: tuple[Any, Any] | None) -> None:  # fmt: skip
        import jax
        from flax import nnx

        self.recipe, self.batches = recipe, batches
        self.graphdef, self.treedef, host = _split(recipe, model)
        self.leaves = [put(leaf) for leaf in host]
        graphdef, treedef = self.graphdef, self.treedef

        def step(leaves: list[Any], *batch: Any) -> tuple[list[Any], Any]:
            m, opt = nnx.merge(graphdef, jax.tree.unflatten(treedef, leaves))
            loss, grads = nnx.value_and_grad(recipe.loss)(m, *batch)
            with jax.named_scope("optimizer"):
                opt.update(m, grads)
            return jax.tree.leaves(nnx.state((m, opt))), loss

        def loss_only(leaves: list[Any], *batch: Any) -> Any:
            m, _ = nnx.merge(graphdef, jax.tree.unflatten(treedef, leaves))
            return recipe.loss(m, *batch)

        self.raw_step = step
        if shardings is None:
            self.fn, self.loss_fn = jax.jit(step), jax.jit(loss_only)
        else:
            replicated, data = shardings
            k = len(batches[0])
            self.fn = jax.jit(step, in_shardings=(replicated, *[data] * k), out_shardings=(replicated, replicated))
            self.loss_fn = jax.jit(loss_only, in_shardings=(replicated, *[data] * k), out_shardings=replicated)

    def step(self, s: int) -> Any:
        self.leaves, loss = self.fn(self.leaves, *self.batches[s])
        return loss

    def sync(self, out: Any) -> None:
        import jax

        jax.block_until_ready((out, self.leaves))

    def loss(self, out: Any) -> float:
        return _local(out)

    def eval_loss(self, s: int) -> float:
        return _local(self.loss_fn(self.leaves, *self.batches[s]))

    def weights(self) -> list[Any]:
        import jax
        from flax import nnx

        m, _ = nnx.merge(self.graphdef, jax.tree.unflatten(self.treedef, self.leaves))
        return [_array(leaf) for leaf in jax.tree.leaves(nnx.state(m, nnx.Param))]


def _array(value: Any) -> Any:
    """This process's copy of a replicated (or single-device) array, as NumPy."""
    import numpy as np

    shards = getattr(value, "addressable_shards", None)
    return np.asarray(shards[0].data if shards else value, dtype=np.float64)


def _shard(value: Any) -> Any:
    """This process's copy of a replicated array, as a device array (keys stay keys)."""
    shards = getattr(value, "addressable_shards", None)
    return shards[0].data if shards else value


def _local(value: Any) -> float:
    return float(_array(value))


class JaxLoop:
    def __init__(self, ranks: Ranks, recipe: Recipe, shape: Shape) -> None:
        import jax
        import numpy as np
        from jax.sharding import Mesh, NamedSharding, PartitionSpec

        self.ranks, self.recipe, self.shape = ranks, recipe, shape
        self.world = ranks.world
        self.local = jax.local_devices()[0]
        self.mesh = Mesh(np.array(jax.devices()), ("data",))
        self.replicated = NamedSharding(self.mesh, PartitionSpec())
        self.data = NamedSharding(self.mesh, PartitionSpec("data"))
        self.collectives = "none" if self.world == 1 else ("nccl" if self.local.platform == "gpu" else "gloo")
        self.device_name = str(getattr(self.local, "device_kind", self.local.platform))
        self._count = 0
        self._shapes: list[tuple[int, ...]] = []
        self._local_batches: list[tuple[Any, ...]] = []

    def _global(self, value: Any) -> Any:
        """A replicated global array of this process's copy; PRNG keys (dropout's, unused: dropout
        is off) travel as their key data."""
        import jax
        import numpy as np

        if jax.dtypes.issubdtype(value.dtype, jax.dtypes.prng_key):
            data = self._global(jax.random.key_data(value))
            return jax.random.wrap_key_data(data, impl=jax.random.key_impl(value))
        return jax.make_array_from_process_local_data(self.replicated, np.asarray(value))

    def n_way(self, steps: int) -> JaxLane:
        import jax
        from flax import nnx

        b, r = self.shape.per_device, self.ranks.rank
        staged, local = [], []
        for s in range(steps):
            shard = tuple(a[r * b : (r + 1) * b] for a in self.recipe.rows(s, self.shape.global_batch))
            staged.append(tuple(jax.make_array_from_process_local_data(self.data, a) for a in shard))
            local.append(tuple(jax.device_put(a, self.local) for a in shard))
        self._local_batches = local
        model = self.recipe.build()
        params = jax.tree.leaves(nnx.state(model, nnx.Param))
        self._shapes = [tuple(x.shape) for x in params]
        self._count = int(sum(x.size for x in params))
        return JaxLane(self.recipe, model, staged, self._global, (self.replicated, self.data))

    def single(self, steps: int, rows: int) -> JaxLane:
        import jax

        staged = [tuple(jax.device_put(a[:rows], self.local) for a in self.recipe.rows(s, rows)) for s in range(steps)]
        return JaxLane(self.recipe, self.recipe.build(), staged, lambda leaf: jax.device_put(leaf, self.local), None)

    def compute_only(self, lane: Any) -> Callable[[int], Any]:
        """The same step on this process's device and rows alone: no collective in the program."""
        import jax

        fn = jax.jit(lane.raw_step)
        state = [[jax.device_put(_shard(leaf), self.local) for leaf in lane.leaves]]

        def step(s: int) -> Any:
            state[0], loss = fn(state[0], *self._local_batches[s])
            return loss

        return step

    def allreduce(self, elements: int) -> Callable[[], Any]:
        import jax
        import jax.numpy as jnp
        import numpy as np

        buffer = jax.make_array_from_process_local_data(self.data, np.ones((1, elements), np.float32))
        summed = jax.jit(lambda x: jnp.sum(x, axis=0), out_shardings=self.replicated)

        def reduce() -> Any:
            return jax.block_until_ready(summed(buffer))

        return reduce

    def gradient_allreduce(self) -> tuple[Callable[[], Any], int]:
        """The gradients' all-reduce as the step runs it: one array per parameter, summed over the mesh in
        one program (XLA combines them into one tuple all-reduce; on a CPU gloo then reduces each tensor)."""
        import jax
        import jax.numpy as jnp
        import numpy as np

        tree = [jax.make_array_from_process_local_data(self.data, np.ones((1, *s), np.float32)) for s in self._shapes]
        summed = jax.jit(lambda t: [jnp.sum(x, axis=0) for x in t], out_shardings=self.replicated)

        def reduce() -> Any:
            return jax.block_until_ready(summed(tree))

        return reduce, len(tree)

    def barrier(self) -> None:
        if self.world > 1:
            from jax.experimental import multihost_utils

            multihost_utils.sync_global_devices("harness")

    def gather(self, values: Sequence[float]) -> list[list[float]]:
        import numpy as np

        mine = np.asarray(list(values), np.float64)
        if self.world == 1:
            return [mine.tolist()]
        from jax.experimental import multihost_utils

        every = np.asarray(multihost_utils.process_allgather(mine))
        return [list(map(float, row)) for row in every.reshape(self.world, -1)]

    def hosts(self) -> list[str]:
        name = socket.gethostname().encode()[:HOST_BYTES].ljust(HOST_BYTES, b"\0")
        rows = self.gather([float(c) for c in name])
        return [bytes(int(c) for c in row).rstrip(b"\0").decode("utf-8", "replace") for row in rows]

    def param_count(self) -> int:
        return self._count


def image_recipe(*, model: Callable[[], Any], prepare: Callable[[Any, Any], Any], layers: Any, images: Any,
                 tx: Any, lr: float, seed: int, flops_per_row: float | None) -> Recipe:  # fmt: skip
    """An image classifier's recipe (mnist): the shared initial weights, NHWC uint8 rows."""
    from suites.runtime import data_parallel, training, training_jax

    weights = training.initial_weights(layers, seed)

    def build() -> Any:
        m = model()
        training_jax.load_weights(m, weights)
        m.eval()  # dropout off
        return m

    def loss(m: Any, x: Any, y: Any) -> Any:
        return training_jax.cross_entropy(m(prepare(x, None)), y)

    rows = data_parallel.image_rows(images.train_x, images.train_y, seed)
    return Recipe(build, loss, lambda _: tx, lambda s: lr, rows, flops_per_row=flops_per_row)
