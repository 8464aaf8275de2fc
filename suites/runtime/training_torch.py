"""PyTorch training loop shared by the training suites (imported only inside a pytorch job).

Fast idiomatic path: the whole dataset, the per-epoch sample orders and any augmentation
parameters are tensors on the device before the clock starts; a batch is an index into them
(no DataLoader, no per-batch host work); loss and accuracy are summed into a device tensor
and read after the epoch. `compiled` wraps the forward pass (model plus input preparation) in
`torch.compile`; backward runs through the AOT-compiled graph, the optimiser step stays eager.

Like for like with the Flax loop (each recorded in the result's `training.fairness`): cuDNN's
algorithm search on a GPU, as XLA autotunes (`conv_algorithm_search`); pinned, asynchronous
host-to-device copies with data=host on a GPU, as jax.device_put's (`host_copy`); `--precision
bf16` computes the model in bfloat16 under autocast with float32 master weights, as Flax's
dtype=bfloat16 layers do (`compute_dtype`).
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

from suites.contract import settings
from suites.contract.datasets import batch_starts
from suites.contract.errors import Skip
from suites.runtime import profiling, training
from suites.runtime.context import Context
from suites.runtime.training import host_copy

EVAL_BATCH = 1000

DATA_NOTES = {
    "device": "data=device: dataset, sample orders and augmentation parameters resident on the device; "
    "a step indexes its own batch",
    "host": "data=host: each step gathers its batch from CPU tensors; on a GPU straight into fresh pinned "
    "(page-locked) host memory, copied to the device with .to(non_blocking=True), as DataLoader(pin_memory=True) "
    "gives (no DataLoader workers); on the CPU the gathered batch is used where it is",
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


# TorchDynamo counts the graphs it compiles in a private module whose names have moved between
# releases; a missing key reads as 0 there (a defaultdict), which would pass for "no recompilation".
DYNAMO_COUNTER = "torch._dynamo.utils.counters['stats']['unique_graphs']"


def _dynamo_graphs() -> int | None:
    """TorchDynamo's running count of compiled graphs; None where this release has no such counter
    (or nothing has compiled yet: the key appears with the first graph)."""
    try:
        from torch._dynamo import utils
    except ImportError:
        return None
    counters = getattr(utils, "counters", None)
    stats = counters.get("stats") if isinstance(counters, Mapping) else None  # .get: no defaultdict insert
    value = stats.get("unique_graphs") if isinstance(stats, Mapping) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _canary_compile() -> None:
    """Compile one fresh tiny function with TorchDynamo (backend="eager": no inductor, no C++).

    Dynamo caches by code object, so each canary gets a code object of its own: a second counter
    in the same process must see a compilation too, not a cache hit."""
    import torch

    def canary(x: Any) -> Any:
        return x + 1

    fresh = types.FunctionType(canary.__code__.replace(), canary.__globals__, "canary")
    torch.compile(fresh, backend="eager")(torch.zeros(1))


class CompileCounter:
    """Graphs compiled by TorchDynamo so far (a recompile for a new batch shape counts too).

    `compiles`: whether the loop compiles at all. If it does, a canary compilation before training
    proves the counter moves; where it does not, `__call__` returns None and `why` says why, so a
    broken counter reads as "not observable", never as 0 compilations. An eager loop compiles
    nothing: 0 by construction, no canary (and no TorchDynamo import)."""

    def __init__(self, compiles: bool = True) -> None:
        self.compiles = compiles
        self.why: str | None = None
        if compiles:
            self.how = f"graphs compiled by TorchDynamo ({DYNAMO_COUNTER}), checked by a canary compile before training"
            self.why = self._canary_problem()
        else:
            self.how = "eager PyTorch: nothing in this loop is compiled, 0 by construction"

    @staticmethod
    def _canary_problem() -> str | None:
        before = _dynamo_graphs() or 0  # None before the first compilation in this process
        try:
            _canary_compile()
        except Exception as e:  # any failure (no compiler backend, a dynamo error) leaves the count unproven
            return f"a canary torch.compile failed ({type(e).__name__}: {e}), so {DYNAMO_COUNTER} is unverified"
        after = _dynamo_graphs()
        if after is None:
            return f"{DYNAMO_COUNTER} does not exist in this torch release"
        if after <= before:
            return f"{DYNAMO_COUNTER} did not move when a canary function was compiled"
        return None

    def __call__(self) -> int | None:
        if not self.compiles:
            return 0
        if self.why is not None:
            return None
        value = _dynamo_graphs()
        if value is None:
            self.why = f"{DYNAMO_COUNTER} disappeared during training"
        return value


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
    start: Callable[[Any], None] | None = None,
) -> None:
    """One step of the suite's own optimiser type and settings (its `defaults`: lr, momentum, eps,
    ...) on a copy of the model: the first-step checks. The training model stays untouched.
    `start(copy)` puts the initial weights into the copy, for a probe run after training."""
    import copy

    probe = copy.deepcopy(model)
    if start is not None:
        start(probe)
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


def conv_search(device_kind: str) -> bool | None:
    """Whether training lets cuDNN time its convolution algorithms (torch.backends.cudnn.benchmark).

    On a GPU yes: XLA autotunes its convolutions and GEMMs when it compiles, so a PyTorch loop
    left on cuDNN's heuristics would be compared with one hand tuned. None on the CPU, where
    neither library searches (the flag only steers cuDNN)."""
    return True if device_kind == "gpu" else None


@contextmanager
def conv_algorithm_search(ctx: Context) -> Iterator[None]:
    """Training with the algorithm search `conv_search` decides, switched on only here, just before
    epoch 1: the search then lands in the cold epoch as XLA's autotuning does (the probes before
    ran on the heuristics and have tuned nothing). Restored afterwards, so checks computed after
    training take the same path as those before. Records the setting and the flags training used."""
    import torch

    search = conv_search(ctx.device_kind)
    training.fairness(ctx)["conv_algorithm_search"] = search
    before = torch.backends.cudnn.benchmark
    if search is not None:
        torch.backends.cudnn.benchmark = search
    try:
        _cudnn_flags(ctx)
        yield
    finally:
        torch.backends.cudnn.benchmark = before


def host_batch(src: Any, idx: Any, dev: Any, pinned: bool) -> Any:
    """Rows `idx` of the CPU tensor `src`, on `dev`.

    `pinned`: gathered straight into a fresh page-locked buffer and copied with non_blocking=True.
    A fresh buffer per step is safe: PyTorch's CachingHostAllocator hands a pinned block out again
    only once the copy that read it has finished (it records an event on the copy's stream);
    reusing one buffer here would overwrite it while the previous copy may still be reading it."""
    import torch

    if not pinned:
        return src[idx].to(dev)
    buf = torch.empty((int(idx.shape[0]), *src.shape[1:]), dtype=src.dtype, pin_memory=True)
    torch.index_select(src, 0, idx, out=buf)
    return buf.to(dev, non_blocking=True)


def compute_dtype(ctx: Context) -> str:
    """The dtype the model computes in: `--precision bf16` means bf16 operands (contract/settings.py)."""
    return settings.compute_dtype(ctx.precision)


def autocast(ctx: Context, *, cache: bool = True) -> AbstractContextManager[Any]:
    """The region that computes in the job's dtype: under bf16 torch.autocast (bf16 operands for
    convolutions and matmuls, float32 accumulation, float32 master weights; no GradScaler, bf16 has
    float32's range); otherwise nothing, so the float32 path is the plain one. `cache` False: no
    cache of cast weights, as PyTorch asks of autocast in a CUDA graph capture."""
    import torch

    if compute_dtype(ctx) != "bfloat16":
        return nullcontext()
    region: AbstractContextManager[Any] = torch.autocast(
        device_type=ctx.device.type, dtype=torch.bfloat16, cache_enabled=cache
    )
    return region


def cross_entropy(logits: Any, labels: Any) -> Any:
    """The training loss on float32 logits (bf16 ones are cast first, as Flax's loop does and as
    autocast would: cross_entropy is on its float32 list); a no-op cast for float32 logits."""
    import torch.nn.functional as F

    return F.cross_entropy(logits.float(), labels)  # log-softmax + NLL in one kernel


def memory_baseline(ctx: Context) -> training.MemoryBaseline:
    """The allocator's bytes right before epoch 1, after the peak counter is restarted (so copies
    made before training, the initial-logits check's among them, do not count). Optimizer state
    must not exist yet: PyTorch creates it in the first step, above this baseline, as the Flax
    loop counts its own."""
    import torch

    on_gpu = ctx.device_kind == "gpu"
    if on_gpu:
        torch.cuda.reset_peak_memory_stats()
    return training.memory_baseline(int(torch.cuda.memory_allocated()) if on_gpu else None)


def run(
    ctx: Context,
    *,
    model: Any,
    optimizer: Any,
    prepare: Callable[[Any, Any], Any],
    data: DeviceData,
    recipe: training.Recipe,
) -> None:
    """Train, evaluate and record every training metric and check for one pytorch job."""
    import torch

    mode = torch_variant(recipe.variant, ctx.device)
    ctx.note(VARIANT_NOTES[mode])
    if mode == "cuda-graph":
        from suites.runtime import cuda_graphs

        cuda_graphs.make_capturable(optimizer)  # before any step: Adam's step counts live on the device
    ctx.note(DATA_NOTES["host" if data.host else "device"])
    ctx.training["data"] = "host" if data.host else "device"
    copy_mode = host_copy(ctx.device_kind, data.host)
    training.record_fairness(ctx, host_copy=copy_mode)
    counter = CompileCounter(compiles=mode == "compiled")  # its canary compiles before any clock

    def logits_of(m: Any, x: Any, a: Any) -> Any:
        """The model in the job's dtype; the input pipeline (`prepare`) stays float32, as Flax's
        runs before its bf16 layers. cuda-graph: autocast without its weight cache inside capture."""
        inputs = prepare(x, a)
        with autocast(ctx, cache=mode != "cuda-graph"):
            return m(inputs)

    # The checks are the workload's definition (same model, weights, optimiser, data): computed in
    # float32 whatever `--precision` (as in the Flax loop), so they keep float32's tolerances. In
    # bf16 two frameworks agree only to bf16 rounding, which would blunt every check to "grossly
    # different"; the bf16 arithmetic itself is shown by the precision probe and the training.
    n_params = param_count(model)
    initial = training.initial_weights(recipe.layers, recipe.seed)
    load_weights(model, initial, recipe.layers)
    model.eval()  # dropout off: the initial loss is a deterministic function of the weights
    first = data.orders[0, : recipe.batch]
    x_first, y_first = data.train_x[first].to(ctx.device), data.train_y[first].to(ctx.device)
    with torch.no_grad():
        logits = model(prepare(x_first, None))
        loss = float(cross_entropy(logits, y_first))
        training.initial_logits_check(ctx, logits[: training.PROBE_SAMPLES].float().tolist(), loss)
    model.train()

    def forward(x: Any, a: Any) -> Any:
        return logits_of(model, x, a)

    fwd = torch.compile(forward) if mode == "compiled" else forward
    n = int(data.train_y.shape[0])
    starts, tail = batch_starts(n, recipe.batch, recipe.drop_last)
    if not starts:
        raise ValueError(f"batch_size {recipe.batch} is larger than the {n} training samples")
    spans = [(s, recipe.batch) for s in starts] + ([(len(starts) * recipe.batch, tail)] if tail else [])
    used = n if tail else len(starts) * recipe.batch
    x_all, y_all = data.train_x, data.train_y
    dev = ctx.device
    pinned = copy_mode == "async"

    def run_epoch(e: int) -> Any:
        order = data.orders[e]
        aux = data.aux[e] if data.aux is not None else None
        totals = torch.zeros(2, device=dev)
        for start, size in spans:
            train_batch(order, aux, start, size, totals)
        return totals

    def train_batch(order: Any, aux: Any, start: int, size: int, totals: Any) -> Any:
        """One optimiser step on the batch at `start`, its loss and correct count added to `totals`."""
        idx = order[start : start + size]
        if data.host:  # gather on the host, then one copy per array to the device
            xb, yb = host_batch(x_all, idx, dev, pinned), host_batch(y_all, idx, dev, pinned)
            ab = host_batch(aux, idx, dev, pinned) if aux is not None else None
        else:
            xb, yb = x_all[idx], y_all[idx]
            ab = aux[idx] if aux is not None else None
        logits = fwd(xb, ab)
        loss = cross_entropy(logits, yb)
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
            spans, used = [(s, recipe.batch) for s in starts], len(starts) * recipe.batch
        epoch_fn = _graph_epochs(ctx, model, optimizer, fwd, data, spans, recipe.batch, graphed, pinned)

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
                logits = logits_of(model, data.test_x[lo : lo + EVAL_BATCH], None)
                correct += (logits.argmax(dim=1) == data.test_y[lo : lo + EVAL_BATCH]).sum()
        model.train()
        return 100.0 * int(correct) / m_test

    on_gpu = ctx.device_kind == "gpu"
    with conv_algorithm_search(ctx):
        baseline = memory_baseline(ctx)
        history = training.train(
            ctx, epochs=recipe.epochs, run_epoch=epoch_fn, read=read, samples_per_epoch=used, compilations=counter,
            evaluate=evaluate, target=training.target_of(ctx), curve=training.curve_of(ctx),
        )  # fmt: skip
    training.record(ctx, history, flops_per_sample=recipe.flops_per_sample, variant=mode)
    if graphed:
        ctx.note(f"cuda-graph: one capture, replayed {graphed[0].replays} times")
    training.record_peak_memory(
        ctx,
        baseline=baseline,
        device_peak=int(torch.cuda.max_memory_allocated()) if on_gpu else None,
        how="torch.cuda.max_memory_allocated() minus memory_allocated() before training",
    )
    # The first-step checks, from the initial weights, once the peak has been read (as in the Flax
    # loop): on the CPU the peak is the process's resident set, and a probe before the baseline
    # would leave its freed model copy and gradients in the heap for training to reuse unseen.
    names = [layer.name for layer in recipe.layers]
    first_step_probe(
        ctx,
        model=model,
        optimizer=optimizer,
        loss_of=lambda m: cross_entropy(m(prepare(x_first, None)), y_first),  # float32, as above
        order=[f"{n}.{part}" for n in names for part in ("weight", "bias")],
        lr=recipe.lr,
        start=lambda m: load_weights(m, initial, recipe.layers),
    )
    accuracy = history.evaluations[-1].accuracy if history.evaluations else evaluate()
    training.record_accuracy(ctx, accuracy)
    ctx.check("param_count", n_params)

    # Last: the profiled steps train the model further, after every number and check is recorded.
    if mode == "cuda-graph":
        ctx.profile("epoch", None, steps_per_sample=len(spans), unavailable="cuda-graph replays a captured epoch "
                    "step by step inside one graph: profile the eager or compiled variant")  # fmt: skip
    else:
        order, aux = data.orders[0], data.aux[0] if data.aux is not None else None
        totals = torch.zeros(2, device=dev)
        steps = [functools.partial(train_batch, order, aux, start, recipe.batch, totals) for start in starts]
        ctx.profile("epoch", profiling.cycle(steps), steps_per_sample=len(spans))

    if recipe.artifacts:
        rows = [(name, tuple(int(d) for d in p.shape)) for name, p in model.named_parameters()]
        training.write_artifact(ctx, "model_summary.txt", training.model_summary(recipe.title, rows))


def _graph_epochs(
    ctx: Context,
    model: Any,
    optimizer: Any,
    fwd: Callable[[Any, Any], Any],
    data: DeviceData,
    spans: Sequence[tuple[int, int]],
    batch: int,
    graphed: list[Any],
    pinned: bool = False,
) -> Callable[[int], Any]:
    """`run_epoch` of variant=cuda-graph: the step reads its batch from static buffers (the sample
    indices when the data is on the device, the batch itself with data=host, copied there from
    pinned memory when `pinned`) and is captured on its first call, in epoch 1 (so capture cost
    lands in the cold epoch, as compilation does). `fwd` carries the autocast region of a bf16
    job, so the capture records the bf16 casts and kernels."""
    import torch

    from suites.runtime import cuda_graphs

    dev = ctx.device
    totals = torch.zeros(2, device=dev)
    x_all, y_all = data.train_x, data.train_y

    def batch_inputs(e: int, start: int) -> list[Any]:
        idx = data.orders[e][start : start + batch]
        aux = [data.aux[e]] if data.aux is not None else []
        if data.host:
            return [host_batch(a, idx, dev, pinned) for a in (x_all, y_all, *aux)]
        return [idx] + [a[idx] for a in aux]

    def step(*inputs: Any) -> Any:
        if data.host:
            xb, yb, rest = inputs[0], inputs[1], inputs[2:]
        else:
            xb, yb, rest = x_all[inputs[0]], y_all[inputs[0]], inputs[1:]
        logits = fwd(xb, rest[0] if rest else None)
        loss = cross_entropy(logits, yb)
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
