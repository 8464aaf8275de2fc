"""Does the jit suite's loop time what a bare loop times? (issue 4)

For `jit` at one length (default L = 1e6, K = 100 calls per loop) compares, per framework:
  bare:    in one process, the jitted f called K times in a plain loop, then
           block_until_ready on the last output (JAX) -- what a careful user writes --
           with the garbage collector on and (alternate samples) off;
  harness: `harness run --suite jit` at that length, metric `jit L=... K=...`
           (every output waited for, see suites/jit/impl_jax.py).
Prints the medians of the loop time (best of the rounds) and the ratios. Target: harness
within 10 % of the bare loop without collector pauses (the harness pauses the collector while
it times, so that is the like-for-like figure; the gc-on column shows what a plain loop pays).

    python benchmarks/jit_bare.py [--length 1000000] [--total 100000000] [--repeat 7] [--rounds 2]
                                  [--frameworks jax,pytorch]  (default: both)
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

# Samples alternate between the garbage collector on (a plain user loop) and off (as the
# harness times: it pauses the collector during samples). With torch.compile loaded the
# process tracks ~400k objects and one full collection takes ~0.25 s on the development
# machine, which a 100-call loop meets often enough to cost ~20 %.
TEMPLATE = """
import gc, json, statistics, time
import numpy as np
x = np.linspace(0.0, 4.0 * np.pi, {length}, dtype=np.float32)
loops = {loops}
{setup}
loop()  # compile
loop()  # warm-up
gc_on, gc_off = [], []
for _ in range({repeat}):
    t = time.perf_counter(); loop(); gc_on.append(time.perf_counter() - t)
    gc.disable()
    t = time.perf_counter(); loop(); gc_off.append(time.perf_counter() - t)
    gc.enable()
print(json.dumps([statistics.median(gc_on), statistics.median(gc_off)]))
"""


def bare(framework: str, length: int, loops: int, repeat: int) -> tuple[float, float]:
    """Median loop time with the garbage collector on, and off."""
    code = TEMPLATE.format(length=length, loops=loops, repeat=repeat, setup=BARE[framework])
    env_code = "import os; os.environ.setdefault('JAX_PLATFORMS', 'cpu')\n"
    out = subprocess.run([sys.executable, "-c", env_code + code], capture_output=True, text=True, check=True)
    on, off = json.loads(out.stdout.strip().splitlines()[-1])
    return float(on), float(off)


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
    parser.add_argument("--frameworks", default="jax,pytorch")
    args = parser.parse_args()
    loops = max(1, args.total // args.length)
    with tempfile.TemporaryDirectory() as tmp:
        print(f"jitted f, L={args.length}, loop of K={loops} calls; median of {args.repeat} loops; "
              f"best of {args.rounds} interleaved rounds")  # fmt: skip
        print(f"{'framework':10} {'bare gc on':>11} {'bare gc off':>12} {'harness':>9} {'h/gc off':>9} {'h/gc on':>8}")
        for framework in args.frameworks.split(","):
            on, off, h = [], [], []
            for _ in range(args.rounds):  # interleaved so drift hits both alike
                b_on, b_off = bare(framework, args.length, loops, args.repeat)
                on.append(b_on)
                off.append(b_off)
                h.append(through_harness(framework, args.length, args.total, args.repeat, Path(tmp)))
            like = min(h) / min(off)  # like for like: both without collector pauses
            verdict = "ok" if abs(like - 1) <= 0.10 else "OUTSIDE 10 %"
            print(
                f"{framework:10} {min(on):11.4f} {min(off):12.4f} {min(h):9.4f} {like:9.3f} "
                f"{min(h) / min(on):8.3f}  {verdict}"
            )


if __name__ == "__main__":
    main()
