"""The result format, written once: these TypedDicts are what mypy sees (`metric["stats"]["median"]`
is a float, a misspelt key an error), what `schema.validate` checks every file's shape against
(pydantic, strict: no coercion, finite numbers of sane magnitude, capped list sizes) and what
docs/result-schema.md is tested against. Rules that relate one field to another (sample counts,
registry names, marks in range) are code in schema.py.

The job side (suites/) builds these documents as plain dicts; the host only ever holds them after
`schema.validate` has migrated an older version and checked them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import (
    TYPE_CHECKING,
    Annotated,
    Any,
    Literal,
    TypeAlias,  # pydantic needs these on Python < 3.12
    Union,
)

from annotated_types import Ge, Gt, Le, MaxLen, MinLen
from pydantic import AllowInfNan, Strict
from typing_extensions import NotRequired, TypedDict

# No real metric, FLOP count or check value comes near this; beyond it squares and products in
# the statistics could overflow a float.
MAX_MAGNITUDE = 1e150
# The bootstrap intervals cost O(samples) per resample: far beyond any real --repeat x --rounds,
# a file with millions of samples would keep every renderer busy for hours.
MAX_SAMPLES = 10_000  # per metric
MAX_TOTAL_SAMPLES = 50_000  # per result
MAX_CURVES = 1_000  # training.curves: one per process (round); far beyond any real --rounds
MAX_CURVE_EPOCHS = 1000  # the training suites' `epochs` maximum


@dataclass(frozen=True)
class Describe:
    """What a value of this type is, in a message ("expected <text>"); pydantic ignores it."""

    text: str
    plural: str | None = None  # in "a list of <plural>"; None: described from the type


Finite = Annotated[float, Strict(), AllowInfNan(False), Ge(-MAX_MAGNITUDE), Le(MAX_MAGNITUDE)]
NonNegative = Annotated[float, Strict(), AllowInfNan(False), Ge(0), Le(MAX_MAGNITUDE)]
Percent = Annotated[
    float, Strict(), AllowInfNan(False), Ge(0), Le(100), Describe("a percentage (0 to 100)", "percentages (0 to 100)")
]
Probability = Annotated[
    float, Strict(), AllowInfNan(False), Ge(0), Le(1), Describe("a probability (0 to 1)", "probabilities (0 to 1)")
]
Integer = Annotated[int, Strict(), Ge(-(10**150)), Le(10**150)]
Count = Annotated[int, Strict(), Ge(0), Le(10**150)]
Text = Annotated[str, Strict()]
Name = Annotated[str, Strict(), MinLen(1)]
Flag = Annotated[bool, Strict()]
Scalar = Annotated[Union[Text, Flag, Finite, None], Describe("a string, number, true/false or null")]
Numbers = Annotated[list[Finite], Strict()]
Capped = Annotated[list[Finite], Strict(), MaxLen(MAX_SAMPLES)]
Objects = Annotated[dict[str, Any], Strict()]
Status = Literal["ok", "failed", "timeout", "oom", "invalid-output", "skipped", "interrupted", "cancelled"]


Marks = Annotated[
    dict[str, Annotated[list[Integer], Strict(), Describe("a list of sample indices")]],
    Strict(),
    Describe("an object of mark reason -> sample indices"),
]
RoundSizes = Annotated[list[Annotated[int, Strict(), Ge(1), Le(10**150)]], Strict(), Describe("whole numbers >= 1")]
MAX_DERIVED_FROM = 8  # a speed-up names two time metrics; a value made of more is not one number's fate
DerivedFrom = Annotated[
    Union[Name, Annotated[list[Name], Strict(), MinLen(1), MaxLen(MAX_DERIVED_FROM)]],
    Describe("a time metric's name or a list of them"),
]


class Stats(TypedDict):
    n: Count
    median: Finite
    q1: Finite
    q3: Finite
    iqr: Finite
    min: Finite
    max: Finite
    mean: Finite
    stdev: Finite


class Sync(TypedDict):
    """Barrier evidence after each sample (suites/runtime/syncguard.py)."""

    state: Literal["ok", "escaped", "unchecked"]
    pending_share: NotRequired[NonNegative | None]
    excess_median_s: NotRequired[NonNegative | None]
    excess_max_s: NotRequired[NonNegative | None]
    idle_barrier_median_s: NotRequired[NonNegative | None]
    sample_median_s: NotRequired[NonNegative | None]
    threshold_s: NotRequired[NonNegative | None]
    n: NotRequired[NonNegative | None]
    why: NotRequired[Text | None]


class Contention(TypedDict):
    """What the process got around each sample (suites/runtime/contention.py); lists index `samples`."""

    cpu_s: Annotated[list[NonNegative], Strict(), MaxLen(MAX_SAMPLES)]
    wall_s: NotRequired[Annotated[list[NonNegative], Strict(), MaxLen(MAX_SAMPLES)] | None]
    involuntary_switches: Annotated[list[Count], Strict(), MaxLen(MAX_SAMPLES)]
    # The process's threads' run-queue wait (schedstat), s; absent in older results, null where unknown.
    run_delay_s: NotRequired[Annotated[list[NonNegative | None], Strict(), MaxLen(MAX_SAMPLES)] | None]
    others_cores: NotRequired[Annotated[list[NonNegative | None], Strict(), MaxLen(MAX_SAMPLES)] | None]
    steal_cores: NotRequired[Annotated[list[NonNegative | None], Strict(), MaxLen(MAX_SAMPLES)] | None]
    runnable: NotRequired[Annotated[list[Count], Strict(), MaxLen(MAX_SAMPLES)] | None]
    cores: Count
    # The CPUs counted for others_cores and steal_cores (the job's affinity), ascending; absent
    # (older results) or null where they were counted host-wide. Linux allows at most 8192 CPUs.
    cpus: NotRequired[Annotated[list[Count], Strict(), MaxLen(8192)] | None]
    window_s: NonNegative
    contended: Annotated[list[Count], Strict(), MaxLen(MAX_SAMPLES)]
    sm_clock_mhz: NotRequired[Annotated[list[NonNegative | None], Strict(), MaxLen(MAX_SAMPLES)] | None]
    clock_event_reasons: NotRequired[Annotated[list[Count | None], Strict(), MaxLen(MAX_SAMPLES)] | None]
    throttled: NotRequired[Annotated[list[Count], Strict(), MaxLen(MAX_SAMPLES)] | None]


class Metric(TypedDict):
    name: Name
    kind: Literal["time", "value"]
    unit: Text
    better: Literal["lower", "higher"]
    samples: Annotated[list[Finite], Strict(), MinLen(1), MaxLen(MAX_SAMPLES)]
    stats: Stats
    description: NotRequired[Text | None]
    first_call: NotRequired[NonNegative | None]
    first_calls: NotRequired[Capped | None]
    warmup: NotRequired[Integer | None]
    flops: NotRequired[NonNegative | None]
    bytes: NotRequired[NonNegative | None]
    dtype: NotRequired[Text | None]
    variant: NotRequired[Text | None]
    synchronised: NotRequired[Flag | None]
    sync: NotRequired[SyncField]
    warnings: NotRequired[Annotated[list[Text], Strict()] | None]
    round_medians: NotRequired[Capped | None]
    marks: NotRequired[MarksField]  # reason (suites/contract/marks.py) -> ascending indices into samples
    round_sizes: NotRequired[RoundSizesField]  # pooled rounds: samples per round, in order
    contention: NotRequired[ContentionField]
    steady_compilations: NotRequired[Count | None]  # compilations inside the steady samples' clocks
    compiles: NotRequired[Flag | None]  # declared: times compilation on purpose (not marked)
    derived_from: NotRequired[DerivedFrom | None]  # value metrics: the time metric(s) whose samples made it


class Check(TypedDict):
    name: Text
    value: Any  # a finite number, or a (nested) list of them: schema.py checks it
    help: NotRequired[Text | None]
    limit: NotRequired[Finite | None]
    rtol: NotRequired[Finite | None]
    atol: NotRequired[Finite | None]
    missing_rounds: NotRequired[Annotated[list[Count], Strict()] | None]  # pooled: rounds without it


class Cpu(TypedDict, total=False):
    logical_cores: Finite | None
    usable_cores: Finite | None
    mhz: Finite | None
    max_mhz: Finite | None
    vector: Text | None


class Machine(TypedDict, total=False):
    cpu: Cpu | None


class Environment(TypedDict, total=False):
    machine: Machine | None
    versions: Annotated[dict[str, Scalar], Strict()]  # read without a fallback for null
    device: Objects | None
    precision: Objects | None
    variables: Annotated[dict[str, Scalar], Strict()]
    launch: Objects | None


class Settings(TypedDict, total=False):
    repeat: Integer | None
    warmup: Integer | None
    threads: Integer | None
    rounds: Integer | None


class Dataset(TypedDict):
    name: Text
    origin: NotRequired[Text | None]
    repo: NotRequired[Text | None]
    revision: NotRequired[Text | None]
    fingerprint: NotRequired[Text | None]
    used_fingerprint: NotRequired[Text | None]
    sha256: NotRequired[Text | None]
    what: NotRequired[Text | None]
    train_samples: NotRequired[Count | None]
    test_samples: NotRequired[Count | None]


class Curve(TypedDict):
    """One process's learning curve (runtime/training.py); schema.py checks the lengths agree.

    An accuracy suite evaluates test accuracy (with train accuracy per epoch), a language model
    (suites/gpt, whose "epoch" is an interval of optimizer steps) validation loss: schema.py
    requires exactly one of `test_accuracy` and `val_loss`."""

    epoch_seconds: Annotated[list[NonNegative], Strict(), MinLen(1), MaxLen(MAX_CURVE_EPOCHS)]
    train_loss: Numbers
    train_accuracy: NotRequired[Annotated[list[Percent], Strict()]]
    test_accuracy: NotRequired[Annotated[list[Percent], Strict()]]
    val_loss: NotRequired[Annotated[list[NonNegative], Strict()]]
    evaluation_seconds: Annotated[list[NonNegative], Strict()]
    seed: NotRequired[Integer | None]


class Target(TypedDict):
    """Time to an accuracy or to a validation loss (runtime/training.py), pooled over rounds by
    harness/judge/time_to_target.py; schema.py requires exactly one of `accuracy` and `loss`."""

    accuracy: NotRequired[Finite]
    loss: NotRequired[NonNegative]  # reached when the validation loss is at or below it
    status: Literal["reached", "not reached"]
    seconds: NotRequired[Finite | None]
    wall_seconds: NotRequired[Finite | None]
    epochs: NotRequired[Finite | None]
    best_accuracy: NotRequired[Finite | None]
    best_loss: NotRequired[NonNegative | None]
    seconds_interval: NotRequired[Annotated[list[Finite], Strict(), MinLen(2), MaxLen(2)] | None]
    seconds_interval_coverage: NotRequired[Probability | None]  # what the interval really covers (3 seeds: 0.75)
    rounds: NotRequired[Annotated[list[Objects], Strict(), MaxLen(MAX_SAMPLES)] | None]
    reached_rounds: NotRequired[Count | None]
    epochs_run: NotRequired[Count | None]
    accuracy_per_epoch: NotRequired[Numbers | None]
    loss_per_epoch: NotRequired[Annotated[list[NonNegative], Strict()] | None]
    evaluation_seconds: NotRequired[Numbers | None]
    seed: NotRequired[Integer | None]


class Training(TypedDict, total=False):
    data: Literal["device", "host"] | None
    cudnn_benchmark: Flag | None  # PyTorch
    cudnn_deterministic: Flag | None
    curves: Annotated[list[Curve], Strict(), MaxLen(MAX_CURVES)] | None
    target: Target | None


MAX_PROFILES = 64  # one per time metric of a job; no suite has this many
MAX_PROFILE_STEPS = 50  # suites/runtime/profiling.py MAX_STEPS


class Profile(TypedDict):
    """A time metric's profile (suites/runtime/profiling.py): a few steady steps under the framework's
    profiler, after the timed samples. `trace`: the trace file under the job's artefact folder (the host
    re-validates the name before it builds a path); `error`: why there is none."""

    metric: Name
    steps_per_sample: Annotated[float, Strict(), AllowInfNan(False), Gt(0), Le(MAX_MAGNITUDE)]
    device_kind: Literal["cpu", "gpu"]
    trace: NotRequired[Name]
    profiler: NotRequired[Text]
    steps: NotRequired[Annotated[int, Strict(), Ge(1), Le(MAX_PROFILE_STEPS)]]
    step_s: NotRequired[Annotated[list[NonNegative], Strict(), MinLen(1), MaxLen(MAX_PROFILE_STEPS)]]
    capture_s: NotRequired[NonNegative]
    ops: NotRequired[Name]  # JAX: what each XLA operation runs, beside the trace (suites/runtime/hlo_ops.py)
    ops_error: NotRequired[Text]
    error: NotRequired[Text]
    round: NotRequired[Name]  # pooled rounds: the round folder whose profile the pooled result keeps


# mypy's view of the open objects stays `dict[str, Any]` (callers read keys the shape leaves open,
# and build them as plain dicts); pydantic checks the TypedDicts above.
if TYPE_CHECKING:
    SyncField = dict[str, Any]
    SettingsField: TypeAlias = dict[str, Any]
    EnvironmentField: TypeAlias = dict[str, Any]
    DatasetField: TypeAlias = dict[str, Any]
    TrainingField: TypeAlias = dict[str, Any]
    ProfileField: TypeAlias = dict[str, Any]
    MarksField = dict[str, list[int]]
    RoundSizesField = list[int]
    ContentionField = dict[str, Any]
else:
    SyncField = Sync | None
    SettingsField, EnvironmentField, DatasetField, TrainingField = Settings, Environment, Dataset, Training
    ProfileField = Profile
    MarksField = Marks | None
    RoundSizesField = RoundSizes | None
    ContentionField = Contention | None


class Result(TypedDict):
    schema_version: int
    run_id: Name
    suite: Name
    framework: Name
    stack: Name
    backend: Name
    device: Literal["cpu", "gpu"]
    params: Annotated[dict[str, Scalar], Strict()]
    settings: SettingsField
    status: Status
    reason: Text | None
    stderr_tail: Text | None
    started_at: Name
    finished_at: Text | None
    duration_s: Finite | None
    environment: EnvironmentField
    image: Annotated[dict[str, Scalar], Strict()] | None
    metrics: Annotated[list[Metric], Strict()]
    checks: Annotated[list[Check], Strict()]
    notes: Annotated[list[Text], Strict()]
    dataset: DatasetField | None  # training suites; null elsewhere (absent in version 1)
    training: TrainingField | None  # training suites; null elsewhere (absent in version 1)
    profiles: NotRequired[Annotated[list[ProfileField], Strict(), MaxLen(MAX_PROFILES)]]  # `--profile` only
