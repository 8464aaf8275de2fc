"""How much of an epoch is input pipeline? `mnist` with data=device against data=host, per framework.

data=device (the suites' default): the dataset, sample orders and augmentation parameters live
on the device and a step gathers its own batch. data=host: every step gathers its batch from
NumPy arrays / CPU tensors on the host and copies it to the device (jax.device_put, .to(device)),
which is what a loop fed from host arrays does. Both train the same model on the same batches.

    python benchmarks/data_pipeline.py [--samples 5120] [--epochs 3] [--rounds 4]
                                       [--frameworks flax,pytorch] [--threads N] [--device cpu|gpu]

Each round runs device and host back to back for each framework, in alternating order (ABBA, so
drift from other load hits both alike); printed: the best round's median steady epoch of each, and the median over rounds
of the paired host/device ratio (> 1: the host pipeline costs that much more per epoch).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BATCH = 128


def run_suite(framework: str, data: str, args: argparse.Namespace, results: Path) -> float:
    """Median steady epoch of one `harness run --suite mnist` job."""
    params = {"dataset": "synthetic", "train_samples": args.samples, "test_samples": 500, "epochs": args.epochs,
              "batch_size": BATCH, "seed": args.seed, "data": data}  # fmt: skip
    extra = ["--threads", str(args.threads)] if args.threads else []
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", "--suite", "mnist", "--frameworks", framework,
         "--backend", "local", "--device", args.device, *extra,
         *[a for k, v in params.items() for a in ("--param", f"{k}={v}")], "--results-dir", str(results), "-q"],
        capture_output=True, text=True, cwd=REPO, env=dict(os.environ),
    )  # fmt: skip
    if proc.returncode not in (0, 1):
        raise RuntimeError(proc.stdout + proc.stderr)
    run_dir = Path(proc.stdout.split("run folder: ")[-1].strip())
    doc = json.loads((run_dir / f"{framework}.json").read_text())
    if doc["status"] != "ok":
        raise RuntimeError(f"{framework} data={data}: {doc['reason']}")
    epoch = next(m for m in doc["metrics"] if m["name"] == "epoch")
    return float(epoch["stats"]["median"])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=40 * BATCH)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--threads", type=int)
    parser.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    parser.add_argument("--frameworks", default="flax,pytorch")
    args = parser.parse_args()
    if args.samples % BATCH:
        parser.error(f"--samples must be a multiple of {BATCH}")
    print(f"mnist CNN on {args.device}, {args.samples} synthetic images per epoch ({args.samples // BATCH} steps of "
          f"{BATCH}), {args.epochs} epochs (median of epochs 2..{args.epochs}), {args.rounds} interleaved rounds")  # fmt: skip
    print(f"{'framework':10} {'device s/epoch':>15} {'host s/epoch':>13} {'host/device':>12}")
    with tempfile.TemporaryDirectory() as tmp:
        for framework in args.frameworks.split(","):
            device: list[float] = []
            host: list[float] = []
            for number in range(args.rounds):
                # ABBA: the order alternates, so drift from other load does not always hit one side.
                if number % 2 == 0:
                    device.append(run_suite(framework, "device", args, Path(tmp)))
                    host.append(run_suite(framework, "host", args, Path(tmp)))
                else:
                    host.append(run_suite(framework, "host", args, Path(tmp)))
                    device.append(run_suite(framework, "device", args, Path(tmp)))
            paired = statistics.median(h / d for d, h in zip(device, host, strict=True))
            print(f"{framework:10} {min(device):15.3f} {min(host):13.3f} {paired:12.3f}")
            rounds = ", ".join(f"{d:.3f}/{h:.3f}" for d, h in zip(device, host, strict=True))
            print(f"{'':10} per round, device/host s/epoch: {rounds}")


if __name__ == "__main__":
    main()
