"""How much does cutting per-call overhead gain in predictive coding? (issue 6, seed 003)

Runs the `pc` suite through `harness run` (local backend) on synthetic MNIST-shaped data and
prints, per framework and execution variant, the median steady epoch and the first epoch
(with compilation), and each framework's speed-up of its low-overhead variant over its
per-batch one (the tutorial reported 1.14 -> 0.72 s/epoch, 1.58x, on a GPU with pcax).

    python benchmarks/pc_variants.py [--epochs 5] [--rounds 2] [--batch-sizes 256]
                                     [--pytorch-fast manual-compile,manual,compile] [--threads N]
                                     [--frameworks jax,pytorch] [--train-samples N]

Rounds run the jobs interleaved (jax, pytorch, jax, ...) and keep the best median per cell, so
drift and neighbours on a shared machine hit every framework alike. Extra `--pytorch-fast`
options after the first run only the low-overhead variant (the per-batch one does not change).
Target: the JAX low-overhead variant at least 1.3x faster than its per-batch variant.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
TARGET = 1.3


def run_job(framework: str, params: dict[str, Any], threads: int | None, results: Path) -> dict[str, Any]:
    args = [a for k, v in params.items() for a in ("--param", f"{k}={v}")]
    if threads:
        args += ["--threads", str(threads)]
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", "--backend", "local", "--suite", "pc", "--frameworks", framework,
         *args, "--results-dir", str(results), "-q"],
        capture_output=True, text=True, cwd=REPO,
    )  # fmt: skip
    if "run folder: " not in proc.stdout:
        raise SystemExit(f"harness run failed:\n{proc.stdout}\n{proc.stderr}")
    run_dir = Path(proc.stdout.split("run folder: ")[-1].strip())
    doc: dict[str, Any] = json.loads((run_dir / f"{framework}.json").read_text())
    if doc["status"] != "ok":
        raise SystemExit(f"{framework} job {doc['status']}: {doc.get('reason')}")
    return doc


def epochs_of(doc: dict[str, Any], variant: str) -> tuple[float, float, float] | None:
    """(median steady epoch, first epoch, test accuracy) of one variant, or None if it did not run."""
    metrics = {m["name"]: m for m in doc["metrics"]}
    epoch = metrics.get(f"epoch [{variant}]")
    if epoch is None:
        return None
    accuracy = float(metrics[f"test accuracy [{variant}]"]["samples"][0])
    return float(epoch["stats"]["median"]), float(epoch["first_call"]), accuracy


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=5, help="per variant; epoch 1 compiles, the rest are timed")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--batch-sizes", default="256")
    parser.add_argument("--pytorch-fast", default="manual-compile,manual,compile")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--train-samples", type=int, default=0, help="0: the full 60 000")
    parser.add_argument("--frameworks", default="jax,pytorch")
    args = parser.parse_args()
    fast_options = args.pytorch_fast.split(",")
    # (framework, label, extra params) per job; labels are what the table prints.
    jobs: list[tuple[str, str, dict[str, Any]]] = [("jax", "jax", {"variants": "both"})]
    jobs.append(("pytorch", f"pytorch ({fast_options[0]})", {"variants": "both", "pytorch_fast": fast_options[0]}))
    jobs += [("pytorch", f"pytorch ({f})", {"variants": "low-overhead", "pytorch_fast": f}) for f in fast_options[1:]]
    jobs = [job for job in jobs if job[0] in args.frameworks.split(",")]

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"pc on synthetic MNIST-shaped data, {args.train_samples or 60000} training samples, {args.epochs} epochs "
          f"per variant; best of {args.rounds} interleaved rounds; threads {args.threads or 'all'}; "
          f"load average at start {load:.1f} on {os.cpu_count()} cores")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        for batch in (int(b) for b in args.batch_sizes.split(",")):
            best: dict[tuple[str, str], tuple[float, float, float]] = {}
            for _ in range(args.rounds):
                for framework, label, extra in jobs:
                    params = {"epochs": args.epochs, "batch_size": batch, "train_samples": args.train_samples,
                              **extra}  # fmt: skip
                    doc = run_job(framework, params, args.threads, Path(tmp))
                    for variant in ("per-batch", "low-overhead"):
                        got = epochs_of(doc, variant)
                        if got is not None and ((label, variant) not in best or got[0] < best[label, variant][0]):
                            best[label, variant] = got
            print(f"\nbatch size {batch}")
            print(f"{'framework':26} {'variant':13} {'steady epoch (s)':>17} {'first epoch (s)':>16} {'speed-up':>9} "
                  f"{'test acc. (%)':>14}")  # fmt: skip
            per_batch: dict[str, float] = {}
            for (label, variant), (steady, first, accuracy) in best.items():
                framework = label.split()[0]
                if variant == "per-batch":
                    per_batch[framework] = steady
                    gain = ""
                else:
                    gain = f"{per_batch[framework] / steady:8.2f}x" if framework in per_batch else ""
                print(f"{label:26} {variant:13} {steady:17.3f} {first:16.2f} {gain:>9} {accuracy:14.2f}")
            if ("jax", "low-overhead") in best:
                ratio = best["jax", "per-batch"][0] / best["jax", "low-overhead"][0]
                verdict = "meets" if ratio >= TARGET else "MISSES"
                print(f"jax low-overhead / per-batch speed-up {ratio:.2f}x: {verdict} the {TARGET}x target")


if __name__ == "__main__":
    main()
