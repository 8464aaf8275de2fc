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

DATA_NOTES = {
    "device": "data=device: dataset, sample orders and augmentation parameters resident on the device; "
    "a step indexes its own batch",
    "host": "data=host: each step gathers its batch from CPU tensors and copies it to the device with .to() "
    "(no DataLoader workers, no pinned memory)",
}

VARIANT_NOTES = {
    "eager": "pytorch variant eager: preloaded device tensors, index batches, eager autograd",
    "compiled": "pytorch variant compiled: as eager, with torch.compile of the forward pass (inductor)",
    "cuda-graph": "pytorch variant cuda-graph: as eager, the whole step (forward, backward, optimizer) captured "
    "once as a CUDA graph and replayed per batch with one launch",
}


def torch_variant(variant: str, device: Any = None) -> str:
    """The loop that runs; an impossible one is a Skip before any work (`device`: the job's
    torch.device, for cuda-graph, which needs a GPU)."""
    if variant == "scan":
        raise Skip("variant=scan compiles a whole epoch with jax.lax.scan; PyTorch has no equivalent (use compiled)")
    if variant == "cuda-graph" and device is not None:
        from suites.runtime import cuda_graphs

        cuda_graphs.require(device, "variant=cuda-graph (use default or compiled on the CPU)")
    return {"default": "eager", "eager": "eager", "compiled": "compiled", "cuda-graph": "cuda-graph"}[variant]


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
    """`host` False (data=device): tensors on the device. True (data=host): the training images,
    labels, orders and aux stay CPU tensors (images already NCHW) and every step gathers its batch
    there and copies it to the device; the test split is on the device either way."""

    train_x: Any
    train_y: Any
    test_x: Any
    test_y: Any
    orders: Any  # (epochs, n) int64
    aux: Any = None  # (epochs, n, k) float32 or None
    host: bool = False


def to_device(ctx: Context, train_x: Any, train_y: Any, test_x: Any, test_y: Any, orders: Any, aux: Any) -> DeviceData:
    """NumPy arrays -> tensors. Images arrive NHWC and are stored NCHW (PyTorch's layout)."""
    import torch

    host = ctx.params.get("data", "device") == "host"
    cpu = torch.device("cpu")

    def images(a: Any, where: Any) -> Any:
        t = torch.from_numpy(a)
        return (t.permute(0, 3, 1, 2) if t.dim() == 4 else t).contiguous().to(where)

    def put(a: Any, where: Any, dtype: Any = None) -> Any:
        if a is None:
            return None
        t = torch.from_numpy(a)
        return (t.to(dtype) if dtype is not None else t).to(where)

    train_at = cpu if host else ctx.device
    data = DeviceData(
        images(train_x, train_at),
        put(train_y, train_at, torch.int64),
        images(test_x, ctx.device),
        put(test_y, ctx.device, torch.int64),
        put(orders, train_at, torch.int64),
        put(aux, train_at),
        host=host,
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


def first_step_probe(
    ctx: Context,
    *,
    model: Any,
    optimizer: Any,
    loss_of: Callable[[Any], Any],
    order: Sequence[str],
    lr: float,
    snapshot: Callable[[Any], dict[str, Any]] | None = None,
    train_mode: bool = False,
) -> None:
    """One step of the suite's own optimiser type and settings (its `defaults`: lr, momentum, eps,
    ...) on a copy of the model: the first-step checks. The training model stays untouched."""
    import copy

    probe = copy.deepcopy(model)
    probe.train(train_mode)
    opt = type(optimizer)(probe.parameters(), **optimizer.defaults)

    def weights(m: Any) -> dict[str, Any]:
        return {name: t.detach().cpu().numpy().copy() for name, t in m.named_parameters()}

    take = snapshot or weights
    before = take(probe)
    loss = loss_of(probe)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    after = take(probe)
    import torch

    with torch.no_grad():
        loss_after = float(loss_of(probe))
    training.first_step_checks(
        ctx, loss_before=float(loss.detach()), loss_after=loss_after, before=before, after=after, order=order, lr=lr
    )


def _cudnn_flags(ctx: Context) -> None:
    """cudnn.benchmark picks convolution algorithms by timing them: it changes speed (and cold epochs)."""
    import torch

    flags = {
        "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
        "cudnn_deterministic": bool(torch.backends.cudnn.deterministic),
    }
    ctx.training.update(flags)
    ctx.note("torch.backends.cudnn.benchmark=" + str(flags["cudnn_benchmark"]).lower()
             + ", deterministic=" + str(flags["cudnn_deterministic"]).lower())  # fmt: skip


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
    lr: float,
) -> None:
    """Train, evaluate and record every training metric and check for one pytorch job."""
    import torch
    import torch.nn.functional as F

    mode = torch_variant(variant, ctx.device)
    ctx.note(VARIANT_NOTES[mode])
    if mode == "cuda-graph":
        from suites.runtime import cuda_graphs

        cuda_graphs.make_capturable(optimizer)  # before any step: Adam's step counts live on the device
    ctx.note(DATA_NOTES["host" if data.host else "device"])
    ctx.training["data"] = "host" if data.host else "device"
    _cudnn_flags(ctx)
    counter = CompileCounter()
    n_params = param_count(model)
    load_weights(model, training.initial_weights(layers, seed), layers)
    model.eval()  # dropout off: the initial loss is a deterministic function of the weights
    first = data.orders[0, :batch]
    x_first, y_first = data.train_x[first].to(ctx.device), data.train_y[first].to(ctx.device)
    with torch.no_grad():
        logits = model(prepare(x_first, None))
        loss = float(F.cross_entropy(logits, y_first))
        training.initial_logits_check(ctx, logits[: training.PROBE_SAMPLES].tolist(), loss)
    names = [layer.name for layer in layers]
    first_step_probe(
        ctx,
        model=model,
        optimizer=optimizer,
        loss_of=lambda m: F.cross_entropy(m(prepare(x_first, None)), y_first),
        order=[f"{n}.{part}" for n in names for part in ("weight", "bias")],
        lr=lr,
    )
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
    dev = ctx.device

    def run_epoch(e: int) -> Any:
        order = data.orders[e]
        aux = data.aux[e] if data.aux is not None else None
        totals = torch.zeros(2, device=dev)
        for start, size in spans:
            idx = order[start : start + size]
            if data.host:  # gather on the host, then one copy per array to the device
                xb, yb = x_all[idx].to(dev), y_all[idx].to(dev)
                ab = aux[idx].to(dev) if aux is not None else None
            else:
                xb, yb = x_all[idx], y_all[idx]
                ab = aux[idx] if aux is not None else None
            logits = fwd(xb, ab)
            loss = F.cross_entropy(logits, yb)  # log-softmax + NLL in one kernel
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            with torch.no_grad():
                totals[0] += loss.detach() * size
                totals[1] += (logits.argmax(dim=1) == yb).sum()
        return totals

    graphed: list[Any] = []  # the captured step, once made
    epoch_fn: Callable[[int], Any] = run_epoch
    if mode == "cuda-graph":
        if tail:  # a graph replays one shape: the last partial batch is left out of every epoch
            ctx.note(f"cuda-graph: the last partial batch ({tail} samples) is left out of every epoch")
            spans, used = [(s, batch) for s in starts], len(starts) * batch
        epoch_fn = _graph_epochs(ctx, model, optimizer, fwd, data, spans, batch, graphed)

    def read(out: Any) -> tuple[float, float]:
        loss_sum, correct = out.tolist()
        return loss_sum / used, 100.0 * correct / used

    m_test = int(data.test_y.shape[0])

    def evaluate() -> float:
        """Test accuracy, dropout off; the eager model avoids a recompilation for eval mode."""
        model.eval()
        correct = torch.zeros((), dtype=torch.int64, device=dev)
        with torch.inference_mode():
            for lo in range(0, m_test, EVAL_BATCH):
                logits = model(prepare(data.test_x[lo : lo + EVAL_BATCH], None))
                correct += (logits.argmax(dim=1) == data.test_y[lo : lo + EVAL_BATCH]).sum()
        model.train()
        return 100.0 * int(correct) / m_test

    on_gpu = ctx.device_kind == "gpu"
    if on_gpu:
        torch.cuda.reset_peak_memory_stats()
    baseline = training.memory_baseline(int(torch.cuda.memory_allocated()) if on_gpu else None)
    history = training.train(
        ctx, epochs=epochs, run_epoch=epoch_fn, read=read, samples_per_epoch=used, compilations=counter,
        evaluate=evaluate, target=training.target_of(ctx), curve=training.curve_of(ctx),
    )  # fmt: skip
    training.record(ctx, history, flops_per_sample=flops_per_sample, variant=mode)
    if graphed:
        ctx.note(f"cuda-graph: one capture, replayed {graphed[0].replays} times")
    training.record_peak_memory(
        ctx,
        baseline=baseline,
        device_peak=int(torch.cuda.max_memory_allocated()) if on_gpu else None,
        how="torch.cuda.max_memory_allocated() minus memory_allocated() before training",
    )
    accuracy = history.evaluations[-1].accuracy if history.evaluations else evaluate()
    training.record_accuracy(ctx, accuracy)
    ctx.check("param_count", n_params)

    if artifacts:
        rows = [(name, tuple(int(d) for d in p.shape)) for name, p in model.named_parameters()]
        training.write_artifact(ctx, "model_summary.txt", training.model_summary(title, rows))


def _graph_epochs(
    ctx: Context,
    model: Any,
    optimizer: Any,
    fwd: Callable[[Any, Any], Any],
    data: DeviceData,
    spans: Sequence[tuple[int, int]],
    batch: int,
    graphed: list[Any],
) -> Callable[[int], Any]:
    """`run_epoch` of variant=cuda-graph: the step reads its batch from static buffers (the sample
    indices when the data is on the device, the batch itself with data=host) and is captured on
    its first call, in epoch 1 (so capture cost lands in the cold epoch, as compilation does)."""
    import torch
    import torch.nn.functional as F

    from suites.runtime import cuda_graphs

    dev = ctx.device
    totals = torch.zeros(2, device=dev)
    x_all, y_all = data.train_x, data.train_y

    def batch_inputs(e: int, start: int) -> list[Any]:
        idx = data.orders[e][start : start + batch]
        inputs = [x_all[idx].to(dev), y_all[idx].to(dev)] if data.host else [idx]
        if data.aux is not None:
            inputs.append(data.aux[e][idx].to(dev))
        return inputs

    def step(*inputs: Any) -> Any:
        if data.host:
            xb, yb, rest = inputs[0], inputs[1], inputs[2:]
        else:
            xb, yb, rest = x_all[inputs[0]], y_all[inputs[0]], inputs[1:]
        logits = fwd(xb, rest[0] if rest else None)
        loss = F.cross_entropy(logits, yb)
        optimizer.zero_grad(set_to_none=True)  # grads come from the graph's pool, rewritten per replay
        loss.backward()
        optimizer.step()
        with torch.no_grad():
            totals[0] += loss.detach() * batch
            totals[1] += (logits.argmax(dim=1) == yb).sum()
        return loss.detach()

    state = [*model.parameters(), *model.buffers(), totals]
    captured = cuda_graphs.CapturedStep(
        step, cuda_graphs.StaticInputs(batch_inputs(0, spans[0][0])), state=state, optimizer=optimizer
    )
    graphed.append(captured)

    def run_epoch(e: int) -> Any:
        totals.zero_()
        for start, _ in spans:
            captured(*batch_inputs(e, start))
        return totals.clone()  # the next epoch zeroes `totals` before this one is read

    return run_epoch
