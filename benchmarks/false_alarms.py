"""False alarms and detection of `harness compare` on this machine, with real runs (issue 21).

Four experiments, all on the local backend, CPU, with a fresh cache home:

1. A/A, quiet, default rounds (1): the same `xla` run (numpy, jax, matrix_size=512) N times, every
   pair compared.
   Reported: the share of compares with at least one "significant" row (the family-wise false
   alarm rate), by compare's rule now (with this machine's noise floor, and without it) and by the
   rule before issue 21 (samples of one process, p < 0.05 and the interval excluding 1, no
   correction), on the same pairs.
2. A/A, quiet, at the rounds `run --detect 10%` recommends (from `harness noise`): the same.
3. A CPU hog (one busy process per core) started part-way into each of N runs at those rounds:
   the share of samples taken under the hog that are marked `contended`, the share of quiet
   samples (experiment 2's) marked, and the false alarms of compare against the quiet runs.
4. Planted slowdowns: a copy of the project whose hidden `fault` suite does 5 %, 10 % or 30 % more
   work in its timed call (a code change, the same workload), at the rounds `--detect 10%`
   recommends for it; the share of (pair, framework) rows called significantly slower.
5. The same, interleaved in one session (`harness ab BASELINE CANDIDATE`, the rounds
   `harness ab --detect 10%` picks): A/A (both sides this checkout) for false alarms, and each
   planted slowdown as the candidate for detection.

    python benchmarks/false_alarms.py            # about 15 minutes on the 2-core development machine
    python benchmarks/false_alarms.py --runs 4   # fewer runs per experiment
    python benchmarks/false_alarms.py --only ab  # experiment 5 alone (about 40 minutes)
    python benchmarks/false_alarms.py --only separate  # experiments 1-4 alone

Prints a Markdown table and writes every figure as JSON beside it (--out). Nothing is asserted.
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from harness.judge.assessment import assess

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.core.statistics import ALPHA, mann_whitney_u, observations_needed, ratio_interval  # noqa: E402
from harness.judge.compare import ROUNDS, Comparison, compare_runs, paired_metrics  # noqa: E402
from harness.judge.noise_floor import apply  # noqa: E402
from harness.store.run_folder import Run, load_run  # noqa: E402

HARNESS = [sys.executable, "-m", "harness.cli"]
XLA = ["--suite", "xla", "-f", "numpy,jax", "-p", "matrix_size=512", "--repeat", "10"]
FAULT = ["--suite", "fault", "-f", "numpy,jax", "-p", "work=300000", "--repeat", "20"]


REPO = Path(__file__).resolve().parent.parent
PLANT = ('size = ctx.params["work"]', 'size = round(ctx.params["work"] * FACTOR)')


def harness(env: dict[str, str], *args: str, repo: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*HARNESS, *args], env=dict(env, PYTHONPATH=str(repo)), cwd=repo, capture_output=True,
                          text=True, timeout=3600)  # fmt: skip


def planted(root: Path, factor: float) -> Path:
    """A copy of harness/ and suites/ whose fault suite times `factor` times the work."""
    repo = root / f"planted-{factor}"
    for package in ("harness", "suites"):
        shutil.copytree(REPO / package, repo / package, ignore=shutil.ignore_patterns("__pycache__"))
    common = repo / "suites" / "fault" / "common.py"
    text = common.read_text()
    if PLANT[0] not in text:
        raise SystemExit(f"{common} no longer contains {PLANT[0]!r}: update the planted edit")
    common.write_text(text.replace(PLANT[0], PLANT[1].replace("FACTOR", repr(factor))))
    return repo


def run(env: dict[str, str], results: Path, args: list[str], rounds: int, repo: Path = REPO) -> Path:
    proc = harness(env, "run", *args, "--rounds", str(rounds), "--backend", "local", "--results-dir", str(results),
                   "-q", repo=repo)  # fmt: skip
    for line in (proc.stdout + proc.stderr).splitlines():
        if line.startswith("run folder: "):
            return Path(line.split(": ", 1)[1].strip())
    raise SystemExit(f"no run folder in the output (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}")


def old_rule(a: Run, b: Run) -> int:
    """Rows the rule before issue 21 called significant: round medians where both have them, else samples."""
    called = 0
    for _, _, _, ma, mb in paired_metrics(a, b):
        xa, xb = ma.get("round_medians") or [], mb.get("round_medians") or []
        if not (len(xa) >= 2 and len(xb) >= 2):
            xa, xb = ma["samples"], mb["samples"]
        interval = ratio_interval(xa, xb)
        p = mann_whitney_u(xa, xb)[1]
        called += p < ALPHA and not (interval.low <= 1 <= interval.high)
    return called


def judged(a: Run, b: Run) -> Comparison:
    """What `harness compare A B` decides: compare_runs, then the measuring machine's noise floor (if measured)."""
    return apply(compare_runs(assess(a), assess(b)))


def alarms(pairs: list[tuple[Path, Path]]) -> dict[str, Any]:
    """Share of compares with at least one significant row: now (with and without the noise floor), before."""
    now = processes_only = before = rows = 0
    for a_dir, b_dir in pairs:
        a, b = load_run(a_dir), load_run(b_dir)
        plain = compare_runs(assess(a), assess(b))
        rows = len(plain.changes)
        processes_only += any(c.significant for c in plain.changes)
        now += any(c.significant for c in judged(a, b).changes)
        before += old_rule(a, b) > 0
    n = len(pairs) or 1
    return {
        "pairs": len(pairs),
        "rows": rows,
        "now": now / n,
        "without_floor": processes_only / n,
        "before": before / n,
    }


def _time(value: Any) -> float | None:
    try:
        return dt.datetime.fromisoformat(str(value)).timestamp()
    except ValueError:
        return None


def flagged_shares(run_dirs: list[Path], hog_at: dict[Path, float] | None = None) -> dict[str, Any]:
    """Marked samples: among rounds that started after the hog (or all rounds when no hog), and before it."""
    under = [0, 0]
    quiet = [0, 0]
    for run_dir in run_dirs:
        started = (hog_at or {}).get(run_dir)
        for path in sorted((run_dir / "rounds").glob("round-*/*.json")):
            doc = json.loads(path.read_text())
            if doc.get("status") != "ok":
                continue
            begin, end = _time(doc.get("started_at")), _time(doc.get("finished_at"))
            if begin is None or end is None:
                continue
            if started is not None and begin >= started:
                side = under
            elif started is None or end <= started:
                side = quiet
            else:
                continue  # the hog started during this round: neither side
            for m in doc["metrics"]:
                seen = m.get("contention")
                if seen:
                    side[0] += len(seen["contended"])
                    side[1] += len(m["samples"])
    return {
        "hog_samples": under[1], "hog_flagged": under[0] / under[1] if under[1] else None,
        "quiet_samples": quiet[1], "quiet_flagged": quiet[0] / quiet[1] if quiet[1] else None,
    }  # fmt: skip


def detect_rounds(env: dict[str, str], results: Path, args: list[str], command: str = "run") -> tuple[int, str]:
    """`harness noise` on the workload (once), then the rounds `run` (or `ab`) `--detect 10%` picks."""
    proc = subprocess.CompletedProcess[str]([], 0, "", "")
    if not harness(env, command, *(["HEAD"] if command == "ab" else []), *args, "--detect", "10%", "--dry-run",
                   "--backend", "local").stderr.startswith("--detect"):  # fmt: skip
        proc = harness(env, "noise", *args, "--rounds", "6", "--sessions", "3", "--backend", "local", "--results-dir",
                       str(results), "-q")  # fmt: skip
        if proc.returncode not in (0, 3):  # 3: a round was disturbed and left out of the floor (said on stderr)
            raise SystemExit(proc.stdout + proc.stderr)
    dry = harness(env, command, *(["HEAD"] if command == "ab" else []), *args, "--detect", "10%", "--dry-run",
                  "--backend", "local")  # fmt: skip
    line = next((x for x in dry.stderr.splitlines() if x.startswith("--detect")), "")
    if not line:  # refused (too noisy for 10 %): the rounds compare's "no verdict" message names instead
        print(f"--detect 10% refused: {dry.stderr.strip()}; using compare's minimum", file=sys.stderr)
        rows = sum(line.count(" between processes") for line in proc.stdout.splitlines())
        return observations_needed(rows), proc.stdout.strip() + "\n" + dry.stderr.strip()
    return int(line.split(": ", 1)[1].split()[0]), proc.stdout.strip()


def hog_during(env: dict[str, str], results: Path, args: list[str], rounds: int, delay: float) -> tuple[Path, float]:
    """One run with a busy process per core started `delay` seconds in."""
    hogs: list[subprocess.Popen[bytes]] = []
    started: list[float] = []

    def start() -> None:
        started.append(time.time())
        hogs.extend(subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 2))

    timer = threading.Timer(delay, start)
    timer.start()
    try:
        run_dir = run(env, results, args, rounds)
    finally:
        timer.cancel()
        for hog in hogs:
            hog.kill()
            hog.wait()
    return run_dir, started[0] if started else float("inf")


def ab(env: dict[str, str], results: Path, args: list[str], rounds: int, baseline: Path, candidate: Path) -> Comparison:
    """One `harness ab` session, judged as `harness ab` (and `compare` of its two runs) judges it."""
    proc = harness(env, "ab", str(baseline), str(candidate), *args, "--rounds", str(rounds), "--backend", "local",
                   "--results-dir", str(results), "-q")  # fmt: skip
    found = {}
    for line in (proc.stdout + proc.stderr).splitlines():
        for side in ("baseline", "candidate"):
            if line.startswith(f"{side} run: "):
                found[side] = Path(line.split(": ", 1)[1].strip())
    if len(found) != 2:
        raise SystemExit(f"no run folders in the output (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return judged(load_run(found["baseline"]), load_run(found["candidate"]))


def interleaved(
    env: dict[str, str], results: Path, home: Path, runs: int, say: Any, fixed: int | None = None
) -> dict[str, Any]:
    """Experiment 5: A/A and planted slowdowns, each side of a pair interleaved in one `harness ab` session
    (at `fixed` rounds a side when given, else the rounds `ab --detect 10%` picks)."""
    figures: dict[str, Any] = {}
    if fixed is None:
        rounds, floor = detect_rounds(env, results, FAULT, command="ab")
        figures["ab_detect_10_rounds"], figures["ab_noise"] = rounds, floor
    else:
        rounds = figures["ab_rounds"] = fixed
    say(f"5: harness ab at {rounds} rounds a side")
    alarms_seen = rows = 0
    for _ in range(runs):
        comparison = ab(env, results, FAULT, rounds, REPO, REPO)
        alarms_seen += any(c.significant for c in comparison.changes)
        rows = len(comparison.changes)
    figures["ab_aa"] = {"sessions": runs, "rows": rows, "false_alarm": alarms_seen / runs}
    say(f"   A/A: {figures['ab_aa']}")
    for slowdown, count in ((0.10, runs), (0.05, max(2, runs // 2)), (0.30, max(2, runs // 2))):
        copy = home / f"planted-{1 + slowdown}"
        copy = copy if copy.is_dir() else planted(home, 1 + slowdown)
        called = total = 0
        for _ in range(count):
            for c in ab(env, results, FAULT, rounds, REPO, copy).changes:
                total += 1
                called += c.significant and c.slowdown > 0 and c.basis == ROUNDS
        key = f"ab_planted_{int(slowdown * 100)}"
        figures[key] = {"sessions": count, "rows": total, "detected": called / total if total else None}
        say(f"   {slowdown:.0%}: {figures[key]}")
    return figures


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=6, help="runs per A/A experiment")
    parser.add_argument(
        "--only", choices=("ab", "separate"), help="ab: experiment 5 (harness ab) alone; separate: experiments 1-4"
    )
    parser.add_argument("--out", type=Path, default=Path("false_alarms.json"))
    parser.add_argument(
        "--ab-rounds", type=int, help="experiment 5 at this many rounds a side (default: --detect 10%%'s)"
    )
    options = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="false-alarms-"))
    os.environ["HARNESS_CACHE_HOME"] = str(home / "cache")  # this process reads the noise floor too
    env = dict(os.environ, HARNESS_CALIBRATE="never")
    results = home / "results"
    figures: dict[str, Any] = {}
    began = time.time()

    def say(text: str) -> None:
        print(f"[{time.time() - began:6.0f} s] {text}", file=sys.stderr, flush=True)

    if options.only == "ab":
        figures.update(interleaved(env, results, home, options.runs, say, options.ab_rounds))
        figures["seconds"] = time.time() - began
        options.out.write_text(json.dumps(figures, indent=2) + "\n")
        print(json.dumps(figures, indent=2))
        return

    say("1: A/A, default rounds")
    singles = [run(env, results, XLA, 1) for _ in range(options.runs)]
    figures["aa_default"] = alarms(list(itertools.combinations(singles, 2)))
    say(f"   {figures['aa_default']}")

    rounds, floor = detect_rounds(env, results, XLA)
    figures["xla_detect_10_rounds"], figures["xla_noise"] = rounds, floor
    say(f"2: A/A at the {rounds} rounds --detect 10% picks")
    quiet_began = time.time()
    quiet = [run(env, results, XLA, rounds) for _ in range(options.runs)]
    per_run = (time.time() - quiet_began) / options.runs
    figures["aa_recommended"] = alarms(list(itertools.combinations(quiet, 2)))
    say(f"   {figures['aa_recommended']}")

    say("3: a CPU hog started part-way into each run")
    hogged: dict[Path, float] = {}
    for i in range(max(2, options.runs // 2)):
        run_dir, at = hog_during(env, results, XLA, rounds, delay=per_run * (0.3 + 0.1 * i))
        hogged[run_dir] = at
    figures["hog"] = flagged_shares(list(hogged), hogged)
    figures["quiet"] = flagged_shares(quiet)
    figures["aa_hog"] = alarms([(q, h) for q in quiet for h in hogged])
    say(f"   hog {figures['hog']}, quiet {figures['quiet']}, compares {figures['aa_hog']}")

    fault_rounds, fault_floor = detect_rounds(env, results, FAULT)
    figures["fault_detect_10_rounds"], figures["fault_noise"] = fault_rounds, fault_floor
    say(f"4: planted slowdowns at the {fault_rounds} rounds --detect 10% picks")
    base = [run(env, results, FAULT, fault_rounds) for _ in range(3)]
    figures["fault_aa"] = alarms(list(itertools.combinations(base, 2)))
    for slowdown in (0.05, 0.10, 0.30):
        copy = planted(home, 1 + slowdown)
        slow = [run(env, results, FAULT, fault_rounds, repo=copy) for _ in range(3)]
        called = total = 0
        for a_dir, b_dir in itertools.product(base, slow):
            comparison = judged(load_run(a_dir), load_run(b_dir))
            for c in comparison.changes:
                total += 1
                called += c.significant and c.slowdown > 0 and c.basis == ROUNDS
        figures[f"planted_{int(slowdown * 100)}"] = {"rows": total, "detected": called / total if total else None}
        say(f"   {slowdown:.0%}: {figures[f'planted_{int(slowdown * 100)}']}")
    if options.only != "separate":
        figures.update(interleaved(env, results, home, options.runs, say, options.ab_rounds))
    figures["seconds"] = time.time() - began
    options.out.write_text(json.dumps(figures, indent=2) + "\n")
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
