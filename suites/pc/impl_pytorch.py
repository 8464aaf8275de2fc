"""Predictive coding in PyTorch: the same algorithm as impl_jax, two ways to execute it.

`per-batch` is the tutorial's shape in idiomatic eager PyTorch: per batch, a forward
initialisation, T x-steps that each rebuild the energy and call `torch.autograd.grad` on the
value nodes, then `backward()` and `torch.optim.Adam.step()` for the weights.

`low-overhead` (parameter `pytorch_fast`) is one of three measured ways to cut that cost
(steady epoch at batch 256 on the 2-core development CPU: eager per-batch 2.05 s):
- `manual-compile` (default, 0.72 s): the closed-form step below under `torch.compile`
  (inductor fuses the elementwise work); Adam stays the fused eager kernel.
- `manual` (1.02 s): the energy's gradients in closed form, in-place updates under
  `torch.no_grad`, fused Adam (one kernel for all tensors): no autograd graph, a third of the
  kernel launches, and u_1 = tanh(x_0 W_1 + b_1), which no x-step changes, computed once per
  batch (XLA finds the same saving in the JAX step by common-subexpression elimination).
- `compile` (1.27 s): the autograd formulation (torch.func.grad_and_value) as one
  `torch.compile` graph.
- `cuda-graph` (GPU only; skipped on the CPU): the `manual` step, the batch gather, the fused
  Adam update (capturable=True) and the epoch totals captured as one CUDA graph
  (suites/runtime/cuda_graphs.py) and replayed per batch; the only per-batch host work is
  copying the batch's indices into the graph's static input buffer. Capture (with its
  side-stream warm-up, whose updates are undone) happens in epoch 1, the "first call".
  Never run on a GPU yet: its logic is tested on the CPU against a stand-in for torch.cuda.

Closed form, with e_l = x_l - u_l, f' = 1 - u^2 for tanh layers and 1 for the last one,
d_l = e_l * f'(u_l):  dE/dx_l = e_l - d_{l+1} W_{l+1}^T,  dE/dW_l = -x_{l-1}^T d_l,  dE/db_l = -sum d_l.
The agreement checks compare both variants' first step with each other and with JAX.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from suites.pc import common
from suites.runtime import cuda_graphs
from suites.runtime.context import Context

HOW = {
    "per-batch": "eager autograd per batch: torch.autograd.grad on the value nodes for each x-step, "
    "backward() + torch.optim.Adam for the w-step",
    "manual": "closed-form gradients, in-place updates under no_grad, fused Adam, u_1 computed once per batch",
    "manual-compile": "closed-form gradients under torch.compile (inductor), fused eager Adam",
    "compile": "the autograd step (torch.func.grad_and_value) as one torch.compile graph, fused eager Adam",
    "cuda-graph": "closed-form gradients, batch gather, fused capturable Adam and epoch totals captured as one "
    "CUDA graph, replayed per batch",
}


def run(ctx: Context) -> None:
    import numpy as np
    import torch

    from suites.runtime import profiling, training
    from suites.runtime.training_torch import CompileCounter

    p = ctx.params
    data = common.load(ctx)
    steps_t, x_lr, batch = int(p["T"]), float(p["x_lr"]), data.batch
    hidden_layers = int(p["layers"])
    n_layers = hidden_layers + 1
    fast = str(p["pytorch_fast"])
    dev = ctx.device
    chosen = common.variants(p)
    graphed = fast == "cuda-graph" and "low-overhead" in chosen
    if graphed:  # before any work: the job cannot give what was asked for here
        cuda_graphs.require(dev, "pytorch_fast=cuda-graph (use manual-compile on the CPU)")

    def put(a: Any, dtype: Any = None) -> Any:
        # A copy, never a view: on the CPU .to(dev) would share memory with the NumPy array, and
        # training would then overwrite the initial weights the next variant starts from.
        t = torch.from_numpy(np.ascontiguousarray(a))
        return t.to(device=dev, dtype=dtype or t.dtype, copy=True)

    x_all, t_all, y_all = put(data.train_x), put(data.train_t), put(data.train_y, torch.int64)
    orders, test_x = put(data.orders, torch.int64), put(data.test_x)
    ctx.sync(None)
    init = common.init_weights(p)

    def fresh(variant: str) -> tuple[list[Any], Any]:
        """The initial weights as leaf tensors, and Adam over them (fused for the low-overhead variant)."""
        params = [put(a).requires_grad_() for layer in init for a in layer]  # W1, b1, W2, b2, ...
        fused = True if variant == "low-overhead" else None
        # capturable: Adam's step count stays on the device, so a CUDA graph can update it
        return params, torch.optim.Adam(
            params,
            lr=float(p["w_lr"]),
            betas=(common.ADAM_B1, common.ADAM_B2),
            eps=common.ADAM_EPS,
            fused=fused,
            capturable=graphed and variant == "low-overhead",
        )

    # ---- per-batch: the tutorial's shape, autograd --------------------------------------------
    def energy(params: list[Any], x0: Any, free: list[Any], target: Any) -> Any:
        x, total = x0, x0.new_zeros(())
        for layer in range(n_layers):
            a = torch.addmm(params[2 * layer + 1], x, params[2 * layer])
            hidden = layer < hidden_layers
            u = torch.tanh(a) if hidden else a
            node = free[layer] if hidden else target
            total = total + 0.5 * (node - u).pow(2).sum()
            x = node
        return total

    def forward(params: list[Any], x0: Any) -> tuple[list[Any], Any]:
        nodes, x = [], x0
        for layer in range(hidden_layers):
            x = torch.tanh(torch.addmm(params[2 * layer + 1], x, params[2 * layer]))
            nodes.append(x)
        return nodes, torch.addmm(params[-1], x, params[-2])

    def autograd_batch(params: list[Any], opt: Any, x0: Any, target: Any, labels: Any) -> tuple[Any, Any]:
        with torch.no_grad():
            free, out = forward(params, x0)
            correct = (out.argmax(dim=1) == labels).sum()
        free = [f.requires_grad_() for f in free]
        energies = []
        for _ in range(steps_t):
            value = energy(params, x0, free, target)
            grads = torch.autograd.grad(value, free)
            with torch.no_grad():
                for f, g in zip(free, grads, strict=True):
                    f.sub_(g, alpha=x_lr)  # plain SGD
            energies.append(value.detach())
        opt.zero_grad(set_to_none=True)
        value = energy(params, x0, [f.detach() for f in free], target)
        value.backward()
        opt.step()
        energies.append(value.detach())
        return torch.stack(energies), correct

    # ---- low-overhead: closed-form gradients ---------------------------------------------------
    def manual_grads(ws: list[Any], x0: Any, target: Any, labels: Any) -> tuple[list[Any], Any, Any]:
        """(dE/dW1, dE/db1, ...), the T + 1 energies, correct predictions at initialisation."""
        u1 = torch.tanh(torch.addmm(ws[1], x0, ws[0]))  # constant through the x-steps
        free = [u1.clone()]
        for layer in range(1, hidden_layers):
            free.append(torch.tanh(torch.addmm(ws[2 * layer + 1], free[-1], ws[2 * layer])))
        correct = (torch.addmm(ws[-1], free[-1], ws[-2]).argmax(dim=1) == labels).sum()

        def errors() -> tuple[list[Any], list[Any], Any]:
            """e_l and d_l = e_l * f'(u_l) at the current nodes, and the energy."""
            es, ds = [free[0] - u1], [(free[0] - u1) * (1.0 - u1 * u1)]
            for layer in range(1, n_layers):
                a = torch.addmm(ws[2 * layer + 1], free[layer - 1], ws[2 * layer])
                if layer < hidden_layers:
                    u = torch.tanh(a)
                    e = free[layer] - u
                    ds.append(e * (1.0 - u * u))
                else:
                    e = target - a
                    ds.append(e)
                es.append(e)
            return es, ds, 0.5 * sum((e * e).sum() for e in es)

        energies = []
        for _ in range(steps_t):
            es, ds, value = errors()
            for layer in range(hidden_layers):
                # dE/dx_l = e_l - d_{l+1} W_{l+1}^T
                free[layer] = free[layer] - x_lr * (es[layer] - ds[layer + 1] @ ws[2 * layer + 2].T)
            energies.append(value)
        _, ds, value = errors()
        energies.append(value)
        inputs = [x0, *free]
        grads = []
        for layer in range(n_layers):
            grads.append(-(inputs[layer].T @ ds[layer]))
            grads.append(-ds[layer].sum(dim=0))
        return grads, torch.stack(energies), correct

    # ---- low-overhead: the autograd step as one graph (torch.func) ------------------------------
    def func_grads(ws: list[Any], x0: Any, target: Any, labels: Any) -> tuple[list[Any], Any, Any]:
        free, out = forward(ws, x0)
        correct = (out.argmax(dim=1) == labels).sum()
        grad_x = torch.func.grad_and_value(lambda f: energy(ws, x0, f, target))
        energies = []
        for _ in range(steps_t):
            grads, value = grad_x(free)
            free = [f - x_lr * g for f, g in zip(free, grads, strict=True)]
            energies.append(value)
        grads, value = torch.func.grad_and_value(lambda w: energy(w, x0, free, target))(ws)
        energies.append(value)
        return list(grads), torch.stack(energies), correct

    compute: Callable[..., Any] | None = None
    if fast in ("manual", "cuda-graph"):
        compute = manual_grads
    elif fast == "manual-compile":
        compute = torch.compile(manual_grads)
    else:
        compute = torch.compile(func_grads)

    def fast_batch(params: list[Any], opt: Any, x0: Any, target: Any, labels: Any) -> tuple[Any, Any]:
        with torch.no_grad():
            grads, energies, correct = compute(params, x0, target, labels)
            for w, g in zip(params, grads, strict=True):
                w.grad = g
        opt.step()  # fused Adam: one kernel over all tensors
        return energies, correct

    def batch_fn(variant: str) -> Callable[..., tuple[Any, Any]]:
        return autograd_batch if variant == "per-batch" else fast_batch

    # ---- low-overhead on a GPU: the whole batch step as one CUDA graph ------------------------
    def graph_step(params: list[Any], opt: Any, totals: Any) -> cuda_graphs.CapturedStep:
        """Captured on its first call: reads the batch's sample indices from a static buffer."""

        def step(idx: Any) -> Any:
            with torch.no_grad():
                grads, energies, correct = manual_grads(params, x_all[idx], t_all[idx], y_all[idx])
                for w, g in zip(params, grads, strict=True):
                    w.grad = g
                opt.step()
                totals[0] += energies[-1]
                totals[1] += correct
            return energies

        inputs = cuda_graphs.StaticInputs([orders[0][:batch]])
        return cuda_graphs.CapturedStep(step, inputs, state=[*params, totals], optimizer=opt)

    graphs: dict[str, cuda_graphs.CapturedStep] = {}

    def make_graph_epoch(variant: str, state: list[Any]) -> Callable[[int], Any]:
        params, opt = state
        totals = torch.zeros(2, device=dev)
        captured = graphs[variant] = graph_step(params, opt, totals)

        def run_epoch(e: int) -> Any:
            order = orders[e]
            totals.zero_()
            for start in data.starts:
                captured(order[start : start + batch])  # the first call captures (epoch 1)
            return totals

        return run_epoch

    def make_epoch(variant: str, state: list[Any]) -> Callable[[int], Any]:
        if graphed and variant == "low-overhead":
            return make_graph_epoch(variant, state)
        step = batch_fn(variant)

        def run_epoch(e: int) -> Any:
            params, opt = state
            order = orders[e]
            totals = torch.zeros(2, device=dev)
            for start in data.starts:
                idx = order[start : start + batch]
                energies, correct = step(params, opt, x_all[idx], t_all[idx], y_all[idx])
                with torch.no_grad():
                    totals[0] += energies[-1]
                    totals[1] += correct
            return totals

        return run_epoch

    used = len(data.starts) * batch

    def read(out: Any) -> tuple[float, float]:
        energy_sum, correct = out.tolist()
        return energy_sum / used, 100.0 * correct / used

    def how(variant: str) -> str:
        return HOW["per-batch"] if variant == "per-batch" else f"pytorch_fast={fast}: {HOW[fast]}"

    histories: dict[str, Any] = {}
    counter = CompileCounter()
    for variant in chosen:
        ctx.progress(f"variant {variant}: {how(variant)} ('loss' = mean energy after the x-steps)")
        state = list(fresh(variant))
        history = training.train(
            ctx,
            epochs=int(p["epochs"]),
            run_epoch=make_epoch(variant, state),
            read=read,
            samples_per_epoch=used,
            compilations=counter,
        )
        with torch.no_grad():
            predicted = forward(state[0], test_x)[1].argmax(dim=1).cpu().numpy()
        accuracy = 100.0 * float(np.mean(predicted == data.test_y))
        common.record_variant(ctx, variant, history, accuracy, how(variant))
        histories[variant] = history
    common.record_speedup(ctx, histories)
    ctx.check("test_accuracy", accuracy)

    # Agreement: the first batch of epoch 1 from the initial weights through each variant's code
    # (after training, so a compilation here never lands in a timed epoch).
    first: dict[str, common.FirstStep] = {}
    idx = orders[0][:batch]
    for variant in chosen:
        if variant in graphs:  # the captured graph itself, from the initial weights
            captured = graphs[variant]
            params, opt = captured.state[:-1], captured.optimizer
            captured.reset([put(a) for layer in init for a in layer] + [torch.zeros(2, device=dev)])
            energies = captured(idx)
            ctx.note(f"{variant}: CUDA graph captured once, replayed {captured.replays} times")
        else:
            params, opt = fresh(variant)
            energies, _ = batch_fn(variant)(params, opt, x_all[idx], t_all[idx], y_all[idx])
        first[variant] = common.FirstStep(
            energies=[float(v) for v in energies.tolist()],
            # after one step Adam's exp_avg = (1 - b1) * grad
            grads=[opt.state[w]["exp_avg"].cpu().numpy() / (1.0 - common.ADAM_B1) for w in params],
            weights=[w.detach().cpu().numpy() for w in params],
        )
    common.record_first_step(ctx, first)

    # Last: each variant's own batch step, from fresh weights; a captured graph replays an epoch's.
    for variant in chosen:
        label = f"epoch [{variant}]"
        if variant in graphs:
            ctx.profile(label, None, steps_per_sample=len(data.starts), unavailable="a CUDA graph replays the step")
            continue
        params, opt = fresh(variant)
        step = batch_fn(variant)

        def at(start: int, params: Any = params, opt: Any = opt, step: Any = step) -> Callable[[], Any]:
            idx = orders[0][start : start + batch]
            return lambda: step(params, opt, x_all[idx], t_all[idx], y_all[idx])

        ctx.profile(label, profiling.cycle([at(start) for start in data.starts]), steps_per_sample=len(data.starts))
