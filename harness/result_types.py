"""Typed views of a validated result (schema.py checks every field named here before a report
reads it), so mypy sees `metric["stats"]["median"]` as a float and a misspelt key as an error.

These describe the documents of docs/result-schema.md; the job side (suites/) builds them as
plain dicts, and the host only ever holds them after `schema.validate`.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict


class Stats(TypedDict):
    n: int
    median: float
    q1: float
    q3: float
    iqr: float
    min: float
    max: float
    mean: float
    stdev: float


class Metric(TypedDict):
    name: str
    kind: str  # time | value
    unit: str
    better: str  # lower | higher
    samples: list[float]
    stats: Stats
    description: NotRequired[str]
    first_call: NotRequired[float | None]
    first_calls: NotRequired[list[float]]
    warmup: NotRequired[int]
    flops: NotRequired[float | None]
    bytes: NotRequired[float | None]
    dtype: NotRequired[str | None]
    variant: NotRequired[str | None]
    synchronised: NotRequired[bool]
    sync: NotRequired[dict[str, Any]]
    warnings: NotRequired[list[str]]
    round_medians: NotRequired[list[float]]
    marks: NotRequired[dict[str, list[int]]]  # reason (suites/runtime/marks.py) -> indices into samples
    round_sizes: NotRequired[list[int]]  # pooled rounds: samples per round, in order


class Check(TypedDict):
    name: str
    value: Any  # a finite number, or a (nested) list of them
    help: NotRequired[str]
    limit: NotRequired[float | None]
    rtol: NotRequired[float | None]
    atol: NotRequired[float | None]


class Result(TypedDict):
    schema_version: int
    run_id: str
    suite: str
    framework: str
    stack: str
    backend: str
    device: str
    params: dict[str, Any]
    settings: dict[str, Any]
    status: str
    reason: str | None
    stderr_tail: str | None
    started_at: str
    finished_at: str | None
    duration_s: float | None
    environment: dict[str, Any]
    image: dict[str, Any] | None
    metrics: list[Metric]
    checks: list[Check]
    notes: list[str]
    dataset: NotRequired[dict[str, Any]]
    training: NotRequired[dict[str, Any]]
