"""This machine's noise floor: how much a metric moves between two processes of the same code.

`harness noise` runs a suite in K interleaved rounds (an A/A experiment: every round is one
process of the same code) and stores, per (framework, metric), the standard deviation of the log of
the round medians: the between-process variation that decides which changes a verdict can see.
It lives in the cache home under the machine's fingerprint (harness/calibration.py's), keyed by
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
from pathlib import Path
from typing import Any

from harness import cache_home, workload
from harness.calibration import read_json_file
from harness.compare import Comparison
from harness.errors import HarnessError
from harness.result_types import Result
from harness.run_folder import Run
from harness.safe_files import write_bytes_atomic
from harness.statistics import ALPHA, smallest_exact_p
from harness.text.escape import plain
from harness.text.numbers import fmt_share

FORMAT, VERSION = "harness-noise", 1
POWER = 0.8
MIN_ROUNDS = 3  # a standard deviation from fewer processes is not an estimate
MAX_ROUNDS = 30  # --detect never asks for more (say so instead)
SIMULATIONS = 600
MAX_FILE_BYTES = 2_000_000


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


def between_processes(run: Run) -> dict[str, dict[str, float]]:
    """framework -> metric -> standard deviation of log(round median), from a run with rounds."""
    found: dict[str, dict[str, float]] = {}
    for fw, result in run.results.items():
        if result["status"] != "ok":
            continue
        for metric in result["metrics"]:
            medians = metric.get("round_medians") or []
            if len(medians) >= MIN_ROUNDS and all(m > 0 for m in medians):
                found.setdefault(fw, {})[metric["name"]] = statistics.stdev(math.log(m) for m in medians)
    return found


def load(fingerprint: str) -> dict[str, Any]:
    """The machine's noise file, validated; {} when there is none (a broken one is an error)."""
    path = file_for(fingerprint)
    doc = read_json_file(path, MAX_FILE_BYTES)
    if doc is None:
        return {}
    problem = _problem(doc)
    if problem:
        raise HarnessError(f"{plain(path)}: {problem}; delete it and run `harness noise` again")
    return dict(doc["workloads"])


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0


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
        if not _number(entry.get("seconds_per_round")):
            return f"workloads[{plain(name)!r}].seconds_per_round: expected a number"
        noise = entry.get("noise")
        if not isinstance(noise, dict) or not all(
            isinstance(per, dict) and all(isinstance(m, str) and _number(v) for m, v in per.items())
            for per in noise.values()
        ):
            return f"workloads[{plain(name)!r}].noise: expected framework -> metric -> a number"
    return None


def store(fingerprint: str, run: Run, rounds: int, seconds: float) -> dict[str, Any]:
    """Record a rounds run's between-process noise for its workload; returns the entry."""
    first = next((r for r in run.results.values() if r["status"] == "ok"), None)
    noise = between_processes(run)
    if first is None or not noise:
        raise HarnessError(f"run {plain(run.summary.get('run_id'))} has no metric with {MIN_ROUNDS}+ round medians")
    entry = {
        "label": workload.label(first),
        "run_id": plain(run.summary.get("run_id")),
        "rounds": rounds,
        "seconds_per_round": seconds / rounds,
        "noise": noise,
    }
    with cache_home.locked(folder() / ".lock", "the noise floor"):
        workloads = load(fingerprint)
        workloads[key_of(first)] = entry
        doc = {"format": FORMAT, "version": VERSION, "fingerprint": fingerprint, "workloads": workloads}
        write_bytes_atomic(file_for(fingerprint), (json.dumps(doc, indent=2) + "\n").encode())
    return entry


@functools.lru_cache(maxsize=256)
def detectable_shift(rounds: int, family: int) -> float | None:
    """The smallest shift in log space, in units of the noise, detected in POWER of simulated pairs
    (rounds a side, exact Mann-Whitney below ALPHA / family); None when no shift can be."""
    threshold = ALPHA / max(family, 1)
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
        if hits >= POWER * SIMULATIONS:
            high = shift
        else:
            low = shift
    return high


def _critical_u(n: int, threshold: float) -> int:
    """The largest U whose exact two-sided p (n vs n, no ties) is below `threshold`."""
    # table[(a, b)][k]: arrangements of a and b observations with U = k (the standard recurrence).
    table: dict[tuple[int, int], list[int]] = {}
    for a in range(n + 1):
        for b in range(n + 1):
            if a == 0 or b == 0:
                table[(a, b)] = [1]
                continue
            left, right = table[(a - 1, b)], table[(a, b - 1)]
            merged = [0] * (a * b + 1)
            for k, c in enumerate(left):
                merged[k + b] += c
            for k, c in enumerate(right):
                merged[k] += c
            table[(a, b)] = merged
    counts = table[(n, n)]
    total = sum(counts)
    tail, critical = 0, -1
    for u, c in enumerate(counts):
        tail += c
        if 2 * tail / total < threshold:
            critical = u
        else:
            break
    return critical


def detectable(sigma: float, rounds: int, family: int) -> float | None:
    """The smallest change (0.03 = 3 %) a verdict sees at these rounds, for noise `sigma`."""
    shift = detectable_shift(rounds, family)
    return None if shift is None else math.exp(shift * sigma) - 1


def rounds_for(sigmas: list[float], target: float, family: int) -> int | None:
    """The fewest rounds at which every metric's detectable change is at most `target`."""
    worst = max(sigmas)

    def reaches(rounds: int) -> bool:
        found = detectable(worst, rounds, family)
        return found is not None and found <= target

    if not reaches(MAX_ROUNDS):
        return None
    low, high = 1, MAX_ROUNDS  # more rounds never see less: bisect for the fewest that reach
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if reaches(middle) else (middle, high)
    return high


def explain(comparison: Comparison, machine: str) -> list[str]:
    """Lines for `compare`: the smallest change its verdicts can see, or that no floor exists."""
    b = comparison.b
    first = next((r for r in b.results.values() if r["status"] == "ok"), None)
    if first is None:
        return []
    entry = load(machine).get(key_of(first))
    if entry is None:
        command = " ".join(
            ["harness noise --suite", first["suite"], *(f"--param {k}={v}" for k, v in first["params"].items())]
        )
        return [
            f"no noise floor for this machine at {workload.label(first)}: how small a change these verdicts can see "
            f"is unknown; `{command}` measures it"
        ]
    family = sum(1 for c in comparison.changes if c.excluded is None)
    parts = []
    for c in comparison.changes:
        sigma = (entry["noise"].get(c.framework) or {}).get(c.metric)
        if c.excluded is not None or sigma is None:
            continue
        found = detectable(sigma, min(c.processes), family)
        parts.append(f"{c.framework} {c.metric} {fmt_share(found) if found is not None else 'none'}")
    if not parts:
        return []
    return [
        f"smallest change a verdict here detects (80 % of the time; this machine's noise floor, run "
        f"{entry['run_id']}): " + ", ".join(parts)
    ]
