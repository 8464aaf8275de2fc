"""Turning command-line choices into a validated plan of jobs, before anything starts."""

from __future__ import annotations

import datetime as dt
import secrets
from dataclasses import asdict, dataclass, field
from typing import Any

from harness.catalog import get_framework, get_suite
from harness.errors import HarnessError
from suites.runtime.settings import CACHE_MODES
from suites.runtime.spec import SMOKE_REPEAT, SMOKE_WARMUP, ParamValue, SpecError, SuiteSpec


@dataclass(frozen=True)
class Job:
    suite: str
    framework: str
    stack: str
    params: dict[str, ParamValue]
    repeat: int
    warmup: int
    device: str
    threads: int | None
    timeout_s: float
    skip_reason: str | None = None
    data_dir: str | None = None  # host path of the dataset folder; backends map it into the job
    cache: str = "cold"  # compiler caches: cold (empty per job) or warm (kept under cache_dir)
    cache_dir: str | None = None  # host folder of the warm caches; backends add the stack

    @property
    def name(self) -> str:
        return f"{self.suite}-{self.framework}"

    def result_file(self) -> str:
        return f"{self.framework}.json"


@dataclass(frozen=True)
class Plan:
    run_id: str
    suite: str
    baseline: str
    jobs: tuple[Job, ...]
    backend: str
    extra: dict[str, Any] = field(default_factory=dict)

    def as_record(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "suite": self.suite,
            "baseline": self.baseline,
            "backend": self.backend,
            "jobs": [asdict(job) for job in self.jobs],
            **self.extra,
        }


def new_run_id(suite: str) -> str:
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{suite}-{secrets.token_hex(2)}"


def parse_params(spec: SuiteSpec, pairs: list[str], base: dict[str, ParamValue] | None = None) -> dict[str, ParamValue]:
    """Defaults, then `base` (e.g. the suite's smoke size), then the user's key=value pairs."""
    given: dict[str, ParamValue] = dict(base or {})
    for pair in pairs:
        if "=" not in pair:
            raise HarnessError(f"--param {pair!r} is not of the form key=value (e.g. --param matrix_size=512)")
        key, raw = pair.split("=", 1)
        try:
            given[key.strip()] = spec.param(key.strip()).parse(raw)
        except SpecError as error:
            raise HarnessError(str(error)) from None
    return spec.resolve(given)


def parse_frameworks(spec: SuiteSpec, text: str | None) -> list[str]:
    names = [n.strip() for n in (text or "").split(",") if n.strip()] or list(spec.frameworks)
    for name in names:
        get_framework(spec, name)
    if len(set(names)) != len(names):
        raise HarnessError(f"--frameworks {text!r} names a framework twice; list each once")
    return names


def make_plan(
    *,
    suite: str,
    frameworks: str | None,
    params: list[str],
    repeat: int | None,
    warmup: int | None,
    device: str,
    threads: int | None,
    baseline: str | None,
    backend: str,
    timeout_s: float | None = None,
    data_dir: str | None = None,
    smoke: bool = False,
    cache: str = "cold",
    cache_dir: str | None = None,
) -> Plan:
    """`smoke`: the suite's declared smoke size and SMOKE_REPEAT samples (explicit options still win)."""
    spec = get_suite(suite)
    names = parse_frameworks(spec, frameworks)
    values = parse_params(spec, params, spec.smoke if smoke else None)
    if smoke:
        repeat = SMOKE_REPEAT if repeat is None else repeat
        warmup = SMOKE_WARMUP if warmup is None else warmup
    if repeat is not None and repeat < 1:
        raise HarnessError(f"--repeat {repeat} must be at least 1")
    if warmup is not None and warmup < 0:
        raise HarnessError(f"--warmup {warmup} must be 0 or more")
    if threads is not None and threads < 1:
        raise HarnessError(f"--threads {threads} must be at least 1")
    if timeout_s is not None and timeout_s <= 0:
        raise HarnessError(f"--timeout {timeout_s} must be a positive number of seconds")
    if cache not in CACHE_MODES:
        raise HarnessError(f"--cache {cache!r} is not one of {', '.join(CACHE_MODES)}")
    base = baseline or names[0]
    if base not in names:
        raise HarnessError(f"--baseline {base!r} is not among --frameworks ({', '.join(names)})")
    jobs = tuple(
        Job(
            suite=spec.name,
            framework=name,
            stack=get_framework(spec, name).stack,
            params=values,
            repeat=spec.repeat if repeat is None else repeat,
            warmup=spec.warmup if warmup is None else warmup,
            device=device,
            threads=threads,
            timeout_s=spec.timeout_s if timeout_s is None else timeout_s,
            skip_reason=spec.unsupported.get(name),
            data_dir=data_dir,
            cache=cache,
            cache_dir=cache_dir if cache == "warm" else None,
        )
        for name in names
    )
    return Plan(run_id=new_run_id(spec.name), suite=spec.name, baseline=base, jobs=jobs, backend=backend)
