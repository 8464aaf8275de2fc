"""suites/runtime/cuda_graphs.py and the pc suite's `pytorch_fast=cuda-graph` without a GPU.

No GPU exists here, so torch.cuda is replaced by a stand-in that keeps CUDA graphs' contract
where it matters for correctness: the capture region runs once, `replay()` recomputes the
recorded step from the current contents of the static inputs and writes its results into the
tensors the capture returned. Everything else (tensors, Adam, the pc suite) is real PyTorch on
the CPU. None of this has run on a GPU.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from harness.core.schema import load_result  # noqa: E402
from suites.contract.errors import Skip  # noqa: E402
from suites.runtime import cuda_graphs  # noqa: E402
from suites.runtime.context import Context  # noqa: E402
from suites.runtime.cuda_graphs import CapturedStep, Snapshot, StaticInputs  # noqa: E402
from tests.conftest import harness, run_folder  # noqa: E402


class FakeStream:
    def __init__(self, name: str, log: list[str]) -> None:
        self.name, self.log = name, log

    def wait_stream(self, other: FakeStream) -> None:
        self.log.append(f"{self.name} waits for {other.name}")


class FakeGraph:
    def __init__(self) -> None:
        self.rerun: Any = None

    def replay(self) -> None:
        self.rerun()


class FakeCuda:
    """torch.cuda as far as capture uses it; `log` records the order of stream and capture events."""

    def __init__(self, *, graphs: bool = True) -> None:
        self.log: list[str] = []
        self.main = FakeStream("main", self.log)
        self.current = self.main
        if graphs:
            self.CUDAGraph = FakeGraph
            self.graph = self._graph

    def is_available(self) -> bool:
        return True

    def Stream(self) -> FakeStream:  # noqa: N802 (torch.cuda's name)
        return FakeStream("side", self.log)

    def current_stream(self) -> FakeStream:
        return self.current

    @contextmanager
    def stream(self, s: FakeStream) -> Iterator[None]:
        previous, self.current = self.current, s
        self.log.append(f"enter {s.name}")
        try:
            yield
        finally:
            self.current = previous
            self.log.append(f"leave {s.name}")

    @contextmanager
    def _graph(self, g: FakeGraph) -> Iterator[None]:
        self.log.append("capture begins")
        yield
        self.log.append("capture ends")


def _copy_into(captured: Any, fresh: Any) -> None:
    if isinstance(captured, torch.Tensor):
        captured.copy_(fresh)
    else:
        for a, b in zip(captured, fresh, strict=True):
            _copy_into(a, b)


@pytest.fixture
def fake_cuda(monkeypatch: pytest.MonkeyPatch) -> FakeCuda:
    return install_fake_cuda(monkeypatch)


def install_fake_cuda(monkeypatch: pytest.MonkeyPatch) -> FakeCuda:
    """The stand-in torch.cuda; a captured graph's replay reruns its step into the captured outputs."""
    fake = FakeCuda()
    monkeypatch.setattr(cuda_graphs, "_torch_cuda", lambda: fake)
    capture = CapturedStep.capture

    def capture_and_bind(self: CapturedStep) -> None:
        capture(self)
        self.graph.rerun = lambda: _copy_into(self.outputs, self.body())

    monkeypatch.setattr(CapturedStep, "capture", capture_and_bind)
    return fake


# ---------------------------------------------------------------------------------------------
# Deciding whether a graph can be captured


def test_cpu_device_is_refused_with_the_fix() -> None:
    reason = cuda_graphs.unavailable_reason(torch.device("cpu"))
    assert reason is not None and "runs on cpu" in reason and "--device gpu" in reason
    with pytest.raises(Skip, match=r"^pytorch_fast=cuda-graph: CUDA graphs need a CUDA device"):
        cuda_graphs.require(torch.device("cpu"), "pytorch_fast=cuda-graph")


def test_cuda_device_needs_a_visible_gpu_and_graph_support(monkeypatch: pytest.MonkeyPatch) -> None:
    cuda = torch.device("cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert "is_available() is False" in str(cuda_graphs.unavailable_reason(cuda))
    monkeypatch.setattr(cuda_graphs, "_torch_cuda", lambda: FakeCuda(graphs=False))
    assert "no torch.cuda.CUDAGraph" in str(cuda_graphs.unavailable_reason(cuda))
    monkeypatch.setattr(cuda_graphs, "_torch_cuda", lambda: FakeCuda())
    assert cuda_graphs.unavailable_reason(cuda) is None
    cuda_graphs.require(cuda, "anything")  # no Skip


def test_only_a_capturable_optimizer_is_accepted() -> None:
    w = [torch.zeros(3, requires_grad=True)]
    plain = torch.optim.Adam(w)
    assert "capturable=True" in str(cuda_graphs.capturable_problem(plain))
    assert cuda_graphs.capturable_problem(torch.optim.Adam(w, capturable=True)) is None
    with pytest.raises(ValueError, match="capturable=True"):
        CapturedStep(lambda: None, StaticInputs([]), state=w, optimizer=plain)


# ---------------------------------------------------------------------------------------------
# Static buffers and restoring state


def test_static_inputs_keep_their_address_and_refuse_other_shapes() -> None:
    inputs = StaticInputs([torch.zeros(4, dtype=torch.int64), torch.zeros(4, 2)])
    addresses = [t.data_ptr() for t in inputs.tensors]
    inputs.load(torch.arange(4), torch.ones(4, 2))
    assert [t.data_ptr() for t in inputs.tensors] == addresses
    assert inputs.tensors[0].tolist() == [0, 1, 2, 3] and float(inputs.tensors[1].sum()) == 8.0
    with pytest.raises(ValueError, match=r"input 1: \(3, 2\)"):
        inputs.load(torch.arange(4), torch.ones(3, 2))  # a partial batch
    with pytest.raises(ValueError, match="does not fit"):
        inputs.load(torch.arange(4.0), torch.ones(4, 2))  # float indices
    with pytest.raises(ValueError, match="takes 2 inputs, got 1"):
        inputs.load(torch.arange(4))


def test_snapshot_restores_weights_and_zeroes_state_the_warmup_created() -> None:
    w = torch.tensor([1.0, 2.0], requires_grad=True)
    opt = torch.optim.Adam([w], lr=0.1, capturable=True, fused=True)
    snapshot = Snapshot([w], opt)
    for _ in range(3):
        w.grad = torch.ones(2)
        opt.step()
    assert w.tolist() != [1.0, 2.0] and float(opt.state[w]["step"]) == 3.0
    snapshot.restore()
    assert w.tolist() == [1.0, 2.0]
    assert all(float(t.abs().sum()) == 0.0 for t in opt.state[w].values())
    # state that existed before the snapshot goes back to its value, not to zero
    w.grad = torch.ones(2)
    opt.step()
    kept = Snapshot([w], opt)
    moment = opt.state[w]["exp_avg"].clone()
    opt.step()
    kept.restore()
    assert torch.equal(opt.state[w]["exp_avg"], moment) and float(opt.state[w]["step"]) == 1.0


def test_non_tensor_optimizer_state_is_refused() -> None:
    w = torch.zeros(2, requires_grad=True)
    opt = torch.optim.SGD([w], lr=0.1, momentum=0.9)
    opt.state[w]["momentum_buffer"] = None
    with pytest.raises(ValueError, match="'momentum_buffer' is a NoneType"):
        Snapshot([w], opt)


# ---------------------------------------------------------------------------------------------
# Capture and replay


def _linear_step(w: Any, opt: Any, total: Any) -> Any:
    def step(x: Any, y: Any) -> Any:
        opt.zero_grad(set_to_none=True)
        loss = ((x @ w - y) ** 2).sum()
        loss.backward()
        opt.step()
        with torch.no_grad():
            total.add_(loss.detach())
        return loss.detach()

    return step


def _problem(seed: int = 0) -> tuple[Any, list[tuple[Any, Any]]]:
    g = torch.Generator().manual_seed(seed)
    w0 = torch.randn(3, 2, generator=g)
    batches = [(torch.randn(4, 3, generator=g), torch.randn(4, 2, generator=g)) for _ in range(5)]
    return w0, batches


def test_capture_warms_up_on_a_side_stream_then_restores_and_replays(fake_cuda: FakeCuda) -> None:
    w0, batches = _problem()
    w, total = w0.clone().requires_grad_(), torch.zeros(())
    opt = torch.optim.Adam([w], lr=0.05, capturable=True, fused=True)
    captured = CapturedStep(
        _linear_step(w, opt, total), StaticInputs(batches[0]), state=[w, total], optimizer=opt, warmup=3
    )
    losses = [float(captured(*b)) for b in batches]
    assert fake_cuda.log == [
        "side waits for main",
        "enter side",
        "leave side",
        "main waits for side",
        "capture begins",
        "capture ends",
    ]
    assert captured.replays == len(batches) and captured.captured
    assert captured.replay() is captured.outputs  # outputs are the capture's tensors, rewritten

    # the same five steps without any graph: identical losses and weights, so the warm-up's
    # three real Adam steps were undone (and the first batch was not applied twice)
    ref_w, ref_total = w0.clone().requires_grad_(), torch.zeros(())
    ref_opt = torch.optim.Adam([ref_w], lr=0.05, fused=True)
    ref_step = _linear_step(ref_w, ref_opt, ref_total)
    expected = [float(ref_step(*b)) for b in batches]
    assert losses == pytest.approx(expected, rel=1e-6)
    ref_step(*batches[-1])  # the extra replay above
    assert torch.allclose(w, ref_w, rtol=1e-6) and float(total) == pytest.approx(float(ref_total), rel=1e-6)


def test_reset_starts_the_captured_step_from_given_weights(fake_cuda: FakeCuda) -> None:
    w0, batches = _problem(1)
    w, total = w0.clone().requires_grad_(), torch.zeros(())
    opt = torch.optim.Adam([w], lr=0.05, capturable=True, fused=True)
    captured = CapturedStep(_linear_step(w, opt, total), StaticInputs(batches[0]), state=[w, total], optimizer=opt)
    first = float(captured(*batches[0]))
    for b in batches[1:]:
        captured(*b)
    captured.reset([w0, torch.zeros(())])
    assert torch.equal(w.detach(), w0) and float(opt.state[w]["step"]) == 0.0
    assert float(captured(*batches[0])) == first and float(opt.state[w]["step"]) == 1.0
    with pytest.raises(ValueError, match="reset takes 2 tensors, got 1"):
        captured.reset([w0])


def test_replay_before_capture_and_zero_warmup_are_errors() -> None:
    w = torch.zeros(2, requires_grad=True)
    opt = torch.optim.Adam([w], capturable=True)
    with pytest.raises(ValueError, match="at least one warm-up"):
        CapturedStep(lambda: None, StaticInputs([]), state=[w], optimizer=opt, warmup=0)
    with pytest.raises(RuntimeError, match="replay before capture"):
        CapturedStep(lambda: None, StaticInputs([]), state=[w], optimizer=opt).replay()


# ---------------------------------------------------------------------------------------------
# The pc suite's cuda-graph variant


TINY = {"train_samples": 512, "test_samples": 256, "epochs": 2, "batch_size": 128, "seed": 3}


def _run_pc(fast: str, variants: str = "both") -> Context:
    from suites.pc import impl_pytorch
    from suites.pc.spec import SPEC

    params = SPEC.resolve({**TINY, "pytorch_fast": fast, "variants": variants})
    ctx = Context(
        SPEC, "pytorch", params, repeat=1, warmup=0, device=torch.device("cpu"), device_kind="cpu", sync=lambda o: None
    )
    impl_pytorch.run(ctx)
    return ctx


def test_pc_cuda_graph_variant_skips_on_the_cpu_before_any_work() -> None:
    with pytest.raises(Skip, match=r"pytorch_fast=cuda-graph \(use manual-compile on the CPU\): CUDA graphs need"):
        _run_pc("cuda-graph")
    # the per-batch variant alone does not need the graph
    ctx = _run_pc("cuda-graph", variants="per-batch")
    assert {m["name"] for m in ctx.metrics} >= {"epoch [per-batch]"}


def test_pc_cuda_graph_variant_trains_like_the_manual_step(
    fake_cuda: FakeCuda, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cuda_graphs, "unavailable_reason", lambda device: None)
    graphed = _run_pc("cuda-graph")
    manual = _run_pc("manual", variants="low-overhead")
    checks = {c["name"]: c["value"] for c in graphed.checks}
    assert checks["variants_agree"] < 1e-4  # the replayed graph's first step vs eager autograd
    values = {m["name"]: m["samples"] for m in graphed.metrics}
    reference = {m["name"]: m["samples"] for m in manual.metrics}
    for name in ("energy after x-steps, epoch 1 [low-overhead]", "energy after x-steps, last epoch [low-overhead]"):
        assert values[name] == pytest.approx(reference[name], rel=1e-6)
    batches = TINY["train_samples"] // TINY["batch_size"]
    # epochs x batches replays, plus one for the agreement check from the initial weights
    assert any(f"replayed {TINY['epochs'] * batches + 1} times" in n for n in graphed.notes)
    assert any("pytorch_fast=cuda-graph" in n for n in graphed.notes)
    assert fake_cuda.log.count("capture begins") == 1


@pytest.mark.slow
def test_pc_cuda_graph_through_the_cli_is_a_skip_with_its_reason(results: Path) -> None:
    args = [a for k, v in {**TINY, "pytorch_fast": "cuda-graph"}.items() for a in ("--param", f"{k}={v}")]
    proc = harness("run", "--suite", "pc", "--frameworks", "pytorch", "--backend", "local", *args,
                   "--results-dir", str(results))  # fmt: skip
    doc = load_result(run_folder(proc.stdout) / "pytorch.json")
    assert doc["status"] == "skipped", proc.stdout + proc.stderr
    assert "CUDA graphs need a CUDA device" in doc["reason"] and "--device gpu" in doc["reason"]


# ---------------------------------------------------------------------------------------------
# The training suites' variant=cuda-graph (suites/runtime/training_torch.py)


class FusedAdam(torch.optim.Adam):  # type: ignore[misc]
    """Adam whose capturable form runs on the CPU (PyTorch's non-fused capturable Adam wants a GPU)."""

    def __init__(self, params: Any, **kwargs: Any) -> None:
        kwargs.setdefault("fused", True)
        super().__init__(params, **kwargs)


def _run_training(suite: str, variant: str, **params: Any) -> Context:
    from suites.contract.registry import all_suites

    spec = all_suites()[suite]
    module = __import__(f"suites.{suite}.impl_pytorch", fromlist=["run"])
    ctx = Context(spec, "pytorch", spec.resolve({**params, "variant": variant}), repeat=1, warmup=0,
                  device=torch.device("cpu"), device_kind="cpu", sync=lambda o: None)  # fmt: skip
    module.run(ctx)
    return ctx


def test_training_cuda_graph_variant_skips_on_the_cpu_before_any_work() -> None:
    for suite in ("mlp", "mnist", "cifar10"):
        with pytest.raises(Skip, match=r"variant=cuda-graph \(use default or compiled on the CPU\): CUDA graphs need"):
            _run_training(suite, "cuda-graph")


def test_flax_skips_the_cuda_graph_variant_with_its_reason() -> None:
    from suites.runtime.training_jax import jax_variant

    with pytest.raises(Skip, match="Flax's jit step is already one compiled program"):
        jax_variant("cuda-graph")


def test_sgd_is_graph_safe_and_adam_is_made_capturable_before_its_first_step() -> None:
    w = [torch.zeros(3, requires_grad=True)]
    assert cuda_graphs.capturable_problem(torch.optim.SGD(w, lr=0.1, momentum=0.9)) is None
    # dampening: the zeroed warm-up buffer would not reproduce SGD's first step (buf = grad)
    assert "capturable=True" in str(cuda_graphs.capturable_problem(torch.optim.SGD(w, lr=0.1, momentum=0.9,
                                                                                   dampening=0.5)))  # fmt: skip
    adam = torch.optim.Adam(w)
    cuda_graphs.make_capturable(adam)
    assert cuda_graphs.capturable_problem(adam) is None
    stepped = torch.optim.Adam(w)
    w[0].grad = torch.ones(3)
    stepped.step()
    with pytest.raises(ValueError, match="before the optimizer's first step"):
        cuda_graphs.make_capturable(stepped)


def test_mlp_cuda_graph_variant_trains_exactly_like_eager(fake_cuda: FakeCuda, monkeypatch: pytest.MonkeyPatch) -> None:
    """Adam made capturable, the step captured once and replayed: the same losses, accuracies and
    first-step checks as the eager loop (mlp has no dropout, so the two trajectories are one)."""
    monkeypatch.setattr(cuda_graphs, "unavailable_reason", lambda device: None)
    monkeypatch.setattr(torch.optim, "Adam", FusedAdam)
    small = {"epochs": 3, "drop_last": True, "batch_size": 50}
    graphed = _run_training("mlp", "cuda-graph", **small)
    eager = _run_training("mlp", "eager", **small)
    samples = {m["name"]: m["samples"] for m in graphed.metrics}
    reference = {m["name"]: m["samples"] for m in eager.metrics}
    for name in ("train loss (first epoch)", "train loss (last epoch)"):
        assert samples[name] == pytest.approx(reference[name], rel=1e-5)
    assert samples["test accuracy"] == reference["test accuracy"]
    checks = [{c["name"]: c["value"] for c in ctx.checks} for ctx in (graphed, eager)]
    assert checks[0] == checks[1]  # every check the gate compares across frameworks, test accuracy included
    assert fake_cuda.log.count("capture begins") == 1
    batches = 8000 // 50  # mlp: 8000 training points by default
    assert any(f"replayed {3 * batches} times" in n for n in graphed.notes), graphed.notes
    assert any(m.get("variant") == "cuda-graph" for m in graphed.metrics)


def test_the_cuda_graph_variant_leaves_out_a_partial_last_batch(
    fake_cuda: FakeCuda, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cuda_graphs, "unavailable_reason", lambda device: None)
    monkeypatch.setattr(torch.optim, "Adam", FusedAdam)
    ctx = _run_training("mlp", "cuda-graph", epochs=2, drop_last=False, batch_size=300)
    assert any("last partial batch (200 samples) is left out" in n for n in ctx.notes), ctx.notes
