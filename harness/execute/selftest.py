"""`harness selftest`: every suite at its smoke size on one device, and what only that device shows.

Runs through the local backend with the frameworks this interpreter has (the GPU machines have
CUDA builds installed, no Docker), then checks each result and prints one line per check:

- the job finished (a framework this interpreter lacks is left out and said so, never failed);
- sync: no timed metric left work running after its clock stopped (runtime/syncguard.py);
- precision: the probe measured the arithmetic that was asked for (fp32 unless `--precision`);
- plausible: no FLOP/s or GB/s above the device's peak (plausibility.py, via assessment.py);
- achievable: FLOP/s shown as a share of what `harness calibrate` measured on this machine for the
  metric's dtype and measured arithmetic (a share above 100 % is flagged, not failed);
- memory (training suites): the allocator's peak above the baseline taken just before training was
  recorded (a peak the job could not tell apart from an earlier one fails, with its reason);
- steady (training suites): compilations were observable, none after epoch 1, and the data held
  on the device (a counter that cannot see compilations fails: its 0 would mean nothing).

Exit status 1 when any check fails; else 3 when the machine disturbed most samples of a suite's run
(a `BUSY` line, the rule `harness run` exits 3 by: rerun on a quiet machine); else 0.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

from harness.backends.base import BackendOptions, make_backend
from harness.core.result_types import Result
from harness.execute.runner import calibrate, execute
from harness.judge.assessment import Assessment, assess
from harness.store.calibration import attach
from harness.store.plan import PlanRequest, frameworks_for, get_suite, make_plan, visible_suites
from harness.store.run_folder import load_run, prepare_results_dir
from harness.text.escape import plain
from suites.contract.frameworks import FRAMEWORKS

TRAINING_SUITES = ("mlp", "mnist", "cifar10", "resnet18", "gpt")
# The training metric the memory check looks for (suites/runtime/training.py writes it).
PEAK_MEMORY = "peak memory above baseline"
MAX_WHY = 200  # characters of a file's reason on one line of the selftest


@dataclass(frozen=True)
class Check:
    suite: str
    framework: str
    name: str
    passed: bool | None  # None: not applicable here (the line says why)
    detail: str
    disturbed: bool = False  # measured, but the machine disturbed it: neither passed nor failed (exit 3)

    def line(self) -> str:
        mark = "BUSY" if self.disturbed else {True: "PASS", False: "FAIL", None: "n/a "}[self.passed]
        return f"{mark}  {self.suite:<9} {self.framework:<8} {self.name:<11} {self.detail}"


def installed(framework: str) -> bool:
    """Whether this interpreter can import the framework (found, not imported: the host never does)."""
    return all(importlib.util.find_spec(module) is not None for module in FRAMEWORKS[framework].modules)


def check_result(suite: str, fw: str, result: Result, judged: Assessment) -> Iterator[Check]:
    """The checks of one job's result; `judged`: its run's assessment (the lints need the whole run)."""
    check = partial(Check, suite, fw)
    if result["status"] != "ok":
        skipped = result["status"] == "skipped"
        yield check("finished", None if skipped else False, f"{result['status']}: {result.get('reason') or ''}")
        return
    yield check("finished", True, f"{len(result['metrics'])} metrics")
    if judged.crowded:
        # Not a failure of the code: the run's numbers measured the neighbours (exit 3, as `run`).
        yield check("quiet", None, judged.crowded, disturbed=True)
    times = [m for m in result["metrics"] if m["kind"] == "time"]
    states = {m["name"]: judged.sync(fw, m["name"]) for m in times}
    bad = [name for name, state in states.items() if state == "escaped"]
    unchecked = [name for name, state in states.items() if state == "unchecked"]
    if bad:
        yield check("sync", False, f"escaped: {', '.join(bad)}")
    elif unchecked:
        yield check("sync", False, f"no barrier evidence for {', '.join(unchecked)}")
    else:
        yield check("sync", True, f"{len(times)} timed metrics, every barrier idle after the clock")
    wanted = result["settings"].get("precision") or "fp32"
    got = judged.precision(fw)
    if not got:
        yield check("precision", False, "no precision probe in the result")
    else:
        text = ", ".join(f"{op} {c}" for op, c in got.items())
        yield check("precision", all(c == wanted for c in got.values()), f"asked {wanted}, measured {text}")
    findings = [f for f in judged.findings if f.framework == fw]
    implausible = [f.metric for f in findings if not f.plausible]
    said = f"above the peak: {', '.join(implausible)}" if implausible else f"{len(findings)} rates below the peak"
    yield check("plausible", not implausible if findings else None, said)
    shares = [f for f in findings if f.quantity == "flops" and f.plausible]
    if shares:
        # Above 100 % passes (the datasheet peak is the hard limit) but is flagged, never plain.
        missing = [f"{f.metric}: {f.achievable_text or 'no calibration'}" for f in shares if f.achievable is None]
        shown = "; ".join(f"{f.metric} {f.achievable_text}" for f in shares if f.achievable is not None)
        yield check("achievable", not missing, "; ".join(missing) if missing else shown)
    if suite in TRAINING_SUITES:
        yield from _training_checks(result, check)


def _why(entry: dict[str, Any]) -> str:
    """The `why` of a training.memory or .compilations entry, from a file: one short inert line."""
    why = entry.get("why")
    text = plain(why) if isinstance(why, str) else "no reason given"
    return text if len(text) <= MAX_WHY else text[: MAX_WHY - 3] + "..."


def _training_checks(result: Result, check: Callable[[str, bool | None, str], Check]) -> Iterator[Check]:
    """memory: the peak above the baseline was observed and recorded; steady: compilations were
    observable, none after epoch 1, and the data held on the device."""
    metrics = {m["name"]: m for m in result["metrics"]}
    training = result.get("training") or {}
    memory = training.get("memory")
    if isinstance(memory, dict) and memory.get("peak") == "not observable":
        # JAX cannot reset its allocator's peak: on a GPU this is the number a reader came for.
        yield check("memory", False, f"peak not observable: {_why(memory)}")
    else:
        peak = metrics.get(PEAK_MEMORY)
        yield check("memory", peak is not None, "peak recorded" if peak else f"no {PEAK_MEMORY} metric")
    compilations = training.get("compilations")
    data = training.get("data")
    if isinstance(compilations, dict) and compilations.get("observable") is False:
        # A counter that sees nothing would read 0 after epoch 1: refused, not passed.
        yield check("steady", False, f"compilations not observable: {_why(compilations)}, data on {data}")
        return
    later = metrics.get("compilations (later epochs)")
    steady = later is not None and max(later["samples"]) == 0 and data in (None, "device")
    yield check("steady", steady, f"compilations after epoch 1: {later and later['samples']}, data on {data}")


def run_selftest(
    *,
    device: str,
    results_dir: Path,
    suites: list[str] | None = None,
    precision: str = "fp32",
    echo: Callable[[str], None] = print,
    calibrate_first: bool = True,
    request: PlanRequest | None = None,
) -> list[Check]:
    """Run the suites, print and return every check.

    `precision` applies to the suites with a precision axis (the training suites); the others run
    their declared arithmetic and are checked against fp32. `request`: the plan's options the command
    line gave (cli/options.py: threads, timeout, cache, profile ...), each suite's plan made from
    it at the smoke size; its device and precision are then the ones that count."""
    if request is not None:
        device, precision = request.device, request.precision
    prepare_results_dir(results_dir)
    backend = make_backend("local", BackendOptions(echo=False))
    names = suites or list(visible_suites())
    checks: list[Check] = []
    # Installed here, and able to compute on the device (numpy has no GPU variant: not run there).
    have = frameworks_for(device, [fw for fw in FRAMEWORKS if installed(fw)])
    threads = None if request is None else request.threads
    ceilings = calibrate(have, device=device, threads=threads, cpus=None, backend=backend) if calibrate_first else None
    for suite in names:
        spec = get_suite(suite)
        chosen = [fw for fw in spec.frameworks if fw in have]
        for fw in spec.frameworks:
            if fw not in chosen:
                why = "not installed in this interpreter" if not installed(fw) else f"no {device} variant"
                checks.append(Check(suite, fw, "finished", None, why))
        if not chosen:
            continue
        asked = PlanRequest(suite="", device=device) if request is None else request
        plan = make_plan(
            replace(
                asked,
                suite=suite,
                frameworks=",".join(chosen),
                smoke=True,
                precision=precision if spec.precision_axis else "fp32",
            ),
            backend="local",
        )
        echo(f"-- {suite}: {', '.join(chosen)} on {device}")
        run_dir = execute(plan, backend, results_dir, argv=["harness", "selftest"])
        attach(run_dir, ceilings)
        run = load_run(run_dir)
        if run.summary.get("interrupted"):
            # Ctrl-C (or SIGTERM, or a session's time limit) stops the whole selftest, not one suite's
            # run: the suites after it were not asked for any more. What finished is printed and kept.
            for c in checks:
                echo(c.line())
            echo(f"interrupted during {suite}: selftest stopped; its runs are kept in {plain(results_dir)}")
            raise KeyboardInterrupt
        judged = assess(run)
        for fw in chosen:
            result = run.results.get(fw)
            if result is None:
                checks.append(Check(suite, fw, "finished", False, "no valid result file"))
                continue
            checks.extend(check_result(suite, fw, result, judged))
    for c in checks:
        echo(c.line())
    return checks
