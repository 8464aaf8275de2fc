"""Time from SIGINT to the harness exiting with everything cleaned up (docker backend).

Starts `harness run --suite fault --param mode=hang --backend docker`, waits until the job
container is hanging, sends SIGINT, and measures until the harness process has exited AND
no container of that run remains. Prints each sample and the median of --samples (default 5).
Target: under 5 s.

    python benchmarks/interrupt_latency.py [--samples 5] [--backend docker]
"""

from __future__ import annotations

import argparse
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def containers_left() -> int:
    out = subprocess.run(
        ["docker", "ps", "-aq", "--filter", "label=org.fw-harness.suite=fault"], capture_output=True, text=True
    )
    return len(out.stdout.split())


def one(backend: str, results: Path) -> float:
    cmd = [sys.executable, "-m", "harness.cli", "run", "--suite", "fault", "--frameworks", "numpy",
           "--param", "mode=hang", "--backend", backend, "--results-dir", str(results)]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        if "hanging on purpose" in line:
            break
    started = time.perf_counter()
    proc.send_signal(signal.SIGINT)
    proc.wait()
    while backend == "docker" and containers_left():
        time.sleep(0.05)
    elapsed = time.perf_counter() - started
    if proc.returncode != 130:
        raise SystemExit(f"harness exited {proc.returncode}, expected 130")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=5)
    parser.add_argument("--backend", default="docker", choices=("docker", "local"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        samples = []
        for i in range(args.samples):
            samples.append(one(args.backend, Path(tmp)))
            print(f"sample {i + 1}: {samples[-1]:.2f} s", flush=True)
    median = statistics.median(samples)
    print(f"SIGINT -> exited and cleaned up ({args.backend}): median {median:.2f} s of {len(samples)}, "
          f"min {min(samples):.2f}, max {max(samples):.2f}; target < 5 s: {'met' if median < 5 else 'MISSED'}")  # fmt: skip


if __name__ == "__main__":
    main()
