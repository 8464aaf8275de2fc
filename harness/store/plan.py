"""Turning command-line choices into a validated plan of jobs, before anything starts; the host's
view of the suites and frameworks it names, with one-line errors for unknown names."""

from __future__ import annotations

import datetime as dt
import math
import os
import re
import secrets
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from harness.core.backend_table import EXPORTS, RUNS
from harness.core.errors import HarnessError
from harness.core.schema import RUN_ID
from harness.text.escape import plain
from suites.contract.frameworks import FRAMEWORKS, Framework
from suites.contract.job_spec import DEVICES, JobOptions, JobSpec
from suites.contract.profiles import MAX_STEPS as MAX_PROFILE_STEPS
from suites.contract.registry import all_suites, broken_problem
from suites.contract.settings import CACHE_MODES, PRECISIONS
from suites.contract.spec import SMOKE_REPEAT, SMOKE_WARMUP, ParamValue, SpecError, SuiteSpec

MAX_TIMEOUT_S = 7 * 24 * 3600.0  # a week: beyond it a wait would overflow some clocks, and no job needs it
MAX_COUNT = 10_000  # repeat, warmup, threads: larger is a typo, and a result holds at most 10000 samples
BACKENDS = (*RUNS, *EXPORTS)  # what a plan may name: harness/core/backend_table.py
K8S_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")  # DNS-1123 subdomain
MAX_ROUNDS = 50  # more processes than this tell nothing new about the noise, and a typo must not queue 10^6 jobs
# What plan.json of a rounds run records beyond its rounds when it was not a fixed count of them:
# a time budget (harness/execute/budget.py) or one side of a `harness ab` session.
SESSION_KEYS = ("budget_s", "interleaved")


@dataclass(frozen=True, kw_only=True)
class Job(JobOptions):
    """One planned job: the job spec's options (suites/contract/job_spec.py, declared once for both
    sides) plus what only the host decides: the stack it runs in, and a skip reason if it cannot run."""

    stack: str
    skip_reason: str | None = None

    @property
    def name(self) -> str:
        return f"{self.suite}-{self.framework}"

    def result_file(self) -> str:
        return f"{self.framework}.json"

    def spec(
        self, *, run_id: str, backend: str, result_path: str, data_dir: str | None, cache_dir: str | None
    ) -> JobSpec:
        """The job.json of this job: its options carried through untouched, and the locations as the
        job sees them, which only the backend knows (a mount point, a folder on a node), so it names each."""
        options = {f.name: getattr(self, f.name) for f in fields(JobOptions)}
        options.update(data_dir=data_dir, cache_dir=cache_dir)
        return JobSpec(**options, run_id=run_id, backend=backend, result_path=result_path)


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


def planned_rounds(plan: Plan) -> int | None:
    """The rounds a run read back from plan.json was planned with (None: each job once), for a resume
    that goes on as a rounds run; a run whose rounds were a budget's or an `ab` session's is refused:
    neither the time it had nor the other side's interleaving can be given back to it."""
    if "budget_s" in plan.extra:
        raise HarnessError(
            f"run {plan.run_id} ran rounds until a --budget was spent; a resume cannot give back the time it had: "
            "start a new run (its finished rounds are pooled in it as they are)"
        )
    if "interleaved" in plan.extra:
        raise HarnessError(
            f"run {plan.run_id} is one side of a `harness ab` session; resuming one side alone would not "
            "interleave it with the other: start a new session"
        )
    if (rounds := plan.extra.get("rounds")) is None or rounds == 1 and not isinstance(rounds, bool):
        return None
    if isinstance(rounds, bool) or not isinstance(rounds, int) or not 2 <= rounds <= MAX_ROUNDS:
        raise HarnessError(
            f"plan.json of run {plan.run_id}: rounds {plain(rounds)!r} is not a number of rounds from 2 to "
            f"{MAX_ROUNDS}; start a new run"
        )
    return rounds


def new_run_id(suite: str) -> str:
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{suite}-{secrets.token_hex(2)}"


def check_timeout(timeout_s: float, option: str = "--timeout") -> float:
    # Compared before anything converts it: an int from a plan.json can be past any float.
    if not (0 < timeout_s <= MAX_TIMEOUT_S and math.isfinite(timeout_s)):
        shown = "of over 300 digits" if isinstance(timeout_s, int) and abs(timeout_s) > 10**300 else f"{timeout_s:g}"
        raise HarnessError(
            f"{option} {shown} must be a number of seconds above 0 and at most {MAX_TIMEOUT_S:g} (a week)"
        )
    return float(timeout_s)


def _count(value: Any, option: str, least: int, allow_none: bool = False) -> int | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise HarnessError(f"{option} {plain(value)!r} must be a whole number from {least} to {MAX_COUNT}")
    if value < least:
        raise HarnessError(f"{option} {value} must be at least {least}")
    if value > MAX_COUNT:
        raise HarnessError(f"{option} {value} must be at most {MAX_COUNT}")
    return value


def make_job(
    spec: SuiteSpec,
    framework: str,
    params: dict[str, ParamValue],
    *,
    repeat: int | None,
    warmup: int | None,
    device: str,
    threads: int | None,
    timeout_s: float | None,
    data_dir: str | None,
    cache: str = "cold",
    cache_dir: str | None = None,
    precision: str = "fp32",
    profile: int = 0,
) -> Job:
    """One job, every field checked; stack and skip reason come from the registry, never from a file."""
    fw = get_framework(spec, framework)
    if device not in DEVICES:
        raise HarnessError(f"--device {plain(device)!r} is not cpu or gpu")
    if data_dir is not None and (not isinstance(data_dir, str) or not data_dir or "\0" in data_dir):
        raise HarnessError(f"data folder {plain(data_dir)!r} is not a path")
    if cache not in CACHE_MODES:
        raise HarnessError(f"--cache {plain(cache)!r} is not one of {', '.join(CACHE_MODES)}")
    if cache_dir is not None and (cache != "warm" or not isinstance(cache_dir, str) or not os.path.isabs(cache_dir)):
        raise HarnessError(f"cache folder {plain(cache_dir)!r} is not an absolute path of a warm cache")
    if (skip_reason := spec.unsupported.get(fw.name)) is None:
        check_device(spec, fw, device)
    if precision not in PRECISIONS:
        raise HarnessError(f"--precision {plain(precision)!r} is not one of {', '.join(PRECISIONS)}")
    if precision != "fp32" and not spec.precision_axis:
        raise HarnessError(
            f"--precision {precision}: suite {spec.name} has no float32 matmul/conv work to run at reduced "
            "precision; drop --precision"
        )
    if isinstance(profile, bool) or not isinstance(profile, int) or not 0 <= profile <= MAX_PROFILE_STEPS:
        raise HarnessError(f"--profile-steps {plain(profile)!r} must be a whole number from 1 to {MAX_PROFILE_STEPS}")
    return Job(
        suite=spec.name,
        framework=fw.name,
        stack=fw.stack,
        params=params,
        repeat=_count(spec.repeat if repeat is None else repeat, "--repeat", 1) or 1,
        warmup=_count(spec.warmup if warmup is None else warmup, "--warmup", 0) or 0,
        device=device,
        threads=_count(threads, "--threads", 1, allow_none=True),
        timeout_s=check_timeout(spec.timeout_s if timeout_s is None else timeout_s),
        skip_reason=skip_reason,
        data_dir=data_dir,
        cache=cache,
        cache_dir=cache_dir,
        precision=precision,
        profile=profile,
    )


def check_device(spec: SuiteSpec, fw: Framework, device: str) -> None:
    """A framework with no variant for the device is refused while planning (one line, nothing
    started), not left to a job that would start, maybe build an image, and fail."""
    if device in fw.devices:
        return
    able = frameworks_for(device, list(spec.frameworks))
    fix = f"--frameworks {','.join(able)}" if able else f"another suite (suite {spec.name} has none)"
    raise HarnessError(
        f"--device {device}: {fw.name} runs on the {' and '.join(fw.devices)} only and has no {device} variant; "
        f"name the frameworks that do ({fix}) or use --device {fw.devices[0]}"
    )


def frameworks_for(device: str, names: list[str]) -> list[str]:
    """The frameworks of `names` that can compute on `device` (for commands that choose them themselves)."""
    return [name for name in names if name in FRAMEWORKS and device in FRAMEWORKS[name].devices]


def parse_params(spec: SuiteSpec, pairs: list[str], base: dict[str, ParamValue] | None = None) -> dict[str, ParamValue]:
    """Defaults, then `base` (e.g. the suite's smoke size), then the user's key=value pairs."""
    given: dict[str, ParamValue] = dict(base or {})
    seen: dict[str, str] = {}
    for pair in pairs:
        if "=" not in pair:
            raise HarnessError(f"--param {pair!r} is not of the form key=value (e.g. --param matrix_size=512)")
        key, raw = pair.split("=", 1)
        if (key := key.strip()) in seen:  # the last would win silently, and the record would not say which was meant
            raise HarnessError(f"--param {key} is given twice ({seen[key]!r} and {pair!r}); give it once")
        seen[key] = pair
        try:
            given[key] = spec.param(key).parse(raw)
        except SpecError as error:
            raise HarnessError(str(error)) from None
    try:
        return spec.resolve(given)
    except SpecError as error:  # the values together (the suite's constraint)
        raise HarnessError(str(error)) from None


def parse_frameworks(spec: SuiteSpec, text: str | None) -> list[str]:
    """The frameworks named (None: all of the suite's); an empty name is refused, never "all"."""
    if text is None:
        return list(spec.frameworks)
    names = [n.strip() for n in text.split(",")]
    if not all(names):
        raise HarnessError(
            f"--frameworks {text!r} has an empty name; list names separated by commas "
            f"(e.g. --frameworks {','.join(spec.frameworks[:2])}), or leave the option out for all"
        )
    for name in names:
        get_framework(spec, name)
    if len(set(names)) != len(names):
        raise HarnessError(f"--frameworks {text!r} names a framework twice; list each once")
    return names


@dataclass(frozen=True, kw_only=True)
class PlanRequest:
    """What a command asks of the jobs it plans, as given (None: the suite's default). Every entry that
    plans (run, ab, noise, bisect, export slurm|k8s, compose's plan step, calibration, selftest) builds
    one and hands it whole to `make_plan`, so an option added here reaches every path, not only those
    that remembered to spell it."""

    suite: str
    frameworks: str | None = None  # comma-separated; None: the suite's frameworks that can run there
    params: tuple[str, ...] = ()  # key=value pairs
    repeat: int | None = None
    warmup: int | None = None
    device: str = "cpu"
    threads: int | None = None
    baseline: str | None = None
    timeout_s: float | None = None
    data_dir: str | None = None
    smoke: bool = False  # the suite's declared smoke size and SMOKE_REPEAT samples (explicit options win)
    cache: str = "cold"
    cache_dir: str | None = None
    precision: str = "fp32"
    profile: int = 0  # steps profiled after each time metric's samples (0: no profile)


def make_plan(asked: PlanRequest, *, backend: str) -> Plan:
    """The request resolved against the registry and checked, job by job; nothing starts."""
    spec = get_suite(asked.suite)
    names = parse_frameworks(spec, asked.frameworks)
    if asked.frameworks is None:  # the suite's frameworks that can run there; one named by the user is checked
        names = frameworks_for(asked.device, names) or names  # (none at all: check_device says why, below)
    values = parse_params(spec, list(asked.params), spec.smoke if asked.smoke else None)
    repeat, warmup = asked.repeat, asked.warmup
    if asked.smoke:
        repeat = SMOKE_REPEAT if repeat is None else repeat
        warmup = SMOKE_WARMUP if warmup is None else warmup
    jobs = tuple(
        make_job(
            spec,
            name,
            values,
            repeat=repeat,
            warmup=warmup,
            device=asked.device,
            threads=asked.threads,
            timeout_s=asked.timeout_s,
            data_dir=asked.data_dir,
            cache=asked.cache,
            cache_dir=asked.cache_dir if asked.cache == "warm" else None,
            precision=asked.precision,
            profile=asked.profile,
        )
        for name in names
    )
    base = asked.baseline or names[0]
    if base not in names:
        raise HarnessError(f"--baseline {plain(base)!r} is not among --frameworks ({', '.join(names)})")
    return Plan(run_id=new_run_id(spec.name), suite=spec.name, baseline=base, jobs=jobs, backend=backend)


def plan_from_record(record: Any, source: str) -> Plan:
    """A plan read back from plan.json, re-validated exactly like a fresh one.

    Everything that becomes a path or a command line (run id, suite, framework names, params,
    counts, timeout) goes through the registry and the same checks as `make_plan`; stack and
    skip reasons are looked up again, never taken from the file.
    """
    try:
        return _plan_from_record(record)
    except HarnessError as error:
        raise HarnessError(f"{source}: not a plan this harness can run ({error}); start a new run") from None


def _plan_from_record(record: Any) -> Plan:
    if not isinstance(record, dict) or not isinstance(record.get("jobs"), list) or not record["jobs"]:
        raise HarnessError("expected an object with a non-empty jobs list")
    run_id = record.get("run_id")
    if not isinstance(run_id, str) or not RUN_ID.fullmatch(run_id):
        raise HarnessError(f"run_id {plain(run_id)!r} is not a run id")
    suite = record.get("suite")
    spec = get_suite(suite if isinstance(suite, str) else plain(suite))
    jobs = []
    for entry in record["jobs"]:
        if not isinstance(entry, dict):
            raise HarnessError("a job is not an object")
        framework = entry.get("framework")
        if entry.get("suite", spec.name) != spec.name:
            raise HarnessError(f"job {plain(framework)!r} names suite {plain(entry.get('suite'))!r}, not {spec.name}")
        given = entry.get("params", {})
        if not isinstance(given, dict):
            raise HarnessError(f"job {plain(framework)!r}: params is not an object")
        try:
            params = spec.resolve(given)
        except SpecError as error:
            raise HarnessError(str(error)) from None
        timeout = entry.get("timeout_s", spec.timeout_s)
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
            raise HarnessError(f"timeout_s {plain(timeout)!r} is not a number")
        jobs.append(
            make_job(
                spec,
                framework if isinstance(framework, str) else plain(framework),
                params,
                repeat=entry.get("repeat"),
                warmup=entry.get("warmup"),
                device=entry.get("device", "cpu"),
                threads=entry.get("threads"),
                timeout_s=timeout,
                data_dir=entry.get("data_dir"),
                cache=entry.get("cache", "cold"),
                cache_dir=entry.get("cache_dir"),
                precision=entry.get("precision", "fp32"),
                profile=entry.get("profile", 0),
            )
        )
    for entry, job in zip(record["jobs"], jobs, strict=True):
        # The stack is the registry's, never the file's; a file naming another was edited: say so.
        if "stack" in entry and entry["stack"] != job.stack:
            raise HarnessError(
                f"job {job.framework!r}: stack {plain(entry['stack'])!r} is not {job.stack!r}, its stack"
            )
    names = [job.framework for job in jobs]
    if len(set(names)) != len(names):
        raise HarnessError("a framework is planned twice")
    if (baseline := record.get("baseline")) not in names:
        raise HarnessError(f"baseline {plain(baseline)!r} is not one of the planned frameworks")
    if (backend := record.get("backend", "local")) not in BACKENDS:
        raise HarnessError(f"backend {plain(backend)!r} is not one of {', '.join(BACKENDS)}")
    for job in jobs:
        # The data folder is mounted into jobs: a host path must be absolute (as `run` records
        # it), a cluster's is the name of a volume claim.
        ok = (
            job.data_dir is None
            or (backend == "kubernetes" and K8S_NAME.fullmatch(job.data_dir) is not None)
            or (backend != "kubernetes" and os.path.isabs(job.data_dir))
        )
        if not ok:
            raise HarnessError(f"data_dir {plain(job.data_dir)!r} is not where a {backend} run keeps its data")
    extra = {k: v for k, v in record.items() if k in ("rounds", "namespace", *SESSION_KEYS)}
    return Plan(run_id=run_id, suite=spec.name, baseline=str(baseline), jobs=tuple(jobs), backend=backend, extra=extra)


# The host's view of suites and frameworks, with user-facing errors for unknown names.
def visible_suites(include_hidden: bool = False) -> dict[str, SuiteSpec]:
    return {n: s for n, s in all_suites().items() if include_hidden or not s.hidden}


def get_suite(name: str) -> SuiteSpec:
    problem = broken_problem(name)  # a folder that would not load: its own line, not "unknown suite"
    if problem is not None:
        raise HarnessError(f"suite {plain(name)} is broken: {problem}")
    suites = all_suites()
    if name not in suites:
        valid = ", ".join(visible_suites())
        raise HarnessError(f"unknown suite {name!r}; choose one of: {valid} (see `harness list`)")
    return suites[name]


def get_framework(suite: SuiteSpec, name: str) -> Framework:
    if name not in suite.all_frameworks or name not in FRAMEWORKS:
        valid = ", ".join(suite.all_frameworks)
        raise HarnessError(f"unknown framework {name!r} for suite {suite.name}; choose from: {valid}")
    return FRAMEWORKS[name]
