"""The data-parallel loop, framework-free: what every rank runs and what rank 0 records.

A suite hands over a `Recipe` (its model, loss, optimiser and global batches, the same NumPy rows in
every framework and at every N) and its framework's `Loop` (runtime/dp_torch.py, runtime/dp_jax.py).
Order, the same on every rank:

1. Checks, outside every clock: 8 steps from the shared initial weights at the global batch (the
   first holds tracing and compilation: it is the metric's first call). Rank 0 runs the same 8
   steps on one device at the same global batch: the agreement gate compares the two.
2. Intervals, interleaved (ABAB): an N-way interval on every rank, then a 1-way interval on rank 0
   while the others wait at a barrier. Same process, same data, same session: the efficiency's two
   sides see the same machine state, as rounds do for two frameworks.
3. The all-reduce of a gradient-sized float32 buffer alone, every rank aligned by a barrier first:
   its time and bus bandwidth (the NCCL-tests definition, bytes x 2(N-1)/N / time).
4. Each rank's step with communication off (last: in PyTorch it leaves the ranks' weights apart):
   compute per rank, whence a straggler, the exposed communication and the overlap.

On a CPU one "device" is a share of the node's cores: each rank takes its slice (`cpu_slice`), and
the 1-way step runs on rank 0's slice, so scaling is measured against one device, not the machine.
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from suites.contract import ranks as contract
from suites.contract.errors import JobError, Skip
from suites.contract.ranks import Fault, Ranks
from suites.contract.settings import Settings
from suites.runtime.context import Context, Readings

CHECK_STEPS = 8  # the loss curve's length, as the suites' own probes
ALLREDUCE_REPS = 10

_current: Ranks | None = None  # set once per process by `start`, before the framework is configured


def start(ranks: Ranks) -> None:
    global _current
    _current = ranks


def current() -> Ranks:
    return _current or Ranks(0, 1, 0, 1, None, "single")


def cpu_slice(ranks: Ranks) -> list[int] | None:
    """Pin this rank to its share of the node's usable cores; returns them (None: left alone).

    Only where the launcher says how many ranks share the node, and this process may still use every
    CPU of the machine: a launcher that bound the cores itself (srun's task binding, a cpuset, the
    local backend's --cpus) is trusted."""
    if ranks.local_world <= 1 or not hasattr(os, "sched_getaffinity"):
        return None
    usable = sorted(os.sched_getaffinity(0))
    if len(usable) < ranks.local_world or len(usable) < (os.cpu_count() or 0):
        return None
    share = len(usable) // ranks.local_world
    mine = usable[ranks.local_rank * share : (ranks.local_rank + 1) * share]
    os.sched_setaffinity(0, mine)
    return mine


def take_device(ranks: Ranks, settings: Settings) -> Settings:
    """This rank's device, before any framework starts: on a CPU its slice of the cores (its thread
    count no more than the slice), on GPUs one GPU where the launcher left several visible."""
    if settings.device == "cpu":
        mine = cpu_slice(ranks)
        if mine is None:
            return settings
        threads = len(mine) if settings.threads is None else min(settings.threads, len(mine))
        return dataclasses.replace(settings, threads=threads)
    visible = [v for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    if len(visible) > 1 and ranks.local_rank < len(visible):
        os.environ["CUDA_VISIBLE_DEVICES"] = visible[ranks.local_rank]
    elif not visible:
        # A container given one GPU (NVIDIA_VISIBLE_DEVICES=3) sees it alone: leave it; else take ours.
        given = os.environ.get("NVIDIA_VISIBLE_DEVICES", "all")
        if given == "all" or len(given.split(",")) > 1:
            os.environ["CUDA_VISIBLE_DEVICES"] = str(ranks.local_rank)
    return settings


@dataclass(frozen=True)
class Recipe:
    """One suite's model and data for the data-parallel loop, in one framework's terms.

    `build()`: a fresh model holding the shared initial weights, dropout off (N-way and 1-way steps
    must be the same function). `loss(model, *batch)`: the mean loss over the batch's rows.
    `optimizer(model)`: PyTorch's optimiser of the model, or JAX's optax transform (model ignored).
    `lr(step)`: the learning rate of a step (PyTorch sets it on every group; optax counts its own).
    `clip`: PyTorch clips the gradients' global norm to it after the all-reduce (0: off); JAX's
    transform clips inside. `rows(step, n)`: the first n rows of step's global batch, NumPy arrays
    (the first n of a larger draw are the same rows: every N and the 1-way step see one batch)."""

    build: Callable[[], Any]
    loss: Callable[..., Any]
    optimizer: Callable[[Any], Any]
    lr: Callable[[int], float]
    rows: Callable[[int, int], tuple[Any, ...]]
    unit: str = "samples"
    items_per_row: int = 1
    clip: float = 0.0
    flops_per_row: float | None = None
    curve_steps: int = CHECK_STEPS  # the loss curve's length: shorter where training is chaotic from the start


class Lane(Protocol):
    """A model, its optimiser and its staged batches: one way of running the steps."""

    def step(self, s: int) -> Any: ...
    def sync(self, out: Any) -> None: ...
    def loss(self, out: Any) -> float: ...  # the global batch's mean loss (an all-reduce where needed)
    def eval_loss(self, s: int) -> float: ...  # step s's batch, current weights, no update
    def weights(self) -> list[Any]: ...


class Loop(Protocol):
    collectives: str  # gloo | nccl | none
    device_name: str

    def n_way(self, steps: int) -> Lane: ...
    def single(self, steps: int, rows: int) -> Lane: ...  # rank 0 only
    def compute_only(self, lane: Lane) -> Callable[[int], Any]: ...  # the lane's step, no communication
    def allreduce(self, elements: int) -> Callable[[], Any]: ...
    def gradient_allreduce(self) -> tuple[Callable[[], Any], int]: ...  # as the framework reduces them; its ops
    def barrier(self) -> None: ...
    def gather(self, values: Sequence[float]) -> list[list[float]]: ...
    def hosts(self) -> list[str]: ...
    def param_count(self) -> int: ...


@dataclass(frozen=True)
class Shape:
    devices: int
    scaling: str
    per_device: int
    global_batch: int
    single_batch: int  # the 1-way step's: the global batch (strong) or one device's (weak)
    intervals: int
    steps: int

    @property
    def total_steps(self) -> int:
        return CHECK_STEPS + self.intervals * self.steps


def shape_of(ctx: Context, batch_param: str = "batch_size") -> Shape:
    p = ctx.params
    devices, batch = contract.devices_of(p), int(p[batch_param])
    problem = contract.batch_problem(p, batch_param)
    if problem:
        raise JobError(problem)
    strong = p[contract.SCALING] == "strong"
    per_device = batch // devices if strong else batch
    global_batch = batch if strong else batch * devices
    return Shape(devices, str(p[contract.SCALING]), per_device, global_batch,
                 global_batch if strong else per_device, int(p["dp_intervals"]), int(p["dp_steps"]))  # fmt: skip


@dataclass
class _Timed:
    samples: list[float] = field(default_factory=list)  # seconds per step, one per interval
    probes: list[Any] = field(default_factory=list)
    readings: Readings = field(default_factory=Readings)


def _norm(tensors: Sequence[Any]) -> float:
    import numpy as np

    return float(np.sqrt(sum(float(np.sum(np.asarray(t, np.float64) ** 2)) for t in tensors)))


def _checks(lane: Lane, recipe: Recipe) -> tuple[float, dict[str, list[float]]]:
    """Steps 0..7 from the initial weights: the first step's time (trace, compile, run) and the checks."""
    before = lane.weights()
    clock = time.perf_counter()
    out = lane.step(0)
    lane.sync(out)
    first = time.perf_counter() - clock
    losses = [lane.loss(out)]
    after = lane.weights()
    loss_after = lane.eval_loss(0)
    lr = recipe.lr(0)
    moved = _norm([a - b for a, b in zip(after, before, strict=True)])
    for s in range(1, CHECK_STEPS):
        losses.append(lane.loss(lane.step(s)))
    return first, {
        "dp_first_step_loss": [losses[0], loss_after],
        "dp_step_weights": [_norm(after), moved / lr if lr > 0 else moved],
        "dp_loss_curve": losses[: recipe.curve_steps],
    }


def _interval(ctx: Context, lane: Lane, start: int, steps: int, timed: _Timed, fault: Callable[[], None]) -> None:
    timed.readings.start()
    clock = time.perf_counter()
    out = None
    for j in range(steps):
        fault()
        out = lane.step(start + j)
    lane.sync(out)
    seconds = time.perf_counter() - clock
    timed.readings.stop()
    timed.probes.append(ctx.probe_escape())
    timed.samples.append(seconds / steps)


def _collective_time(loop: Loop, reduce: Callable[[], Any]) -> float:
    """Median seconds of a collective, every rank aligned by a barrier first (outside the clock)."""
    for _ in range(2):
        reduce()
    times = []
    for _ in range(ALLREDUCE_REPS):
        loop.barrier()
        clock = time.perf_counter()
        reduce()
        times.append(time.perf_counter() - clock)
    return _median(times)


def _planted(ranks: Ranks) -> tuple[Callable[[], None], Callable[[], None]]:
    """(per step, at the first timed interval): what HARNESS_RANK_FAULT plants on this rank."""
    fault: Fault | None = contract.fault_from(os.environ.get(contract.FAULT_VAR))
    if fault is None or fault.rank != ranks.rank:
        return (lambda: None), (lambda: None)
    if fault.kind == "slow":
        pause = fault.ms / 1000.0
        return (lambda: time.sleep(pause)), (lambda: None)

    def at_first_interval() -> None:
        print(f"[rank {ranks.rank}] planted fault: {fault.kind}", file=sys.stderr, flush=True)
        if fault.kind == "crash":
            os._exit(3)
        while True:  # hang: alive, silent, in no collective
            time.sleep(3600)

    return (lambda: None), at_first_interval


def _median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def link_peak(device_kind: str, device_name: str) -> float | None:
    """The all-reduce bus bandwidth's ceiling where the link is known: NVLink 4 on H100/H200 SXM
    (450 GB/s a direction, NCCL-tests' busbw ceiling); None elsewhere (gloo over loopback has none)."""
    sxm = device_kind == "gpu" and any(k in device_name for k in ("H100 80GB HBM3", "H200", "H100 SXM"))
    return 450e9 if sxm else None


def _one_way(
    loop: Loop, recipe: Recipe, shape: Shape, leader: bool
) -> tuple[float, dict[str, list[float]] | None, Lane | None]:
    """Rank 0's 1-way lanes while the others wait: the checks at the global batch (the gate's), and the
    lane timed against the N-way one (the same, in strong scaling; one device's batch in weak)."""
    first, checks, single = 0.0, None, None
    loop.barrier()
    if leader:
        probe = loop.single(shape.total_steps, shape.global_batch)
        first, checks = _checks(probe, recipe)
        single = probe
        if shape.single_batch != shape.global_batch:
            single = loop.single(shape.total_steps, shape.single_batch)
            single.sync(single.step(CHECK_STEPS))  # its own compilation, outside every clock
    loop.barrier()
    return first, checks, single


def _interleaved(
    ctx: Context, loop: Loop, shape: Shape, lane: Lane, single: Lane | None,
    planted: tuple[Callable[[], None], Callable[[], None]],
) -> tuple[_Timed, _Timed]:  # fmt: skip
    """ABAB: an N-way interval on every rank, then rank 0's 1-way interval while the others wait."""
    per_step, at_first = planted
    wide, alone = _Timed(), _Timed()
    for i in range(shape.intervals):
        start = CHECK_STEPS + i * shape.steps
        loop.barrier()
        if i == 0:
            at_first()
        _interval(ctx, lane, start, shape.steps, wide, per_step)
        if shape.devices > 1:
            loop.barrier()
            if single is not None:
                _interval(ctx, single, start, shape.steps, alone, lambda: None)
            loop.barrier()
        ctx.progress(f"interval {i + 1}/{shape.intervals}: {wide.samples[-1] * 1e3:.2f} ms/step"
                     + (f" ({shape.devices}-way), {alone.samples[-1] * 1e3:.2f} ms/step (1-way)"
                        if alone.samples else ""))  # fmt: skip
    return wide, alone


def _compute_only(loop: Loop, shape: Shape, lane: Lane, per_step: Callable[[], None]) -> list[float]:
    """Seconds per step of this rank's step with communication off: one sample an interval, and at
    least the straggler rule's number of them (over the intervals' batches again)."""
    step = loop.compute_only(lane)
    step(CHECK_STEPS)  # a program of its own in JAX: compiled outside the clock
    samples: list[float] = []
    timed = shape.intervals * shape.steps
    loop.barrier()
    for i in range(max(shape.intervals, contract.STRAGGLER_SAMPLES)):
        clock = time.perf_counter()
        out = None
        for j in range(shape.steps):
            per_step()
            out = step(CHECK_STEPS + (i * shape.steps + j) % timed)
        lane.sync(out)
        samples.append((time.perf_counter() - clock) / shape.steps)
    return samples


def run(ctx: Context, recipe: Recipe, make_loop: Callable[[Ranks, Recipe, Shape], Loop]) -> None:
    """The data-parallel loop on this rank (every rank runs it; rank 0 records)."""
    ranks = current()
    shape = shape_of(ctx)
    if ranks.world != shape.devices:
        raise JobError(f"this process is one of {ranks.world} ranks, but devices={shape.devices}")
    if ctx.precision != "fp32":
        raise Skip(f"the data-parallel loop runs in float32 only (--precision {ctx.precision} asked); "
                   "drop --precision or --param devices")  # fmt: skip
    loop = make_loop(ranks, recipe, shape)
    planted = _planted(ranks)  # (every step, the first interval): HARNESS_RANK_FAULT on this rank
    leader, n = ranks.leader, shape.devices
    ctx.note(
        f"data-parallel: {n} rank{'s' if n > 1 else ''} ({loop.collectives}), {shape.scaling} scaling, global batch "
        f"{shape.global_batch} ({shape.per_device} per device); 1-way step at batch {shape.single_batch}, "
        "interleaved; dropout off (N-way and 1-way steps are the same function)"
    )
    ctx.progress(f"rank {ranks.rank}/{n}: staging {shape.total_steps} steps' batches")
    lane = loop.n_way(shape.total_steps)
    first_call, checks = _checks(lane, recipe)
    ctx.progress(f"rank {ranks.rank}: first step {first_call:.3f} s (trace, compile, run); loss {checks['dp_loss_curve'][0]:.5f}")  # fmt: skip
    single_first, single_checks, single = _one_way(loop, recipe, shape, leader) if n > 1 else (0.0, None, None)
    wide, alone = _interleaved(ctx, loop, shape, lane, single, planted)
    allreduce_s: float | None = None
    gradient: tuple[float, int] | None = None
    elements = loop.param_count()
    if n > 1:
        allreduce_s = _collective_time(loop, loop.allreduce(elements))
        reduce, buffers = loop.gradient_allreduce()
        gradient = (_collective_time(loop, reduce), buffers)
    compute = _compute_only(loop, shape, lane, planted[0])
    # Fixed length on every rank (a collective): the medians, then every compute sample.
    mine = [_median(wide.samples), _median(compute), allreduce_s if allreduce_s is not None else -1.0, *compute]
    gathered = loop.gather(mine)
    hosts = loop.hosts()
    if not leader:
        return
    _record(ctx, recipe, shape, loop, (first_call, single_first), checks, single_checks, wide, alone,
            (allreduce_s, gradient), elements, gathered, hosts)  # fmt: skip


def _record(ctx: Context, recipe: Recipe, shape: Shape, loop: Loop, firsts: tuple[float, float],
            checks: dict[str, list[float]], single_checks: dict[str, list[float]] | None, wide: _Timed,
            alone: _Timed, reduced: tuple[float | None, tuple[float, int] | None], elements: int, gathered: list[list[float]],
            hosts: list[str]) -> None:  # fmt: skip
    n = shape.devices
    allreduce_s, gradient = reduced
    for name, value in checks.items():
        ctx.check(name, value)
    items = recipe.items_per_row
    flops = None if recipe.flops_per_row is None else recipe.flops_per_row * shape.global_batch
    ctx.record_time(
        "dp step",
        first_call=firsts[0],
        samples=wide.samples,
        flops=flops,
        description=f"one {n}-way data-parallel optimiser step at global batch {shape.global_batch} (per step)",
        probes=wide.probes,
        readings=wide.readings,
        variant=f"{n}-way {loop.collectives}" if n > 1 else "1 device",
    )
    step_s = _median(wide.samples)
    throughput = shape.global_batch * items / step_s
    ctx.value("dp throughput", [shape.global_batch * items / s for s in wide.samples], unit=f"{recipe.unit}/s",
              description=f"{recipe.unit} per second, all {n} devices", derived_from="dp step")  # fmt: skip
    single_s = single_thr = efficiency = None
    if alone.samples:
        ctx.record_time(
            "dp step (1-way)",
            first_call=firsts[1],
            samples=alone.samples,
            description=f"the same step on one device at batch {shape.single_batch}, interleaved with the N-way",
            probes=alone.probes,
            readings=alone.readings,
            variant="1 device",
        )
        single_s = _median(alone.samples)
        single_thr = shape.single_batch * items / single_s
        efficiency = throughput / (n * single_thr)
    ranks = [
        {"rank": r, "host": hosts[r][:200], "step_s": row[0], "compute_s": row[1],
         "allreduce_s": row[2] if row[2] >= 0 else None, "compute_samples": row[3:]}
        for r, row in enumerate(gathered)
    ]  # fmt: skip
    compute_s = max(row[1] for row in gathered)
    reduce_record: dict[str, Any] | None = None
    exposed = overlap = None
    if allreduce_s is not None and allreduce_s > 0 and gradient is not None:
        size = elements * 4
        peak = link_peak(ctx.device_kind, loop.device_name)
        reduce_record = {"bytes": size, "seconds": allreduce_s, "algbw_Bps": size / allreduce_s,
                         "busbw_Bps": size * 2 * (n - 1) / n / allreduce_s, "peak_Bps": peak,
                         "gradient_seconds": gradient[0], "gradient_collectives": gradient[1]}  # fmt: skip
        exposed = step_s - compute_s
        # Hidden: the share of the gradients' reduction (as the framework runs it) the step did not pay.
        overlap = min(1.0, max(0.0, 1.0 - exposed / gradient[0])) if gradient[0] > 0 else None
    ctx.parallel = {
        "devices": n,
        "scaling": shape.scaling,
        "global_batch": shape.global_batch,
        "per_device_batch": shape.per_device,
        "unit": recipe.unit,
        "items_per_row": items,
        "collectives": loop.collectives,
        "steps_per_interval": shape.steps,
        "step_s": step_s,
        "single_step_s": single_s,
        "single_batch": shape.single_batch if n > 1 else None,
        "throughput": throughput,
        "single_throughput": single_thr,
        "efficiency": efficiency,
        "compute_s": compute_s,
        "allreduce": reduce_record,
        "exposed_comm_s": exposed,
        "overlap": overlap,
        "ranks": ranks,
        "straggler": contract.straggler([row[3:] for row in gathered]),
        "single": None
        if single_checks is None
        else {
            "global_batch": shape.global_batch,
            "checks": [{"name": k, "value": v} for k, v in single_checks.items()],
        },  # fmt: skip
    }
    if reduce_record is not None and allreduce_s is not None and exposed is not None:
        ctx.progress(
            f"all-reduce of {elements * 4 / 1e6:.2f} MB: {allreduce_s * 1e3:.2f} ms flat, bus bandwidth "
            f"{reduce_record['busbw_Bps'] / 1e9:.3f} GB/s; as the gradients are reduced "
            f"({reduce_record['gradient_collectives']} collectives) {reduce_record['gradient_seconds'] * 1e3:.2f} ms; "
            f"compute {compute_s * 1e3:.2f} ms/step, exposed communication {exposed * 1e3:.2f} ms/step"
        )
    if efficiency is not None:
        ctx.progress(f"scaling efficiency {efficiency * 100:.1f} % ({n} devices vs 1, {shape.scaling})")


def image_rows(train_x: Any, train_y: Any, seed: int) -> Callable[[int, int], tuple[Any, Any]]:
    """Step s's first n rows of an image set: indices drawn with replacement from (seed, s), so
    the first n of any draw are the same whatever n (NumPy's bounded integers are drawn in order)."""
    import numpy as np

    def rows(s: int, n: int) -> tuple[Any, Any]:
        picked = np.random.default_rng(np.random.SeedSequence([seed, 0xD9, s])).integers(0, len(train_y), size=n)
        return np.ascontiguousarray(train_x[picked]), np.asarray(train_y[picked], np.int64)

    return rows
