"""One measuring session, owned in one place: what a command that plans jobs asks (a `PlanRequest` and
the session's `Settings`) goes in; the plan, the rounds it buys, the backend, calibration, the run and
its assessment come out. The Typer functions in cli/ only parse, call this and print what it returns
(as pyperf's Runner owns what its CLI only configures, and optimum-benchmark's `launch` returns the
report its config asked for).

The order of the checks is the order a user meets them: options first, then files (a resumed run's
plan), then the machine (an engine, a noise floor); nothing starts before all of them passed.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, replace
from pathlib import Path

from harness.backends.base import CHOICES as CHOICES  # re-exported: the --backend choices
from harness.backends.base import BackendOptions, check_options, make_backend, make_limits, resolve_backend
from harness.core import cache_home
from harness.core.errors import HarnessError
from harness.core.schema import load_summary
from harness.execute.budget import RoundClock, refuse_short
from harness.execute.rounds import MAX_ROUNDS, execute_rounds
from harness.execute.runner import calibrate, execute
from harness.judge import noise_floor, sequential
from harness.judge.assessment import Assessment, assess, run_exit_code
from harness.store.calibration import attach as attach_calibration
from harness.store.calibration import check_mode as check_calibrate_mode
from harness.store.calibration import describe as describe_calibration
from harness.store.data.store import require as require_dataset
from harness.store.images import stack_image, variant_for
from harness.store.plan import Plan, check_timeout, frameworks_for, make_plan, parse_frameworks, planned_rounds
from harness.store.plan import PlanRequest as PlanRequest  # re-exported: what cli/options.py builds
from harness.store.run_folder import load_run, prepare_results_dir, resolve_run, resume_plan, suites_digest
from harness.text.escape import plain
from suites.contract.frameworks import STACKS


@dataclass(frozen=True)
class Settings:
    """How the planned jobs run (cli/options.py SESSION_OPTIONS), as given; None: the command's default."""

    results_dir: Path
    backend: str = "auto"
    rounds: int | None = None
    budget: str | None = None
    detect: str | None = None
    quiet: bool = False
    processes: str = "fresh"
    memory: str | None = None
    cpus: float | None = None
    gpus: str | None = None
    transfer: str = "auto"
    pythons: tuple[str, ...] = ()
    dry_run: bool = False
    wheelhouse: Path | None = None  # image builds take only these wheels (the CLI fills $HARNESS_WHEELHOUSE in)

    @property
    def budget_s(self) -> float | None:
        return None if self.budget is None else sequential.parse_budget(self.budget)

    def interpreters(self) -> dict[str, str]:
        """--python STACK=PATH, each checked as the local backend will use it (for --dry-run too)."""
        return parse_pythons(self.pythons)

    def backend_for(self, device: str) -> str:
        """The backend these settings run on (`auto` decided here, once, before planning)."""
        return resolve_backend(self.backend, pythons=self.interpreters(), gpus=self.gpus, device=device)

    def options(self) -> BackendOptions:
        """What every backend factory takes from these settings."""
        return BackendOptions(
            echo=not self.quiet,
            limits=make_limits(self.memory, self.cpus),
            pythons=self.interpreters(),
            gpus=self.gpus,
            wheelhouse=self.wheelhouse,
            transfer=self.transfer,
            fork_rounds=self.processes == "forked",
        )


def parse_pythons(pairs: tuple[str, ...]) -> dict[str, str]:
    """--python STACK=PATH: a known stack, named once, and an interpreter that exists (a path, or a name on PATH)."""
    found: dict[str, str] = {}
    for pair in pairs:
        stack, sep, path = pair.partition("=")
        if not sep or not stack or not path:
            raise HarnessError(
                f"--python {pair!r} is not of the form STACK=PATH (e.g. --python jax=.venv-jax/bin/python)"
            )
        if stack not in STACKS:
            raise HarnessError(
                f"--python {plain(pair)!r}: {plain(stack)!r} is not a stack; use one of {', '.join(STACKS)} "
                "(flax runs in the jax stack)"
            )
        if stack in found:
            raise HarnessError(f"--python names the {stack} stack twice; give one interpreter per stack")
        runnable = os.path.isfile(path) and os.access(path, os.X_OK) if os.sep in path else shutil.which(path)
        if not runnable:
            raise HarnessError(
                f"--python {plain(pair)!r}: no executable interpreter at {plain(path)!r}; give the path of a "
                f"Python that has the {stack} stack's packages (or a name on PATH)"
            )
        found[stack] = path
    return found


def require_datasets(plan: Plan) -> None:
    """A missing dataset is one line naming the fetch command, before any job starts."""
    named = plan.jobs[0].params.get("dataset") if plan.jobs else None
    if isinstance(named, str) and plan.jobs[0].data_dir is not None:
        require_dataset(Path(plan.jobs[0].data_dir), named, plan.suite)


def plan_record(plan: Plan) -> str:
    """What --dry-run prints: the plan as plan.json records it."""
    return json.dumps(plan.as_record(), indent=2)


def planned(request: PlanRequest, backend: str) -> Plan:
    """The request's plan, its datasets checked: what every command that plans starts from."""
    plan = make_plan(request, backend=backend)
    require_datasets(plan)
    return plan


@dataclass(frozen=True)
class RoundsRule:
    """What a command's --rounds may be: from `least` up to MAX_ROUNDS (with a budget, time is the cap:
    sequential.MAX_ROUNDS); `default` without one."""

    least: int = 1
    default: int = 1
    refusal: str = "--rounds {rounds} must be between {least} and {most}"  # said when --rounds is out of range
    sides: int = 1  # run folders a round fills (ab: 2), for what a budget must buy
    interleaved: bool = False  # --detect plans for two interleaved sides (ab), not two separate runs
    margin: float = 0.0  # ab: a change --detect asks for must clear the session's margin
    share: int = 1  # the budget is shared by this many sessions (noise): each must buy `least` rounds
    # With a budget, --rounds caps the rounds (run, noise); ab's looks spend the budget, so it refuses both.
    budget_caps: bool = True


def decide_rounds(plan: Plan, settings: Settings, rule: RoundsRule) -> tuple[int, list[str]]:
    """(the rounds to run, lines to say first) from --rounds, --detect and --budget: with a budget
    --rounds is a cap and the rounds go on until it is spent; --detect picks them from this machine's
    noise floor; a budget that cannot buy `least` rounds of this workload is refused up front."""
    budget_s = settings.budget_s
    most = MAX_ROUNDS if budget_s is None else sequential.MAX_ROUNDS
    rounds, notes = settings.rounds, []
    if budget_s is not None and rounds is not None and not rule.budget_caps:
        raise HarnessError("--budget buys as many rounds as it can and stops when the evidence is clear; "
                           "drop --rounds, or drop --budget")  # fmt: skip
    if rounds is not None and not rule.least <= rounds <= most:
        raise HarnessError(rule.refusal.format(rounds=rounds, least=rule.least, most=most, default=rule.default))
    if settings.detect is not None:
        if rounds is not None:
            raise HarnessError("--detect picks the rounds itself; drop --rounds")
        rounds, line = noise_floor.plan_rounds(
            plan, settings.detect, interleaved=rule.interleaved, budget_s=budget_s, margin=rule.margin
        )
        notes.append(line)
    elif budget_s is not None:  # (--detect has checked its own rounds against the budget)
        refuse_short(plan, budget_s / rule.share, rule.least, sides=rule.sides)
    if rounds is None:
        rounds = rule.default if budget_s is None else most
    return rounds, notes


@dataclass(frozen=True)
class Finished:
    """What a run session returns for the command to print."""

    run_dir: Path
    judged: Assessment
    budget_line: str | None  # what a --budget bought

    @property
    def exit_code(self) -> int:
        return run_exit_code(self.judged)


class RunSession:
    """`harness run`: a new run of the request, or (`resume`) the jobs of a run that are not ok."""

    def __init__(
        self, request: PlanRequest, settings: Settings, *, resume: str | None = None, calibrate_mode: str = "auto"
    ) -> None:
        check_calibrate_mode(calibrate_mode)
        self.settings, self.calibrate_mode = settings, calibrate_mode
        budget_s = settings.budget_s
        self.resume_dir: Path | None = None
        if resume is not None:
            self.plan, self.backend = self._resumed(request, settings, resume, budget_s)
        elif not request.suite:
            raise HarnessError("--suite is required (see `harness list`), or --resume RUN to finish a run")
        else:
            self.backend = settings.backend_for(request.device)
            self.plan = make_plan(request, backend=self.backend)
        # Also on --resume: plan.json is read back from disk, and the cache folder a job writes into is
        # never one a file named, only the cache home's own.
        self.plan = warm_caches_in_cache_home(self.plan)
        require_datasets(self.plan)
        self.budget_s = budget_s
        if settings.detect is not None and (settings.rounds is not None or self.resume_dir is not None):
            raise HarnessError("--detect picks the rounds itself; drop --rounds (and --resume)")
        rounds, self.notes = decide_rounds(self.plan, settings, RoundsRule())
        # A rounds run resumes as one: the rounds it has not finished (single jobs: None).
        self.resumed_rounds = None
        if self.resume_dir is not None:
            self.resumed_rounds = rounds_to_resume(self.plan, self.resume_dir, settings.rounds)
        self.rounds = self.resumed_rounds or rounds
        # What the chosen backend refuses (--python for slurm, HARNESS_SLURM_*, --gpus for docker), checked
        # for --dry-run and a real run alike: a dry run must not accept what the run then refuses.
        self.options = settings.options()
        check_options(self.backend, self.options)

    def _resumed(
        self, request: PlanRequest, settings: Settings, resume: str, budget_s: float | None
    ) -> tuple[Plan, str]:
        if request.suite or request.frameworks is not None or request.params or request.profile:
            raise HarnessError(
                "--resume RUN re-uses that run's plan; drop --suite, --frameworks, --param and --profile"
            )
        if budget_s is not None:
            raise HarnessError("--budget runs rounds, and --resume re-runs single jobs; drop one of them")
        longer = check_timeout(request.timeout_s) if request.timeout_s is not None else None  # options, then files
        self.resume_dir = resolve_run(resume, settings.results_dir)
        plan = resume_plan(self.resume_dir)
        requested = resume_backend(settings.backend, plan.backend, self.resume_dir.name)
        check_same_code(self.resume_dir)
        backend = resolve_backend(requested, pythons=settings.interpreters(), gpus=settings.gpus, device=request.device)
        if longer is not None:  # e.g. a job that timed out gets more time on the second try
            plan = replace(plan, jobs=tuple(replace(job, timeout_s=longer) for job in plan.jobs))
        return plan, backend

    def plan_text(self) -> str:
        """--dry-run: the plan as it would run."""
        return plan_record(self.plan)

    def run(self, argv: list[str]) -> Finished:
        """Calibrate where asked, run the jobs (rounds, budget, resume), and assess the run folder."""
        chosen = make_backend(self.backend, self.options)
        target = self.settings.results_dir
        ceilings = None
        if self.calibrate_mode != "never" and self.resume_dir is None:
            prepare_results_dir(target)  # an unusable results folder is refused before minutes of calibration
            ceilings = calibrate(
                [job.framework for job in self.plan.jobs if job.skip_reason is None],
                device=self.plan.jobs[0].device,
                threads=self.plan.jobs[0].threads,
                cpus=self.settings.cpus,
                backend=chosen,
                force=self.calibrate_mode == "always",
            )
        clock = None if self.budget_s is None else RoundClock(self.budget_s)  # from the first round
        if self.resumed_rounds is not None:  # a rounds run goes on as one: the rounds it has not finished
            run_dir = execute_rounds(
                self.plan, chosen, target, self.resumed_rounds, argv=argv, resume_dir=self.resume_dir
            )
        elif self.rounds == 1 and clock is None:
            run_dir = execute(self.plan, chosen, target, argv=argv, resume_dir=self.resume_dir)
        else:
            run_dir = execute_rounds(self.plan, chosen, target, self.rounds, argv=argv, stop=clock)
        attach_calibration(run_dir, ceilings)
        return Finished(run_dir, assess(load_run(run_dir)), None if clock is None else clock.line())


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


def warm_caches_in_cache_home(plan: Plan) -> Plan:
    """--cache warm: each job's compiler caches in the cache home, under its stack and lock hash."""
    jobs = []
    for job in plan.jobs:
        if job.cache == "warm":
            variant = variant_for(job.device)
            lock_hash = stack_image(job.stack, variant).lock_hash
            job = replace(job, cache_dir=str(cache_home.compile_cache_dir(job.stack, variant, lock_hash)))
        jobs.append(job)
    return replace(plan, jobs=tuple(jobs))


def calibrate_machine(
    frameworks: str | None, *, device: str, threads: int | None, settings: Settings, smoke: bool
) -> list[str]:
    """`harness calibrate`: measure this machine's ceilings with each stack (always, replacing the cached
    ones), and the lines that describe them."""
    from suites.contract.registry import all_suites

    names = parse_frameworks(all_suites()["calibrate"], frameworks)
    if frameworks is None:  # the default: every stack that can compute on the device (numpy has no GPU variant)
        names = frameworks_for(device, names)
    if threads is not None and threads < 1:
        raise HarnessError(f"--threads {threads} must be at least 1")
    chosen = make_backend(settings.backend_for(device), settings.options())
    doc = calibrate(names, device=device, threads=threads, cpus=settings.cpus, backend=chosen, force=True, smoke=smoke)
    if doc is None:
        raise HarnessError("no calibration job produced a usable figure; see the job output above")
    return describe_calibration(doc)
