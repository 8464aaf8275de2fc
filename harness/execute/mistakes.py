"""`harness selftest --mistakes`: classic benchmarking mistakes planted in a hidden suite
(suites/mistakes), each run through the real plan, backend, job runtime and assessment, and the
guard that must catch it named beside what was raised.

A mistake is caught when its guard is raised against the framework that made it, the honest
framework beside it raises nothing (no blame moved onto it), and the run does not pass (its exit
status is what a user's script would see). One honest run of every framework first is the control:
a guard that fires on honest code would make every catch below worthless.

A guard that reads a timing (`Guard.timing`) and stayed silent while most of the culprit's samples
were disturbed (the CONTENDED rule) is UNDECIDED, not MISSED: the machine, not the guard, may have
hidden the mistake, and the corpus exits 3 (rerun on a quiet machine) as `harness run` does. MISSED
(exit 1) is kept for a machine quiet enough to tell. The mistakes themselves are planted to be caught
whatever the machine's speed (suites/mistakes/common.py), so a busy machine seldom leaves one undecided.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from harness.backends.base import BackendOptions, make_backend
from harness.core.errors import HarnessError
from harness.execute.runner import execute
from harness.execute.selftest import installed
from harness.judge import guards
from harness.judge.assessment import DISTURBED, FAILED, Assessment, assess, run_exit_code
from harness.judge.guards.contention import mostly_disturbed
from harness.store.calibration import gpu_names
from harness.store.peaks import machine_limits
from harness.store.plan import PlanRequest, frameworks_for, get_suite, make_plan
from harness.store.run_folder import load_run, prepare_results_dir
from harness.text.escape import plain
from suites.contract import machine
from suites.contract.settings import usable_cores

SUITE = "mistakes"
FINISHED = "finished"  # raised when the culprit's job did not finish at all: no guard needed


def guard_names() -> dict[str, str]:
    """What each guard is called in the table, and what it raises in a run's report: every registered
    guard (judge/guards/), then the job that did not finish."""
    return {**{g.name: g.catches for g in guards.registered()}, FINISHED: "the job did not finish"}


@dataclass(frozen=True)
class Mistake(guards.Planted):
    guard: str = ""  # the guard that must catch it (`Guard.name`); the control's: none


CONTROL = Mistake("none", "none: every framework honest (the control)", "none", "numpy")


def planted_corpus() -> tuple[Mistake, ...]:
    """Every guard's planted rows (`Guard.planted`), in the registry's order: a new guard brings its own."""
    return tuple(
        Mistake(p.name, p.what, p.culprit, p.honest, p.devices, p.threads, p.params, p.cores, g.name)
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
    # Not caught, and the machine may have hidden it: why (the culprit's disturbed samples); "" if quiet.
    undecided: str = ""

    @property
    def caught(self) -> bool | None:
        """None: not run here; for the control, True when nothing was raised at all."""
        if not self.ran:
            return None
        if self.mistake is CONTROL:
            return not self.raised and not self.honest_raised and self.exit_code in (0, 3)
        return self.mistake.guard in self.raised and not self.honest_raised and self.exit_code not in (0, 3)

    @property
    def missed(self) -> bool:
        """Not caught on a machine quiet enough to tell: the guard (or the plant) is broken."""
        return self.caught is False and not self.undecided

    @property
    def mark(self) -> str:
        if self.mistake is CONTROL:
            return {True: "QUIET", False: "FALSE", None: "n/a"}[self.caught]
        return "UNDECIDED" if self.undecided else {True: "CAUGHT", False: "MISSED", None: "n/a"}[self.caught]


def raised(judged: Assessment, framework: str) -> tuple[str, ...]:
    """The guards a run raised against one framework, in the registry's order."""
    result = judged.run.results.get(framework)
    if result is None or result["status"] != "ok":
        return (FINISHED,)
    # A disturbance guard is raised by the machine, never by a planted mistake: a busy machine must
    # not turn the control into a false alarm (its exit 3 is accepted below).
    return tuple(g.name for g in judged.guards_raised(framework) if not g.disturbance)


def machine_hid(judged: Assessment, mistake: Mistake) -> str:
    """Why this machine could not tell whether the mistake's guard works ("" when it could): the guard
    reads a timing and most samples of one of the culprit's time metrics were disturbed."""
    guard = guards.by_name(mistake.guard)
    if guard is None or not guard.timing:
        return ""  # a product or a compilation count: no load hides it
    seen = [
        f"{k} of {n} samples of {plain(name)} contended or throttled"
        for (fw, name), (k, n) in judged.contention.items()
        if fw == mistake.culprit and mostly_disturbed(k, n)
    ]
    return "machine disturbed: " + "; ".join(seen) if seen else ""


def outcome(mistake: Mistake, frameworks: list[str], judged: Assessment, run_id: str) -> Outcome:
    """What one run of the corpus shows: the guards raised, against whom, and whether the machine could tell."""
    code = run_exit_code(judged)
    if mistake is CONTROL:
        return Outcome(mistake, tuple(g for fw in frameworks for g in raised(judged, fw)), (), code, run_id)
    culprit = judged.run.results.get(mistake.culprit)
    if culprit is not None and culprit["status"] == "skipped":  # the plant does not apply here: said why
        why = plain(str(culprit.get("reason") or "skipped"))[:200]
        return Outcome(mistake, (), (), code, run_id, ran=False, why=why)
    found = Outcome(mistake, raised(judged, mistake.culprit), raised(judged, mistake.honest), code, run_id)
    if found.caught is False and not found.honest_raised:
        # Blame on the honest framework is never the machine's doing: only a silent guard may be undecided.
        return replace(found, undecided=machine_hid(judged, mistake))
    return found


def float64_limit(device: str) -> float:
    """The most this machine's device can do in float64, FLOP/s (the generous bound every cached
    figure is held to: all its cores, its fastest variant), which the inflated_flops plant claims a
    multiple of; 0.0 where no peak is known (that plant is then skipped, saying so)."""
    limits = machine_limits(device, machine.describe()["cpu"], gpu_names() if device == "gpu" else [])
    return limits["float64/fp64"][0] if "float64/fp64" in limits else 0.0


def corpus(device: str, only: list[str] | None = None) -> list[Mistake]:
    """The mistakes that apply on this device, or those named (an unknown name is one line)."""
    planted = planted_corpus()
    known = sorted({m.name for m in planted})
    for name in only or []:
        if name not in known:
            raise HarnessError(f"no planted mistake {name!r}; the corpus has {', '.join(known)}")
    return [m for m in planted if device in m.devices and (only is None or m.name in only)]


def _run_one(
    mistake: Mistake, frameworks: list[str], device: str, results_dir: Path, limit: float
) -> tuple[Assessment, str]:
    plan = make_plan(
        PlanRequest(
            suite=SUITE,
            frameworks=",".join(frameworks),
            device=device,
            params=(f"mistake={mistake.name}", f"culprit={mistake.culprit}", f"limit={limit!r}", *mistake.params),
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
    limit = float64_limit(device)
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
        judged, run_id = _run_one(mistake, frameworks, device, results_dir, limit)
        outcomes.append(outcome(mistake, frameworks, judged, run_id))
        echo(line(outcomes[-1]))
        if judged.interrupted:
            raise KeyboardInterrupt
    return outcomes


def line(o: Outcome) -> str:
    who = "all" if o.mistake is CONTROL else o.mistake.culprit
    head = f"{o.mark:<6}  {o.mistake.name:<15} {who:<8}"
    if not o.ran:
        return f"{head} {o.why}"
    got = ", ".join(o.raised) or "nothing"
    extra = f"; against the honest {o.mistake.honest}: {', '.join(o.honest_raised)}" if o.honest_raised else ""
    wanted = f"must raise {o.mistake.guard}" if o.mistake.guard else "must raise nothing"
    why = f" ({o.undecided}; rerun on a quiet machine)" if o.undecided else ""
    return f"{head} {wanted}; raised {got}{extra}{why} (exit {o.exit_code}, run {o.run_id})"


def exit_status(outcomes: list[Outcome]) -> int:
    """1 when a row was missed on a machine quiet enough to tell, or nothing was caught at all; else 3
    when the machine left a row undecided; else 0."""
    if any(o.missed for o in outcomes) or not any(o.caught for o in outcomes):
        return FAILED
    return DISTURBED if any(o.undecided for o in outcomes) else 0


def summary(outcomes: list[Outcome], limitations: bool) -> str:
    """The closing line; `limitations`: the whole corpus ran, so its documented limitations are counted."""
    caught = sum(o.caught is True for o in outcomes)
    missed = sum(o.missed for o in outcomes)
    undecided = sum(bool(o.undecided) for o in outcomes)
    skipped = sum(o.caught is None for o in outcomes)
    limits = f", {len(LIMITATIONS)} documented limitations (not planted)" if limitations else ""
    return (
        f"mistakes: {caught} caught (the control included), {missed} missed, {undecided} undecided (the machine "
        f"disturbed them: rerun on a quiet machine), {skipped} not run here{limits}"
    )


def table(outcomes: list[Outcome]) -> Iterator[str]:
    """The corpus as a markdown table (docs/measurements.md holds this machine's)."""
    yield "| mistake | framework | guard that must catch it | raised | caught |"
    yield "| --- | --- | --- | --- | --- |"
    for o in outcomes:
        guard = guard_names().get(o.mistake.guard, "none (the control)")
        got = ", ".join(o.raised) or "nothing" if o.ran else f"not run: {o.why}"
        verdict = f"undecided: {o.undecided}" if o.undecided else {True: "yes", False: "**no**", None: "n/a"}[o.caught]
        who = "all" if o.mistake is CONTROL else o.mistake.culprit
        yield f"| {o.mistake.what} | {who} | {guard} | {got} | {verdict} |"


def limitation_rows() -> Iterator[str]:
    """The mistakes no guard catches yet, as rows of the same table (docs/method.md says why)."""
    for limit in LIMITATIONS:
        yield f"| {limit.what} | - | none yet | not planted | limitation: {limit.why} |"
