"""One job's whole specification, `job.json`: the fields are declared once, here, for both sides.

The host's plan holds each job as a `harness.store.plan.Job`, which is `JobOptions` plus what only the
host needs (its stack, a skip reason). The backend that starts the job writes `JobSpec` -- the
options, the run it belongs to, and every location as the job sees it (a container's mount
points, not the host's folders) -- into the job's own folder, and `python -m suites run --job
PATH` reads that file and nothing else. An option is one field of `JobOptions`: planned,
recorded in plan.json, written into job.json and read back here without anyone spelling it again.

Standard library only: this runs inside the stack images, where the harness is not installed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from suites.contract.settings import CACHE_MODES, PRECISIONS
from suites.contract.spec import ParamValue, SpecError, SuiteSpec

if TYPE_CHECKING:
    from suites.contract.frameworks import Framework

JOB_FILE = "job.json"  # its name in the job's folder
DEVICES = ("cpu", "gpu")
MAX_JOB_BYTES = 1 << 20  # a spec is a few hundred bytes; anything near this is not one


@dataclass(frozen=True, kw_only=True)
class JobOptions:
    """What one (suite, framework) job is asked to do (`harness run`'s options, resolved)."""

    suite: str
    framework: str
    params: dict[str, ParamValue]
    repeat: int
    warmup: int
    device: str
    threads: int | None
    timeout_s: float
    # Locations: the plan holds the host's folders, job.json the job's view of them (the backend maps them).
    data_dir: str | None = None  # the dataset folder (read-only)
    cache: str = "cold"  # compiler caches: cold (empty per job) or warm (kept under cache_dir)
    cache_dir: str | None = None  # the warm compiler caches
    precision: str = "fp32"  # float32 matmul/conv arithmetic: fp32 | tf32 | bf16 (contract/settings.py)
    profile: int = 0  # steps under the framework's profiler after each time metric (0: none; runtime/profiling.py)


@dataclass(frozen=True, kw_only=True)
class JobSpec(JobOptions):
    """`job.json`: the options, the run, and where the job writes its one result file."""

    run_id: str
    backend: str  # recorded in the result: which backend ran the job
    result_path: str  # relative paths are relative to the job's working folder


class JobSpecError(ValueError):
    """A job.json this job cannot run: one line naming the field."""


def _text(value: Any) -> bool:
    return isinstance(value, str) and value != "" and "\0" not in value


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value: Any) -> bool:
    return (_whole(value) or isinstance(value, float)) and value == value and abs(value) != float("inf")


# One check per declared type: a new field of a new type fails at import until it has one.
_TYPES: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "str": ("a non-empty string", _text),
    "str | None": ("a non-empty string or null", lambda v: v is None or _text(v)),
    "int": ("a whole number", _whole),
    "int | None": ("a whole number or null", lambda v: v is None or _whole(v)),
    "float": ("a number", _number),
    "dict[str, ParamValue]": ("an object", lambda v: isinstance(v, dict)),
}
_CHECKS = {f.name: _TYPES[str(f.type)] for f in fields(JobSpec)}
_CHOICES: dict[str, tuple[str, ...]] = {"device": DEVICES, "cache": CACHE_MODES, "precision": PRECISIONS}
_LEAST: dict[str, float] = {"repeat": 1, "warmup": 0, "threads": 1, "profile": 0}
_ABOVE: dict[str, float] = {"timeout_s": 0}


def dumps(spec: JobSpec) -> str:
    """The text of job.json."""
    return json.dumps(asdict(spec), indent=2, allow_nan=False) + "\n"


def write(folder: Path, spec: JobSpec) -> Path:
    """job.json in the job's folder (the backend calls this before the job starts)."""
    from suites.contract.files import write_text_atomic

    path = Path(folder) / JOB_FILE
    write_text_atomic(path, dumps(spec))
    return path


def _bad_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def parse(text: str) -> JobSpec:
    """A checked JobSpec from job.json's text; JobSpecError says which field is wrong and why."""
    try:
        record = json.loads(text, parse_constant=_bad_constant)
    except ValueError as error:
        raise JobSpecError(f"not JSON ({error})") from None
    if not isinstance(record, dict):
        raise JobSpecError("not a JSON object")
    unknown = sorted(set(record) - set(_CHECKS))
    if unknown:
        raise JobSpecError(f"unknown field {unknown[0]!r}: written by another version of the harness?")
    given: dict[str, Any] = {}
    for name, (expected, ok) in _CHECKS.items():
        if name not in record:
            raise JobSpecError(f"field {name!r} is missing")
        value = record[name]
        if not ok(value):
            raise JobSpecError(f"{name}: {_shown(value)} is not {expected}")
        if name in _CHOICES and value not in _CHOICES[name]:
            raise JobSpecError(f"{name}: {_shown(value)} is not one of {', '.join(_CHOICES[name])}")
        if value is not None and name in _LEAST and value < _LEAST[name]:
            raise JobSpecError(f"{name}: {value} is less than {_LEAST[name]:g}")
        if name in _ABOVE and value <= _ABOVE[name]:
            raise JobSpecError(f"{name}: {value} is not above {_ABOVE[name]:g}")
        given[name] = float(value) if expected == "a number" else value
    return JobSpec(**given)


def read(path: Path) -> JobSpec:
    """job.json from disk, checked as `parse` checks it (a missing or huge file is an error too)."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_JOB_BYTES + 1)
    except OSError as error:
        raise JobSpecError(f"cannot read it ({error.strerror or error})") from None
    if len(data) > MAX_JOB_BYTES:
        raise JobSpecError(f"larger than {MAX_JOB_BYTES} bytes")
    return parse(data.decode("utf-8", "replace"))


def _shown(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    text = text if len(text) <= 60 else text[:57] + "..."
    return text.replace("\n", " ")


def resolve(spec: JobSpec) -> tuple[SuiteSpec, Framework, dict[str, ParamValue]]:
    """The suite, the framework and the full parameters the spec names, each checked against the registry."""
    from suites.contract.frameworks import FRAMEWORKS
    from suites.contract.registry import all_suites

    suites = all_suites()
    if spec.suite not in suites:
        raise JobSpecError(f"suite: {spec.suite!r} is not a suite here (one of {', '.join(suites)})")
    suite = suites[spec.suite]
    if spec.framework not in suite.all_frameworks or spec.framework not in FRAMEWORKS:
        raise JobSpecError(f"framework: {spec.framework!r} is not a framework of suite {suite.name}")
    try:
        params = suite.resolve(spec.params)
    except SpecError as error:
        raise JobSpecError(f"params: {error}") from None
    return suite, FRAMEWORKS[spec.framework], params
