"""Does going through the harness change the number? (issue: spine)

Times a float64 matmul (n=2000) two ways for numpy, jax and pytorch:
  bare:    a plain perf_counter loop with the framework's synchronisation, in one process;
  harness: `harness run --suite xla --param matrix_size=2000`, metric `matmul`.
Prints both medians and their ratio. Target: harness/bare within 5 %.

    python benchmarks/harness_overhead.py [--n 2000] [--repeat 15] [--rounds 2]
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
    "numpy": """
import numpy as np
run = lambda: a @ b
sync = lambda out: None
""",
    "jax": """
import jax, jax.numpy as jnp
jax.config.update("jax_enable_x64", True)
a, b = jnp.asarray(a), jnp.asarray(b)
run = lambda: a @ b
sync = lambda out: out.block_until_ready()
""",
    "pytorch": """
import torch
a, b = torch.from_numpy(a), torch.from_numpy(b)
run = lambda: a @ b
sync = lambda out: None
""",
}

TEMPLATE = """
import json, statistics, sys, time
import numpy as np
rng = np.random.default_rng(0)
a, b = rng.random(({n}, {n})), rng.random(({n}, {n}))
{setup}
sync(run())
for _ in range(1):
    sync(run())
samples = []
for _ in range({repeat}):
    t = time.perf_counter(); sync(run()); samples.append(time.perf_counter() - t)
print(json.dumps(statistics.median(samples)))
"""


def bare(framework: str, n: int, repeat: int) -> float:
    code = TEMPLATE.format(n=n, repeat=repeat, setup=BARE[framework])
    env_code = "import os; os.environ.setdefault('JAX_PLATFORMS', 'cpu'); os.environ.setdefault('XLA_PYTHON_CLIENT_PREALLOCATE', 'false')\n"
    out = subprocess.run([sys.executable, "-c", env_code + code], capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def through_harness(framework: str, n: int, repeat: int, results: Path) -> float:
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", "--suite", "xla", "--frameworks", framework,
         "--param", f"matrix_size={n}", "--repeat", str(repeat), "--results-dir", str(results), "-q"],
        capture_output=True, text=True, cwd=REPO,
    )  # fmt: skip
    run_dir = Path(proc.stdout.split("run folder: ")[-1].strip())
    doc = json.loads((run_dir / f"{framework}.json").read_text())
    return float(next(m for m in doc["metrics"] if m["name"] == "matmul")["stats"]["median"])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        print(f"float64 matmul n={args.n}, median of {args.repeat}; best of {args.rounds} interleaved rounds")
        print(f"{'framework':10} {'bare (s)':>10} {'harness (s)':>12} {'ratio':>7}")
        for framework in ("numpy", "jax", "pytorch"):
            b, h = [], []
            for _ in range(args.rounds):  # interleaved so drift hits both alike
                b.append(bare(framework, args.n, args.repeat))
                h.append(through_harness(framework, args.n, args.repeat, Path(tmp)))
            ratio = min(h) / min(b)
            verdict = "ok" if abs(ratio - 1) <= 0.05 else "OUTSIDE 5 %"
            print(f"{framework:10} {min(b):10.4f} {min(h):12.4f} {ratio:7.3f}  {verdict}")


if __name__ == "__main__":
    main()
