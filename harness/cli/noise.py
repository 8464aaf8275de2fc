"""`harness noise`: measure (or read from a rounds run) this machine's between-process noise floor."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Annotated, Optional

import typer

from harness.backends.base import make_backend, resolve_backend
from harness.cli.options import (
    BackendName,
    BackendOption,
    BudgetOption,
    Device,
    DeviceOption,
    Precision,
    PrecisionOption,
    Processes,
    ProcessesOption,
    Quiet,
    ResultsDir,
    ThreadsOption,
    backend_options,
    default_data_dir,
    default_results_dir,
)
from harness.core.errors import HarnessError
from harness.execute.budget import RoundClock, refuse_short
from harness.execute.rounds import MAX_ROUNDS, execute_rounds
from harness.judge import noise_floor, sequential
from harness.judge.assessment import DISTURBED, INTERRUPTED
from harness.judge.noise_floor import MIN_ROUNDS, detectable, left_out, store
from harness.store.plan import PlanRequest, make_plan, new_run_id
from harness.store.run_folder import Run, load_run, resolve_run
from harness.text.escape import plain
from harness.text.numbers import fmt_share

DEFAULT_ROUNDS = 6
DEFAULT_SESSIONS = 3
SHOWN_ROUNDS = (4, 5, 6, 8)


def noise(
    run_refs: Annotated[
        Optional[list[str]],
        typer.Argument(
            metavar="[RUN]...", help="finished runs of one workload with --rounds 3+ to read the floor from"
        ),
    ] = None,
    suite: Annotated[
        Optional[str], typer.Option("--suite", "-s", help="measure: the suite to run A/A rounds of")
    ] = None,
    frameworks: Annotated[Optional[str], typer.Option("--frameworks", "-f", help="comma-separated")] = None,
    param: Annotated[list[str], typer.Option("--param", "-p", help="suite parameter key=value; repeatable")] = [],  # noqa: B006
    repeat: Annotated[Optional[int], typer.Option(help="timed calls per metric [default: suite's]")] = None,
    rounds: Annotated[
        Optional[int],
        typer.Option(
            help=f"A/A rounds a session: processes of the same code, interleaved [default: {DEFAULT_ROUNDS}; with "
            "--budget: as many as it buys]"
        ),
    ] = None,
    budget: BudgetOption = None,
    sessions: Annotated[
        int, typer.Option(help="separate runs of those rounds: how far whole runs drift apart (2 or more)")
    ] = DEFAULT_SESSIONS,
    device: DeviceOption = Device("cpu"),
    backend: BackendOption = BackendName("auto"),
    threads: ThreadsOption = None,
    precision: PrecisionOption = Precision("fp32"),
    results_dir: ResultsDir = None,
    quiet: Quiet = False,
    processes: ProcessesOption = Processes.fresh,
) -> None:
    """How much each metric moves between two processes, and between two runs, of the same code on this
    machine (A/A experiments), stored per machine and workload: `compare` and `run --detect` read it."""
    base = results_dir or default_results_dir()
    if bool(run_refs) == (suite is not None):
        raise HarnessError("give either RUN... (finished runs with --rounds 3 or more) or --suite S to measure")
    if run_refs:
        loaded = [load_run(resolve_run(ref, base)) for ref in run_refs]
        seconds = sum(r["duration_s"] or 0.0 for run in loaded for r in run.results.values())
        _report(loaded, seconds, min(_rounds_of(run) for run in loaded))
        return
    budget_s = None if budget is None else sequential.parse_budget(budget)
    most = MAX_ROUNDS if budget_s is None else sequential.MAX_ROUNDS  # with a budget, time is the cap
    if rounds is not None and not MIN_ROUNDS <= rounds <= most:
        raise HarnessError(
            f"--rounds {rounds}: a noise floor needs {MIN_ROUNDS} to {most} rounds (default {DEFAULT_ROUNDS})"
        )
    if not 1 <= sessions <= 20:
        raise HarnessError(f"--sessions {sessions} must be 1 to 20 (default {DEFAULT_SESSIONS}; 1 measures no drift)")
    if rounds is None:
        rounds = DEFAULT_ROUNDS if budget_s is None else most
    name = resolve_backend(backend.value, pythons={}, gpus=None, device=device.value)
    plan = make_plan(
        PlanRequest(
            suite=suite or "",
            frameworks=frameworks,
            params=tuple(param),
            repeat=repeat,
            device=device.value,
            threads=threads,
            data_dir=str(default_data_dir().resolve()),
            precision=precision.value,
        ),
        backend=name,
    )
    # Where the floor is stored, checked before minutes of sessions (a bad $HARNESS_CACHE_HOME is one
    # line now, not after every session has run), and a budget that cannot buy a floor's rounds.
    noise_floor.folder()
    if budget_s is not None:
        refuse_short(plan, budget_s / sessions, MIN_ROUNDS)
    chosen = make_backend(name, backend_options(quiet=quiet, processes=processes))
    began = time.perf_counter()
    runs = []
    for done in range(sessions):
        planned = replace(plan, run_id=new_run_id(plan.suite))
        # Each session gets an equal share of what is left of the budget (a session that ran over
        # its share, to reach MIN_ROUNDS, leaves less to the others).
        left = None if budget_s is None else budget_s - (time.perf_counter() - began)
        clock = None if left is None else RoundClock(max(left / (sessions - done), 1.0), least=MIN_ROUNDS)
        runs.append(load_run(execute_rounds(planned, chosen, base, rounds, argv=["harness", "noise"], stop=clock)))
        if clock is not None:
            typer.echo(f"session {done + 1}: {clock.line()}", err=True)
        if clock is not None and clock.short and not runs[-1].summary.get("interrupted"):
            # Its rounds are too few for a floor, and the next sessions' shares are no larger.
            raise HarnessError(
                f"no noise floor stored: --budget {budget_s:g}s over {sessions} session(s) cannot buy the "
                f"{MIN_ROUNDS} rounds each session needs (a round takes about {max(clock.rounds_s):.0f} s here); give "
                f"--budget {clock.fitting_budget_s() * sessions}s, fewer --sessions, or a smaller workload; the run "
                f"is kept: {plain(runs[-1].path)}"
            )
        if runs[-1].summary.get("interrupted"):
            # Ctrl-C (or SIGTERM) stops the whole measurement: a floor from cut-short sessions would be
            # stored as if it were whole, and the remaining sessions were not asked for any more.
            typer.echo(
                f"interrupted: no noise floor stored ({len(runs) - 1} of {sessions} session(s) finished; their "
                f"runs are kept: {', '.join(plain(r.path) for r in runs)})",
                err=True,
            )
            raise typer.Exit(INTERRUPTED)
    # With a budget the sessions may have bought different numbers of rounds: the floor is stored at
    # the fewest (its degrees of freedom are counted from them, never more than there were).
    _report(runs, time.perf_counter() - began, rounds if budget_s is None else min(_rounds_of(r) for r in runs))


def _rounds_of(loaded: Run) -> int:
    found = {r["settings"].get("rounds") or 1 for r in loaded.results.values() if r["status"] == "ok"}
    if not found or min(found) < MIN_ROUNDS:
        raise HarnessError(
            f"run {plain(loaded.summary.get('run_id'))} has {min(found, default=0)} round(s); a noise floor needs "
            f"{MIN_ROUNDS} or more: `harness run ... --rounds {DEFAULT_ROUNDS}`, or `harness noise --suite S`"
        )
    return min(found)


def _report(runs: list[Run], seconds: float, rounds: int) -> None:
    machine, entry = store(runs, rounds, seconds)
    typer.echo(
        f"noise floor of machine {machine} at {plain(entry['label'])} ({len(runs)} run(s) of {rounds} rounds: "
        f"{entry['run_id']}):"
    )
    metrics = sum(len(per) for per in entry["noise"].values())
    for fw, per in entry["noise"].items():
        for metric, sigma in per.items():
            found = {k: detectable(sigma, k, metrics) for k in SHOWN_ROUNDS}
            reach = [f"{k}: {fmt_share(share) if share is not None else 'none'}" for k, share in found.items()]
            session = (entry["sessions"].get(fw) or {}).get(metric)
            drift = f"; run to run {fmt_share(session)} more" if session is not None else ""
            typer.echo(
                f"  {plain(fw)} {plain(metric)}: {fmt_share(sigma)} between processes{drift}; smallest change a "
                f"compare of {metrics} rows detects at rounds " + ", ".join(reach)
            )
    if len(runs) < 2:
        typer.echo("  one run only: how far whole runs drift apart is not measured (`--sessions 3`)")
    disturbed = left_out(runs)
    if disturbed:
        # Stored from the rounds the machine left alone, as compare judges; but a script asked for a
        # floor measured on a quiet machine and must be able to tell it was not (exit DISTURBED).
        typer.echo(
            f"{disturbed} round(s) were contended or throttled and left out of the floor (as compare leaves them "
            "out); measure again on a quiet machine for a floor from every round",
            err=True,
        )
        raise typer.Exit(DISTURBED)
