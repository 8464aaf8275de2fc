"""How long `harness history` takes on a results folder of many runs, and whether it shows progress.

Builds `--runs` run folders (default 1,500: the size a user reported as 142 s of silence), half of
them xla runs and half jit runs, each with three frameworks of three time metrics of 50 samples, a
run an hour apart; then times the real CLI, `harness history RESULTS --suite xla`, as a user runs
it: the median wall time of --repeat runs and the CPU time of those runs (steadier on a shared
machine). Nothing is asserted: the figures go in the notes.

`--tree DIR` times another checkout's harness (e.g. a `git worktree` of the commit before a change)
on the same folder, so one call gives the before and the after:

    python benchmarks/history_scale.py
    python benchmarks/history_scale.py --tree ../before --runs 1500 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.factories import metric, result  # noqa: E402

FRAMEWORKS = ("numpy", "jax", "pytorch")
METRICS, SAMPLES = 3, 50


def write_runs(results: Path, runs: int) -> None:
    for n in range(runs):
        suite = "xla" if n % 2 == 0 else "jit"
        run_id = f"2024{1 + n // 700:02d}{1 + (n // 24) % 28:02d}-{n % 24:02d}0000-{suite}-{n:04d}"
        stamp = f"2024-{1 + n // 700:02d}-{1 + (n // 24) % 28:02d}T{n % 24:02d}:00:00.000+00:00"
        folder = results / run_id
        folder.mkdir(parents=True)
        jobs = []
        for k, fw in enumerate(FRAMEWORKS):
            scale = 0.01 * (1 + k) * (1 + 0.001 * (n % 7))
            samples = [scale * (1 + 0.01 * ((j * 7919 + n) % 13)) for j in range(SAMPLES)]
            doc: dict[str, Any] = result(fw, [metric(f"op{i}", samples, flops=1e8) for i in range(METRICS)])
            doc.update(run_id=run_id, suite=suite, started_at=stamp, finished_at=stamp)
            doc["environment"]["machine"] = {"cpu": {"model": "bench", "logical_cores": 2, "usable_cores": 2}}
            (folder / f"{fw}.json").write_text(json.dumps(doc))
            jobs.append({"framework": fw, "status": "ok", "reason": None, "file": f"{fw}.json"})
        summary = {"run_id": run_id, "suite": suite, "baseline": FRAMEWORKS[0], "backend": "local", "jobs": jobs}
        (folder / "summary.json").write_text(json.dumps(summary))


def time_history(tree: Path, results: Path, repeat: int) -> tuple[float, float]:
    """(median wall seconds, median CPU seconds) of `harness history RESULTS --suite xla` from `tree`."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    walls, cpus = [], []
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "harness.cli", "history", str(results), "--suite", "xla", "--format", "json"],
            capture_output=True,
            text=True,
            cwd=tree,
            env=env,
        )
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))
        if proc.returncode != 0:
            raise SystemExit(f"history from {tree} exited {proc.returncode}: {proc.stderr[-2000:]}")
    return statistics.median(walls), statistics.median(cpus)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1500)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--tree", type=Path, default=None, help="another checkout to time on the same folder")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        results = Path(tmp) / "results"
        start = time.perf_counter()
        write_runs(results, args.runs)
        print(f"{args.runs} runs written in {time.perf_counter() - start:.1f} s", flush=True)
        trees = [("this tree", REPO)] + ([("--tree", args.tree.resolve())] if args.tree else [])
        timed = {}
        for label, tree in trees:
            wall, cpu = time_history(tree, results, args.repeat)
            timed[label] = wall
            print(
                f"{label:10} {tree}: history --suite xla  {wall:7.2f} s wall (median of {args.repeat}), {cpu:7.2f} s CPU"
            )
        if args.tree:
            print(f"--tree / this tree: {timed['--tree'] / timed['this tree']:.2f}x")


if __name__ == "__main__":
    main()
