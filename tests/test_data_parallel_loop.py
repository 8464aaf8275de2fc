"""The data-parallel loop's own logic (suites/runtime/data_parallel.py), framework-free: a NumPy
"framework" of N simulated ranks drives the real loop, so what it records -- checks, the 1-way step
interleaved, efficiency, all-reduce bandwidth, per-rank figures -- is checked without a process group,
and the GPU branches (which GPU a rank takes, the link's peak) without a GPU."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from suites.contract import ranks as contract
from suites.contract.registry import all_suites
from suites.contract.settings import Settings
from suites.runtime import data_parallel as dp
from suites.runtime.context import Context

ROWS = 8


def _rows(s: int, n: int) -> tuple[Any, Any]:
    rng = np.random.default_rng([3, s])
    x = rng.normal(size=(max(n, ROWS), 4)).astype(np.float32)[:n]
    return x, x @ np.array([1.0, -2.0, 0.5, 3.0], np.float32)


def _loss(w: Any, x: Any, y: Any) -> float:
    return float(np.mean((x @ w - y) ** 2))


class NumpyLane:
    """Least squares by SGD; `world` shards average their gradients (what DDP's all-reduce does)."""

    def __init__(self, rows: int, world: int, lr: float = 0.05) -> None:
        self.w, self.rows, self.world, self.lr = np.zeros(4), rows, world, lr

    def _grad(self, s: int) -> Any:
        x, y = _rows(s, self.rows)
        shards = np.array_split(np.arange(self.rows), self.world)
        return np.mean([2 * x[i].T @ (x[i] @ self.w - y[i]) / len(i) for i in shards], axis=0)

    def step(self, s: int) -> float:
        loss = _loss(self.w, *_rows(s, self.rows))
        self.w = self.w - self.lr * self._grad(s)
        return loss

    def sync(self, out: Any) -> None:
        pass

    def loss(self, out: Any) -> float:
        return float(out)

    def eval_loss(self, s: int) -> float:
        return _loss(self.w, *_rows(s, self.rows))

    def weights(self) -> list[Any]:
        return [self.w.copy()]


class NumpyLoop:
    collectives, device_name = "none", "cpu"

    def __init__(self, shape: dp.Shape) -> None:
        self.shape = shape

    def n_way(self, steps: int) -> NumpyLane:
        return NumpyLane(self.shape.global_batch, self.shape.devices)

    def single(self, steps: int, rows: int) -> NumpyLane:
        return NumpyLane(rows, 1)

    def compute_only(self, lane: Any) -> Any:
        return lane.step

    def allreduce(self, elements: int) -> Any:
        return lambda: np.ones(elements).sum()

    def gradient_allreduce(self) -> tuple[Any, int]:
        return (lambda: np.ones(4).sum()), 2

    def barrier(self) -> None:
        pass

    def gather(self, values: Any) -> list[list[float]]:
        return [list(values) for _ in range(self.shape.devices)]  # every simulated rank alike

    def hosts(self) -> list[str]:
        return ["node-a"] * self.shape.devices

    def param_count(self) -> int:
        return 4


def _context(**params: Any) -> Context:
    spec = all_suites()["mnist"]
    values = spec.resolve({"devices": 2, "dp_intervals": 3, "dp_steps": 2, "batch_size": ROWS, **params})
    return Context(spec, "pytorch", values, repeat=1, warmup=0, device="cpu", device_kind="cpu",
                   sync=lambda out: None)  # fmt: skip


def _recipe() -> dp.Recipe:
    return dp.Recipe(build=lambda: None, loss=_loss, optimizer=lambda m: None, lr=lambda s: 0.05, rows=_rows)


def test_the_loop_records_the_block_the_host_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dp, "_current", contract.Ranks(0, 2, 0, 1, "h:1", "harness"))
    ctx = _context()
    dp.run(ctx, _recipe(), lambda ranks, recipe, shape: NumpyLoop(shape))
    block = ctx.parallel
    assert block is not None and set(block) == set(contract.BLOCK_KEYS)
    assert (block["devices"], block["global_batch"], block["per_device_batch"], block["single_batch"]) == (2, 8, 4, 8)
    names = [m["name"] for m in ctx.metrics]
    assert names == ["dp step", "dp throughput", "dp step (1-way)"]
    wide, alone = ctx.metrics[0], ctx.metrics[2]
    assert len(wide["samples"]) == len(alone["samples"]) == 3  # interleaved: one of each per interval
    assert block["efficiency"] == pytest.approx(block["throughput"] / (2 * block["single_throughput"]))
    reduce = block["allreduce"]
    assert reduce["bytes"] == 16 and reduce["busbw_Bps"] == pytest.approx(16 * 2 * (2 - 1) / 2 / reduce["seconds"])
    assert reduce["gradient_collectives"] == 2 and reduce["gradient_seconds"] > 0
    assert [r["rank"] for r in block["ranks"]] == [0, 1] and block["ranks"][1]["host"] == "node-a"
    # at least the straggler rule's samples, whatever the intervals (3 here)
    assert len(block["ranks"][0]["compute_samples"]) == contract.STRAGGLER_SAMPLES and block["straggler"] is None
    # the N-way steps average the shards' gradients: the same mathematics as the 1-way step at this batch
    single = {c["name"]: c["value"] for c in block["single"]["checks"]}
    mine = {c["name"]: c["value"] for c in ctx.checks}
    assert single["dp_loss_curve"] == pytest.approx(mine["dp_loss_curve"], rel=1e-12)
    assert mine["dp_loss_curve"][-1] < mine["dp_loss_curve"][0]  # it learns
    first_loss, after = mine["dp_first_step_loss"]
    assert after < first_loss  # the loss of the first batch after its own step


def test_weak_scaling_times_one_device_at_its_own_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dp, "_current", contract.Ranks(0, 2, 0, 1, "h:1", "harness"))
    ctx = _context(scaling="weak", batch_size=4)
    dp.run(ctx, _recipe(), lambda ranks, recipe, shape: NumpyLoop(shape))
    block = ctx.parallel
    assert block is not None
    assert (block["global_batch"], block["per_device_batch"], block["single_batch"]) == (8, 4, 4)
    assert block["single"]["global_batch"] == 8  # the gate still compares at the N-way global batch


def test_a_rank_that_does_not_match_the_devices_parameter_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from suites.contract.errors import JobError

    monkeypatch.setattr(dp, "_current", contract.Ranks(0, 3, 0, 1, "h:1", "harness"))
    with pytest.raises(JobError, match="one of 3 ranks"):
        dp.run(_context(), _recipe(), lambda ranks, recipe, shape: NumpyLoop(shape))


def test_the_loop_is_float32_only(monkeypatch: pytest.MonkeyPatch) -> None:
    from suites.contract.errors import Skip

    monkeypatch.setattr(dp, "_current", contract.Ranks(0, 2, 0, 1, "h:1", "harness"))
    ctx = _context()
    ctx.precision = "bf16"
    with pytest.raises(Skip, match="float32 only"):
        dp.run(ctx, _recipe(), lambda ranks, recipe, shape: NumpyLoop(shape))


def test_a_straggler_rank_is_named_from_the_gathered_samples(monkeypatch: pytest.MonkeyPatch) -> None:
    class Slow(NumpyLoop):
        def gather(self, values: Any) -> list[list[float]]:
            slow = [v * 3 for v in values]
            return [list(values), slow]  # every compute sample 3x: a straggler by the contract's rule

    monkeypatch.setattr(dp, "_current", contract.Ranks(0, 2, 0, 1, "h:1", "harness"))
    ctx = _context()
    dp.run(ctx, _recipe(), lambda ranks, recipe, shape: Slow(shape))
    assert ctx.parallel is not None and ctx.parallel["straggler"]["rank"] == 1


@pytest.mark.parametrize(
    ("visible", "nvidia", "local", "taken"),
    [
        ("4,5,6,7", None, 2, "6"),  # the launcher left several visible: this rank takes its own
        (None, None, 1, "1"),  # nothing said: GPU = local rank
        (None, "3", 1, None),  # a container given one GPU sees it alone: left as it is
        ("5", None, 1, "5"),  # bound already (srun --gpus-per-task): left
    ],
)
def test_a_gpu_rank_takes_its_own_gpu(
    monkeypatch: pytest.MonkeyPatch, visible: str | None, nvidia: str | None, local: int, taken: str | None
) -> None:
    for name, value in (("CUDA_VISIBLE_DEVICES", visible), ("NVIDIA_VISIBLE_DEVICES", nvidia)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    settings = Settings(device="gpu", threads=None, x64=False)
    assert dp.take_device(contract.Ranks(local, 8, local, 8, "h:1", "harness"), settings) == settings
    import os

    assert os.environ.get("CUDA_VISIBLE_DEVICES") == taken


def test_the_link_peak_is_known_only_for_nvlink_parts() -> None:
    assert dp.link_peak("gpu", "NVIDIA H100 80GB HBM3") == 450e9
    assert dp.link_peak("gpu", "NVIDIA H200") == 450e9
    assert dp.link_peak("gpu", "NVIDIA H100 PCIe") is None
    assert dp.link_peak("cpu", "cpu") is None


def test_image_and_text_batches_are_one_batch_at_every_n() -> None:
    from suites.gpt import common

    x = np.arange(100 * 4, dtype=np.uint8).reshape(100, 2, 2, 1)
    rows = dp.image_rows(x, np.arange(100), seed=1)
    big, small = rows(5, 16), rows(5, 4)
    assert np.array_equal(big[0][:4], small[0]) and np.array_equal(big[1][:4], small[1])
    assert not np.array_equal(rows(6, 4)[1], small[1])
    cfg = common.Config(n_layer=1, n_head=1, n_embd=8, block_size=8, batch=4, dropout=0.0, intervals=2, steps=2,
                        lr=1e-3, warmup=1, min_lr_ratio=0.1, weight_decay=0.0, grad_clip=0.0, eval_windows=1,
                        attention="fused", variant="default", seed=3)  # fmt: skip
    text = np.arange(1000, dtype=np.uint8)
    (xb, yb), (xs, _) = common.parallel_rows(cfg, text, 2, 8), common.parallel_rows(cfg, text, 2, 2)
    assert np.array_equal(xb[:2], xs) and np.array_equal(yb[:, :-1], xb[:, 1:])  # targets are the next bytes
