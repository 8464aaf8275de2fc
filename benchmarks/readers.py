"""How long `harness show` and `harness compare` take on the largest run folder the reader accepts.

Builds two run folders (A and B) where every count cap of the result schema is at its maximum and
every file still validates (`harness.core.schema.load_result`): the suite with the most frameworks, so
the most results a run can hold; per result MAX_TOTAL_SAMPLES samples as MAX_SAMPLES-sample time
metrics; on each metric one round per sample (round_sizes of 1 and MAX_SAMPLES round medians,
so `compare` tests round medians), MAX_SAMPLES first calls, every per-sample contention list and
every mark reason on every sample; MAX_CURVES learning curves holding MAX_CURVE_POINTS epochs in
all, and a time-to-target record of MAX_SAMPLES rounds. Every declared check passes and no metric
is excluded, so `show` computes every ratio interval and `compare` every row (the benchmark stops if
the output says otherwise). Then times the real CLI in a subprocess, as a user runs it: the median
wall time of --repeat runs and the CPU time of that run (steadier on a shared machine). Nothing
else is asserted: the figures go in the notes (issue 23 asks for under 5 s each).

`--fill-bytes` also fills every result up to MAX_RESULT_BYTES (check values to MAX_CHECK_NUMBERS, then numbers in the environment)
(no count cap applies there, only the file's size): the largest files the reader accepts.

    python benchmarks/readers.py               # seconds of show and compare
    python benchmarks/readers.py --profile     # and the top of a cProfile of each, in-process
    python benchmarks/readers.py --fill-bytes  # the same on results of MAX_RESULT_BYTES
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import json
import os
import pstats
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness.core.result_types import MAX_CURVE_EPOCHS, MAX_CURVES, MAX_SAMPLES, MAX_TOTAL_SAMPLES  # noqa: E402
from harness.core.schema import MAX_CHECK_NUMBERS, MAX_CURVE_POINTS, MAX_RESULT_BYTES, PER_SAMPLE, load_result  # noqa: E402
from suites.contract.marks import MARKS  # noqa: E402
from suites.contract.registry import all_suites  # noqa: E402
from suites.contract.stats import summarize  # noqa: E402
from tests.factories import metric, result  # noqa: E402

METRICS = MAX_TOTAL_SAMPLES // MAX_SAMPLES  # metrics of MAX_SAMPLES samples fit in one result
# Each curve as long as the cap on all curves' epochs allows.
EPOCHS = min(MAX_CURVE_EPOCHS, MAX_CURVE_POINTS // MAX_CURVES)


def widest_suite() -> tuple[str, tuple[str, ...]]:
    """The suite with the most frameworks: a run of it holds the most result files."""
    name, suite = max(all_suites().items(), key=lambda item: len(item[1].all_frameworks))
    return name, tuple(suite.all_frameworks)


def _metric(name: str, rng: random.Random, scale: float) -> dict[str, Any]:
    samples = [scale * rng.lognormvariate(0.0, 0.05) for _ in range(MAX_SAMPLES)]
    m = metric(name, samples, flops=1e9, first=scale * 3)
    every = list(range(MAX_SAMPLES))
    contention: dict[str, Any] = {key: [0.0] * MAX_SAMPLES for key in PER_SAMPLE}
    contention.update(involuntary_switches=[0] * MAX_SAMPLES, runnable=[1] * MAX_SAMPLES,
                      clock_event_reasons=[0] * MAX_SAMPLES, cores=2, window_s=0.1,
                      contended=every[::3], throttled=every[::5])  # fmt: skip
    m.update(bytes=1e6, dtype="float32", first_calls=[scale * 3] * MAX_SAMPLES, round_sizes=[1] * MAX_SAMPLES,
             round_medians=list(samples), marks={reason: every for reason in MARKS}, contention=contention)  # fmt: skip
    return m


def _training(rng: random.Random) -> dict[str, Any]:
    curve = {"epoch_seconds": [1.0] * EPOCHS, "train_loss": [1.0 / (e + 1) for e in range(EPOCHS)],
             "train_accuracy": [50.0] * EPOCHS, "test_accuracy": [min(99.0, 50.0 + e) for e in range(EPOCHS)],
             "evaluation_seconds": [0.1] * EPOCHS, "seed": 1}  # fmt: skip
    seconds = [rng.uniform(10, 20) for _ in range(MAX_SAMPLES)]
    rounds = [{"seconds": s, "wall_seconds": s * 1.1, "epochs": 5, "reached": True} for s in seconds]
    target = {"accuracy": 90.0, "status": "reached", "seconds": summarize(seconds)["median"], "wall_seconds": 16.5,
              "epochs": 5.0, "seconds_interval": [14.0, 16.0], "rounds": rounds, "reached_rounds": len(rounds)}  # fmt: skip
    return {"data": "device", "curves": [curve] * MAX_CURVES, "target": target}


def _checks(suite: str) -> list[dict[str, Any]]:
    """Every check the suite declares, passing: the same value from every framework, within any limit."""
    return [
        {
            "name": spec.name,
            "value": 0.0 if spec.limit is not None else 1.0,
            "help": spec.help,
            "limit": spec.limit,
            "rtol": spec.rtol,
            "atol": spec.atol,
        }
        for spec in all_suites()[suite].checks
    ]


def _fill(doc: dict[str, Any], suite: str) -> None:
    """Grow the first declared agreement check's value to MAX_CHECK_NUMBERS, then pad the file to just
    below MAX_RESULT_BYTES with numbers in the free-form environment (legal, and slow to parse)."""
    spec = next(c for c in all_suites()[suite].checks if c.rtol is not None and c.limit is None)
    value = 0.123456789  # the same in every framework: the check passes
    check = next(c for c in doc["checks"] if c["name"] == spec.name)
    others = sum(len(c["value"]) if isinstance(c["value"], list) else 1 for c in doc["checks"] if c is not check)
    check["value"] = [value] * (MAX_CHECK_NUMBERS - others)
    room = MAX_RESULT_BYTES - len(json.dumps(doc)) - 4096
    doc["environment"]["padding"] = [value] * (room // len(f"{value}, "))


def write_run(folder: Path, run_id: str, seed: int, fill_bytes: bool = False) -> Path:
    suite, frameworks = widest_suite()
    rng = random.Random(seed)
    path = folder / run_id
    path.mkdir(parents=True)
    jobs = []
    for k, fw in enumerate(frameworks):
        doc = result(fw, [_metric(f"op{i}", rng, 0.01 * (1 + k + i)) for i in range(METRICS)], _checks(suite))
        doc.update(run_id=run_id, suite=suite, training=_training(rng))
        doc["environment"]["machine"] = {"cpu": {"model": "bench", "logical_cores": 2, "usable_cores": 2}}
        if fill_bytes:
            _fill(doc, suite)
        name = f"{fw}.json"
        (path / name).write_text(json.dumps(doc))
        load_result(path / name)  # legal, or this benchmark measures a rejection
        jobs.append({"framework": fw, "status": "ok", "reason": None, "file": name})
    summary = {"run_id": run_id, "suite": suite, "baseline": frameworks[0], "backend": "local", "jobs": jobs}
    (path / "summary.json").write_text(json.dumps(summary))
    return path


def _time(args: tuple[str, ...], expect: str) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one run of the CLI; it must exit 0 and print `expect`."""
    cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, cwd=REPO)
    elapsed = time.perf_counter() - start
    cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"harness {' '.join(args)} exited {proc.returncode}: {proc.stderr[-2000:]}")
    if expect not in proc.stdout:
        raise SystemExit(f"harness {' '.join(args)} printed no {expect!r}: it did not take the path measured here")
    cpu = (cpu_after.ru_utime - cpu_before.ru_utime) + (cpu_after.ru_stime - cpu_before.ru_stime)
    return elapsed, cpu


def _profile(*args: str) -> str:
    from harness.cli.main import main as cli_main

    profile = cProfile.Profile()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
        profile.runcall(cli_main, list(args))
    out = io.StringIO()
    pstats.Stats(profile, stream=out).sort_stats("cumulative").print_stats(25)
    return out.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", action="store_true", help="print a cProfile of each command too")
    parser.add_argument("--fill-bytes", action="store_true", help="fill every result up to MAX_RESULT_BYTES")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each command (the median is shown)")
    options = parser.parse_args()
    suite, frameworks = widest_suite()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["HARNESS_CACHE_HOME"] = str(Path(tmp) / "cache-home")  # never the user's calibration
        a = write_run(Path(tmp), "20240101-000000-a", seed=1, fill_bytes=options.fill_bytes)
        b = write_run(Path(tmp), "20240101-000001-b", seed=2, fill_bytes=options.fill_bytes)
        print(f"run folders: suite {suite}, {len(frameworks)} results of {METRICS} metrics x {MAX_SAMPLES} samples "
              f"({MAX_SAMPLES} rounds of 1), {MAX_CURVES} curves x {EPOCHS} epochs, "
              f"{sum(p.stat().st_size for p in a.iterdir()) / 2**20:.1f} MiB a run")  # fmt: skip
        # A ratio interval in show's table (non-baseline cells), a row tested on round medians in compare's.
        commands = {"show": (("show", str(a)), "x ["), "compare": (("compare", str(a), str(b)), "(rounds)")}
        for label, (args, expect) in commands.items():
            runs = sorted((_time(args, expect) for _ in range(max(1, options.repeat))), key=lambda run: run[0])
            wall, cpu = runs[len(runs) // 2]
            every = ", ".join(f"{w:.2f}" for w, _ in runs)
            print(f"harness {label}: {wall:.2f} s (median of {len(runs)}: {every}; CPU {cpu:.2f} s)")
        if options.profile:
            for label, (args, _) in commands.items():
                print(f"\n-- cProfile of harness {label} --\n{_profile(*args)}")


if __name__ == "__main__":
    main()
