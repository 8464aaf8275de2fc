"""`harness`: plan, run and show framework comparisons.

Every user-facing problem is a HarnessError, caught once in `main`: one line on stderr,
exit code 2, no traceback.
"""

from __future__ import annotations

import json
import math
import os
import sys
from dataclasses import replace
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer
from typer.exceptions import TyperException

from harness.backends.docker_auto import make_backend, resolve_backend
from harness.calibrate_jobs import attach as attach_calibration
from harness.calibrate_jobs import calibrate
from harness.calibrate_jobs import describe as describe_calibration
from harness.calibration import check_mode as check_calibrate_mode
from harness.catalog import get_suite, visible_suites
from harness.cli_cloud import clean, doctor, reproduce
from harness.cli_cluster import collect_command, export_app
from harness.compare import compare_runs
from harness.compare_render import render_comparison
from harness.data.cli import app as data_app
from harness.data.store import require as require_dataset
from harness.errors import HarnessError
from harness.escape import plain
from harness.exports import Format, render_run
from harness.images import DEFAULT_BASE_IMAGE, build_images, fill_images_wheelhouse, parse_stacks
from harness.limits import make_limits
from harness.plan import check_timeout, make_plan, parse_frameworks
from harness.plausibility import implausible
from harness.report import write_report
from harness.rounds import execute_rounds
from harness.run_writer import resume_plan
from harness.runner import execute, prepare_results_dir
from harness.runs import Run, load_run, resolve_run
from harness.table import gate_passed

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    help="Compare ML frameworks fairly: synchronised, compile time separated, same data and precision.",
)
app.add_typer(data_app, name="data")
app.add_typer(export_app, name="export")
app.command("collect")(collect_command)
app.command("doctor")(doctor)
app.command("reproduce")(reproduce)
app.command("clean")(clean)


class Device(str, Enum):
    cpu = "cpu"
    gpu = "gpu"


class BackendName(str, Enum):
    auto = "auto"
    docker = "docker"
    local = "local"


def default_results_dir() -> Path:
    return Path(os.environ.get("HARNESS_RESULTS_DIR", "results"))


def default_data_dir() -> Path:
    return Path(os.environ.get("HARNESS_DATA_DIR", "data"))


def default_wheelhouse() -> Optional[Path]:
    """$HARNESS_WHEELHOUSE: the wheels every image build (also on demand in `run`) takes, no index."""
    value = os.environ.get("HARNESS_WHEELHOUSE", "").strip()
    return Path(value) if value else None


FormatOption = Annotated[Format, typer.Option("--format", help="output format")]

ResultsDir = Annotated[
    Optional[Path],
    typer.Option("--results-dir", help="where run folders go [default: ./results or $HARNESS_RESULTS_DIR]"),
]


def _pythons(pairs: list[str]) -> dict[str, str]:
    found: dict[str, str] = {}
    for pair in pairs:
        stack, sep, path = pair.partition("=")
        if not sep or not stack or not path:
            raise HarnessError(
                f"--python {pair!r} is not of the form STACK=PATH (e.g. --python jax=.venv-jax/bin/python)"
            )
        found[stack] = path
    return found


@app.command("list")
def list_suites(all_: Annotated[bool, typer.Option("--all", help="include test-only suites")] = False) -> None:
    """Every suite, its frameworks, parameters with defaults, and what it measures."""
    for spec in visible_suites(include_hidden=all_).values():
        typer.echo(f"{spec.name}: {spec.description}")
        typer.echo(f"  frameworks: {', '.join(spec.frameworks)}")
        for fw, reason in spec.unsupported.items():
            typer.echo(f"  {fw}: skipped ({reason})")
        for p in spec.params:
            typer.echo(f"  --param {p.name}={p.default}  ({p.type}; {p.describe_range()}) {p.help}")
        typer.echo(f"  defaults: repeat {spec.repeat}, warmup {spec.warmup}, timeout {spec.timeout_s:g} s")
        typer.echo("")


@app.command()
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
    device: Annotated[Device, typer.Option(help="where the frameworks compute")] = Device.cpu,
    backend: Annotated[
        BackendName,
        typer.Option(
            envvar="HARNESS_BACKEND", help="how jobs are isolated; auto: docker when an engine answers, else local"
        ),
    ] = BackendName.auto,
    baseline: Annotated[
        Optional[str], typer.Option(help="framework the ratios refer to [default: first listed]")
    ] = None,
    threads: Annotated[Optional[int], typer.Option(help="thread count applied the same way to every framework")] = None,
    timeout: Annotated[Optional[float], typer.Option(help="per-job time limit in seconds [default: suite's]")] = None,
    python: Annotated[
        list[str], typer.Option("--python", help="local backend: STACK=PATH interpreter for a stack; repeatable")
    ] = [],  # noqa: B006
    results_dir: ResultsDir = None,
    data_dir: Annotated[
        Optional[Path], typer.Option("--data-dir", help="dataset folder [default: ./data or $HARNESS_DATA_DIR]")
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="do not echo job output")] = False,
    rounds: Annotated[int, typer.Option(help="run the frameworks round-robin K times and pool the samples")] = 1,
    fmt: FormatOption = Format.table,
    memory: Annotated[
        Optional[str], typer.Option("--memory", help="memory limit per job, e.g. 4g (docker: container limit)")
    ] = None,
    cpus: Annotated[Optional[float], typer.Option("--cpus", help="CPU limit per job (local: cores it may use)")] = None,
    gpus: Annotated[
        Optional[str], typer.Option("--gpus", help="docker, --device gpu: all (default), a count, or device=0,1")
    ] = None,
    resume: Annotated[
        Optional[str], typer.Option("--resume", metavar="RUN", help="re-run only the jobs of RUN that are not ok")
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="validate and print the plan; start nothing")] = False,
    transfer: Annotated[
        str,
        typer.Option(
            envvar="HARNESS_TRANSFER",
            help="docker: bind (mount host folders), copy (through the API, for remote engines) or auto",
        ),
    ] = "auto",
    cache: Annotated[
        str,
        typer.Option(
            "--cache",
            envvar="HARNESS_CACHE",
            help="compiler caches (JAX persistent cache, Inductor, Triton): cold = empty for every job; "
            "warm = kept under RESULTS_DIR/.cache (docker: a volume) and reused by later jobs",
        ),
    ] = "cold",
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
    backend_name = resolve_backend(backend.value, pythons=_pythons(python), gpus=gpus, device=device.value)
    if resume is not None:
        if suite is not None or frameworks is not None or param:
            raise HarnessError("--resume RUN re-uses that run's plan; drop --suite, --frameworks and --param")
        resume_dir = resolve_run(resume, target)
        plan = resume_plan(resume_dir)
        if timeout is not None:  # e.g. a job that timed out gets more time on the second try
            plan = replace(plan, jobs=tuple(replace(job, timeout_s=check_timeout(timeout)) for job in plan.jobs))
    elif suite is None:
        raise HarnessError("--suite is required (see `harness list`), or --resume RUN to finish a run")
    else:
        resume_dir = None
        plan = make_plan(
            suite=suite,
            frameworks=frameworks,
            params=param,
            repeat=repeat,
            warmup=warmup,
            device=device.value,
            threads=threads,
            baseline=baseline,
            backend=backend_name,
            timeout_s=timeout,
            data_dir=str((data_dir or default_data_dir()).resolve()),
            smoke=smoke,
            cache=cache,
            cache_dir=str((target / ".cache").resolve()),
        )
    named = plan.jobs[0].params.get("dataset") if plan.jobs else None
    if isinstance(named, str) and plan.jobs[0].data_dir is not None:
        # A missing dataset is one line naming the fetch command, before any job starts.
        require_dataset(Path(plan.jobs[0].data_dir), named, plan.suite)
    if rounds < 1:
        raise HarnessError(f"--rounds {rounds} must be at least 1")
    limits = make_limits(memory, cpus)
    argv = ["harness"] + sys.argv[1:]
    if rounds > 1 and resume_dir is not None:
        raise HarnessError("--rounds cannot be combined with --resume; resume re-runs single jobs")
    if dry_run:
        typer.echo(json.dumps(plan.as_record(), indent=2))
        return
    chosen = make_backend(
        backend_name,
        pythons=_pythons(python),
        echo=not quiet,
        limits=limits,
        gpus=gpus,
        wheelhouse=default_wheelhouse(),
        transfer=transfer,
    )
    ceilings = None
    if calibrate_mode != "never" and resume_dir is None:
        prepare_results_dir(target)
        ceilings = calibrate(
            [job.framework for job in plan.jobs if job.skip_reason is None],
            device=plan.jobs[0].device,
            threads=plan.jobs[0].threads,
            cpus=cpus,
            backend=chosen,
            results_dir=target,
            force=calibrate_mode == "always",
        )
    if rounds == 1:
        run_dir = execute(plan, chosen, target, argv=argv, resume_dir=resume_dir)
    else:
        run_dir = execute_rounds(plan, chosen, target, rounds, argv=argv)
    attach_calibration(run_dir, ceilings)
    loaded = load_run(run_dir)
    typer.echo("")
    typer.echo(render_run(loaded, fmt))
    typer.echo(f"\nrun folder: {run_dir}", err=fmt is not Format.table)
    raise typer.Exit(run_exit_code(loaded))


INTERRUPTED_EXIT = 130  # the shell's convention for SIGINT


def run_exit_code(loaded: Run) -> int:
    """0: every job ok or skipped, every check passed, every number plausible; 130 interrupted; else 1."""
    if loaded.summary.get("interrupted"):
        return INTERRUPTED_EXIT
    all_ok = all(r["status"] in ("ok", "skipped") for r in loaded.results.values()) and not loaded.problems
    return 0 if all_ok and gate_passed(loaded) and not implausible(loaded) else 1


@app.command("calibrate")
def calibrate_command(
    frameworks: Annotated[
        Optional[str], typer.Option("--frameworks", "-f", help="comma-separated; default: numpy,jax,pytorch")
    ] = None,
    device: Annotated[Device, typer.Option(help="where the frameworks compute")] = Device.cpu,
    backend: Annotated[BackendName, typer.Option(envvar="HARNESS_BACKEND", help="how jobs are isolated")] = (
        BackendName.auto
    ),
    threads: Annotated[Optional[int], typer.Option(help="thread count, as for `harness run`")] = None,
    cpus: Annotated[Optional[float], typer.Option("--cpus", help="CPU limit per job, as for `harness run`")] = None,
    results_dir: ResultsDir = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="do not echo job output")] = False,
) -> None:
    """Measure this machine's achievable matmul FLOP/s and bandwidth with each stack (cached per machine)."""
    from suites.calibrate.spec import SPEC

    names = parse_frameworks(SPEC, frameworks)
    if threads is not None and threads < 1:
        raise HarnessError(f"--threads {threads} must be at least 1")
    target = results_dir or default_results_dir()
    prepare_results_dir(target)
    backend_name = resolve_backend(backend.value, pythons={}, gpus=None, device=device.value)
    chosen = make_backend(
        backend_name,
        pythons={},
        echo=not quiet,
        limits=make_limits(None, cpus),
        gpus=None,
        wheelhouse=default_wheelhouse(),
        transfer="auto",
    )
    doc = calibrate(
        names, device=device.value, threads=threads, cpus=cpus, backend=chosen, results_dir=target, force=True
    )
    if doc is None:
        raise HarnessError("no calibration job produced a usable figure; see the job output above")
    for line in describe_calibration(doc):
        typer.echo(line)


@app.command()
def show(
    run_ref: Annotated[str, typer.Argument(metavar="RUN", help="run folder, or run id under --results-dir")],
    results_dir: ResultsDir = None,
    fmt: FormatOption = Format.table,
) -> None:
    """Re-render a finished run from its files alone."""
    loaded = load_run(resolve_run(run_ref, results_dir or default_results_dir()))
    typer.echo(render_run(loaded, fmt))


@app.command()
def compare(
    run_a: Annotated[str, typer.Argument(metavar="RUN_A", help="the reference run (before)")],
    run_b: Annotated[str, typer.Argument(metavar="RUN_B", help="the run compared with it (after)")],
    fail_above: Annotated[
        Optional[float], typer.Option("--fail-above", help="exit 1 on a significant slowdown above PCT percent")
    ] = None,
    results_dir: ResultsDir = None,
    fmt: FormatOption = Format.table,
) -> None:
    """Two runs of one suite: per-metric ratio with its interval, significance, geometric mean."""
    if fail_above is not None and not (fail_above >= 0 and math.isfinite(fail_above)):  # nan would disable the gate
        raise HarnessError(f"--fail-above {fail_above} must be a finite percentage of 0 or more")
    base = results_dir or default_results_dir()
    comparison = compare_runs(load_run(resolve_run(run_a, base)), load_run(resolve_run(run_b, base)))
    typer.echo(render_comparison(comparison, fmt))
    worst = comparison.worst_significant_slowdown()
    if fail_above is not None and worst is not None and worst.slowdown * 100 > fail_above:
        typer.echo(
            f"significant slowdown above {fail_above:g} %: {worst.framework} {worst.metric} "
            f"{worst.slowdown:.1%} worse (p={worst.p_value:.3g})",
            err=True,
        )
        raise typer.Exit(1)


@app.command()
def report(
    run_ref: Annotated[str, typer.Argument(metavar="RUN", help="run folder, or run id under --results-dir")],
    out: Annotated[Optional[Path], typer.Option("--out", help="report folder [default: RUN/report]")] = None,
    figures: Annotated[bool, typer.Option("--figures/--no-figures", help="draw PNG figures (needs matplotlib)")] = True,
    results_dir: ResultsDir = None,
) -> None:
    """Write a self-contained report folder: report.md (tables, checks, environment) and figures."""
    run_dir = resolve_run(run_ref, results_dir or default_results_dir())
    path = write_report(load_run(run_dir), out or run_dir / "report", figures=figures)
    typer.echo(f"report: {path}")


class Variant(str, Enum):
    cpu = "cpu"
    cuda12 = "cuda12"


StacksOption = Annotated[
    Optional[str], typer.Option("--stacks", help="comma-separated stacks (default: all of jax, numpy, pytorch)")
]
VariantOption = Annotated[Variant, typer.Option(help="cpu, or cuda12 for --device gpu")]


@app.command()
def build(
    stacks: StacksOption = None,
    variant: VariantOption = Variant.cpu,
    base_image: Annotated[str, typer.Option("--base-image", help="image the stacks are built on")] = DEFAULT_BASE_IMAGE,
    wheelhouse: Annotated[
        Optional[Path],
        typer.Option(help="install only wheels from DIR, no index (air-gapped); default $HARNESS_WHEELHOUSE"),
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="do not echo the build output")] = False,
    verify: Annotated[
        bool, typer.Option("--verify", help="then print what each image was built for (CUDA, cuDNN, GPU kernels)")
    ] = False,
) -> None:
    """Build the stack images (tags name stack, variant and lock hash; an unchanged lock is reused)."""
    done = build_images(
        parse_stacks(stacks), variant.value, base_image, wheelhouse or default_wheelhouse(), echo=not quiet
    )
    if verify:
        from harness.image_probe import verify_images

        verify_images(done)


@app.command()
def wheelhouse(
    folder: Annotated[Path, typer.Argument(metavar="DIR", help="folder to fill with wheels")],
    stacks: StacksOption = None,
    variant: VariantOption = Variant.cpu,
    find_links: Annotated[
        list[Path], typer.Option("--find-links", help="also look for wheels in this folder; repeatable")
    ] = [],  # noqa: B006
) -> None:
    """Download every wheel the stacks' locks pin into DIR, for `harness build --wheelhouse DIR` offline."""
    fill_images_wheelhouse(folder, parse_stacks(stacks), variant.value, find_links)


@app.command()
def describe(suite: Annotated[str, typer.Argument(help="suite name")]) -> None:
    """Parameters and checks of one suite."""
    spec = get_suite(suite)
    typer.echo(f"{spec.name}: {spec.description}")
    for check in spec.checks:
        typer.echo(f"  check {check.name}: {check.help}")


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    try:
        code = app(args=args, prog_name="harness", standalone_mode=False)
    except HarnessError as error:
        typer.echo(f"error: {plain(error)}", err=True)
        sys.exit(2)
    except TyperException as error:
        # Usage errors (unknown option, bad choice, missing argument) in the same one-line form.
        commands = typer.main.get_command(app).commands  # type: ignore[attr-defined]
        command = next((a for a in args if a in commands), None)
        message = error.format_message() if hasattr(error, "format_message") else str(error)
        if not message.strip():  # no arguments at all: the help was shown, which is the answer
            sys.exit(0)
        hint = f"harness {command} --help" if command else "harness --help"
        typer.echo(f"error: {message} (see `{hint}`)", err=True)
        sys.exit(2)
    except (typer.Abort, KeyboardInterrupt):
        typer.echo("aborted", err=True)
        sys.exit(INTERRUPTED_EXIT)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
