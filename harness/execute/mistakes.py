"""`harness selftest --mistakes`: classic benchmarking mistakes planted in a hidden suite
(suites/mistakes), each run through the real plan, backend, job runtime and assessment, and the
guard that must catch it named beside what was raised.

A mistake is caught when its guard is raised against the framework that made it, the honest
framework beside it raises nothing (no blame moved onto it), and the run does not pass (its exit
status is what a user's script would see). One honest run of every framework first is the control:
a guard that fires on honest code would make every catch below worthless.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from harness.backends.base import BackendOptions, make_backend
from harness.core.errors import HarnessError
from harness.execute.runner import execute
from harness.execute.selftest import installed
from harness.judge import guards
from harness.judge.assessment import Assessment, assess, run_exit_code
from harness.store.plan import PlanRequest, frameworks_for, get_suite, make_plan
from harness.store.run_folder import load_run, prepare_results_dir
from suites.contract.settings import usable_cores

SUITE = "mistakes"
FINISHED = "finished"  # raised when the culprit's job did not finish at all: no guard needed


def guard_names() -> dict[str, str]:
    """What each guard is called in the table, and what it raises in a run's report: every registered
    guard (judge/guards/), then the job that did not finish."""
    return {**{g.name: g.catches for g in guards.registered()}, FINISHED: "the job did not finish"}


@dataclass(frozen=True)
class Mistake:
    name: str  # the suite's `mistake` parameter
    what: str  # the mistake, as a user would recognise it
    culprit: str  # the framework that makes it
    honest: str  # the framework beside it, honest: the baseline and the reference of the checks
    guard: str  # the guard that must catch it (`Guard.name`)
    devices: tuple[str, ...] = ("cpu", "gpu")
    threads: int | None = None  # the run's --threads
    params: tuple[str, ...] = ()  # more of the suite's parameters, key=value
    cores: int = 1  # usable cores the mistake needs to show at all


CONTROL = Mistake("none", "none: every framework honest (the control)", "none", "numpy", "")


def planted_corpus() -> tuple[Mistake, ...]:
    """Every guard's planted rows (`Guard.planted`), in the registry's order: a new guard brings its own."""
    return tuple(
        Mistake(p.name, p.what, p.culprit, p.honest, g.name, p.devices, p.threads, p.params, p.cores)
        for g in guards.registered()
        for p in g.planted
    )


@dataclass(frozen=True)
class Limitation:
    """A mistake of the list no guard catches yet: a row of the table, never planted, never caught."""

    what: str
    why: str


LIMITATIONS = (
    Limitation("a warm-up only one framework got (extra untimed calls before measuring)",
               "the steady samples are what they are; only the first call would differ, and nothing compares "
               "it with an expectation"),
    Limitation("work left outside the clock (the host-to-device copy or the optimiser step before the timed call)",
               "no guard sees work that was never timed; the checks catch it only where it changes the outputs"),
    Limitation("an evaluation on the training set",
               "training and test accuracy lie close together on the suites' data, often inside the agreement "
               "band float32 drift needs"),
    Limitation("bf16 or TF32 under an fp32 request",
               "the precision probe's guard, on a GPU only: a CPU has no TF32 and runs float32 as float32"),
)  # fmt: skip


@dataclass(frozen=True)
class Outcome:
    mistake: Mistake
    raised: tuple[str, ...]  # guards raised against the culprit
    honest_raised: tuple[str, ...]  # guards raised against the honest framework (must be none)
    exit_code: int
    run_id: str
    ran: bool = True
    why: str = ""  # not run: why

    @property
    def caught(self) -> bool | None:
        """None: not run here; for the control, True when nothing was raised at all."""
        if not self.ran:
            return None
        if self.mistake is CONTROL:
            return not self.raised and not self.honest_raised and self.exit_code in (0, 3)
        return self.mistake.guard in self.raised and not self.honest_raised and self.exit_code not in (0, 3)


def raised(judged: Assessment, framework: str) -> tuple[str, ...]:
    """The guards a run raised against one framework, in the registry's order."""
    result = judged.run.results.get(framework)
    if result is None or result["status"] != "ok":
        return (FINISHED,)
    # A disturbance guard is raised by the machine, never by a planted mistake: a busy machine must
    # not turn the control into a false alarm (its exit 3 is accepted below).
    return tuple(g.name for g in judged.guards_raised(framework) if not g.disturbance)


def corpus(device: str, only: list[str] | None = None) -> list[Mistake]:
    """The mistakes that apply on this device, or those named (an unknown name is one line)."""
    planted = planted_corpus()
    known = sorted({m.name for m in planted})
    for name in only or []:
        if name not in known:
            raise HarnessError(f"no planted mistake {name!r}; the corpus has {', '.join(known)}")
    return [m for m in planted if device in m.devices and (only is None or m.name in only)]


def _run_one(mistake: Mistake, frameworks: list[str], device: str, results_dir: Path) -> tuple[Assessment, str]:
    plan = make_plan(
        PlanRequest(
            suite=SUITE,
            frameworks=",".join(frameworks),
            device=device,
            params=(f"mistake={mistake.name}", f"culprit={mistake.culprit}", *mistake.params),
            baseline=frameworks[0],
            threads=mistake.threads,
        ),
        backend="local",
    )
    run_dir = execute(plan, make_backend("local", BackendOptions(echo=False)), results_dir,
                      argv=["harness", "selftest", "--mistakes"])  # fmt: skip
    return assess(load_run(run_dir)), run_dir.name


def run_mistakes(
    *, device: str, results_dir: Path, only: list[str] | None = None, echo: Callable[[str], None] = print
) -> list[Outcome]:
    """The control, then every mistake; one line each as it ends."""
    chosen = corpus(device, only)  # an unknown name stops here, before any folder is made
    prepare_results_dir(results_dir)
    outcomes: list[Outcome] = []
    have = frameworks_for(device, [fw for fw in get_suite(SUITE).frameworks if installed(fw)])
    for mistake in (CONTROL, *chosen):
        frameworks = have if mistake is CONTROL else [mistake.honest, mistake.culprit]
        missing = [fw for fw in frameworks if fw not in have]
        cores = usable_cores() or 1
        if missing or len(frameworks) < 2 or cores < mistake.cores:
            why = f"{', '.join(missing) or 'a second framework'} not installed here (or no {device} variant)"
            if not missing and len(frameworks) >= 2:
                why = f"it needs {mistake.cores} usable cores to show; this process has {cores}"
            outcomes.append(Outcome(mistake, (), (), 0, "", ran=False, why=why))
            echo(line(outcomes[-1]))
            continue
        judged, run_id = _run_one(mistake, frameworks, device, results_dir)
        if mistake is CONTROL:
            everyone = tuple(g for fw in frameworks for g in raised(judged, fw))
            outcome = Outcome(mistake, everyone, (), run_exit_code(judged), run_id)
        else:
            outcome = Outcome(mistake, raised(judged, mistake.culprit), raised(judged, mistake.honest),
                              run_exit_code(judged), run_id)  # fmt: skip
        outcomes.append(outcome)
        echo(line(outcome))
        if judged.interrupted:
            raise KeyboardInterrupt
    return outcomes


def line(o: Outcome) -> str:
    mark = {True: "CAUGHT", False: "MISSED", None: "n/a   "}[o.caught]
    if o.mistake is CONTROL:
        mark = {True: "QUIET ", False: "FALSE ", None: "n/a   "}[o.caught]
    who = "all" if o.mistake is CONTROL else o.mistake.culprit
    if not o.ran:
        return f"{mark}  {o.mistake.name:<15} {who:<8} {o.why}"
    got = ", ".join(o.raised) or "nothing"
    extra = f"; against the honest {o.mistake.honest}: {', '.join(o.honest_raised)}" if o.honest_raised else ""
    wanted = f"must raise {o.mistake.guard}" if o.mistake.guard else "must raise nothing"
    return f"{mark}  {o.mistake.name:<15} {who:<8} {wanted}; raised {got}{extra} (exit {o.exit_code}, run {o.run_id})"


def table(outcomes: list[Outcome]) -> Iterator[str]:
    """The corpus as a markdown table (docs/measurements.md holds this machine's)."""
    yield "| mistake | framework | guard that must catch it | raised | caught |"
    yield "| --- | --- | --- | --- | --- |"
    for o in outcomes:
        guard = guard_names().get(o.mistake.guard, "none (the control)")
        got = ", ".join(o.raised) or "nothing" if o.ran else f"not run: {o.why}"
        verdict = {True: "yes", False: "**no**", None: "n/a"}[o.caught]
        who = "all" if o.mistake is CONTROL else o.mistake.culprit
        yield f"| {o.mistake.what} | {who} | {guard} | {got} | {verdict} |"


def limitation_rows() -> Iterator[str]:
    """The mistakes no guard catches yet, as rows of the same table (docs/method.md says why)."""
    for limit in LIMITATIONS:
        yield f"| {limit.what} | - | none yet | not planted | limitation: {limit.why} |"
