"""`harness ab --budget` on this machine, for real: false alarms of A/A sessions and the sessions it
takes to find a planted code slowdown, with the time each session took (issue 39).

Every session is the real CLI on the local backend: this checkout as the baseline, and as the
candidate either an unchanged copy of this checkout's code (A/A: two folders, as when a user
compares a checkout with a branch's; `--aa-against self` compares this checkout with itself) or a
copy whose hidden `fault` suite times (1 + slowdown) times the work in its timed call
(benchmarks/false_alarms.py's planted edit: a code change, the same workload and parameters).

    python benchmarks/ab_budget.py                                  # the figures of docs/method.md
    python benchmarks/ab_budget.py --aa 20 --planted 0.05:8:180 --planted 0.30:10:60
    python benchmarks/ab_budget.py --frameworks numpy,jax
    python benchmarks/ab_budget.py --processes fresh              # a new interpreter every round's job

`--planted SLOWDOWN:SESSIONS:BUDGET_S` (repeatable); `--aa N` A/A sessions at `--aa-budget`
seconds. Prints a Markdown table and writes every session's outcome as JSON (--out); `--keep DIR`
keeps every session's run folders (each round's result: which side was faster round by round). Run it on a
quiet machine: anything else running makes samples `contended`, and the harness leaves those out.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.false_alarms import planted  # noqa: E402

STOPPED = re.compile(r"sequential: stopped after (\d+) look\(s\) and (\d+) round\(s\) a side, (\d+) s")


@dataclass(frozen=True)
class Outcome:
    exit: int
    seconds: float
    looks: int | None
    rounds: int | None
    called_slower: int
    called_faster: int
    error: str | None


def copied(root: Path) -> Path:
    """An unchanged copy of this checkout's harness/ and suites/ (the A/A candidate)."""
    repo = root / "copy"
    for package in ("harness", "suites"):
        shutil.copytree(REPO / package, repo / package, ignore=shutil.ignore_patterns("__pycache__"))
    return repo


def session(candidate: Path, budget: float, args: argparse.Namespace, results: Path) -> Outcome:
    began = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli", "ab", str(REPO), str(candidate), "--suite", "fault",
         "-f", args.frameworks, "-p", f"work={args.work}", "--repeat", str(args.repeat), "--budget", f"{budget:g}s",
         "--backend", "local", "--processes", args.processes, "--results-dir", str(results), "-q"],
        capture_output=True, text=True, cwd=REPO, timeout=budget + 600,
    )  # fmt: skip
    seconds = time.monotonic() - began
    found = STOPPED.search(proc.stdout)
    slower = sum(1 for line in proc.stdout.splitlines() if re.search(r" noop .*% slower$", line))
    faster = sum(1 for line in proc.stdout.splitlines() if re.search(r" noop .*% faster$", line))
    return Outcome(
        exit=proc.returncode,
        seconds=round(seconds, 1),
        looks=int(found.group(1)) if found else None,
        rounds=int(found.group(2)) if found else None,
        called_slower=slower,
        called_faster=faster,
        error=None if found else (proc.stderr.strip().splitlines() or ["no summary line"])[-1][:300],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--aa", type=int, default=20)
    parser.add_argument("--aa-budget", type=float, default=60.0)
    parser.add_argument("--aa-against", choices=("copy", "self"), default="copy", help="the A/A candidate")
    parser.add_argument("--planted", action="append", default=[], help="SLOWDOWN:SESSIONS:BUDGET_S")
    parser.add_argument("--frameworks", default="numpy")
    parser.add_argument("--work", type=int, default=300000)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--processes", choices=("forked", "fresh"), default="fresh", help="each round's job process")
    parser.add_argument("--out", type=Path, default=Path("ab_budget.json"))
    parser.add_argument("--keep", type=Path, help="keep every session's run folders here (each round's result)")
    args = parser.parse_args()
    plans = [(0.0, args.aa, args.aa_budget)] + [
        (float(s), int(n), float(b)) for s, n, b in (p.split(":") for p in args.planted or ["0.30:10:60", "0.05:8:180"])
    ]
    figures: dict[str, list[dict[str, object]]] = {}
    with tempfile.TemporaryDirectory(prefix="ab-budget-") as home:
        root = Path(home)
        print(
            "| candidate | budget | sessions | called a change | time a session, median / max | rounds a side, median |"
        )
        print("| --- | --- | --- | --- | --- | --- |", flush=True)
        for slowdown, count, budget in (plan for plan in plans if plan[1] > 0):  # --aa 0: no A/A sessions
            if slowdown != 0:
                candidate = planted(root, 1 + slowdown)
            else:
                candidate = REPO if args.aa_against == "self" else copied(root)
            results = (args.keep or root) / ("aa" if slowdown == 0 else f"planted-{slowdown:g}")
            runs = [session(candidate, budget, args, results) for _ in range(count)]
            key = "A/A" if slowdown == 0 else f"+{slowdown:.0%} work"
            figures[key] = [asdict(r) for r in runs]
            called = sum(1 for r in runs if r.called_slower or r.called_faster)
            times = [r.seconds for r in runs]
            rounds = [r.rounds for r in runs if r.rounds is not None]
            print(f"| {key} | {budget:g} s | {count} | {called} of {count} | {statistics.median(times):.0f} / "
                  f"{max(times):.0f} s | {statistics.median(rounds) if rounds else '-'} |", flush=True)  # fmt: skip
    args.out.write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
