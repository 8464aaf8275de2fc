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
FIRST_BUCKET_BYTES, BUCKET_BYTES = 1 << 20, 25 << 20  # DDP's defaults (bucket_cap_mb=25, a 1 MiB first bucket)


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
        self.batchnorm: str | None = None  # how the N-way model's BatchNorm sees the global batch, if it has one
        self._count = 0
        self._numels: list[int] = []

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
        self._numels = [p.numel() for p in model.parameters() if p.requires_grad]
        self._count = sum(self._numels)
        if self.world > 1 and any(isinstance(m, _batchnorm_types()) for m in model.modules()):
            # The N-way model only: rank 0's 1-way model must run no collective of its own.
            model, self.batchnorm = global_batchnorm(model, self.device)
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

    def gradient_allreduce(self) -> tuple[Callable[[], Any], int]:
        """The gradients' all-reduce as DDP runs it: its buckets (the first 1 MiB, then 25 MiB, filled in
        reverse parameter order), launched back to back and waited for together."""
        import torch
        import torch.distributed as dist

        sizes, current, cap = [], 0, FIRST_BUCKET_BYTES
        for numel in reversed(self._numels):
            current += numel * 4
            if current >= cap:
                sizes.append(current // 4)
                current, cap = 0, BUCKET_BYTES
        if current:
            sizes.append(current // 4)
        buckets = [torch.ones(n, dtype=torch.float32, device=self.device) for n in sizes]

        def reduce() -> Any:
            for work in [dist.all_reduce(b, async_op=True) for b in buckets]:
                work.wait()
            if self.device.type == "cuda":
                torch.cuda.synchronize()
            return buckets

        return reduce, len(buckets)

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


def _batchnorm_types() -> tuple[type, ...]:
    from torch import nn

    return (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)


def global_batchnorm(model: Any, device: Any) -> tuple[Any, str]:
    """BatchNorm over the global batch, so the N-way step is the 1-way step: on GPUs torch's own
    SyncBatchNorm (the idiomatic way); on a CPU SyncBatchNorm refuses to run, so each BatchNorm2d
    becomes `CrossRankBatchNorm`, the same arithmetic over gloo. Returns the model and what was used."""
    import torch.distributed as dist
    from torch import nn

    if not dist.is_initialized() or dist.get_world_size() == 1:
        return model, "BatchNorm (one device)"
    if device.type == "cuda":
        return nn.SyncBatchNorm.convert_sync_batchnorm(model), "torch.nn.SyncBatchNorm"
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if type(child) is nn.BatchNorm2d:
                setattr(parent, name, CrossRankBatchNorm.of(child))
    return model, "cross-rank BatchNorm over gloo (SyncBatchNorm's arithmetic; torch's runs on CUDA only)"


def _cross_rank_batchnorm() -> Any:
    import torch
    import torch.distributed.nn.functional as dist_functional
    from torch import nn

    class CrossRankBatchNorm(nn.BatchNorm2d):  # type: ignore[misc]
        """BatchNorm2d whose training statistics are the global batch's: every rank's sum and sum of
        squares (and count) all-reduced with autograd (the backward sums the statistics' gradients over
        the ranks, as SyncBatchNorm's does), in float64 so the one-pass variance loses nothing."""

        @classmethod
        def of(cls, bn: Any) -> Any:
            made = cls(bn.num_features, eps=bn.eps, momentum=bn.momentum, affine=bn.affine,
                       track_running_stats=bn.track_running_stats).to(bn.weight.device)  # fmt: skip
            made.load_state_dict(bn.state_dict())
            return made

        def forward(self, x: Any) -> Any:
            if not self.training:
                return super().forward(x)
            c = x.shape[1]
            wide = x.double()
            count = torch.tensor([x.numel() / c], dtype=torch.float64, device=x.device)
            stats = dist_functional.all_reduce(torch.cat([wide.sum((0, 2, 3)), (wide * wide).sum((0, 2, 3)), count]))
            n = stats[-1]
            mean = stats[:c] / n
            var = stats[c : 2 * c] / n - mean * mean
            if self.track_running_stats:
                with torch.no_grad():
                    self.num_batches_tracked.add_(1)
                    m = self.momentum if self.momentum is not None else 1.0 / float(self.num_batches_tracked)
                    self.running_mean.mul_(1 - m).add_(m * mean.float())
                    self.running_var.mul_(1 - m).add_(m * (var * n / (n - 1)).float())
            scale = (self.weight.double() / torch.sqrt(var + self.eps)).float()[None, :, None, None]
            return (x - mean.float()[None, :, None, None]) * scale + self.bias[None, :, None, None]

    return CrossRankBatchNorm


class _Lazy:
    """The class is made on first use: this module is imported where torch is not (the job's start)."""

    made: Any = None

    def of(self, bn: Any) -> Any:
        if _Lazy.made is None:
            _Lazy.made = _cross_rank_batchnorm()
        return _Lazy.made.of(bn)


CrossRankBatchNorm = _Lazy()
