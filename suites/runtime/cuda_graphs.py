"""A PyTorch training step captured as a CUDA graph (imported only inside a pytorch job).

A CUDA graph records the kernels of one step once and replays them with a single launch, so a
step of many small kernels stops paying Python and launch overhead per kernel. What capture
demands (PyTorch's "CUDA Graphs" notes, torch.cuda.graphs):

- fixed addresses: the step reads its inputs from static buffers that every replay's inputs are
  copied into, and its outputs are the tensors the capture produced, rewritten by each replay;
- fixed shapes, no host synchronisation and no CPU tensors inside the step;
- warm-up iterations on a side stream before capture (lazy initialisation: cuBLAS workspaces,
  the optimizer's state, autograd's stream bookkeeping);
- an optimizer built with `capturable=True` (Adam/AdamW keep their step count on the device).

Warm-up really trains. `CapturedStep.capture` therefore saves the tensors the step mutates,
runs the warm-up, captures, and puts the saved values back (optimizer state created by the
warm-up goes back to zeros, which is Adam's fresh state), so the captured run starts from the
same weights as every other variant and its trajectory can be checked against theirs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from suites.contract.errors import Skip

# PyTorch's whole-network example warms up 3 iterations (DistributedDataParallel needs 11).
WARMUP_STEPS = 3


def _torch_cuda() -> Any:
    """torch.cuda (a seam: the unit tests, which have no GPU, put a stand-in here)."""
    import torch

    return torch.cuda


def unavailable_reason(device: Any) -> str | None:
    """Why a CUDA graph cannot be captured on `device` (a torch.device); None when it can."""
    kind = getattr(device, "type", str(device))
    if kind != "cuda":
        return f"CUDA graphs need a CUDA device and this job runs on {kind} (run with --device gpu)"
    cuda = _torch_cuda()
    if not cuda.is_available():
        return "torch.cuda.is_available() is False: no GPU reaches this process"
    if not hasattr(cuda, "CUDAGraph") or not hasattr(cuda, "graph"):
        return "this torch build has no torch.cuda.CUDAGraph"
    return None


def require(device: Any, what: str) -> None:
    """Skip the job, naming `what` needed the graph, when capture is impossible here."""
    reason = unavailable_reason(device)
    if reason is not None:
        raise Skip(f"{what}: {reason}")


def _plain_sgd(optimizer: Any, groups: Sequence[dict[str, Any]]) -> bool:
    """SGD keeps no step count and no host-side state, only momentum buffers (tensors). With
    dampening 0 a buffer the warm-up made and `Snapshot.restore` zeroed gives the first replay
    momentum * 0 + grad = grad, exactly what SGD's first step stores: graph-safe as it is."""
    import torch

    return isinstance(optimizer, torch.optim.SGD) and all(g.get("dampening", 0) == 0 for g in groups)


def make_capturable(optimizer: Any) -> None:
    """Switch a freshly built optimizer to its graph-safe form where PyTorch has one: Adam and
    AdamW read `capturable` from their parameter groups at every step and then keep their step
    counts on the device. Must run before the first step (the state it creates differs)."""
    if optimizer.state:
        raise ValueError("make_capturable must run before the optimizer's first step")
    for group in optimizer.param_groups:
        if "capturable" in group:
            group["capturable"] = True


def capturable_problem(optimizer: Any) -> str | None:
    """None when `optimizer` may be stepped inside a capture, else what to change."""
    groups = getattr(optimizer, "param_groups", None)
    if not groups:
        return f"{type(optimizer).__name__} has no param_groups"
    if _plain_sgd(optimizer, groups):
        return None
    if not all(group.get("capturable", False) for group in groups):
        return f"{type(optimizer).__name__} was built without capturable=True"
    return None


class StaticInputs:
    """The fixed-address tensors a captured step reads; `load` copies a replay's inputs in."""

    def __init__(self, examples: Sequence[Any]) -> None:
        import torch

        self.tensors = [torch.zeros_like(t) for t in examples]

    def load(self, *values: Any) -> None:
        if len(values) != len(self.tensors):
            raise ValueError(f"the captured step takes {len(self.tensors)} inputs, got {len(values)}")
        for i, (static, value) in enumerate(zip(self.tensors, values, strict=True)):
            if tuple(value.shape) != tuple(static.shape) or value.dtype != static.dtype:
                # a graph replays fixed shapes: a partial last batch must be dropped, not padded
                raise ValueError(
                    f"input {i}: {tuple(value.shape)} {value.dtype} does not fit the captured "
                    f"{tuple(static.shape)} {static.dtype}"
                )
            static.copy_(value, non_blocking=True)


def _optimizer_state(optimizer: Any) -> list[tuple[Any, str, Any]]:
    """(state dict, key, tensor) of every optimizer state entry; refuses non-tensor state."""
    import torch

    found = []
    for state in optimizer.state.values():
        for key, value in state.items():
            if not isinstance(value, torch.Tensor):
                raise ValueError(
                    f"optimizer state {key!r} is a {type(value).__name__}, not a tensor: only optimizers whose "
                    "state lives in tensors (Adam/AdamW with capturable=True) can be captured"
                )
            found.append((state, key, value))
    return found


class Snapshot:
    """Values of the tensors a step mutates, to put back after warm-up and capture."""

    def __init__(self, tensors: Sequence[Any], optimizer: Any) -> None:
        self.saved = [(t, t.detach().clone()) for t in tensors]
        self.optimizer = optimizer
        self.optimizer_saved = {id(t): t.detach().clone() for _, _, t in _optimizer_state(optimizer)}

    def restore(self) -> None:
        import torch

        with torch.no_grad():
            for tensor, value in self.saved:
                tensor.copy_(value)
            for _, _, tensor in _optimizer_state(self.optimizer):
                value = self.optimizer_saved.get(id(tensor))
                if value is None:
                    tensor.zero_()  # created by the warm-up: Adam's fresh state is all zeros
                else:
                    tensor.copy_(value)


class CapturedStep:
    """`step(*static_inputs)` captured once, then replayed: `captured(*inputs) -> outputs`.

    `state`: every tensor the step mutates besides the optimizer's own state (parameters,
    on-device accumulators); restored after the warm-up. The step must do all its work on the
    GPU, on tensors of fixed shape, and must not read results back to the host.
    """

    def __init__(
        self,
        step: Callable[..., Any],
        inputs: StaticInputs,
        *,
        state: Sequence[Any],
        optimizer: Any,
        warmup: int = WARMUP_STEPS,
    ) -> None:
        problem = capturable_problem(optimizer)
        if problem is not None:
            raise ValueError(f"cannot capture this step: {problem}")
        if warmup < 1:
            raise ValueError("capture needs at least one warm-up step on a side stream")
        self.step, self.inputs, self.state, self.optimizer, self.warmup = step, inputs, list(state), optimizer, warmup
        self.graph: Any = None
        self.outputs: Any = None
        self.replays = 0

    def body(self) -> Any:
        """The step on the static inputs: what the graph records (and what a replay recomputes)."""
        return self.step(*self.inputs.tensors)

    @property
    def captured(self) -> bool:
        return self.graph is not None

    def capture(self) -> None:
        """Warm up on a side stream, capture one step, restore the state the warm-up changed."""
        cuda = _torch_cuda()
        snapshot = Snapshot(self.state, self.optimizer)
        side = cuda.Stream()
        side.wait_stream(cuda.current_stream())
        with cuda.stream(side):
            for _ in range(self.warmup):
                self.body()
        cuda.current_stream().wait_stream(side)
        snapshot.restore()
        # grads allocated inside the capture come from the graph's private pool and are
        # overwritten, not accumulated, by every replay
        self.optimizer.zero_grad(set_to_none=True)
        graph = cuda.CUDAGraph()
        with cuda.graph(graph):
            self.outputs = self.body()
        # capture records kernels without running them; restoring again keeps that true even
        # for work a capture ran eagerly (and costs a few copies once)
        snapshot.restore()
        self.graph = graph

    def replay(self) -> Any:
        if self.graph is None:
            raise RuntimeError("replay before capture")
        self.graph.replay()
        self.replays += 1
        return self.outputs

    def __call__(self, *values: Any) -> Any:
        self.inputs.load(*values)
        if self.graph is None:
            self.capture()
        return self.replay()

    def reset(self, values: Sequence[Any]) -> None:
        """Put `values` into the `state` tensors and zero the optimizer state (a fresh start)."""
        import torch

        if len(values) != len(self.state):
            raise ValueError(f"reset takes {len(self.state)} tensors, got {len(values)}")
        with torch.no_grad():
            for tensor, value in zip(self.state, values, strict=True):
                tensor.copy_(value)
            for _, _, tensor in _optimizer_state(self.optimizer):
                tensor.zero_()
