"""The inference loop (suites/runtime/inference.py) on a real Context with a stand-in model that costs a
known time per row: the metrics and the block it records, a sweep that stops where the device has no
memory for a batch or a call grows too slow, and what counts as out of memory."""

from __future__ import annotations

import time
from typing import Any

import pytest

from suites.contract.inference import LATENCY, percentile
from suites.contract.spec import SuiteSpec
from suites.runtime import inference
from suites.runtime.context import Context

SPEC = SuiteSpec("t", "test", ("pytorch",))


class OutOfMemoryError(RuntimeError):
    """Named as PyTorch's is (torch.cuda.OutOfMemoryError): the loop knows it by name."""


def context(**params: Any) -> Context:
    values = {"mode": "infer", "requests": 20, "max_batch": 64, **params}
    return Context(SPEC, "pytorch", values, repeat=3, warmup=0, device="cpu", device_kind="cpu",
                   sync=lambda out: None)  # fmt: skip


def stand_in(fails_at: int | None = None, error: BaseException | None = None, per_row_s: float = 0.0) -> Any:
    def request(batch: int) -> Any:
        if fails_at is not None and batch >= fails_at:
            raise error if error is not None else OutOfMemoryError("CUDA out of memory")

        def call() -> int:
            time.sleep(per_row_s * batch)
            return batch

        return call

    return request


def test_the_latency_its_tail_and_the_sweep_are_recorded_and_named() -> None:
    ctx = context()
    inference.run(ctx, inference.Model(request=stand_in(), unit="rows"))
    names = {m["name"]: m for m in ctx.metrics}
    latency = names[LATENCY]
    assert len(latency["samples"]) == 20 and latency["first_call"] is not None
    block = ctx.inference
    assert block is not None and block["mode"] == "infer" and block["stopped"] is None
    assert block["latency"]["percentiles"]["p50"] == LATENCY
    assert names[block["latency"]["percentiles"]["p99"]]["samples"] == [percentile(latency["samples"], 0.99)]
    assert [p["batch"] for p in block["sweep"]] == [1, 8, 64]
    for point in block["sweep"]:
        seconds = names[point["time"]]["samples"]
        assert names[point["throughput"]]["samples"] == [point["batch"] / s for s in seconds]
        assert names[point["throughput"]]["derived_from"] == point["time"]


@pytest.mark.parametrize(
    "error",
    [OutOfMemoryError("CUDA out of memory"), RuntimeError("RESOURCE_EXHAUSTED: Out of memory allocating"),
     MemoryError()],
)  # fmt: skip
def test_a_batch_the_device_has_no_memory_for_ends_the_sweep_there(error: BaseException) -> None:
    ctx = context()
    inference.run(ctx, inference.Model(request=stand_in(fails_at=64, error=error), unit="rows"))
    assert ctx.inference is not None
    assert [p["batch"] for p in ctx.inference["sweep"]] == [1, 8]
    assert ctx.inference["stopped"].startswith("batch 64: out of device memory")
    assert not any("64" in m["name"] for m in ctx.metrics)


def test_any_other_error_is_the_jobs_failure() -> None:
    with pytest.raises(ValueError, match="shape"):
        inference.run(context(), inference.Model(request=stand_in(fails_at=8, error=ValueError("bad shape")),
                                                 unit="rows"))  # fmt: skip


def test_a_call_over_the_cap_ends_the_sweep_after_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inference, "SWEEP_CALL_CAP_S", 0.002)  # batch 8 at 0.5 ms a row: 4 ms a call
    ctx = context(requests=5)
    inference.run(ctx, inference.Model(request=stand_in(per_row_s=0.0005), unit="rows"))
    assert ctx.inference is not None
    assert [p["batch"] for p in ctx.inference["sweep"]] == [1, 8]
    assert "batch 8: one call took" in ctx.inference["stopped"]


def test_out_of_memory_is_known_by_name_and_message_only() -> None:
    assert inference.out_of_memory(OutOfMemoryError("x"))
    assert inference.out_of_memory(RuntimeError("RESOURCE_EXHAUSTED: while allocating"))
    assert inference.out_of_memory(MemoryError())
    assert not inference.out_of_memory(RuntimeError("shape mismatch"))
