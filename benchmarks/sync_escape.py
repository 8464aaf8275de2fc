"""Sync-escape detection, measured: what the probes see, and what the barrier costs. (issue: integrity)

Part 1, evidence for the thresholds in suites/runtime/syncguard.py: probes after honest and after
deliberately unsynchronised JAX samples (a matmul, and a loop of small jitted calls), in one
process, printed as pending share and excess wait (first barrier minus second) against the sample.

Part 2, cost: the barrier runs outside the clock, but it could still disturb the next sample
(caches, allocator). `harness run` of `xla` (jax, matmul n=2000) and `mnist` (flax, epochs) with
the check on and off (HARNESS_SYNC_CHECK=off), interleaved on/off/on/off..., reported as the median
of the per-round ratios with/without (drift from other load cancels within a round).
Target: within 2 %. Part 3 measures the same inside one process, where the spread between
processes (thread placement, +-15-25 % per round on a 2-core machine) does not enter.

    python benchmarks/sync_escape.py [--rounds 4] [--skip-cost]
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
sys.path.insert(0, str(REPO))


def evidence() -> None:
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import jax
    import jax.numpy as jnp

    from suites.runtime.adapter_jax import LiveArrayBarrier
    from suites.runtime.syncguard import probe, verdict

    barrier = LiveArrayBarrier()
    a = jax.random.uniform(jax.random.key(0), (1024, 1024))
    x = jnp.ones(10_000)
    mm = jax.jit(jnp.matmul)
    f = jax.jit(lambda v: 0.2 * v + jnp.sin(v) + jnp.cos(2 * v))
    jax.block_until_ready((mm(a, a), f(x)))

    def matmul(sync: bool) -> object:
        out = mm(a, a)
        return out.block_until_ready() if sync else out

    def loop(sync: bool) -> object:
        outs = [f(x) for _ in range(100)]
        return jax.block_until_ready(outs) if sync else outs

    print("part 1: probes after 15 samples each (JAX CPU)")
    print(f"{'case':30} {'sample med':>11} {'pending':>8} {'excess med':>11} {'excess max':>11} {'ratio':>8} verdict")
    for label, work in (("matmul 1024 float32", matmul), ("100 jitted calls, L=1e4", loop)):
        for sync in (True, False):
            samples, probes = [], []
            for _ in range(15):
                start = time.perf_counter()
                out = work(sync)
                samples.append(time.perf_counter() - start)
                probes.append(probe(barrier))
                del out
            record = verdict(samples, probes)
            excess = [p.excess_s for p in probes]
            name = f"{label} {'synced' if sync else 'UNSYNCED'}"
            print(
                f"{name:30} {record['sample_median_s'] * 1e3:9.3f}ms {record['pending_share']:8.0%} "
                f"{record['excess_median_s'] * 1e6:9.0f}us {max(excess) * 1e6:9.0f}us "
                f"{record['excess_median_s'] / record['sample_median_s']:8.3f} {record['state']}"
            )


def harness_median(suite: str, framework: str, params: list[str], metric: str, check: bool, results: Path) -> float:
    env = {**os.environ, "HARNESS_SYNC_CHECK": "on" if check else "off", "HARNESS_CALIBRATE": "never"}
    args = [a for p in params for a in ("--param", p)]
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", "--suite", suite, "--frameworks", framework, *args,
         "--backend", "local", "--results-dir", str(results), "-q"],
        capture_output=True, text=True, cwd=REPO, env=env,
    )  # fmt: skip
    run_dir = Path(proc.stdout.split("run folder: ")[-1].strip())
    doc = json.loads((run_dir / f"{framework}.json").read_text())
    found = next(m for m in doc["metrics"] if m["name"] == metric)
    assert found["sync"]["state"] == ("ok" if check else "unchecked"), found["sync"]
    return float(found["stats"]["median"])


CASES = (
    ("xla", "jax", ["matrix_size=2000"], "matmul"),
    ("mnist", "flax", ["dataset=synthetic", "train_samples=2560", "test_samples=256", "epochs=5"], "epoch"),
)


def cost(rounds: int) -> None:
    print(f"\npart 2: steady medians with / without the barrier, {rounds} interleaved rounds")
    print(f"{'case':28} {'with (s)':>10} {'without (s)':>12} {'per-round ratios':>30} {'median':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        for suite, fw, params, metric in CASES:
            ratios, on, off = [], [], []
            for r in range(rounds):
                order = (True, False) if r % 2 == 0 else (False, True)  # alternate who goes first
                got = {c: harness_median(suite, fw, params, metric, c, Path(tmp)) for c in order}
                on.append(got[True])
                off.append(got[False])
                ratios.append(got[True] / got[False])
            ratio = statistics.median(ratios)
            verdict = "ok" if abs(ratio - 1) <= 0.02 else "OUTSIDE 2 %"
            text = " ".join(f"{x:.3f}" for x in ratios)
            print(
                f"{suite + '/' + fw + ' ' + metric:28} {statistics.median(on):10.4f} {statistics.median(off):12.4f} "
                f"{text:>30} {ratio:7.3f}  {verdict}"
            )


def in_process(blocks: int = 12, per_block: int = 8) -> None:
    """The barrier's effect on the next sample inside one process (no process-to-process spread):
    blocks of float64 matmuls n=2000, alternately with and without a probe after every sample;
    each block's first sample is left out (it follows the other kind)."""
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import jax
    import jax.numpy as jnp

    from suites.runtime.adapter_jax import LiveArrayBarrier
    from suites.runtime.syncguard import probe

    jax.config.update("jax_enable_x64", True)
    barrier = LiveArrayBarrier()
    a = jax.random.normal(jax.random.key(0), (2000, 2000), dtype=jnp.float64)
    mm = jax.jit(jnp.matmul)
    mm(a, a).block_until_ready()
    medians: list[tuple[bool, float]] = []
    pooled: dict[bool, list[float]] = {True: [], False: []}
    for block in range(blocks):
        use = block % 2 == 0
        times = []
        for i in range(per_block):
            start = time.perf_counter()
            mm(a, a).block_until_ready()
            if i:
                times.append(time.perf_counter() - start)
            if use:
                probe(barrier)
        pooled[use] += times
        medians.append((use, statistics.median(times)))
    pairs = [medians[i][1] / medians[i + 1][1] for i in range(0, len(medians) - 1, 2)]
    ratio = statistics.median(pooled[True]) / statistics.median(pooled[False])
    print(f"\npart 3: one process, matmul n=2000 float64, {blocks} alternating blocks of {per_block}")
    print(f"after a barrier {statistics.median(pooled[True]) * 1e3:.1f} ms, without {statistics.median(pooled[False]) * 1e3:.1f} ms: "
          f"ratio {ratio:.3f} (block pairs {' '.join(f'{r:.3f}' for r in pairs)})")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--skip-cost", action="store_true")
    args = parser.parse_args()
    evidence()
    in_process()
    if not args.skip_cost:
        cost(args.rounds)


if __name__ == "__main__":
    main()
