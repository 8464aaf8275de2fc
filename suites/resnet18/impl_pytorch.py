"""ResNet18 in PyTorch, eager (the idiomatic default), with the seed-004 measurements.

Data lives on the device as uint8 NCHW before the clock starts; a batch is an index into it.
Eager PyTorch compiles nothing, so its cold epoch has no compilation share: whatever epoch 1
costs beyond a warm epoch is first-run work (allocator growth, oneDNN/cuDNN kernel selection --
on a GPU cuDNN's algorithm search, switched on just before epoch 1 as XLA autotunes when it
compiles -- lazy CUDA module loading). `--precision bf16`: the network runs under bf16 autocast
with float32 master weights (training_torch.autocast); the checks stay float32 (the workload's
definition, as in the Flax job).
"""

from __future__ import annotations

import functools
import time
from typing import Any

from suites.contract.inference import inferring
from suites.contract.ranks import data_parallel
from suites.resnet18 import common, infer_torch
from suites.runtime.context import Context, Readings


def run(ctx: Context) -> None:
    import torch
    import torch.nn.functional as F

    from suites.contract.datasets import batch_starts
    from suites.resnet18.models_torch import ResNet18, load_weights, make_prepare
    from suites.runtime import profiling, training, training_torch
    from suites.runtime.training_torch import CompileCounter, first_step_probe

    p = ctx.params
    if inferring(p):
        infer_torch.run(ctx)
        return
    if data_parallel(p):
        _parallel(ctx)
        return
    images, orders = common.load(ctx)
    batch, epochs = int(p["batch_size"]), int(p["epochs"])
    dev = ctx.device
    on_gpu = ctx.device_kind == "gpu"
    ctx.training["data"] = "device"
    training.record_fairness(ctx, host_copy=None)  # the data lives on the device
    if on_gpu:
        torch.cuda.init()  # CUDA context creation is start-up, not data movement
    prepare = make_prepare(dev)

    def logits_of(m: Any, x: Any) -> Any:
        """The network in the job's dtype; normalisation stays float32 (Flax's runs before its layers)."""
        inputs = prepare(x)
        with training_torch.autocast(ctx):
            return m(inputs)

    def bce(logits: Any, y: Any) -> Any:
        return F.binary_cross_entropy_with_logits(logits.float(), y)  # float32 loss, as autocast would

    def nchw(a: Any) -> Any:
        return torch.from_numpy(a).permute(0, 3, 1, 2).contiguous()

    # NHWC -> NCHW and the dtype casts happen on the host, outside the transfer clock.
    host = (
        nchw(images.train_x),
        torch.from_numpy(images.train_y).long(),
        nchw(images.test_x),
        torch.from_numpy(images.test_y).long(),
        torch.from_numpy(orders).long(),
    )
    nbytes = sum(int(t.numel() * t.element_size()) for t in host)
    probes: list[Any] = []
    transfers: list[float] = []
    readings = Readings()
    arrays: Any = host
    for _ in range(3):
        arrays = None  # the previous copy is freed first, as in the flax job: one dataset copy at a time
        readings.start()  # outside the clock
        start = time.perf_counter()
        arrays = tuple(t.to(dev, copy=True) for t in host)  # copy=True: on the CPU a real copy too
        ctx.sync(None)
        transfers.append(time.perf_counter() - start)
        readings.stop()
        probes.append(ctx.probe_escape())  # outside the clock
    train_x, train_y, test_x, test_y, orders_dev = arrays

    weights = common.init_weights(int(p["seed"]))
    model = ResNet18()
    load_weights(model, weights)
    model = model.to(dev)
    n_params = int(sum(t.numel() for t in model.parameters()))
    if p["optimizer"] == "adam":
        optimizer: Any = torch.optim.Adam(model.parameters(), lr=p["lr"])
    else:
        optimizer = torch.optim.SGD(model.parameters(), lr=p["lr"], momentum=common.SGD_MOMENTUM)

    first = orders_dev[0, :batch]
    x_first, y_first = train_x[first], train_y[first].float()

    n = len(images.train_y)
    starts, tail = batch_starts(n, batch, bool(p["drop_last"]))
    if not starts:
        raise ValueError(f"batch_size {batch} is larger than the {n} training samples")
    spans = [(s, batch) for s in starts] + ([(len(starts) * batch, tail)] if tail else [])
    used = n if tail else len(starts) * batch

    def run_epoch(e: int) -> Any:
        order = orders_dev[e]
        totals = torch.zeros(2, device=dev)
        for start, size in spans:
            train_batch(order, start, size, totals)
        return totals

    def train_batch(order: Any, start: int, size: int, totals: Any) -> Any:
        """One SGD step on the batch at `start`, its loss and correct count added to `totals`."""
        idx = order[start : start + size]
        yb = train_y[idx].float()
        logits = logits_of(model, train_x[idx])
        loss = bce(logits, yb)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        with torch.no_grad():
            totals[0] += loss.detach() * size
            totals[1] += ((logits > 0).float() == yb).sum()
        return totals

    def read(out: Any) -> tuple[float, float]:
        loss_sum, correct = out.tolist()
        return loss_sum / used, 100.0 * correct / used

    m_test = len(images.test_y)

    def evaluate() -> float:
        model.eval()  # BatchNorm from its running statistics
        correct = torch.zeros((), dtype=torch.int64, device=dev)
        with torch.inference_mode():
            for lo in range(0, m_test, batch):
                logits = logits_of(model, test_x[lo : lo + batch])
                correct += ((logits > 0).long() == test_y[lo : lo + batch]).sum()
        model.train()
        return 100.0 * int(correct) / m_test

    model.train()
    with training_torch.conv_algorithm_search(ctx):
        baseline = training_torch.memory_baseline(ctx)  # optimizer state is made in epoch 1, above it
        history = training.train(
            ctx, epochs=epochs, run_epoch=run_epoch, read=read, samples_per_epoch=used,
            compilations=CompileCounter(compiles=False), evaluate=evaluate, target=training.target_of(ctx),
            curve=training.curve_of(ctx),
        )  # fmt: skip
    training.record(ctx, history, flops_per_sample=common.flops_per_sample(int(p["image_size"])))
    common.record_transfer(ctx, transfers, nbytes, probes, readings)
    if history.steady:
        common.record_cold_split(ctx, history.first.seconds, 0.0, [e.seconds for e in history.steady], transfers[0])
    training.record_peak_memory(
        ctx,
        baseline=baseline,
        device_peak=int(torch.cuda.max_memory_allocated()) if on_gpu else None,
        how="torch.cuda.max_memory_allocated() minus memory_allocated() before training",
    )
    if on_gpu:
        # The caching allocator keeps freed blocks: reserved >= allocated is PyTorch's analogue
        # of JAX's pool, and what nvidia-smi shows (plus the CUDA context).
        common.record_memory_extras(
            ctx,
            reserve_bytes=int(torch.cuda.max_memory_reserved()),
            label="allocator reserved (peak)",
            description="torch.cuda.max_memory_reserved(): the caching allocator's peak pool",
        )
    # The first optimiser step on the first batch, from the initial weights on a copy (BatchNorm on
    # batch statistics, as in training), once the peak has been read, as in the Flax job: on the CPU
    # the peak is the resident set, which a probe before training would have grown unseen.
    first_step_probe(
        ctx,
        model=model,
        optimizer=optimizer,
        loss_of=lambda m: bce(m(prepare(x_first)), y_first),  # float32 whatever --precision
        order=[name for name, _ in common.param_shapes()],
        lr=float(p["lr"]),
        train_mode=True,
        start=lambda m: load_weights(m, weights),
    )

    accuracy = history.evaluations[-1].accuracy if history.evaluations else evaluate()
    training.record_accuracy(ctx, accuracy)
    ctx.check("param_count", n_params)

    fresh = ResNet18()
    load_weights(fresh, weights)
    fresh = fresh.to(dev).train()
    with torch.no_grad():
        logits = fresh(prepare(nchw(common.probe_batch(images)).to(dev)))  # float32 whatever --precision
    ctx.check("initial_logits", [float(v) for v in logits.float().cpu().tolist()])

    if p["artifacts"]:
        rows = [(name, tuple(int(d) for d in t.shape)) for name, t in model.named_parameters()]
        training.write_artifact(ctx, "model_summary.txt", training.model_summary(common.TITLE, rows))

    # Last: the profiled steps train the model further, after every number and check is recorded.
    totals = torch.zeros(2, device=dev)
    steps = [functools.partial(train_batch, orders_dev[0], start, batch, totals) for start in starts]
    ctx.profile("epoch", profiling.cycle(steps), steps_per_sample=len(spans))


def _parallel(ctx: Context) -> None:
    """DistributedDataParallel with BatchNorm over the global batch (suites/runtime/data_parallel.py)."""
    import torch
    import torch.nn.functional as F

    from suites.resnet18.models_torch import ResNet18, load_weights, make_prepare
    from suites.resnet18.spec import PARALLEL_CURVE_STEPS
    from suites.runtime import data_parallel as dp
    from suites.runtime import dp_torch

    p = ctx.params
    images, _ = common.load(ctx)
    weights = common.init_weights(int(p["seed"]))
    prepare = make_prepare(ctx.device)
    loops: list[Any] = []

    def build() -> Any:
        model = ResNet18()
        load_weights(model, weights)
        return model.to(ctx.device).train()  # BatchNorm on batch statistics, as the suite trains

    def loss(forward: Any, x: Any, y: Any) -> Any:
        return F.binary_cross_entropy_with_logits(forward(prepare(x.permute(0, 3, 1, 2))).float(), y.float())

    def optimizer(m: Any) -> Any:
        if p["optimizer"] == "adam":
            return torch.optim.Adam(m.parameters(), lr=p["lr"])
        return torch.optim.SGD(m.parameters(), lr=p["lr"], momentum=common.SGD_MOMENTUM)

    recipe = dp.Recipe(
        build=build,
        loss=loss,
        optimizer=optimizer,
        lr=lambda s: float(p["lr"]),
        rows=dp.image_rows(images.train_x, images.train_y, int(p["seed"])),
        flops_per_row=common.flops_per_sample(int(p["image_size"])),
        curve_steps=PARALLEL_CURVE_STEPS,
    )

    def make_loop(ranks: Any, r: Any, s: Any) -> Any:
        loops.append(dp_torch.TorchLoop(ranks, r, s, ctx.device))
        return loops[-1]

    dp.run(ctx, recipe, make_loop)
    ctx.note(f"data-parallel BatchNorm: {loops[0].batchnorm or 'one device (nothing to synchronise)'}")
