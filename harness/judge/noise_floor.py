"""This machine's noise floor: how much a metric moves between two processes of the same code.

`harness noise` runs a suite in K interleaved rounds (an A/A experiment: every round is one
process of the same code) and stores, per (framework, metric), the standard deviation of the log of
the round medians: the between-process variation that decides which changes a verdict can see.
It lives in the cache home under the machine's fingerprint (harness/store/calibration.py's), keyed by
the workload it was measured at (suite, parameters, precision, device).

From it, `compare` says the smallest change its verdicts could detect at their rounds, and
`harness run --detect 3%` picks the rounds that reach 3 %. The detectable effect is found by
simulation of the test `compare` runs (exact two-sided Mann-Whitney on K round medians a side,
significant below alpha / family, Holm's strictest threshold): the smallest shift, in units of the
noise, that it detects in POWER of the simulated pairs. Normal noise in log space is assumed.
"""

from __future__ import annotations

import functools
import json
import math
import random
import statistics
from collections.abc import Mapping
from dataclasses import replace
from itertools import accumulate
from pathlib import Path
from statistics import NormalDist
from typing import Any, cast

from harness.core import cache_home, machine_id, workload
from harness.core.errors import Disturbed, HarnessError
from harness.core.result_types import Result
from harness.core.safe_files import write_bytes_atomic
from harness.core.statistics import ALPHA, smallest_exact_p, u_distribution
from harness.judge import assessment, sequential
from harness.judge.compare import ROUNDS, Change, Comparison
from harness.store.calibration import gpu_names, read_json_file
from harness.store.plan import Plan
from harness.store.run_folder import Run, partners
from harness.text.escape import plain
from harness.text.numbers import fmt_change, fmt_share
from suites.contract import machine

FORMAT, VERSION = "harness-noise", 1
POWER = 0.8
MIN_ROUNDS = 3  # a standard deviation from fewer processes is not an estimate
MAX_ROUNDS = 30  # --detect never asks for more (say so instead), unless a --budget caps the time instead
SIMULATED_ROUNDS = 30  # up to here the detectable shift is simulated; beyond, the normal approximation
SIMULATIONS = 600
MAX_FILE_BYTES = 2_000_000
# A floor estimated from fewer round medians than this, beyond one per run (its degrees of freedom),
# is too uncertain to excuse anything: one run of 6 rounds has 5, the default 3 x 6 has 15.
MIN_DEGREES = 5
# Bounds of a stored floor's values, so the arithmetic on them stays finite (exp of a huge noise
# overflows): a log standard deviation of 3 is a factor of 20 per deviation, beyond any machine.
MAX_NOISE, MAX_DEGREES, MAX_SECONDS = 3.0, 1_000_000, 1e7
# The largest change a floor may ever call drift. The widest A/A drift measured on the 2-core
# development machine was about 33 % (a process lands in a 13.5 ms or an 18 ms mode and stays:
# docs/method.md); a floor whose gate is wider than this is too wide to judge with, and a change
# beyond it is judged on the between-process evidence alone, with a line saying so: a 2x slowdown
# is never "within run-to-run noise".
MAX_HELD = 0.5


def folder() -> Path:
    return cache_home.folder("noise")


def file_for(fingerprint: str) -> Path:
    if not fingerprint.isalnum():
        raise HarnessError(f"machine fingerprint {plain(fingerprint)!r} is not a name")
    return folder() / f"{fingerprint}.json"


def key(suite: str, params: Mapping[str, Any], precision: str, device: str) -> str:
    """The workload a noise floor was measured at (no dataset: known only once a job has run)."""
    return workload.plan_key(suite, params, precision, device)


def key_of(result: Result) -> str:
    return key(result["suite"], result["params"], str(result["settings"].get("precision") or "fp32"), result["device"])


def _kept(result: Result, metric: str) -> list[float]:
    """The round medians of one metric that a verdict would use (assessment.kept_rounds: rounds the
    machine disturbed left out), all positive; [] when fewer than MIN_ROUNDS remain."""
    if result["status"] != "ok":
        return []
    match = [m for m in result["metrics"] if m["name"] == metric]
    kept = assessment.kept_rounds(result, match[0])[0] if match else []
    return kept if len(kept) >= MIN_ROUNDS and all(m > 0 for m in kept) else []


def between_processes(run: Run) -> dict[str, dict[str, float]]:
    """framework -> metric -> standard deviation of log(round median), from a run with rounds, over
    exactly the rounds `compare` judges with (a contended or throttled round is left out of both)."""
    found: dict[str, dict[str, float]] = {}
    for fw, result, metric in assessment.ok_metrics(run):
        if kept := _kept(result, metric["name"]):
            found.setdefault(fw, {})[metric["name"]] = statistics.stdev(math.log(m) for m in kept)
    return found


def left_out(runs: list[Run]) -> int:
    """Rounds of these runs left out of the floor because the machine disturbed them."""
    return sum(assessment.kept_rounds(r, m)[1] for run in runs for _, r, m in assessment.ok_metrics(run))


def _identity(result: Result) -> dict[str, Any]:
    """What must be equal, framework by framework, across the runs of one floor: the stack."""
    return {
        "stack": result.get("stack"),
        "backend": result.get("backend"),
        "versions": machine_id.field_at(result, "environment", "versions"),
        "image": machine_id.field_at(result, "image", "id"),
    }


def check_alike(runs: list[Run]) -> Result:
    """The first ok result of these runs, once every ok result is of one workload, measured on one
    machine, each framework on one stack; else a HarnessError naming the difference."""
    if not (ok := [(run, fw, r) for run in runs for fw, r in run.results.items() if r["status"] == "ok"]):
        raise HarnessError(f"run {plain(runs[0].summary.get('run_id'))} has no successful job to read noise from")
    first_run, first_fw, first = ok[0]
    stacks: dict[str, tuple[Run, Result]] = {}
    for run, fw, result in ok:
        where = f"run {plain(run.summary.get('run_id'))} ({plain(fw)}) and run {plain(first_run.summary.get('run_id'))}"
        differs = workload.differences(first, result)
        if key_of(first) != key_of(result) or differs:
            raise HarnessError(
                f"{where} ({plain(first_fw)}) measured different workloads ({plain('; '.join(differs))}); a noise floor is "
                "of one workload: give runs of one suite, parameters, precision and device"
            )
        if machines := machine_id.differences(first, result):
            raise HarnessError(
                f"{where} ({plain(first_fw)}) were measured on different machines ({plain('; '.join(machines))}); a "
                "noise floor is of one machine: give runs measured on one"
            )
        seen = stacks.setdefault(fw, (run, result))
        if _identity(seen[1]) != _identity(result):
            names = [k for k, v in _identity(result).items() if _identity(seen[1])[k] != v]
            raise HarnessError(
                f"run {plain(run.summary.get('run_id'))} and run {plain(seen[0].summary.get('run_id'))} ran {plain(fw)} "
                f"on different stacks ({', '.join(names)} differ); a noise floor is of one stack: give runs of one"
            )
    return first


def load(fingerprint: str) -> dict[str, Any]:
    """The machine's noise file, validated; {} when there is none (a broken one is an error)."""
    path = file_for(fingerprint)
    try:
        doc = read_json_file(path, MAX_FILE_BYTES)
    except ValueError as error:  # not JSON, NaN, nested too deep, a link, a FIFO, too large
        raise HarnessError(f"{plain(path)}: {plain(error)}; delete it and run `harness noise` again") from None
    if doc is None:
        return {}
    if problem := _problem(doc):
        raise HarnessError(f"{plain(path)}: {problem}; delete it and run `harness noise` again")
    return dict(doc["workloads"])


def _number(value: Any, limit: float = math.inf) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= limit


def _beyond(noise: Mapping[str, Mapping[str, float]]) -> str | None:
    """The first `framework metric` whose noise is beyond MAX_NOISE, or None."""
    return next((f"{fw} {metric}" for fw, per in noise.items() for metric, v in per.items() if v > MAX_NOISE), None)


def _problem(doc: Any) -> str | None:
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or doc.get("version") != VERSION:
        return f"not a {FORMAT} file of version {VERSION}"
    workloads = doc.get("workloads")
    if not isinstance(workloads, dict):
        return "workloads: expected an object"
    for name, entry in workloads.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("label"), str):
            return f"workloads[{plain(name)!r}]: expected an object with a label"
        if not (isinstance(entry.get("rounds"), int) and entry["rounds"] >= MIN_ROUNDS):
            return f"workloads[{plain(name)!r}].rounds: expected a count of {MIN_ROUNDS} or more"
        if not _number(entry.get("seconds_per_round"), MAX_SECONDS):
            return f"workloads[{plain(name)!r}].seconds_per_round: expected a number"
        for field in ("noise", "sessions", "degrees"):
            # sessions: absent before --sessions; degrees: absent before floors counted them
            found = entry.get(field, {} if field in ("sessions", "degrees") else None)
            limit = MAX_NOISE if field != "degrees" else MAX_DEGREES
            if not isinstance(found, dict) or not all(
                isinstance(per, dict) and all(isinstance(m, str) and _number(v, limit) for m, v in per.items())
                for per in found.values()
            ):
                return f"workloads[{plain(name)!r}].{field}: expected framework -> metric -> a number (at most {limit})"
    return None


def between_sessions(runs: list[Run], within: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """framework -> metric -> the run-to-run (session) standard deviation of log medians beyond what
    the process noise of each run's rounds explains; needs two runs or more."""
    found: dict[str, dict[str, float]] = {}
    for fw, per in within.items():
        for metric, process in per.items():
            kept = [k for run in runs if fw in run.results and (k := _kept(run.results[fw], metric))]
            if len(kept) >= 2:
                levels = [statistics.fmean(math.log(m) for m in k) for k in kept]
                extra = statistics.variance(levels) - process**2 / statistics.fmean(len(k) for k in kept)
                found.setdefault(fw, {})[metric] = math.sqrt(max(extra, 0.0))
    return found


def degrees(runs: list[Run]) -> dict[str, dict[str, int]]:
    """framework -> metric -> degrees of freedom of its pooled process noise: kept rounds - 1, summed."""
    found: dict[str, dict[str, int]] = {}
    for run in runs:
        for fw, result, metric in assessment.ok_metrics(run):
            if kept := _kept(result, metric["name"]):
                per = found.setdefault(fw, {})
                per[metric["name"]] = per.get(metric["name"], 0) + len(kept) - 1
    return found


def store(runs: list[Run], rounds: int, seconds: float) -> tuple[str, dict[str, Any]]:
    """Record the between-process (and, from two runs on, between-session) noise of these runs of one
    workload, under the fingerprint of the machine that measured them (from their own records);
    returns (that fingerprint, the entry). Runs of different workloads, machines or stacks are refused."""
    first = check_alike(runs)
    per_run = [between_processes(run) for run in runs]
    noise: dict[str, dict[str, float]] = {}
    for fw in {fw for found in per_run for fw in found}:
        for metric in {m for found in per_run for m in found.get(fw, {})}:
            values = [found[fw][metric] for found in per_run if metric in found.get(fw, {})]
            noise.setdefault(fw, {})[metric] = math.sqrt(statistics.fmean(v * v for v in values))  # pooled
    if not noise:
        raise Disturbed(
            f"run {plain(runs[0].summary.get('run_id'))} has no metric with {MIN_ROUNDS}+ round medians the machine "
            "left alone (contended or throttled rounds are left out); measure again on a quiet machine"
        )
    sessions = between_sessions(runs, noise) if len(runs) >= 2 else {}
    if wild := _beyond(noise) or _beyond(sessions):
        raise HarnessError(
            f"{plain(wild)}: the round medians spread by more than a factor of e^{MAX_NOISE:g} (one standard "
            "deviation): that is not the noise of one machine; check the runs with `harness show RUN`"
        )
    entry: dict[str, Any] = {
        "label": workload.label(first),
        "run_id": ", ".join(plain(run.summary.get("run_id")) for run in runs),
        "rounds": rounds,
        "sessions_measured": len(runs),
        "seconds_per_round": seconds / (rounds * len(runs)),
        "noise": noise,
        "sessions": sessions,
        "degrees": degrees(runs),
    }
    fingerprint = machine_id.fingerprint(first)
    with cache_home.locked(folder() / ".lock", "the noise floor"):
        workloads = load(fingerprint)
        workloads[key_of(first)] = entry
        doc = {"format": FORMAT, "version": VERSION, "fingerprint": fingerprint, "workloads": workloads}
        write_bytes_atomic(file_for(fingerprint), (json.dumps(doc, indent=2) + "\n").encode())
    return fingerprint, entry


def host_fingerprint(device: str, threads: int | None) -> str:
    """The machine fingerprint a job on this host records (harness/core/machine_id.py), for `--detect`,
    which plans before any job has run."""
    gpus = [{"name": name} for name in gpu_names()] if device == "gpu" else []
    record = {
        "device": device,
        "settings": {"threads": threads},
        "environment": {"machine": machine.describe(), "nvml": {"gpus": gpus}},
    }
    return machine_id.fingerprint(cast(Result, record))


def drift(entry: dict[str, Any], framework: str, metric: str) -> float | None:
    """The run-to-run noise a verdict must clear: the measured drift, but never less than the process
    noise. A few runs measure drift poorly: three A/A runs here measured none for a metric whose later
    runs sat 25 % apart (a run lands in a fast or a slow mode and stays there), so a run's level is
    taken to be at least as uncertain as one of its processes."""
    if (process := (entry["noise"].get(framework) or {}).get(metric)) is None:
        return None
    measured = (entry.get("sessions", {}).get(framework) or {}).get(metric)
    return max(float(process), float(measured or 0.0))


def reachable(sigma: float, family: int) -> float:
    """The smallest change (0.1 = 10 %) two separate runs reveal 80 % of the time when their levels
    drift by `sigma` (log): it must clear the gate by the drift's own 80 % quantile."""
    return math.exp(session_gate(sigma, family) + NormalDist().inv_cdf(POWER) * math.sqrt(2) * sigma) - 1


def session_gate(sigma: float, family: int) -> float:
    """How far apart (log ratio) two sessions' levels must be before a verdict may call it a change:
    the two-sided Bonferroni normal quantile for the family, times sqrt 2 (two sessions) x sigma."""
    z = NormalDist().inv_cdf(1 - ALPHA / (2 * max(family, 1)))
    return z * math.sqrt(2) * sigma


def _first_ok(run: Run) -> Result | None:
    return next((r for r in run.results.values() if r["status"] == "ok"), None)


def degrees_of(entry: dict[str, Any], framework: str, metric: str) -> int:
    """The floor's degrees of freedom for a metric; a floor stored before they were counted: its rounds
    less one per session (what it had when every round was kept)."""
    found = (entry.get("degrees", {}).get(framework) or {}).get(metric)
    if isinstance(found, int) and not isinstance(found, bool):
        return found
    return max(int(entry["rounds"]) - 1, 0) * int(entry.get("sessions_measured") or 1)


def apply(comparison: Comparison) -> Comparison:
    """The comparison with the noise floor of the machine that measured both runs brought in: a
    significant row whose change is within the run-to-run (session) noise becomes "not significant",
    and the footer says what the floor lets the verdicts see, that there is none, or why it was not
    used (runs of two machines; a floor too uncertain; a change beyond what any floor may call drift)."""
    first_a, first = _first_ok(comparison.a), _first_ok(comparison.b)
    if first is None or first_a is None:
        return comparison
    if machines := machine_id.differences(first_a, first):
        return replace(comparison, floor=comparison.floor + [
            f"runs A and B were measured on different machines ({plain('; '.join(machines))}): no machine's noise floor "
            "applies, so no verdict is held as run-to-run drift; each verdict says whether these processes differ, "
            "which includes the machines' own difference"
        ])  # fmt: skip
    entry = load(machine_id.fingerprint(first)).get(key_of(first))
    session = partners(comparison.a.summary, comparison.b.summary)
    lines = explain(comparison, entry, first, session)
    if session:
        # Both sides ran round by round in one session: whatever the machine drifted, it drifted
        # under both, so the between-process test alone decides.
        lines.append("the runs are the two sides of one interleaved session (harness ab): run-to-run drift cancels")
    if entry is None or session:
        return replace(comparison, floor=comparison.floor + lines)
    family = comparison.family_size
    changes: list[Change] = []
    held, uncertain, beyond = 0, [], []
    for c in comparison.changes:
        sigma = drift(entry, c.framework, c.metric)
        if c.significant and sigma is not None and c.ratio > 0:
            gate, change = session_gate(sigma, family), abs(math.log(c.ratio))
            if change >= gate:
                pass  # beyond the drift: the verdict stands
            elif degrees_of(entry, c.framework, c.metric) < MIN_DEGREES:
                uncertain.append(c)
            elif change >= math.log1p(MAX_HELD):
                beyond.append(c)  # never drift, whatever the floor says
            else:
                c = replace(c, within_sessions=math.exp(gate) - 1)
                held += 1
        changes.append(c)
    if held:
        lines.append(
            f"{held} row(s) significant between processes but within this machine's run-to-run noise: not "
            "significant (`harness ab BASELINE CANDIDATE` measures two versions in one session, where it cancels)"
        )
    if uncertain:
        lines.append(
            f"the noise floor (runs {plain(entry['run_id'])}) rests on too few rounds to excuse a change ({uncertain[0].framework} "
            f"{uncertain[0].metric}: {degrees_of(entry, uncertain[0].framework, uncertain[0].metric)} degrees of freedom, "
            f"{MIN_DEGREES} needed): {len(uncertain)} significant row(s) judged without it; measure it again: "
            f"`{command(first['suite'], first['params'])}`"
        )
    if beyond:
        lines.append(
            f"{len(beyond)} significant row(s) changed by more than any run-to-run drift may excuse ({fmt_share(MAX_HELD)}; "
            f"e.g. {beyond[0].framework} {beyond[0].metric} x{beyond[0].ratio:.3g}): judged without the noise floor"
        )
    return replace(comparison, changes=changes, floor=comparison.floor + lines)


@functools.lru_cache(maxsize=256)
def detectable_shift(rounds: int, family: int) -> float | None:
    """The smallest shift in log space, in units of the noise, detected in POWER of simulated pairs
    (rounds a side, exact Mann-Whitney below ALPHA / family); None when no shift can be."""
    threshold = ALPHA / max(family, 1)
    if rounds > SIMULATED_ROUNDS:
        # Many rounds (a budget's): the normal approximation holds, and simulating hundreds of rounds
        # would take seconds. Mann-Whitney's power is then a t-test's on 3/pi of the rounds (its
        # Pitman efficiency under normal noise); at 30 rounds this is 6 % below the simulated shift.
        z = NormalDist().inv_cdf
        return (z(1 - threshold / 2) + z(POWER)) * math.sqrt(2 / (rounds * 3 / math.pi))
    if smallest_exact_p(rounds, rounds) >= threshold:
        return None
    critical = _critical_u(rounds, threshold)
    rng = random.Random(rounds * 1000 + family)
    low, high = 0.0, 20.0
    for _ in range(14):  # bisection on the shift
        shift = (low + high) / 2
        hits = 0
        for _ in range(SIMULATIONS):
            a = [rng.gauss(0, 1) for _ in range(rounds)]
            b = [rng.gauss(shift, 1) for _ in range(rounds)]
            # U of a = its rank sum - n(n+1)/2 = pairs with x > y (continuous: no ties)
            ranked = sorted([(x, 1) for x in a] + [(y, 0) for y in b])
            u = sum(rank for rank, (_, mine) in enumerate(ranked, 1) if mine) - rounds * (rounds + 1) // 2
            hits += u <= critical or u >= rounds * rounds - critical
        low, high = (low, shift) if hits >= POWER * SIMULATIONS else (shift, high)
    return high


def _critical_u(n: int, threshold: float) -> int:
    """The largest U whose exact two-sided p (n vs n, no ties) is below `threshold`."""
    counts = u_distribution(n, n)
    total = sum(counts)
    # The cumulative tail only grows: the U below the threshold are a prefix of 0, 1, 2, ...
    return sum(1 for tail in accumulate(counts) if 2 * tail / total < threshold) - 1


def detectable(sigma: float, rounds: int, family: int, margin: float = 0.0) -> float | None:
    """The smallest change (0.03 = 3 %) a verdict sees at these rounds, for noise `sigma`; with an
    `ab` margin, what the rounds see beyond it (the test asks for a difference past 1 + margin)."""
    shift = detectable_shift(rounds, family)
    return None if shift is None else (1 + margin) * math.exp(shift * sigma) - 1


def rounds_for(
    sigmas: list[float], target: float, family: int, most: int = MAX_ROUNDS, margin: float = 0.0
) -> int | None:
    """The fewest rounds (up to `most`) at which every metric's detectable change is at most `target`."""
    worst = max(sigmas)

    def reaches(rounds: int) -> bool:
        found = detectable(worst, rounds, family, margin)
        return found is not None and found <= target

    if not reaches(most):
        return None
    low, high = 1, most  # more rounds never see less: bisect for the fewest that reach
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if reaches(middle) else (middle, high)
    return high


def command(suite: str, params: Mapping[str, Any]) -> str:
    """The command that measures the noise floor of this workload."""
    return " ".join(["harness noise --suite", suite, *(f"--param {k}={v}" for k, v in params.items())])


def parse_target(detect: str) -> float:
    """--detect PCT as a share (3% -> 0.03)."""
    try:
        target = float(detect.strip().rstrip("%")) / 100
    except ValueError:
        target = math.nan
    if not (0 < target < 10):
        raise HarnessError(f"--detect {plain(detect)!r} is not a percentage above 0, e.g. --detect 3%")
    return target


def plan_rounds(
    plan: Plan, detect: str, *, interleaved: bool, budget_s: float | None = None, margin: float = 0.0
) -> tuple[int, str]:
    """--detect PCT: the fewest rounds at which every planned metric's detectable change is PCT or
    less, and a line saying so and what they cost. Two separate runs must also clear the machine's
    run-to-run drift, which no number of rounds does; two interleaved sides (`harness ab`) need not.
    With a budget the rounds may go past MAX_ROUNDS but must fit in it (at the noise run's cost of a
    round); a budgeted `ab` looks several times, so its rounds are planned for its last look alone,
    at the alpha the earlier looks leave it (sequential.last_alpha): more rounds than one look needs.
    An `ab` session's `margin` is never called, so a change must clear it and the noise both."""
    target = parse_target(detect)
    if interleaved and target <= margin:
        raise HarnessError(
            f"--detect {plain(detect)}: harness ab never calls a change within its margin ({fmt_change(margin)}); "
            "ask for a larger change, or lower --margin"
        )
    job = plan.jobs[0]
    entry = load(host_fingerprint(job.device, job.threads)).get(key(plan.suite, job.params, job.precision, job.device))
    how = command(plan.suite, job.params)
    if entry is None:
        raise HarnessError(f"--detect needs this machine's noise floor for this workload; measure it first: {how}")
    planned = {j.framework for j in plan.jobs if j.skip_reason is None}
    if not (sigmas := [s for fw, per in entry["noise"].items() if fw in planned for s in per.values()]):
        raise HarnessError(f"the noise floor has none of {', '.join(sorted(planned))}; measure them: {how}")
    if not interleaved:
        drifts = [d for fw, per in entry["noise"].items() if fw in planned for m in per if (d := drift(entry, fw, m))]
        floor = reachable(max(drifts), len(sigmas)) if drifts else 0.0
        if target < floor:
            raise HarnessError(
                f"--detect {detect}: whole runs drift apart so far on this machine that no number of rounds lets "
                f"a compare of two runs see under {fmt_share(floor)}; measure both versions in one session: "
                "harness ab BASELINE CANDIDATE --suite ... --detect ..."
            )
    family = len(sigmas)
    if budget_s is not None and interleaved:
        family = sequential.family_at(family, sequential.last_alpha())
    most = MAX_ROUNDS if budget_s is None else sequential.MAX_ROUNDS
    if (found := rounds_for(sigmas, target, family, most, margin if interleaved else 0.0)) is None:
        raise HarnessError(
            f"--detect {detect}: even {most} rounds cannot see a change that small here "
            f"(between-process noise up to {fmt_share(max(sigmas))}); ask for a larger change"
        )
    each_s = float(entry["seconds_per_round"])
    cost = found * each_s * (2 if interleaved else 1)
    each = f"{found} rounds a side" if interleaved else f"{found} rounds"
    if budget_s is not None and cost > budget_s:
        raise HarnessError(
            f"--detect {detect}: {each} take about {cost:.0f} s here ({each_s:.1f} s a round in the noise run "
            f"{plain(entry['run_id'])}), more than --budget {budget_s:.0f} s buys; give --budget "
            f"{math.ceil(cost * 1.1)}s or ask for a larger change"
        )
    then = "" if interleaved else f"; compare the run with another of {found} rounds"
    return found, (
        f"--detect {target:.1%}: {each} (about {cost:.0f} s: {each_s:.1f} s a round in the "
        f"noise run {plain(entry['run_id'])}){then}"
    )


def explain(comparison: Comparison, entry: dict[str, Any] | None, first: Result, session: bool = False) -> list[str]:
    """Lines for `compare`: the smallest change its verdicts can see, or that no floor exists
    (`session`: the runs are one interleaved session, so no run-to-run allowance applies)."""
    family = comparison.family_size
    alpha = sequential.recorded_alpha(comparison.a.summary, comparison.b.summary)
    if alpha is not None and alpha > 0:  # a budgeted session's verdicts were made at its last look's alpha
        family = sequential.family_at(family, alpha)
    if entry is None:
        how = command(first["suite"], first["params"])
        if session and (own := _own_spread(comparison, family, comparison.margin)):
            return [
                "smallest change a verdict here detects (80 % of the time; from the spread of these runs' own "
                f"round medians, no noise floor for this machine at {workload.label(first)}): " + ", ".join(own)
            ]
        unknown = "" if session else ", and so is the run-to-run noise they cannot tell from a change"
        return [
            f"no noise floor for this machine at {workload.label(first)}: how small a change these verdicts can see "
            f"is unknown{unknown}; `{how}` measures {'it' if session else 'both'}"
        ]
    parts = []
    for c in comparison.changes:
        sigma = (entry["noise"].get(c.framework) or {}).get(c.metric)
        if not c.tested or sigma is None:
            continue
        found = detectable(sigma, min(c.processes), family, c.margin)
        apart = None if session else drift(entry, c.framework, c.metric)
        gate = f" (run to run: {fmt_share(math.exp(session_gate(apart, family)) - 1)})" if apart is not None else ""
        parts.append(f"{c.framework} {c.metric} {fmt_share(found) if found is not None else 'none'}{gate}")
    if not parts:
        return []
    return [
        f"smallest change a verdict here detects (80 % of the time; this machine's noise floor, runs "
        f"{plain(entry['run_id'])}): " + ", ".join(parts)
    ]


def _own_spread(comparison: Comparison, family: int, margin: float = 0.0) -> list[str]:
    """Per tested rounds row: the change its rounds could detect at the spread of its own round
    medians (the standard deviation of their logs, each side about its own mean, pooled); the two
    sides of one session share the machine's states, so their spread is what the test faced."""
    found = []
    for c in comparison.changes:
        if not c.tested or c.basis != ROUNDS:
            continue
        sides = []  # the round medians its test used (the quiet rounds)
        for run in (comparison.a, comparison.b):
            result = run.results.get(c.framework)
            metrics = result["metrics"] if result is not None and result["status"] == "ok" else []
            metric = next((m for m in metrics if m["name"] == c.metric), None)
            sides.append(assessment.kept_rounds(result, metric)[0] if result is not None and metric is not None else [])
        xa, xb = sides
        if len(xa) < MIN_ROUNDS or len(xb) < MIN_ROUNDS or min(xa + xb) <= 0:
            continue
        logs = [[math.log(x) for x in side] for side in (xa, xb)]
        sigma = math.sqrt(sum(statistics.variance(side) * (len(side) - 1) for side in logs) / (len(xa) + len(xb) - 2))
        seen = detectable(sigma, min(len(xa), len(xb)), family, margin)
        found.append(f"{c.framework} {c.metric} {fmt_share(seen) if seen is not None else 'none'}")
    return found
