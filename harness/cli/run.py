"""`harness run` and `harness calibrate`: the commands that start jobs and print what they measured."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Optional

import typer

from harness.backends.base import check_options as check_backend_options
from harness.backends.base import make_backend, resolve_backend
from harness.cli.options import (
    BackendName,
    BackendOption,
    BudgetOption,
    CpusOption,
    DataDir,
    Device,
    DeviceOption,
    FormatOption,
    GpusOption,
    MemoryOption,
    Precision,
    PrecisionOption,
    Processes,
    ProcessesOption,
    ProfileOption,
    ProfileStepsOption,
    Quiet,
    ResultsDir,
    ThreadsOption,
    Transfer,
    TransferOption,
    backend_options,
    default_data_dir,
    default_results_dir,
    parse_pythons,
    profile_steps,
    require_datasets,
)
from harness.core import cache_home
from harness.core.errors import HarnessError
from harness.core.schema import load_summary
from harness.execute.budget import RoundClock, refuse_short
from harness.execute.rounds import MAX_ROUNDS, execute_rounds
from harness.execute.runner import calibrate, execute
from harness.judge import noise_floor, sequential
from harness.judge.assessment import assess, run_exit_code
from harness.report.exports import Format, render_run
from harness.report.profile_text import profile_text
from harness.store.calibration import attach as attach_calibration
from harness.store.calibration import check_mode as check_calibrate_mode
from harness.store.calibration import describe as describe_calibration
from harness.store.images import stack_image, variant_for
from harness.store.plan import (
    Plan,
    PlanRequest,
    check_timeout,
    frameworks_for,
    make_plan,
    parse_frameworks,
    planned_rounds,
)
from harness.store.run_folder import load_run, prepare_results_dir, resolve_run, resume_plan, suites_digest


def run(
    suite: Annotated[Optional[str], typer.Option("--suite", "-s", help="suite name (see `harness list`)")] = None,
    frameworks: Annotated[
        Optional[str], typer.Option("--frameworks", "-f", help="comma-separated; default: all of the suite's")
    ] = None,
    param: Annotated[list[str], typer.Option("--param", "-p", help="suite parameter key=value; repeatable")] = [],  # noqa: B006
    repeat: Annotated[
        Optional[int], typer.Option(help="timed steady-state calls per metric [default: suite's]")
    ] = None,
    warmup: Annotated[Optional[int], typer.Option(help="untimed calls after the first call [default: suite's]")] = None,
    device: DeviceOption = Device("cpu"),
    backend: BackendOption = BackendName("auto"),
    baseline: Annotated[
        Optional[str], typer.Option(help="framework the ratios refer to [default: first listed]")
    ] = None,
    threads: ThreadsOption = None,
    timeout: Annotated[Optional[float], typer.Option(help="per-job time limit in seconds [default: suite's]")] = None,
    python: Annotated[
        list[str], typer.Option("--python", help="local backend: STACK=PATH interpreter for a stack; repeatable")
    ] = [],  # noqa: B006
    results_dir: ResultsDir = None,
    data_dir: DataDir = None,
    quiet: Quiet = False,
    rounds: Annotated[
        Optional[int],
        typer.Option(
            help="run the frameworks round-robin K times and pool the samples [default: 1; with --budget: "
            "as many as it buys]"
        ),
    ] = None,
    budget: BudgetOption = None,
    detect: Annotated[
        Optional[str],
        typer.Option(
            "--detect",
            metavar="PCT",
            help="pick the rounds with which a compare of two such runs detects a change of PCT % "
            "(from this machine's noise floor: `harness noise`)",
        ),
    ] = None,
    fmt: FormatOption = Format.table,
    memory: MemoryOption = None,
    cpus: CpusOption = None,
    gpus: GpusOption = None,
    resume: Annotated[
        Optional[str], typer.Option("--resume", metavar="RUN", help="re-run only the jobs of RUN that are not ok")
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="validate and print the plan; start nothing")] = False,
    transfer: TransferOption = Transfer.auto,
    processes: ProcessesOption = Processes.fresh,
    cache: Annotated[
        str,
        typer.Option(
            "--cache",
            envvar="HARNESS_CACHE",
            help="compiler caches (JAX persistent cache, Inductor, Triton): cold = empty for every job; "
            "warm = kept in the cache home per stack and lock ($HARNESS_CACHE_HOME/compile) and reused by later jobs",
        ),
    ] = "cold",
    precision: PrecisionOption = Precision("fp32"),
    profile: ProfileOption = False,
    profile_steps_given: ProfileStepsOption = None,
    smoke: Annotated[
        bool, typer.Option("--smoke", help="the suite's smallest real size (its declared smoke parameters), 3 samples")
    ] = False,
    calibrate_mode: Annotated[
        str,
        typer.Option(
            "--calibrate",
            envvar="HARNESS_CALIBRATE",
            help="auto: measure this machine's achievable FLOP/s and bandwidth once per fingerprint "
            "(for '% of achievable'); always: re-measure; never: skip",
        ),
    ] = "auto",
) -> None:
    """Run one suite on several frameworks, one isolated job each, and print the comparison."""
    target = results_dir or default_results_dir()
    check_calibrate_mode(calibrate_mode)
    steps = profile_steps(profile, profile_steps_given)
    pythons = parse_pythons(python)
    budget_s = None if budget is None else sequential.parse_budget(budget)
    if resume is not None:
        if suite is not None or frameworks is not None or param or steps:
            raise HarnessError(
                "--resume RUN re-uses that run's plan; drop --suite, --frameworks, --param and --profile"
            )
        if budget_s is not None:
            raise HarnessError("--budget runs rounds, and --resume re-runs single jobs; drop one of them")
        longer = check_timeout(timeout) if timeout is not None else None  # the options first, then the files
        resume_dir = resolve_run(resume, target)
        plan = resume_plan(resume_dir)
        requested = resume_backend(backend.value, plan.backend, resume_dir.name)
        check_same_code(resume_dir)
        backend_name = resolve_backend(requested, pythons=pythons, gpus=gpus, device=device.value)
        if longer is not None:  # e.g. a job that timed out gets more time on the second try
            plan = replace(plan, jobs=tuple(replace(job, timeout_s=longer) for job in plan.jobs))
    elif suite is None:
        raise HarnessError("--suite is required (see `harness list`), or --resume RUN to finish a run")
    else:
        resume_dir = None
        backend_name = resolve_backend(backend.value, pythons=pythons, gpus=gpus, device=device.value)
        plan = make_plan(
            PlanRequest(
                suite=suite,
                frameworks=frameworks,
                params=tuple(param),
                repeat=repeat,
                warmup=warmup,
                device=device.value,
                threads=threads,
                baseline=baseline,
                timeout_s=timeout,
                data_dir=str((data_dir or default_data_dir()).resolve()),
                smoke=smoke,
                cache=cache,
                precision=precision.value,
                profile=steps,
            ),
            backend=backend_name,
        )
    # Also on --resume: plan.json is read back from disk, and the cache folder a job writes into is
    # never one a file named, only the cache home's own.
    plan = _warm_caches_in_cache_home(plan)
    require_datasets(plan)
    most = MAX_ROUNDS if budget_s is None else sequential.MAX_ROUNDS  # with a budget, time is the cap
    if rounds is not None and not 1 <= rounds <= most:
        raise HarnessError(f"--rounds {rounds} must be between 1 and {most}")
    if detect is not None:
        if rounds is not None or resume_dir is not None:
            raise HarnessError("--detect picks the rounds itself; drop --rounds (and --resume)")
        rounds, line = noise_floor.plan_rounds(plan, detect, interleaved=False, budget_s=budget_s)
        typer.echo(line, err=True)
    if budget_s is not None and detect is None:
        refuse_short(plan, budget_s, 1)  # a budget that one round of this workload outlasts, where known
    resumed_rounds = None if resume_dir is None else rounds_to_resume(plan, resume_dir, rounds)
    if rounds is None:
        rounds = resumed_rounds or (1 if budget_s is None else sequential.MAX_ROUNDS)
    options = backend_options(
        quiet=quiet, memory=memory, cpus=cpus, gpus=gpus, transfer=transfer, pythons=pythons, processes=processes
    )
    # What the chosen backend refuses (--python for slurm, HARNESS_SLURM_*, --gpus for docker), checked
    # here for --dry-run and a real run alike: a dry run must not accept what the run then refuses.
    check_backend_options(backend_name, options)
    argv = ["harness"] + sys.argv[1:]
    if dry_run:
        typer.echo(json.dumps(plan.as_record(), indent=2))
        return
    chosen = make_backend(backend_name, options)
    ceilings = None
    if calibrate_mode != "never" and resume_dir is None:
        prepare_results_dir(target)  # an unusable results folder is refused before minutes of calibration
        ceilings = calibrate(
            [job.framework for job in plan.jobs if job.skip_reason is None],
            device=plan.jobs[0].device,
            threads=plan.jobs[0].threads,
            cpus=cpus,
            backend=chosen,
            force=calibrate_mode == "always",
        )
    clock = None if budget_s is None else RoundClock(budget_s)  # from the first round: calibration is apart
    if resumed_rounds is not None:  # a rounds run goes on as one: the rounds it has not finished
        run_dir = execute_rounds(plan, chosen, target, resumed_rounds, argv=argv, resume_dir=resume_dir)
    elif rounds == 1 and clock is None:
        run_dir = execute(plan, chosen, target, argv=argv, resume_dir=resume_dir)
    else:
        run_dir = execute_rounds(plan, chosen, target, rounds, argv=argv, stop=clock)
    if clock is not None:
        typer.echo(clock.line(), err=True)
    attach_calibration(run_dir, ceilings)
    judged = assess(load_run(run_dir))
    typer.echo("\n" + render_run(judged, fmt))
    if fmt is Format.table and any(job.profile for job in plan.jobs):
        typer.echo("\n" + profile_text(judged))
    typer.echo(f"\nrun folder: {run_dir}", err=fmt is not Format.table)
    if judged.crowded:
        typer.echo(f"run flagged: {judged.crowded}", err=True)
    raise typer.Exit(run_exit_code(judged))


def rounds_to_resume(plan: Plan, run_dir: Path, asked: int | None) -> int | None:
    """The rounds a resumed run goes on to (None: a run of single jobs, resumed job by job). A rounds
    run resumes as one, so its pooled check values keep comparing round with round; a session that
    cannot be continued honestly is refused."""
    recorded = planned_rounds(plan)
    if recorded is None:
        if asked is not None and asked > 1:
            raise HarnessError(
                f"run {run_dir.name} ran each job once; --resume finishes it that way: drop --rounds, or start a "
                f"new run with --rounds {asked}"
            )
        return None
    if asked is not None and asked != recorded:
        raise HarnessError(f"run {run_dir.name} was planned with {recorded} rounds; resume it without --rounds")
    return recorded


def check_same_code(run_dir: Path) -> None:
    """A resumed run keeps its finished results: the jobs it re-runs must run the same suites' code,
    or one run would hold numbers of two versions under one code record."""
    recorded = (load_summary(run_dir / "summary.json").get("code") or {}).get("suites_sha256")
    now = suites_digest()
    if isinstance(recorded, str) and recorded != now:
        raise HarnessError(
            f"run {run_dir.name} was measured with suites {recorded[:12]}, this checkout has {now[:12]}: resuming "
            "would mix results of two versions of the code; start a new run (or check out the code it ran)"
        )


def resume_backend(requested: str, recorded: str, run_id: str) -> str:
    """The backend a resumed run continues on: the one it ran on (kept and new results from one)."""
    if requested == "auto":
        return recorded
    if requested != recorded:
        raise HarnessError(
            f"run {run_id} ran on the {recorded} backend; resume it there (--backend {recorded}, or leave "
            "--backend out): its kept results and the new ones must come from one backend"
        )
    return requested


def _warm_caches_in_cache_home(plan: Plan) -> Plan:
    """--cache warm: each job's compiler caches in the cache home, under its stack and lock hash."""
    jobs = []
    for job in plan.jobs:
        if job.cache == "warm":
            variant = variant_for(job.device)
            lock_hash = stack_image(job.stack, variant).lock_hash
            job = replace(job, cache_dir=str(cache_home.compile_cache_dir(job.stack, variant, lock_hash)))
        jobs.append(job)
    return replace(plan, jobs=tuple(jobs))


def calibrate_command(
    frameworks: Annotated[
        Optional[str], typer.Option("--frameworks", "-f", help="comma-separated; default: numpy,jax,pytorch")
    ] = None,
    device: DeviceOption = Device("cpu"),
    backend: BackendOption = BackendName("auto"),
    threads: ThreadsOption = None,
    cpus: CpusOption = None,
    results_dir: Annotated[
        Optional[Path], typer.Option("--results-dir", hidden=True, help="not used: the ceilings live in the cache home")
    ] = None,
    quiet: Quiet = False,
    smoke: Annotated[
        bool,
        typer.Option(
            "--smoke",
            help="the calibrate suite's smoke size (N = 128 matmuls, an 8 MiB stream, 3 samples): a quick check "
            "that every stack calibrates; its ceilings are lower than a full calibration's and replace the cached ones",
        ),
    ] = False,
) -> None:
    """Measure this machine's achievable matmul FLOP/s and bandwidth with each stack (cached per machine)."""
    from suites.contract.registry import all_suites

    names = parse_frameworks(all_suites()["calibrate"], frameworks)
    if frameworks is None:  # the default: every stack that can compute on the device (numpy has no GPU variant)
        names = frameworks_for(device.value, names)
    if threads is not None and threads < 1:
        raise HarnessError(f"--threads {threads} must be at least 1")
    if results_dir is not None:  # accepted as before the cache home, so scripts that pass it keep working
        typer.echo(f"--results-dir is not used by calibrate: the ceilings live in {cache_home.home()}", err=True)
    options = backend_options(quiet=quiet, cpus=cpus)
    chosen = make_backend(resolve_backend(backend.value, pythons={}, gpus=None, device=device.value), options)
    doc = calibrate(names, device=device.value, threads=threads, cpus=cpus, backend=chosen, force=True, smoke=smoke)
    if doc is None:
        raise HarnessError("no calibration job produced a usable figure; see the job output above")
    for line in describe_calibration(doc):
        typer.echo(line)
