"""PyTorch training loop shared by the training suites (imported only inside a pytorch job).

Fast idiomatic path: the whole dataset, the per-epoch sample orders and any augmentation
parameters are tensors on the device before the clock starts; a batch is an index into them
(no DataLoader, no per-batch host work); loss and accuracy are summed into a device tensor
and read after the epoch. `compiled` wraps the forward pass (model plus input preparation) in
`torch.compile`; backward runs through the AOT-compiled graph, the optimiser step stays eager.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from suites.runtime import training
from suites.runtime.context import Context
from suites.runtime.datasets import batch_starts
from suites.runtime.errors import Skip

EVAL_BATCH = 1000

VARIANT_NOTES = {
    "eager": "pytorch variant eager: preloaded device tensors, index batches, eager autograd",
    "compiled": "pytorch variant compiled: as eager, with torch.compile of the forward pass (inductor)",
}


def torch_variant(variant: str) -> str:
    if variant == "scan":
        raise Skip("variant=scan compiles a whole epoch with jax.lax.scan; PyTorch has no equivalent (use compiled)")
    return {"default": "eager", "eager": "eager", "compiled": "compiled"}[variant]


def seed_everything(seed: int) -> None:
    import torch

    torch.manual_seed(seed)  # parameter init and dropout masks, on CPU and every GPU


class CompileCounter:
    """Graphs compiled by TorchDynamo so far (a recompile for a new batch shape counts too)."""

    def __call__(self) -> int:
        from torch._dynamo.utils import counters

        return int(counters["stats"]["unique_graphs"])


@dataclass
class DeviceData:
    train_x: Any
    train_y: Any
    test_x: Any
    test_y: Any
    orders: Any  # (epochs, n) int64 on the device
    aux: Any = None  # (epochs, n, k) float32 or None


def to_device(ctx: Context, train_x: Any, train_y: Any, test_x: Any, test_y: Any, orders: Any, aux: Any) -> DeviceData:
    """NumPy arrays -> device tensors. Images arrive NHWC and are stored NCHW (PyTorch's layout)."""
    import torch

    def images(a: Any) -> Any:
        t = torch.from_numpy(a)
        return (t.permute(0, 3, 1, 2) if t.dim() == 4 else t).contiguous().to(ctx.device)

    def put(a: Any, dtype: Any = None) -> Any:
        if a is None:
            return None
        t = torch.from_numpy(a)
        return (t.to(dtype) if dtype is not None else t).to(ctx.device)

    data = DeviceData(
        images(train_x),
        put(train_y, torch.int64),
        images(test_x),
        put(test_y, torch.int64),
        put(orders, torch.int64),
        put(aux),
    )
    ctx.sync(None)
    return data


def load_weights(model: Any, weights: dict[str, tuple[Any, Any]], layers: Sequence[training.Layer]) -> None:
    """Shared NumPy initial weights (Flax layout) into the PyTorch layers of the same names."""
    import torch

    for layer in layers:
        kernel, bias = weights[layer.name]
        if layer.flattened_from is not None:  # rows in (H, W, C) order -> PyTorch's (C, H, W)
            c, h, w = layer.flattened_from
            kernel = kernel.reshape(h, w, c, -1).transpose(2, 0, 1, 3).reshape(c * h * w, -1)
        # conv (kh, kw, in, out) -> (out, in, kh, kw); dense (in, out) -> (out, in)
        weight = kernel.transpose(3, 2, 0, 1) if kernel.ndim == 4 else kernel.T
        module = getattr(model, layer.name)
        if tuple(module.weight.shape) != weight.shape:
            raise ValueError(f"layer {layer.name}: weight {tuple(module.weight.shape)}, shared init {weight.shape}")
        with torch.no_grad():
            module.weight.copy_(torch.from_numpy(weight.copy()))
            module.bias.copy_(torch.from_numpy(bias))


def param_count(model: Any) -> int:
    return int(sum(p.numel() for p in model.parameters()))


def run(
    ctx: Context,
    *,
    model: Any,
    optimizer: Any,
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
    """Train, evaluate and record every training metric and check for one pytorch job."""
    import torch
    import torch.nn.functional as F

    mode = torch_variant(variant)
    ctx.note(VARIANT_NOTES[mode])
    counter = CompileCounter()
    n_params = param_count(model)
    load_weights(model, training.initial_weights(layers, seed), layers)
    model.eval()  # dropout off: the initial loss is a deterministic function of the weights
    with torch.no_grad():
        first = data.orders[0, :batch]
        logits = model(prepare(data.train_x[first], None))
        loss = float(F.cross_entropy(logits, data.train_y[first]))
        training.initial_logits_check(ctx, logits[: training.PROBE_SAMPLES].tolist(), loss)
    model.train()

    def forward(x: Any, a: Any) -> Any:
        return model(prepare(x, a))

    fwd = torch.compile(forward) if mode == "compiled" else forward
    n = int(data.train_y.shape[0])
    starts, tail = batch_starts(n, batch, drop_last)
    if not starts:
        raise ValueError(f"batch_size {batch} is larger than the {n} training samples")
    spans = [(s, batch) for s in starts] + ([(len(starts) * batch, tail)] if tail else [])
    used = n if tail else len(starts) * batch
    x_all, y_all = data.train_x, data.train_y

    def run_epoch(e: int) -> Any:
        order = data.orders[e]
        aux = data.aux[e] if data.aux is not None else None
        totals = torch.zeros(2, device=ctx.device)
        for start, size in spans:
            idx = order[start : start + size]
            yb = y_all[idx]
            logits = fwd(x_all[idx], aux[idx] if aux is not None else None)
            loss = F.cross_entropy(logits, yb)  # log-softmax + NLL in one kernel
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            with torch.no_grad():
                totals[0] += loss.detach() * size
                totals[1] += (logits.argmax(dim=1) == yb).sum()
        return totals

    def read(out: Any) -> tuple[float, float]:
        loss_sum, correct = out.tolist()
        return loss_sum / used, 100.0 * correct / used

    on_gpu = ctx.device_kind == "gpu"
    if on_gpu:
        torch.cuda.reset_peak_memory_stats()
    host_reset = training.reset_host_peak()
    history = training.train(
        ctx, epochs=epochs, run_epoch=run_epoch, read=read, samples_per_epoch=used, compilations=counter
    )
    training.record(ctx, history, flops_per_sample=flops_per_sample)
    training.record_peak_memory(
        ctx,
        device_bytes=int(torch.cuda.max_memory_allocated()) if on_gpu else None,
        host_reset=host_reset,
        how="torch.cuda.max_memory_allocated()",
    )

    # Evaluation is not timed; the eager model avoids a recompilation for eval mode.
    model.eval()
    correct = 0
    m_test = int(data.test_y.shape[0])
    with torch.inference_mode():
        for lo in range(0, m_test, EVAL_BATCH):
            logits = model(prepare(data.test_x[lo : lo + EVAL_BATCH], None))
            correct += int((logits.argmax(dim=1) == data.test_y[lo : lo + EVAL_BATCH]).sum())
    training.record_accuracy(ctx, 100.0 * correct / m_test)
    ctx.check("param_count", n_params)

    if artifacts:
        rows = [(name, tuple(int(d) for d in p.shape)) for name, p in model.named_parameters()]
        training.write_artifact(ctx, "model_summary.txt", training.model_summary(title, rows))
