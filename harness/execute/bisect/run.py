"""Runs a bisect: a generated lock and a venv per version, K interleaved rounds V1 V2 ... Vn, the verdicts.

Each (round, version) job is a normal run folder, RESULTS_DIR/bisect-<id>/<version>/round-<k>/, made
by harness.execute.runner.execute with a local backend whose interpreter for the stack is that version's venv.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field, replace
from itertools import pairwise
from pathlib import Path
from typing import Any

from harness.backends.base import Backend, JobOutcome, serving
from harness.backends.local import LocalBackend
from harness.core.errors import HarnessError
from harness.core.safe_files import make_folder, new_folder, write_bytes_atomic, write_json_atomic
from harness.core.schema import InvalidResult, load_result, load_summary
from harness.core.statistics import observations_needed
from harness.execute.bisect import record
from harness.execute.bisect.envs import Env, ensure_env, env_for
from harness.execute.bisect.locks import check_package, check_version, fetch_hashes, generate_lock
from harness.execute.bisect.verdict import MIN_ROUNDS, Pair, VersionRun, answer, compare_pair, judge
from harness.execute.budget import RoundClock
from harness.execute.rounds import MAX_ROUNDS
from harness.execute.runner import execute, say
from harness.judge import assessment, sequential
from harness.store.images import Engine, connect, ensure, sha256_file, stack_image
from harness.store.plan import Job, Plan, PlanRequest, get_framework, get_suite, make_plan
from harness.store.run_folder import SUMMARY_FILE, prepare_results_dir
from harness.text.escape import plain, utf8


@dataclass(frozen=True)
class Request:
    plan: PlanRequest  # the suite and every axis of the plan (cli/options.py); frameworks: `framework`
    metric: str
    stack: str
    package: str
    versions: list[str]
    results_dir: Path
    framework: str | None = None
    rounds: int | None = None  # None: the fewest with which the versions' pairs can give a verdict
    find_links: list[Path] = field(default_factory=list)
    no_index: bool = False
    echo: bool = True
    fork_rounds: bool = False  # local: each version's jobs forked from a server that imported once (opt-in)
    backend: str = "local"  # local: a venv per version; docker: an image per version
    wheelhouse: Path | None = None  # docker: build the images from these wheels only (with --find-links)
    budget_s: float | None = None  # rounds until this is spent (envs and images built before: not counted)


@dataclass
class Outcome:
    folder: Path
    doc: dict[str, Any]
    pairs: list[Pair]
    runs: dict[str, VersionRun]
    unit: str


class VenvBackend(LocalBackend):
    """The local backend with one version's venv as the stack's interpreter, recorded as the result's image."""

    def __init__(self, env: Env, echo: bool, fork_rounds: bool = False) -> None:
        super().__init__(pythons={env.stack: str(env.python)}, echo=echo, fork_rounds=fork_rounds)
        self.env = env

    def run_job(self, job: Job, run_id: str, run_dir: Path) -> JobOutcome:
        outcome = super().run_job(job, run_id, run_dir)
        outcome.annotations["image"] = self.env.record()
        return outcome


def choose_framework(request: Request) -> str:
    spec = get_suite(request.plan.suite)
    if request.framework is not None:
        fw = get_framework(spec, request.framework)
        if fw.stack != request.stack:
            raise HarnessError(f"--framework {fw.name} runs in the {fw.stack} stack, not {request.stack}")
        return fw.name
    for name in spec.frameworks:
        if get_framework(spec, name).stack == request.stack:
            return name
    raise HarnessError(f"suite {spec.name} has no framework in the {request.stack} stack; pick another --stack")


def check_request(request: Request) -> None:
    check_package(request.package)
    for version in request.versions:
        check_version(version)
    if len(request.versions) < 2 or len(set(request.versions)) != len(request.versions):
        raise HarnessError("--versions must name at least two different versions")
    needed = rounds_needed(request.versions)
    most = MAX_ROUNDS if request.budget_s is None else sequential.MAX_ROUNDS  # with a budget, time is the cap
    if request.rounds is not None and request.rounds > most:
        raise HarnessError(f"--rounds {request.rounds} must be at most {most}")
    if request.rounds is not None and request.rounds < needed:
        raise HarnessError(
            f"--rounds {request.rounds} is too few: with fewer than {needed} round medians per version no change "
            f"between {len(request.versions)} versions can reach p < 0.05 (exact Mann-Whitney, Holm across the "
            f"{len(request.versions) - 1} pairs); use --rounds {needed} or more"
        )
    for folder in request.find_links:
        if not folder.is_dir():
            raise HarnessError(f"--find-links {folder} is not a folder of wheels")
    if request.backend not in ("local", "docker"):
        raise HarnessError(f"--backend {plain(request.backend)!r} is not local or docker")
    if request.wheelhouse is not None and request.backend != "docker":
        raise HarnessError("--wheelhouse builds the images of --backend docker; add it, or drop --wheelhouse")


def check_metric(request: Request) -> None:
    """--metric against the names the suite declares (suites/<suite>/spec.py `metrics`), before any
    environment is built; a suite that declares none is checked after the first job (`_require_metric`)."""
    spec = get_suite(request.plan.suite)
    if spec.metrics and request.metric not in spec.metrics:
        raise HarnessError(
            f"--metric {plain(request.metric)!r}: suite {spec.name} reports no such metric; "
            f"choose one of: {', '.join(spec.metrics)}"
        )


def _require_metric(request: Request, result_path: Path) -> None:
    """After the first job: the metric must be among what the job reported (an ok job), or the
    bisect stops there instead of running every round of every version first."""
    try:
        doc = load_result(result_path)
    except InvalidResult:
        return  # the job failed: its version is reported as excluded, as any failed round is
    names = [m["name"] for m in doc["metrics"]]
    if doc["status"] == "ok" and request.metric not in names:
        raise HarnessError(
            f"--metric {plain(request.metric)!r}: {doc['framework']} on suite {request.plan.suite} reported no such "
            f"metric; choose one of: {plain(', '.join(names)) or 'none'}"
        )


def rounds_needed(versions: list[str]) -> int:
    """Rounds a version with which a change between any consecutive pair can be significant."""
    return max(MIN_ROUNDS, observations_needed(max(len(versions) - 1, 1)))


def plan_bisect(request: Request) -> tuple[Plan, str]:
    """The request checked (package, versions, rounds, framework, metric) and the plan every version
    runs: the request's plan with the one framework bisected."""
    check_request(request)
    framework = choose_framework(request)
    check_metric(request)
    return make_plan(replace(request.plan, frameworks=framework), backend=request.backend), framework


def run_bisect(request: Request, argv: list[str] | None = None) -> Outcome:
    plan, framework = plan_bisect(request)
    needed = rounds_needed(request.versions)
    rounds = request.rounds or (needed if request.budget_s is None else sequential.MAX_ROUNDS)
    image = stack_image(request.stack, "cpu")
    results_dir = request.results_dir.resolve()
    prepare_results_dir(results_dir)
    folder = results_dir / f"bisect-{plan.run_id}"
    new_folder(folder, results_dir)
    make_folder(folder / "locks", results_dir)
    base = image.lock_file.read_text(encoding="utf-8")
    backends: dict[str, Backend] = {}
    locks: dict[str, dict[str, Any]] = {}
    engine = connect(hint="start Docker, or bisect with --backend local") if request.backend == "docker" else None
    for version in request.versions:
        label = f"{request.package}=={version}"
        say(f"-> {label}: lock and venv")
        hashes = fetch_hashes(request.package, version, request.find_links, request.no_index)
        note = f"{request.stack} stack lock {image.lock_hash[:12]}"
        text = generate_lock(base, request.package, version, hashes, note)
        lock = folder / "locks" / f"{version}.txt"
        write_bytes_atomic(lock, utf8(text), results_dir)
        locks[version] = {"file": f"locks/{version}.txt", "lock_hash": sha256_file(lock)}
        if engine is not None:
            backends[version], locks[version]["image"] = _image_backend(engine, request, lock, label)
            continue
        env = env_for(request.stack, text)
        built = ensure_env(env, lock, label, request.find_links, request.no_index)
        say(f"   {'built' if built else 'reused'} {env.folder}")
        backends[version] = VenvBackend(env, request.echo, request.fork_rounds)
        locks[version]["env"] = str(env.folder)
    # The budget runs from the first round: building the versions' venvs or images is not measuring.
    clock = None if request.budget_s is None else RoundClock(request.budget_s, least=needed)
    done = 0
    with serving(*backends.values()):  # each version's servers import that version once
        for number in range(1, rounds + 1):
            say(f"== round {number}/{rounds}" if clock is None else f"== round {number}")
            if _run_round(plan, number, request, backends, folder, argv):
                break
            done = number
            if clock is not None and clock(number):
                break
    if clock is not None:
        say(clock.line())
    return _conclude(request, plan, framework, folder, locks, done, None if clock is None else clock.record())


def _image_backend(engine: Engine, request: Request, lock: Path, label: str) -> tuple[Backend, str]:
    """The version's stack image, built from its generated lock (or reused: the tag names the
    lock's hash), and a docker backend pinned to it."""
    from harness.backends.docker_backend import DockerBackend

    image = stack_image(request.stack, "cpu", lock=lock)

    def echo(line: str) -> None:
        if request.echo:
            print(f"   {plain(line)}", flush=True)

    try:
        ensured = ensure(engine, image, request.wheelhouse, echo, extra=request.find_links)
    except HarnessError as error:
        raise HarnessError(f"{label}: the image could not be built: {error}") from None
    say(f"   {'built' if ensured.built else 'reused'} {image.tag}")
    record = ensured.record()
    backend = DockerBackend(engine, echo=request.echo, wheelhouse=request.wheelhouse, pinned={request.stack: record})
    return backend, image.tag


def _run_round(
    plan: Plan, number: int, request: Request, backends: dict[str, Backend], folder: Path, argv: list[str] | None
) -> bool:
    """One job per version; True when the run was interrupted."""
    for version in request.versions:
        say(f"-> {request.package} {version}")
        run_dir = execute(replace(plan, run_id=f"round-{number}"), backends[version], folder / version, argv)
        if number == 1 and version == request.versions[0]:
            _require_metric(request, run_dir / plan.jobs[0].result_file())
        try:
            if load_summary(run_dir / SUMMARY_FILE).get("interrupted"):
                return True
        except HarnessError as error:
            print(f"warning: {error}", file=sys.stderr)
            return True
    return False


def _collect(
    request: Request, plan: Plan, folder: Path, version: str, rounds: int, lock_hash: str
) -> tuple[VersionRun, dict[str, Any] | None]:
    """The version's round medians and pooled samples, and the metric's record (for unit/better)."""
    job = plan.jobs[0]
    medians: list[float] = []
    samples: list[float] = []
    found: dict[str, Any] | None = None
    left_out = 0
    for number in range(1, rounds + 1):
        path = folder / version / f"round-{number}" / job.result_file()
        try:
            doc = load_result(path)
        except InvalidResult as error:
            return VersionRun(version, medians, samples, f"round {number}: {plain(error)}"), found
        if doc["status"] != "ok":
            return VersionRun(version, medians, samples, f"round {number}: {doc['status']}: {doc['reason']}"), found
        if (doc.get("image") or {}).get("lock_hash") != lock_hash:
            return VersionRun(version, medians, samples, f"round {number}: ran with another lock"), found
        metric = next((m for m in doc["metrics"] if m["name"] == request.metric), None)
        if metric is None:
            names = ", ".join(m["name"] for m in doc["metrics"]) or "none"
            return VersionRun(version, medians, samples, f"no metric {request.metric!r} (it has: {names})"), found
        found = found or dict(metric)
        if assessment.mostly_disturbed(len(assessment.disturbed_samples(metric)), len(metric["samples"])):
            left_out += 1  # a round the machine disturbed measured its neighbours: out, as in `compare`
            continue
        medians.append(float(metric["stats"]["median"]))
        samples.extend(float(s) for s in metric["samples"])
    if len(medians) < 2:
        why = (
            "fewer than two rounds finished"
            if rounds < 2
            else "fewer than two rounds the machine left alone (contended or throttled rounds are left out)"
        )
        return VersionRun(
            version, medians, samples, why, disturbed=rounds >= 2, left_out=left_out, rounds=rounds
        ), found
    return VersionRun(version, medians, samples, left_out=left_out, rounds=rounds), found


def _conclude(
    request: Request,
    plan: Plan,
    framework: str,
    folder: Path,
    locks: dict[str, dict[str, Any]],
    rounds: int,
    budget: dict[str, Any] | None = None,
) -> Outcome:
    runs: dict[str, VersionRun] = {}
    metric: dict[str, Any] | None = None
    for version in request.versions:
        run, found = _collect(request, plan, folder, version, rounds, locks[version]["lock_hash"])
        runs[version] = run
        metric = metric or found
    if metric is None:
        problems = "; ".join(f"{v}: {r.problem}" for v, r in runs.items() if r.problem)
        raise HarnessError(f"no version measured metric {request.metric!r} ({plain(problems)}); see {folder}")
    unit, better = str(metric["unit"]), str(metric["better"])
    versions = request.versions
    pairs = judge([compare_pair(runs[a], runs[b], request.metric, unit, better) for a, b in pairwise(versions)])
    header = {
        "id": plan.run_id,
        "suite": request.plan.suite,
        "framework": framework,
        "metric": request.metric,
        "unit": unit,
        "better": better,
        "stack": request.stack,
        "package": request.package,
        "versions": versions,
        "rounds": rounds,
        **(budget or {}),
        "params": plan.jobs[0].params,
        "repeat": plan.jobs[0].repeat,
    }
    results = {v: record.version_record(runs[v], [f"{v}/round-{k}" for k in range(1, rounds + 1)]) for v in versions}
    doc = record.make_record(header, locks, results, pairs, answer(pairs))
    record.validate(doc)
    write_json_atomic(folder / record.FILE, doc, folder.parent)
    return Outcome(folder, doc, pairs, runs, unit)
