"""The shape of a result's `parallel` block: what rank 0 of a data-parallel job (suites/contract/ranks.py,
`devices` >= 1) records about the N-way step, the 1-way step interleaved with it, the all-reduce and
every rank.

Like result_types.py, these TypedDicts are both what mypy sees and what pydantic checks (strict: no
coercion, finite numbers, capped lengths); unlike the rest of a result, an unknown key is refused
(`extra="forbid"`), so a misspelt figure is a one-line rejection and never a silently missing number.
Rules that relate fields to each other and to the result's params are code in schema.py
(`parallel_problem`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from annotated_types import Ge, Gt, Le, MaxLen, MinLen
from pydantic import AllowInfNan, ConfigDict, Strict, with_config
from typing_extensions import NotRequired, TypedDict

from harness.core.result_types import MAX_MAGNITUDE, Describe, Finite, NonNegative, Probability
from suites.contract.ranks import MAX_DEVICES, PARALLEL_CHECKS

MAX_HOST = 255  # a host name (RFC 1123's 253, and some slack): more is not a host
MAX_CHECK_NAME = 60
MAX_INTERVALS = 1000  # the dp_intervals parameter's maximum (suites/contract/ranks.py)
MAX_SINGLE_CHECKS = 4 * len(PARALLEL_CHECKS)  # the names are checked in schema.py; this caps the list before that

Whole = Annotated[int, Strict(), Ge(1), Le(10**15), Describe("a whole number >= 1", "whole numbers >= 1")]
Index = Annotated[int, Strict(), Ge(0), Le(MAX_DEVICES), Describe("a rank (a whole number >= 0)", "ranks")]
Devices = Annotated[int, Strict(), Ge(1), Le(MAX_DEVICES), Describe(f"a whole number from 1 to {MAX_DEVICES}")]
Positive = Annotated[
    float, Strict(), AllowInfNan(False), Gt(0), Le(MAX_MAGNITUDE), Describe("a finite number > 0", "finite numbers > 0")
]
Bytes = Annotated[int, Strict(), Ge(0), Le(10**18), Describe("a whole number of bytes >= 0")]
Host = Annotated[str, Strict(), MaxLen(MAX_HOST), Describe(f"a string of at most {MAX_HOST} characters")]
CheckName = Annotated[str, Strict(), MinLen(1), MaxLen(MAX_CHECK_NAME), Describe("a check name")]

FORBID = ConfigDict(extra="forbid")


@with_config(FORBID)
class AllReduce(TypedDict):
    """The gradient all-reduce timed alone, on this job's gradient size (nccl-tests' algbw and busbw):
    one flat buffer (the link), and the gradients as the framework reduces them (XLA: one collective per
    tensor; DDP: its 25 MB buckets)."""

    bytes: Bytes
    seconds: NonNegative
    algbw_Bps: NonNegative
    busbw_Bps: NonNegative
    peak_Bps: Positive | None  # the link's peak where known (NVLink, PCIe); null elsewhere
    gradient_seconds: NonNegative
    gradient_collectives: Whole


@with_config(FORBID)
class RankFigures(TypedDict):
    rank: Index
    host: Host
    step_s: NonNegative
    compute_s: NonNegative  # its median step with communication off
    allreduce_s: NonNegative | None
    # the per-interval compute steps compute_s is the median of (the job writes them since it gathers them)
    compute_samples: NotRequired[Annotated[list[NonNegative], Strict(), MaxLen(MAX_INTERVALS)]]


@with_config(FORBID)
class Straggler(TypedDict):
    rank: Index
    ratio: NonNegative  # its compute_s over the median of the other ranks'


@with_config(FORBID)
class SingleCheck(TypedDict):
    name: CheckName
    value: Any  # a finite number or a (nested) list of them: schema.py checks it as it checks `checks[].value`


@with_config(FORBID)
class Single(TypedDict):
    """The 1-way run's checks at the N-way global batch: the agreement gate's other side (judge/parallel.py)."""

    global_batch: Whole
    checks: Annotated[list[SingleCheck], Strict(), MaxLen(MAX_SINGLE_CHECKS)]


@with_config(FORBID)
class Parallel(TypedDict):
    devices: Devices
    scaling: Literal["strong", "weak"]
    global_batch: Whole
    per_device_batch: Whole
    unit: Literal["samples", "tokens"]
    items_per_row: Whole  # tokens per row for a language model, 1 for images
    collectives: Literal["gloo", "nccl", "none"]
    steps_per_interval: Whole
    step_s: Positive  # median seconds per N-way step over the steady intervals
    single_step_s: Positive | None  # the 1-way step, interleaved in the same job; null when devices == 1
    single_batch: Whole | None  # the 1-way step's batch: the global batch (strong) or one device's (weak)
    throughput: Positive  # items/s, N-way
    single_throughput: Positive | None
    efficiency: NonNegative | None  # throughput / (devices x single_throughput), as the job worked it out
    compute_s: NonNegative  # the slowest rank's median step with communication off
    allreduce: AllReduce | None
    exposed_comm_s: Finite | None  # step_s - compute_s (noise can make it a little negative)
    overlap: Probability | None  # the share of the all-reduce hidden behind compute
    ranks: Annotated[list[RankFigures], Strict(), MinLen(1), MaxLen(MAX_DEVICES)]
    straggler: Straggler | None
    single: Single | None
