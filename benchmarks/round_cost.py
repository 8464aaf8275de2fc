"""Where a round's time goes, per framework: the job's own cold path (interpreter and runtime start,
framework import, device init, precision probe, the work) and what the harness adds around it
(issue 39, cheaper rounds).

Every figure comes from real `harness run --suite fault --rounds N` on the local backend: the wall
time a round adds (a run of N rounds less a run of 1, over N - 1: the command's start, the pooling
and the table are paid once a run), and from each round's result file the job's cold path
(`environment.cold_path`). A round's "process and harness" share is what is neither the job's cold
path nor its work: interpreter start, the job runtime's imports, the process's exit, writing the
round's folder and reading its result back.

    python benchmarks/round_cost.py                          # numpy, jax, pytorch; 8 rounds each
    python benchmarks/round_cost.py --frameworks numpy --rounds 12
    python benchmarks/round_cost.py --checkout /tmp/before   # the same with another checkout's code
    python benchmarks/round_cost.py --processes fresh        # a new interpreter every round's job

Run it on a quiet machine. Prints a Markdown table; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PARTS = ("import_s", "device_init_s", "precision_probe_s", "workload_s")


def measure(
    framework: str, rounds: int, checkout: Path, results: Path, env: dict[str, str], processes: str
) -> dict[str, float]:
    began = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", "--suite", "fault", "-f", framework, "-p", "work=300000",
         "--repeat", "20", "--rounds", str(rounds), "--backend", "local", "--calibrate", "never", "-q",
         "--processes", processes, "--results-dir", str(results)],
        cwd=checkout, env=env, capture_output=True, text=True,
    )  # fmt: skip
    wall = time.perf_counter() - began
    if proc.returncode not in (0, 3):
        raise SystemExit(f"{framework}: exit {proc.returncode}\n{proc.stderr[-2000:]}")
    run = max(results.iterdir(), key=lambda p: p.stat().st_mtime)
    files = sorted((run / "rounds").glob(f"round-*/{framework}.json")) or [run / f"{framework}.json"]
    docs = [json.loads(p.read_text()) for p in files]
    parts = {k: statistics.median(d["environment"]["cold_path"].get(k, 0.0) for d in docs) for k in PARTS}
    job = statistics.median(d["duration_s"] for d in docs)
    return {"wall": wall, "job_s": job, **parts}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frameworks", default="numpy,jax,pytorch")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--checkout", type=Path, default=REPO, help="a checkout of this project to measure")
    parser.add_argument("--processes", choices=("forked", "fresh"), default="fresh", help="each round's job process")
    args = parser.parse_args()
    checkout = args.checkout.resolve()
    with tempfile.TemporaryDirectory(prefix="round-cost-") as home:
        env = dict(os.environ, HARNESS_CACHE_HOME=str(Path(home) / "cache"), PYTHONPATH=str(checkout))
        print(f"checkout {checkout}, {args.processes} processes; a run of 1 round against one of {args.rounds}\n")
        print("| framework | a round | the job | import | device init | precision probe | work | process and harness |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- |", flush=True)
        for framework in args.frameworks.split(","):
            once = measure(framework, 1, checkout, Path(home) / f"{framework}-1", env, args.processes)
            found = measure(framework, args.rounds, checkout, Path(home) / framework, env, args.processes)
            per_round = (found["wall"] - once["wall"]) / (args.rounds - 1)
            # A forked round's job reports the server's import, paid once a run, not once a round.
            forked = args.processes == "forked"
            known = sum(found[k] for k in PARTS if not (forked and k == "import_s"))
            once_only = " (once)" if forked else ""
            print(f"| {framework} | {per_round:.2f} s | {found['job_s']:.2f} s | {found['import_s']:.2f} s{once_only} | "
                  f"{found['device_init_s']:.2f} s | {found['precision_probe_s']:.2f} s | {found['workload_s']:.2f} s | "
                  f"{per_round - known:.2f} s |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
