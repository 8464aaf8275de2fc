"""Data-parallel jobs: one job run as N processes (ranks), the contract between backends and the job.

A training suite that declares `parallel_params()` runs its data-parallel loop
(suites/runtime/data_parallel.py) when `devices` >= 1: N = `devices` processes, one per device, each
running the same `python -m suites run --job PATH` with the same job.json. The backend starts them
and tells each who it is through the environment (below); the job does the rest. `devices=0` (the
default) is the suite's own single-process loop, untouched.

What a backend gives every rank (`rank_environment`):
    HARNESS_RANK         this process's rank, 0..N-1
    HARNESS_WORLD_SIZE   N
    HARNESS_LOCAL_RANK   its index among the ranks of its node (which GPU it takes)
    HARNESS_COORDINATOR  host:port of rank 0, where both jax.distributed and torch's TCP store meet
A Slurm task may leave the first three to Slurm (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID); a
Kubernetes indexed Job gives its rank as JOB_COMPLETION_INDEX. HARNESS_COORDINATOR is always set by
whoever starts the ranks (a script computes it from the node list, a Service names rank 0).

Only rank 0 writes the result file; every rank's figures reach it through the framework's own
collectives, and it records them under the result's `parallel` block (see `BLOCK_KEYS`). A rank
that fails exits non-zero: the backend stops the others within `GRACE_S` and records a failed result
naming the rank (harness/backends/ranks.py).

Standard library only: this runs inside the stack images.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Mapping
from dataclasses import dataclass

from suites.contract.spec import CheckSpec, Param, ParamValue

DEVICES = "devices"  # the parameter: 0 = the suite's own loop, N >= 1 = the data-parallel loop on N ranks
SCALING = "scaling"
SCALINGS = ("strong", "weak")
MAX_DEVICES = 1024
COORDINATOR_PORT = 29500  # rank 0's port where the job has a network of its own (a container network, a Service)
GRACE_S = 10.0  # how long the other ranks get to end by themselves once one has failed, before they are killed

RANK_VAR = "HARNESS_RANK"
WORLD_VAR = "HARNESS_WORLD_SIZE"
LOCAL_RANK_VAR = "HARNESS_LOCAL_RANK"
# Ranks sharing this node's CPUs: on a CPU a "device" is a share of the cores, so each rank takes its
# slice (runtime/data_parallel.py); unset where the launcher binds cores itself (srun --cpu-bind).
LOCAL_WORLD_VAR = "HARNESS_LOCAL_WORLD_SIZE"
COORDINATOR_VAR = "HARNESS_COORDINATOR"
# Testing aid, recorded in the result like every HARNESS_ variable: `slow:R:MS` (rank R sleeps MS ms
# in every step: a straggler), `crash:R` (rank R exits at its first timed step), `hang:R` (it stops).
FAULT_VAR = "HARNESS_RANK_FAULT"
FAULT_KINDS = ("slow", "crash", "hang")

# The keys of the result's `parallel` block (written by rank 0, validated by the host):
#   devices, scaling, global_batch, per_device_batch, unit ("samples" | "tokens"), items_per_row,
#   collectives ("gloo" | "nccl"), steps_per_interval,
#   step_s (median seconds per N-way step), single_step_s (the 1-way step's, interleaved with it),
#   efficiency (throughput_N / (N x throughput_1)), compute_s (the slowest rank's step without
#   communication), allreduce ({bytes, seconds, algbw_Bps, busbw_Bps}), exposed_comm_s, overlap,
#   ranks ([{rank, host, step_s, compute_s, allreduce_s}]), straggler (null | {rank, ratio}),
#   single ({global_batch, checks: [{name, value}]}: the 1-way run's checks at the N-way global batch).
BLOCK_KEYS = (
    "devices",
    "scaling",
    "global_batch",
    "per_device_batch",
    "unit",
    "items_per_row",
    "collectives",
    "steps_per_interval",
    "step_s",
    "single_step_s",
    "single_batch",
    "throughput",
    "single_throughput",
    "efficiency",
    "compute_s",
    "allreduce",
    "exposed_comm_s",
    "overlap",
    "ranks",
    "straggler",
    "single",
)
STRAGGLER_RATIO = 1.3  # a rank whose step computes this much longer than the other ranks' median is named
# Fewer samples name no straggler: under the same code on every rank, one rank's s samples all lie
# above another's with chance 2 / C(2s, s): 33 % at s=2, 0.8 % at s=5, 0.2 % at s=6 (then the ratio too).
STRAGGLER_SAMPLES = 6


def straggler(compute: list[list[float]]) -> dict[str, float | int] | None:
    """The rank named a straggler from every rank's compute-only samples (seconds per step), or None.

    One rule for the job and the host. The slowest rank by median is named when its median is more
    than STRAGGLER_RATIO x the median of the other ranks' medians AND every one of its samples is
    slower than every sample of every other rank: on a noisy machine two ranks running the same
    code drift apart by tens of % for a sample or two, never consistently (the A/A this must pass).
    With fewer than STRAGGLER_SAMPLES samples a rank, no rank is named."""
    if len(compute) < 2 or any(len(row) < STRAGGLER_SAMPLES for row in compute):
        return None
    medians = [statistics.median(row) for row in compute]
    worst = max(range(len(compute)), key=lambda r: medians[r])
    middle = statistics.median(m for r, m in enumerate(medians) if r != worst)
    if middle <= 0:
        return None
    ratio = medians[worst] / middle
    apart = min(compute[worst]) > max(v for r, row in enumerate(compute) if r != worst for v in row)
    return {"rank": worst, "ratio": ratio} if ratio > STRAGGLER_RATIO and apart else None


def parallel_params(*, steps: int = 10, intervals: int = 6) -> tuple[Param, ...]:
    """The parameters of the data-parallel loop, the same in every suite that has one."""
    return (
        Param(
            DEVICES,
            "int",
            0,
            "0: the suite's own single-process loop; N >= 1: data-parallel training on N devices, one process "
            "each (JAX: one program over the device mesh; PyTorch: DistributedDataParallel), with the 1-way "
            "step interleaved for scaling efficiency",
            min=0,
            max=MAX_DEVICES,
        ),
        Param(
            SCALING,
            "str",
            "strong",
            "devices >= 1: strong keeps batch_size as the global batch (each device takes batch_size/N); "
            "weak makes batch_size each device's (global batch N x batch_size)",
            choices=SCALINGS,
        ),
        Param(
            "dp_intervals",
            "int",
            intervals,
            "devices >= 1: timed intervals, each an N-way then a 1-way one (compilation is in the checks' first step)",
            min=2,
            max=1000,
        ),  # fmt: skip
        Param("dp_steps", "int", steps, "devices >= 1: optimiser steps per interval", min=1, max=100_000),
    )


def parallel_checks(
    *,
    loss_rtol: float = 1e-5,
    loss_atol: float = 1e-6,
    curve_rtol: float = 1e-4,
    curve_atol: float = 1e-5,
    curve_steps: int = 8,
) -> tuple[CheckSpec, ...]:
    """The data-parallel loop's checks; a devices >= 1 job reports these and only these.

    Tolerances: the N-way and the 1-way step differ only in the order of the gradient's sum (float32:
    a few ulps); across frameworks they are the suites' first-step tolerances. A suite whose forward
    pass amplifies rounding (BatchNorm over few values) loosens the losses', never the weights'."""
    return (
        CheckSpec(
            "dp_first_step_loss",
            "data-parallel loop: global-batch loss of the first step from the shared initial weights, "
            "before and after the update (dropout off)",
            rtol=loss_rtol,
            atol=loss_atol,
            required=False,
        ),
        CheckSpec(
            "dp_step_weights",
            "data-parallel loop, after the first step: the weights' total L2 norm and ||W - W0|| / lr",
            rtol=5e-4,
            atol=1e-6,
            required=False,
        ),
        CheckSpec(
            "dp_loss_curve",
            f"data-parallel loop: global-batch training loss of the first {curve_steps} steps",
            rtol=curve_rtol,
            atol=curve_atol,
            required=False,
        ),
    )


PARALLEL_CHECKS = tuple(c.name for c in parallel_checks())
PARALLEL_SMOKE: dict[str, ParamValue] = {"dp_intervals": 2, "dp_steps": 2}  # a suite's smoke size adds these


def devices_of(params: Mapping[str, object]) -> int:
    """The `devices` parameter (0 where the suite has none)."""
    value = params.get(DEVICES, 0)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def processes(params: Mapping[str, object]) -> int:
    """How many processes a backend starts for a job with these parameters."""
    return max(1, devices_of(params))


def data_parallel(params: Mapping[str, object]) -> bool:
    return devices_of(params) >= 1


def batch_problem(params: Mapping[str, ParamValue], batch_param: str = "batch_size") -> str | None:
    """Strong scaling splits the global batch evenly; a remainder would make the N-way step another step."""
    devices, batch = devices_of(params), params.get(batch_param)
    if devices > 1 and params.get(SCALING) == "strong" and isinstance(batch, int) and batch % devices:
        return (
            f"{batch_param}={batch} does not split over devices={devices} (strong scaling gives each device "
            f"{batch_param}/devices rows): use a multiple of {devices}, or --param scaling=weak"
        )
    return None


def rank_environment(
    rank: int, world: int, coordinator: str, local_rank: int | None = None, local_world: int | None = None
) -> dict[str, str]:
    """What a backend sets for rank `rank` of `world` (`local_world`: ranks on this node, default all)."""
    return {
        RANK_VAR: str(rank),
        WORLD_VAR: str(world),
        LOCAL_RANK_VAR: str(rank if local_rank is None else local_rank),
        LOCAL_WORLD_VAR: str(world if local_world is None else local_world),
        COORDINATOR_VAR: coordinator,
    }


class RankError(ValueError):
    """The environment does not say consistently who this rank is."""


@dataclass(frozen=True)
class Ranks:
    rank: int
    world: int
    local_rank: int
    local_world: int  # ranks sharing this node's cores (1: the launcher bound them, or a world of one)
    coordinator: str | None  # None for a world of one
    source: str  # harness | slurm | k8s | single

    @property
    def leader(self) -> bool:
        return self.rank == 0


def _whole(name: str, text: str | None) -> int | None:
    if text is None:
        return None
    if not text.isascii() or not text.isdigit():
        raise RankError(f"{name}={text!r} is not a whole number")
    return int(text)


def from_environment(expected: int, environ: Mapping[str, str] | None = None) -> Ranks:
    """Who this process is, for a job that asked for `expected` processes; RankError if it cannot tell."""
    env = os.environ if environ is None else environ
    source = "harness"
    rank = _whole(RANK_VAR, env.get(RANK_VAR))
    world = _whole(WORLD_VAR, env.get(WORLD_VAR))
    local = _whole(LOCAL_RANK_VAR, env.get(LOCAL_RANK_VAR))
    if rank is None and "SLURM_PROCID" in env:
        source = "slurm"
        rank = _whole("SLURM_PROCID", env.get("SLURM_PROCID"))
        world = world if world is not None else _whole("SLURM_NTASKS", env.get("SLURM_NTASKS"))
        local = _whole("SLURM_LOCALID", env.get("SLURM_LOCALID"))
    elif rank is None and "JOB_COMPLETION_INDEX" in env:
        source = "k8s"
        rank = _whole("JOB_COMPLETION_INDEX", env.get("JOB_COMPLETION_INDEX"))
        local = 0  # one pod per rank
    if rank is None:
        if expected > 1:
            raise RankError(
                f"this job runs on {expected} processes but {RANK_VAR} is not set: start it with "
                "`harness run` (or from an exported script), which starts every rank"
            )
        return Ranks(0, 1, 0, 1, None, "single")
    world = expected if world is None else world
    if world != expected:
        raise RankError(f"{WORLD_VAR}={world}, but the job's devices parameter asks for {expected} processes")
    if not 0 <= rank < world:
        raise RankError(f"rank {rank} is outside 0..{world - 1}")
    coordinator = env.get(COORDINATOR_VAR) or None
    if world > 1 and (coordinator is None or ":" not in coordinator):
        raise RankError(f"{COORDINATOR_VAR} must be host:port of rank 0 (got {coordinator!r})")
    local_world = _whole(LOCAL_WORLD_VAR, env.get(LOCAL_WORLD_VAR)) or 1
    return Ranks(rank, world, rank if local is None else local, local_world, coordinator, source)


@dataclass(frozen=True)
class Fault:
    kind: str
    rank: int
    ms: float = 0.0


def fault_from(text: str | None) -> Fault | None:
    """The planted fault of FAULT_VAR, or None; a malformed one is an error (a typo must not run clean)."""
    if not text:
        return None
    parts = text.split(":")
    if parts[0] not in FAULT_KINDS or len(parts) != (3 if parts[0] == "slow" else 2) or not parts[1].isdigit():
        raise RankError(f"{FAULT_VAR}={text!r}: expected slow:RANK:MS, crash:RANK or hang:RANK")
    try:
        ms = float(parts[2]) if parts[0] == "slow" else 0.0
    except ValueError:
        raise RankError(f"{FAULT_VAR}={text!r}: MS is not a number") from None
    if not 0 <= ms <= 60_000:
        raise RankError(f"{FAULT_VAR}={text!r}: MS must be 0..60000")
    return Fault(parts[0], int(parts[1]), ms)
