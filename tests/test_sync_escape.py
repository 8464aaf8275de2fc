"""Sync-escape detection: a timed call that returns before its work finished is caught, FLOPs or not."""

from __future__ import annotations

import itertools
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from suites.contract.spec import SuiteSpec
from suites.runtime import syncguard
from suites.runtime.context import Context
from suites.runtime.syncguard import Probe, verdict
from tests.conftest import finished, read, run_folder
from tests.planted import harness_in, planted_repo

SPEC = SuiteSpec("t", "test", ("jax",))

# Recorded on this machine (JAX 0.10 CPU, benchmarks/sync_escape.py): an honest sample's first
# barrier runs on cold caches and takes 10-100 us more than the second, but nothing is pending.
HONEST = [Probe(False, 95e-6, 15e-6), Probe(False, 80e-6, 14e-6), Probe(False, 60e-6, 12e-6)]
# An unsynchronised 1024 x 1024 matmul: pending at every probe, ~30 ms left behind a 0.2 ms sample.
ESCAPED = [Probe(True, 31e-3, 20e-6), Probe(True, 29e-3, 18e-6), Probe(True, 30e-3, 25e-6)]


def barrier_marks(metric: dict[str, Any]) -> dict[str, list[int]]:
    """The marks a barrier found; `contended` (the test machine's own load) is another matter."""
    return {k: v for k, v in metric["marks"].items() if k != "contended"}


def test_honest_samples_pass_even_when_the_barrier_is_slower_than_the_sample() -> None:
    record = verdict([150e-6, 160e-6, 140e-6], HONEST)
    assert record["state"] == "ok" and record["pending_share"] == 0.0


def test_pending_work_that_outlives_the_sample_escapes() -> None:
    record = verdict([0.2e-3, 0.25e-3, 0.18e-3], ESCAPED)
    assert record["state"] == "escaped"
    assert record["excess_median_s"] > 100 * record["sample_median_s"]


def test_pending_but_immaterial_work_is_recorded_not_flagged() -> None:
    # 0.1 ms pending behind 50 ms samples: 0.2 %, below the 5 % materiality threshold.
    probes = [Probe(True, 115e-6, 15e-6)] * 3
    record = verdict([50e-3] * 3, probes)
    assert record["state"] == "ok" and record["pending_share"] == 1.0


def test_one_noisy_probe_does_not_flag_a_metric() -> None:
    probes = HONEST[:2] + [Probe(True, 5e-3, 15e-6)]  # one sample hit a context switch
    assert verdict([1e-3] * 3, probes)["state"] == "ok"


class FakeCuda:
    """torch.cuda as far as the CUDA barrier uses it: a stream whose kernels finish at `done_at`."""

    def __init__(self, clock: list[float]) -> None:
        self.clock, self.done_at = clock, 0.0

    def device_count(self) -> int:
        return 1

    def current_stream(self, device: int) -> Any:
        return types.SimpleNamespace(query=lambda: self.clock[0] >= self.done_at)

    def synchronize(self) -> None:
        self.clock[0] = max(self.clock[0], self.done_at) + 10e-6  # an idle synchronize costs 10 us


@pytest.mark.parametrize("synchronised", [True, False])
def test_cuda_barrier_decides_escape_from_the_stream(monkeypatch: pytest.MonkeyPatch, synchronised: bool) -> None:
    """The PyTorch-CUDA path without a GPU: a kernel of 2 ms launched in 20 us, synced or not."""
    clock = [0.0]
    cuda = FakeCuda(clock)
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))
    from suites.runtime.adapter_pytorch import CudaBarrier

    def launch() -> str:
        clock[0] += 20e-6
        cuda.done_at = clock[0] + 2e-3
        return "tensor"

    def sync(out: Any) -> None:
        if synchronised:
            cuda.synchronize()

    ctx = Context(
        SPEC, "pytorch", {}, repeat=5, warmup=0, device="cuda", device_kind="gpu", sync=sync,
        clock=lambda: clock[0], barrier=CudaBarrier(),
    )  # fmt: skip
    ctx.measure("kernel", launch)
    sync_record = ctx.metrics[0]["sync"]
    assert sync_record["state"] == ("ok" if synchronised else "escaped"), sync_record
    if not synchronised:
        assert sync_record["pending_share"] == 1.0 and sync_record["excess_median_s"] > 1.9e-3


def test_a_synchronous_framework_is_ok_without_a_barrier() -> None:
    ctx = Context(SPEC, "numpy", {}, repeat=2, warmup=0, device="cpu", device_kind="cpu", sync=lambda o: None)
    ctx.measure("m", lambda: 1)
    assert ctx.metrics[0]["sync"]["state"] == "ok"
    assert barrier_marks(ctx.metrics[0]) == {}  # nothing asynchronous: nothing a barrier could find


# --- per-sample marks ---------------------------------------------------------------------------


def test_escaped_samples_names_each_sample_whose_own_probe_found_material_work() -> None:
    samples = [0.2e-3] * 6
    probes = [
        ESCAPED[0],  # pending, 31 ms behind a 0.2 ms sample: marked
        HONEST[0],  # nothing pending: the cold-cache excess alone never marks
        Probe(True, 25e-6, 15e-6),  # pending, but 10 us: below the 20 us floor
        Probe(False, 5e-3, 15e-6),  # a slow barrier with nothing pending (a context switch)
        ESCAPED[1],
        Probe(True, 45e-6, 15e-6),  # pending and 30 us: above the floor (5 % of 0.2 ms is 10 us)
    ]
    assert syncguard.escaped_samples(samples, probes) == [0, 4, 5]


def test_escaped_samples_uses_the_threshold_verdict_uses() -> None:
    # 0.1 ms pending behind 50 ms samples is immaterial for the metric, and so for each sample.
    probes = [Probe(True, 115e-6, 15e-6), Probe(True, 3.015e-3, 15e-6)]  # 0.1 ms and 3 ms behind
    samples = [50e-3, 50e-3]
    assert syncguard.material_s(samples) == verdict(samples, probes)["threshold_s"] == pytest.approx(2.5e-3)
    assert syncguard.escaped_samples(samples, probes) == [1]
    assert syncguard.escaped_samples([], probes) == [] and syncguard.escaped_samples(samples, []) == []


def _cuda_ctx(monkeypatch: pytest.MonkeyPatch, skip_sync: set[int], **kwargs: Any) -> tuple[Context, Any]:
    """A PyTorch-CUDA Context on the fake stream whose launch k (0: the first call) is left unsynchronised
    when k is in `skip_sync`; each launch is a 2 ms kernel launched in 20 us."""
    clock = [0.0]
    cuda = FakeCuda(clock)
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))
    from suites.runtime.adapter_pytorch import CudaBarrier

    calls = itertools.count()
    current = [0]

    def launch() -> str:
        current[0] = next(calls)
        clock[0] += 20e-6
        cuda.done_at = clock[0] + 2e-3
        return "tensor"

    def sync(out: Any) -> None:
        if current[0] not in skip_sync:
            cuda.synchronize()

    ctx = Context(
        SPEC, "pytorch", {}, repeat=5, warmup=0, device="cuda", device_kind="gpu", sync=sync,
        clock=lambda: clock[0], barrier=CudaBarrier(), **kwargs,
    )  # fmt: skip
    return ctx, launch


def test_measure_marks_the_samples_that_left_work_running(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two of five samples escape: too few to flag the metric, but each is named by its index."""
    ctx, launch = _cuda_ctx(monkeypatch, skip_sync={2, 4})  # launches 2 and 4 = samples 1 and 3
    ctx.measure("kernel", launch, per=10)  # scaled samples keep the raw samples' order
    metric = ctx.metrics[0]
    assert metric["sync"]["state"] == "ok" and metric["sync"]["pending_share"] == 0.4
    assert barrier_marks(metric) == {"escaped": [1, 3]}
    assert max(metric["samples"][i] for i in (1, 3)) < min(metric["samples"][i] for i in (0, 2, 4))


def test_no_marks_without_barrier_evidence(monkeypatch: pytest.MonkeyPatch) -> None:
    ctx, launch = _cuda_ctx(monkeypatch, skip_sync={1, 2, 3, 4, 5}, sync_check=False)
    ctx.measure("kernel", launch)
    assert ctx.metrics[0]["sync"]["state"] == "unchecked" and barrier_marks(ctx.metrics[0]) == {}
    ctx, launch = _cuda_ctx(monkeypatch, skip_sync=set())
    ctx.measure("honest", launch)
    assert ctx.metrics[0]["sync"]["state"] == "ok" and barrier_marks(ctx.metrics[0]) == {}


def test_missing_probes_make_a_record_time_metric_unchecked() -> None:
    class Idle:
        def pending(self) -> bool:
            return False

        def wait(self) -> None:
            pass

    ticks = itertools.count()
    ctx = Context(
        SPEC, "jax", {}, repeat=1, warmup=0, device="cpu", device_kind="cpu", sync=lambda o: None,
        clock=lambda: float(next(ticks)), barrier=Idle(),
    )  # fmt: skip
    ctx.record_time("epoch", first_call=2.0, samples=[1.0, 1.0])
    assert ctx.metrics[0]["sync"]["state"] == syncguard.UNCHECKED and barrier_marks(ctx.metrics[0]) == {}
    ctx.record_time("epoch2", first_call=2.0, samples=[1.0, 1.0], probes=[ctx.probe_escape(), ctx.probe_escape()])
    assert ctx.metrics[1]["sync"]["state"] == "ok" and barrier_marks(ctx.metrics[1]) == {}
    # An epoch whose barrier found 0.5 s of work still running behind a 1 s epoch.
    late = Probe(True, 0.5, 1e-3)
    ctx.record_time("epoch3", first_call=2.0, samples=[1.0, 1.0, 1.0], probes=[ctx.probe_escape(), late, None])
    assert barrier_marks(ctx.metrics[2]) == {}  # one probe missing: no evidence per sample
    ctx.record_time("epoch4", first_call=2.0, samples=[1.0, 1.0, 1.0], probes=[ctx.probe_escape(), late, late])
    assert barrier_marks(ctx.metrics[3]) == {"escaped": [1, 2]} and ctx.metrics[3]["sync"]["state"] == "escaped"


# --- planted suites, run for real through the CLI ---------------------------------------------

SPEC_SRC = """
from suites.contract.spec import Param, SuiteSpec

SPEC = SuiteSpec(
    name="planted",
    description="a 1024 x 1024 float32 matmul, timed",
    frameworks=("numpy", "jax"),
    params=(Param("mode", "str", "honest", "honest or escape", choices=("honest", "escape")),),
    repeat=5,
    warmup=1,
)
"""

NUMPY_SRC = """
import numpy as np


def run(ctx):
    a = np.random.default_rng(0).random((1024, 1024), dtype=np.float32)
    ctx.measure("matmul", lambda: a @ a)
"""

# The mistake from the issue: the callback stores its result aside and returns nothing, and no
# FLOP count is declared, so the FLOP lint has nothing to hold the time against.
JAX_SRC = """
import jax
import jax.numpy as jnp
import numpy as np


def run(ctx):
    a = jnp.asarray(np.random.default_rng(0).random((1024, 1024), dtype=np.float32))
    mm = jax.jit(jnp.matmul)
    out = {}

    def step():
        out["c"] = mm(a, a)

    if ctx.params["mode"] == "escape":
        ctx.measure("matmul", step)
    else:
        ctx.measure("matmul", lambda: mm(a, a))
"""


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("planted")
    return planted_repo(root, {"planted": {"spec.py": SPEC_SRC, "impl_numpy.py": NUMPY_SRC, "impl_jax.py": JAX_SRC}})


@pytest.mark.slow
def test_planted_unsynchronised_jax_without_flops_is_flagged_and_exits_1(planted: Path, tmp_path: Path) -> None:
    proc = harness_in(planted, "run", "--suite", "planted", "--frameworks", "numpy,jax", "--param", "mode=escape",
                      "--backend", "local", "--results-dir", str(tmp_path), "-q")  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    doc = read(run_folder(proc.stdout) / "jax.json")
    metric = doc["metrics"][0]
    assert metric["flops"] is None and metric["sync"]["state"] == "escaped"
    # Every sample's barrier found the matmul running (a busy test machine may add `contended` marks).
    assert metric["marks"]["escaped"] == [0, 1, 2, 3, 4]
    assert metric["warnings"] and "returned nothing" in metric["warnings"][0]
    row = next(line for line in proc.stdout.splitlines() if line.startswith("matmul "))
    assert "ESCAPED" in row and "x [" not in row.split("ESCAPED")[1]  # no ratio for the escaped cell
    assert "sync escaped" in proc.stdout and "returned before its work finished" in proc.stdout
    assert read(run_folder(proc.stdout) / "numpy.json")["metrics"][0]["sync"]["state"] == "ok"


@pytest.mark.slow
def test_planted_honest_jax_passes(planted: Path, tmp_path: Path) -> None:
    proc = harness_in(planted, "run", "--suite", "planted", "--frameworks", "numpy,jax", "--param", "mode=honest",
                      "--backend", "local", "--results-dir", str(tmp_path), "-q")  # fmt: skip
    assert finished(proc), proc.stdout + proc.stderr
    doc = read(run_folder(proc.stdout) / "jax.json")
    assert doc["metrics"][0]["sync"]["state"] == "ok" and doc["metrics"][0]["warnings"] == []
    assert "escaped" not in doc["metrics"][0]["marks"]
    assert "ESCAPED" not in proc.stdout


@pytest.mark.slow
def test_planted_unsynchronised_jit_is_flagged_by_bytes_alone(tmp_path: Path) -> None:
    """The jit suite with its JAX sync removed, and the barrier switched off: the bandwidth lint catches it."""
    repo = planted_repo(
        tmp_path, {}, {"suites/jit/impl_jax.py": ('dtype="float32",', 'dtype="float32", synchronise=False,')}
    )
    big = ("--param", "min_length=100000000", "--param", "max_length=100000000", "--param", "total=100000000")
    proc = harness_in(repo, "run", "--suite", "jit", "--frameworks", "jax", *big, "--repeat", "3", "--warmup", "0",
                      "--backend", "local", "--results-dir", str(tmp_path / "r"), "-q",
                      env={"HARNESS_SYNC_CHECK": "off"})  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "GB/s exceeds the limit" in proc.stdout and "L1 bound" in proc.stdout
    doc = read(run_folder(proc.stdout) / "jax.json")
    assert {m["sync"]["state"] for m in doc["metrics"] if m["kind"] == "time"} == {"unchecked"}
