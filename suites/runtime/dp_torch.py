"""PyTorch's data-parallel loop: DistributedDataParallel, one process per device (gloo on a CPU,
NCCL on GPUs), the idiomatic way; runtime/data_parallel.py drives it.

Each rank's loss is its rows' mean; DDP averages the gradients over the ranks, which is the global
batch's mean gradient (equal shards), so the N-way step is the 1-way step up to the order of the sum.
Clipping reads the averaged gradients, identical on every rank.
"""

from __future__ import annotations

import datetime
import socket
from collections.abc import Callable, Sequence
from typing import Any

from suites.contract.ranks import Ranks
from suites.runtime.data_parallel import Recipe, Shape

HOST_BYTES = 256


def initialise(ranks: Ranks, device_kind: str, timeout_s: float) -> None:
    """Join the process group before any work (rank 0 hosts the TCP store at the coordinator).

    A collective that waits longer than the timeout fails the rank instead of hanging it: the
    harness then stops the others (harness/backends/ranks.py)."""
    import torch.distributed as dist

    if ranks.world <= 1 or dist.is_initialized():
        return
    backend = "nccl" if device_kind == "gpu" else "gloo"
    if device_kind == "gpu":
        import torch

        torch.cuda.set_device(0 if torch.cuda.device_count() == 1 else ranks.local_rank)
    dist.init_process_group(
        backend,
        init_method=f"tcp://{ranks.coordinator}",
        rank=ranks.rank,
        world_size=ranks.world,
        timeout=datetime.timedelta(seconds=max(30.0, min(timeout_s, 600.0))),
    )


class TorchLane:
    def __init__(self, recipe: Recipe, model: Any, forward: Any, batches: list[tuple[Any, ...]], world: int) -> None:
        self.recipe, self.model, self.forward, self.batches, self.world = recipe, model, forward, batches, world
        self.opt = recipe.optimizer(model)

    def step(self, s: int) -> Any:
        for group in self.opt.param_groups:
            group["lr"] = self.recipe.lr(s)
        loss = self.recipe.loss(self.forward, *self.batches[s])
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        if self.recipe.clip > 0:
            import torch

            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.recipe.clip)
        self.opt.step()
        return loss.detach()

    def sync(self, out: Any) -> None:
        import torch

        if out is not None and out.is_cuda:
            torch.cuda.synchronize()

    def loss(self, out: Any) -> float:
        if self.world > 1:
            import torch.distributed as dist

            total = out.clone()
            dist.all_reduce(total)  # gloo has no AVG: the sum, divided
            return float(total) / self.world
        return float(out)

    def eval_loss(self, s: int) -> float:
        import torch

        with torch.no_grad():
            return self.loss(self.recipe.loss(self.forward, *self.batches[s]))

    def weights(self) -> list[Any]:
        return [p.detach().cpu().double().numpy().copy() for p in self.model.parameters()]


class TorchLoop:
    def __init__(self, ranks: Ranks, recipe: Recipe, shape: Shape, device: Any) -> None:
        import torch

        if device.type == "cuda":  # DDP wants the index: the GPU this rank took (initialise)
            device = torch.device("cuda", torch.cuda.current_device())
        self.ranks, self.recipe, self.shape, self.device = ranks, recipe, shape, device
        self.world = ranks.world
        self.collectives = "none" if self.world == 1 else ("nccl" if device.type == "cuda" else "gloo")
        self.device_name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
        self._count = 0

    def _batches(self, steps: int, lo: int, hi: int, rows: int) -> list[tuple[Any, ...]]:
        import torch

        staged = []
        for s in range(steps):
            arrays = self.recipe.rows(s, rows)
            staged.append(tuple(torch.from_numpy(a[lo:hi]).to(self.device) for a in arrays))
        return staged

    def n_way(self, steps: int) -> TorchLane:
        b, r = self.shape.per_device, self.ranks.rank
        model = self.recipe.build()
        self._count = sum(p.numel() for p in model.parameters())
        forward = model
        if self.world > 1:
            from torch.nn.parallel import DistributedDataParallel

            forward = DistributedDataParallel(model, device_ids=None if self.device.type == "cpu" else [self.device])
        return TorchLane(self.recipe, model, forward, self._batches(steps, r * b, (r + 1) * b, self.shape.global_batch), self.world)  # fmt: skip

    def single(self, steps: int, rows: int) -> TorchLane:
        model = self.recipe.build()
        return TorchLane(self.recipe, model, model, self._batches(steps, 0, rows, rows), 1)

    def compute_only(self, lane: Any) -> Callable[[int], Any]:
        """The rank's own step with DDP's all-reduce skipped (`no_sync`); it leaves the ranks' weights
        apart, so the loop runs it last."""
        forward = lane.forward
        if not hasattr(forward, "no_sync"):
            return lane.step  # type: ignore[no-any-return]

        def step(s: int) -> Any:
            with forward.no_sync():
                return lane.step(s)

        return step

    def allreduce(self, elements: int) -> Callable[[], Any]:
        import torch
        import torch.distributed as dist

        buffer = torch.ones(elements, dtype=torch.float32, device=self.device)

        def reduce() -> Any:
            dist.all_reduce(buffer)
            if buffer.is_cuda:
                torch.cuda.synchronize()
            return buffer

        return reduce

    def barrier(self) -> None:
        if self.world > 1:
            import torch.distributed as dist

            dist.barrier()

    def gather(self, values: Sequence[float]) -> list[list[float]]:
        import torch

        mine = torch.tensor(list(values), dtype=torch.float64, device=self.device)  # NCCL gathers device tensors
        if self.world == 1:
            return [mine.tolist()]
        import torch.distributed as dist

        every = [torch.zeros_like(mine) for _ in range(self.world)]
        dist.all_gather(every, mine)
        return [t.tolist() for t in every]

    def hosts(self) -> list[str]:
        name = socket.gethostname().encode()[:HOST_BYTES]
        rows = self.gather([float(c) for c in name.ljust(HOST_BYTES, b"\0")]) if self.world > 1 else [list(name)]
        return [bytes(int(c) for c in row).rstrip(b"\0").decode("utf-8", "replace") for row in rows]

    def param_count(self) -> int:
        return self._count


def image_recipe(ctx: Any, *, model: Callable[[], Any], prepare: Callable[[Any, Any], Any], layers: Any,
                 images: Any, optimizer: Callable[[Any], Any], lr: float, seed: int,
                 flops_per_row: float | None) -> Recipe:  # fmt: skip
    """An image classifier's recipe (mnist): the shared initial weights, NHWC uint8 rows made NCHW here."""
    import torch.nn.functional as F

    from suites.runtime import data_parallel, training, training_torch

    weights = training.initial_weights(layers, seed)

    def build() -> Any:
        m = model().to(ctx.device)
        training_torch.load_weights(m, weights, layers)
        return m.eval()  # dropout off

    def loss(forward: Any, x: Any, y: Any) -> Any:
        return F.cross_entropy(forward(prepare(x.permute(0, 3, 1, 2), None)).float(), y)

    rows = data_parallel.image_rows(images.train_x, images.train_y, seed)
    return Recipe(build, loss, optimizer, lambda s: lr, rows, flops_per_row=flops_per_row)
