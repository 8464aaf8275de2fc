"""Contention marks of a job pinned to one core, beside a busy process on another core and on its own.

`harness run --threads 1` pins each job to the first CPU of its affinity (suites/contract/settings.py),
and the job counts the others' CPU time on the CPUs it may use (suites/runtime/contention.py). Real
`xla` runs (numpy and jax, matrix_size=512, --repeat 10, --threads 1), local backend, a fresh cache
home, N runs (--runs) in each of three conditions:

1. no hog: the baseline (what the rest of the machine does to the job);
2. a hog (a pure-Python busy loop) pinned to another CPU than the job's: goal <= 5 % of samples
   marked `contended` (counted host-wide, as before, it marked every sample);
3. a hog pinned to the job's CPU, the two sharing one core: goal >= 90 % marked.

Reported per condition: the share of the timed samples marked contended (metrics[].contention.contended
over metrics[].samples of every <framework>.json), the median of the others' share (`others_cores`),
the CPUs the job counted (`cpus`), and how busy the machine was just before each run (every CPU,
over 0.5 s, before the hog starts): above a few hundredths of a core the figures measure the
machine's other work as well as the hog.

    python benchmarks/pinned_contention.py            # --runs 4: about 3 minutes on the 2-core development machine
    python benchmarks/pinned_contention.py --runs 1   # one run per condition

Needs Linux and at least 2 CPUs in this process's affinity. Other processes on the job's CPU are
contention too: run it on a quiet machine. Prints a Markdown table and writes every figure as JSON
(--out). Nothing is asserted.
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
from typing import Any

REPO = Path(__file__).resolve().parent.parent
HARNESS = [sys.executable, "-m", "harness.cli"]
XLA = ["--suite", "xla", "-f", "numpy,jax", "-p", "matrix_size=512", "--repeat", "10", "--threads", "1"]
HOG = "import os\nos.sched_setaffinity(0, [{cpu}])\nwhile True:\n    pass\n"
GOALS = {"none": "", "other core": "<= 5 %", "same core": ">= 90 %"}


def run(env: dict[str, str], results: Path) -> Path:
    """One `harness run` of the workload; its run folder."""
    proc = subprocess.run([*HARNESS, "run", *XLA, "--backend", "local", "--results-dir", str(results), "-q"], env=env,
                          cwd=REPO, capture_output=True, text=True, timeout=1800)  # fmt: skip
    for line in (proc.stdout + proc.stderr).splitlines():
        if line.startswith("run folder: "):
            return Path(line.split(": ", 1)[1].strip())
    raise SystemExit(f"no run folder in the output (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}")


def busy_cores(seconds: float = 0.5) -> float | None:
    """Cores busy (every task, every CPU: /proc/stat's aggregate line) over the next `seconds`."""

    def ticks() -> int | None:
        try:
            fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()
        except OSError:
            return None
        return sum(int(fields[k]) for k in (1, 2, 3, 6, 7))  # user nice system irq softirq

    first = ticks()
    time.sleep(seconds)
    last = ticks()
    if first is None or last is None:
        return None
    return (last - first) / os.sysconf("SC_CLK_TCK") / seconds


def beside_a_hog(env: dict[str, str], results: Path, cpu: int | None) -> Path:
    """One run while a busy loop pinned to `cpu` runs (no hog when None)."""
    if cpu is None:
        return run(env, results)
    hog = subprocess.Popen([sys.executable, "-c", HOG.format(cpu=cpu)])
    try:
        time.sleep(0.3)  # the hog is running
        return run(env, results)
    finally:
        hog.kill()
        hog.wait()


def marked(run_dirs: list[Path]) -> dict[str, Any]:
    """Samples marked contended over every timed sample of these runs, per framework and in all."""
    per: dict[str, list[int]] = {}
    others: list[float] = []
    counted: set[tuple[int, ...] | None] = set()
    for run_dir in run_dirs:
        for path in sorted(run_dir.glob("*.json")):
            doc = json.loads(path.read_text())
            if not isinstance(doc, dict) or "framework" not in doc or doc.get("status") != "ok":
                continue
            tally = per.setdefault(doc["framework"], [0, 0])
            for m in doc.get("metrics", []):
                seen = m.get("contention")
                if not seen:
                    continue
                tally[0] += len(seen["contended"])
                tally[1] += len(m["samples"])
                others.extend(o for o in seen.get("others_cores") or [] if o is not None)
                counted.add(tuple(seen["cpus"]) if seen.get("cpus") is not None else None)
    total = [sum(t[0] for t in per.values()), sum(t[1] for t in per.values())]
    return {
        "runs": len(run_dirs),
        "samples": total[1],
        "contended": total[0],
        "share": total[0] / total[1] if total[1] else None,
        "per_framework": {fw: {"contended": c, "samples": n, "share": c / n if n else None}
                          for fw, (c, n) in sorted(per.items())},  # fmt: skip
        "others_cores_median": statistics.median(others) if others else None,
        "cpus_counted": sorted(([list(c) if c is not None else None for c in counted]), key=str),
    }  # fmt: skip


def _percent(share: float | None) -> str:
    return "-" if share is None else f"{share:.0%}"


def table(figures: dict[str, Any]) -> str:
    frameworks = sorted({fw for c in figures["conditions"].values() for fw in c["per_framework"]})
    head = ["hog", "goal", "runs", "samples", "contended", *frameworks, "others_cores (median)", "CPUs counted",
            "busy before (cores)"]  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for name, c in figures["conditions"].items():
        per = [_percent(c["per_framework"].get(fw, {}).get("share")) for fw in frameworks]
        median = "-" if c["others_cores_median"] is None else f"{c['others_cores_median']:.2f}"
        before = ", ".join("-" if b is None else f"{b:.2f}" for b in c["busy_before"])
        cells = [name, GOALS[name], str(c["runs"]), str(c["samples"]), _percent(c["share"]), *per, median,
                 ", ".join(str(x) for x in c["cpus_counted"]), before]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=4, help="runs per condition")
    parser.add_argument("--out", type=Path, default=Path("pinned_contention.json"))
    options = parser.parse_args()
    if not hasattr(os, "sched_getaffinity"):
        raise SystemExit("needs Linux (CPU affinity)")
    usable = sorted(os.sched_getaffinity(0))
    if len(usable) < 2:
        raise SystemExit(f"needs at least 2 CPUs in this process's affinity, has {usable}")
    # The job inherits this affinity and `--threads 1` keeps its first CPU (suites/contract/settings.py).
    job_cpu, other_cpu = usable[0], usable[1]
    home = Path(tempfile.mkdtemp(prefix="pinned-contention-"))
    env = dict(os.environ, HARNESS_CACHE_HOME=str(home / "cache"), HARNESS_CALIBRATE="never", PYTHONPATH=str(REPO))
    results = home / "results"
    began = time.time()

    def say(text: str) -> None:
        print(f"[{time.time() - began:6.0f} s] {text}", file=sys.stderr, flush=True)

    figures: dict[str, Any] = {"job_cpu": job_cpu, "other_cpu": other_cpu, "conditions": {}}
    for name, hog_cpu in (("none", None), ("other core", other_cpu), ("same core", job_cpu)):
        say(f"{name}: {options.runs} run(s), the job on CPU {job_cpu}, the hog on {hog_cpu}")
        started = time.time()
        dirs, busy = [], []
        for _ in range(options.runs):
            busy.append(busy_cores())
            dirs.append(beside_a_hog(env, results, hog_cpu))
        figures["conditions"][name] = marked(dirs) | {
            "hog_cpu": hog_cpu,
            "busy_before": [None if b is None else round(b, 3) for b in busy],
            "seconds": round(time.time() - started, 1),
        }
        say(f"   {_percent(figures['conditions'][name]['share'])} of samples contended")
    figures["seconds"] = round(time.time() - began, 1)
    options.out.write_text(json.dumps(figures, indent=2) + "\n")
    print(table(figures))
    print(f"\n{options.runs} run(s) per condition, {figures['seconds']:.0f} s in all; figures in {options.out}")


if __name__ == "__main__":
    main()
