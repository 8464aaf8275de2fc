"""Does the jit suite's loop time what a bare loop times? (issue 4)

For `jit` at one length (default L = 1e6, K = 100 calls per loop) compares, per framework:
  bare:    in one process, the jitted f called K times in a plain loop, then
           block_until_ready on the last output (JAX) -- what a careful user writes;
  harness: `harness run --suite jit` at that length, metric `jit L=... K=...`
           (every output waited for, see suites/jit/impl_jax.py).
Prints the medians of the loop time and their ratio. Target: harness/bare within 10 %.

    python benchmarks/jit_bare.py [--length 1000000] [--total 100000000] [--repeat 7] [--rounds 2]
                                  [--frameworks jax,pytorch]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

BARE = {
    "jax": """
import jax, jax.numpy as jnp
f = jax.jit(lambda x: 0.2 * x + jnp.sin(x) + jnp.cos(2 * x))
x = jnp.asarray(x)
def loop():
    for _ in range(loops):
        y = f(x)
    y.block_until_ready()
""",
    "pytorch": """
import torch
f = torch.compile(lambda x: 0.2 * x + torch.sin(x) + torch.cos(2 * x), dynamic=True)
x = torch.from_numpy(x)
def loop():
    with torch.no_grad():
        for _ in range(loops):
            y = f(x)
""",
}

TEMPLATE = """
import json, statistics, time
import numpy as np
x = np.linspace(0.0, 4.0 * np.pi, {length}, dtype=np.float32)
loops = {loops}
{setup}
loop()  # compile
loop()  # warm-up
samples = []
for _ in range({repeat}):
    t = time.perf_counter(); loop(); samples.append(time.perf_counter() - t)
print(json.dumps(statistics.median(samples)))
"""


def bare(framework: str, length: int, loops: int, repeat: int) -> float:
    code = TEMPLATE.format(length=length, loops=loops, repeat=repeat, setup=BARE[framework])
    env_code = "import os; os.environ.setdefault('JAX_PLATFORMS', 'cpu')\n"
    out = subprocess.run([sys.executable, "-c", env_code + code], capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def through_harness(framework: str, length: int, total: int, repeat: int, results: Path) -> float:
    from suites.jit.common import name

    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", "--backend", "local", "--suite", "jit", "--frameworks", framework,
         "--param", f"min_length={length}", "--param", f"max_length={length}", "--param", f"total={total}",
         "--repeat", str(repeat), "--results-dir", str(results), "-q"],
        capture_output=True, text=True, cwd=REPO,
    )  # fmt: skip
    run_dir = Path(proc.stdout.split("run folder: ")[-1].strip())
    doc = json.loads((run_dir / f"{framework}.json").read_text())
    metric = name("jit", length, max(1, total // length))
    return float(next(m for m in doc["metrics"] if m["name"] == metric)["stats"]["median"])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--length", type=int, default=1_000_000)
    parser.add_argument("--total", type=int, default=100_000_000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--frameworks", default="jax")
    args = parser.parse_args()
    loops = max(1, args.total // args.length)
    with tempfile.TemporaryDirectory() as tmp:
        print(f"jitted f, L={args.length}, loop of K={loops} calls; median of {args.repeat} loops; "
              f"best of {args.rounds} interleaved rounds")  # fmt: skip
        print(f"{'framework':10} {'bare (s)':>10} {'harness (s)':>12} {'ratio':>7}")
        for framework in args.frameworks.split(","):
            b, h = [], []
            for _ in range(args.rounds):  # interleaved so drift hits both alike
                b.append(bare(framework, args.length, loops, args.repeat))
                h.append(through_harness(framework, args.length, args.total, args.repeat, Path(tmp)))
            ratio = min(h) / min(b)
            verdict = "ok" if abs(ratio - 1) <= 0.10 else "OUTSIDE 10 %"
            print(f"{framework:10} {min(b):10.4f} {min(h):12.4f} {ratio:7.3f}  {verdict}")


if __name__ == "__main__":
    main()
