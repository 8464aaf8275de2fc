"""How long the pictures take on the largest run a result file may describe.

Builds a run folder at the schema's caps (4 frameworks, 5 time metrics of 10,000 samples each =
50,000 samples a result, 10 rounds with marks, and 1,000 learning curves of 50 epochs on a
training run), then times the real CLI: `show --plot`, `report` (every PNG) and `publish` (every
chart's data embedded). Nothing is asserted: the figures go in the notes.

    python benchmarks/pictures_scale.py
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.factories import metric, result  # noqa: E402

FRAMEWORKS = ("numpy", "jax", "flax", "pytorch")
SAMPLES, METRICS, ROUNDS = 10_000, 5, 10
CURVES, EPOCHS = 1_000, 50


def _xla_run(folder: Path) -> Path:
    docs = []
    for k, fw in enumerate(FRAMEWORKS):
        metrics = []
        for i in range(METRICS):
            samples = [0.01 * (1 + 0.01 * ((j * 7919 + i + k) % 100)) for j in range(SAMPLES)]
            m = metric(f"op{i}", samples, flops=1e8, first=0.5)
            m.update(bytes=1e6, dtype="float64", round_sizes=[SAMPLES // ROUNDS] * ROUNDS,
                     first_calls=[0.5] * ROUNDS, marks={"escaped": list(range(0, SAMPLES, 97))})  # fmt: skip
            metrics.append(m)
        docs.append(result(fw, metrics))
    return _write(folder / "20240101-000000-xla-0001", docs, "xla")


def _training_run(folder: Path) -> Path:
    docs = []
    for fw in ("flax", "pytorch"):
        doc = result(fw, [metric("epoch", [1.0] * (EPOCHS - 1))], checks=[])
        doc["suite"] = "mlp"
        curve = {"epoch_seconds": [1.0] * EPOCHS, "train_loss": [1.0 / (e + 1) for e in range(EPOCHS)],
                 "train_accuracy": [50.0] * EPOCHS, "test_accuracy": [min(99.0, 50.0 + e) for e in range(EPOCHS)],
                 "evaluation_seconds": [0.1] * EPOCHS, "seed": 1}  # fmt: skip
        doc["training"] = {"data": "device", "curves": [curve] * CURVES}
        docs.append(doc)
    return _write(folder / "20240101-000001-mlp-0002", docs, "mlp")


def _write(path: Path, docs: list[dict[str, Any]], suite: str) -> Path:
    path.mkdir(parents=True)
    jobs = []
    for doc in docs:
        doc["run_id"] = path.name
        doc["suite"] = suite
        (path / f"{doc['framework']}.json").write_text(json.dumps(doc))
        jobs.append({"framework": doc["framework"], "status": "ok", "reason": None, "file": f"{doc['framework']}.json"})
    summary = {"run_id": path.name, "suite": suite, "baseline": docs[0]["framework"], "backend": "local", "jobs": jobs}
    (path / "summary.json").write_text(json.dumps(summary))
    return path


def _time(*args: str) -> float:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, cwd=REPO)
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise SystemExit(f"harness {' '.join(args)} exited {proc.returncode}: {proc.stderr[-2000:]}")
    return elapsed


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        results = Path(tmp) / "results"
        runs = {"xla (4 x 5 x 10,000 samples, 10 rounds)": _xla_run(results),
                f"mlp ({CURVES} curves x {EPOCHS} epochs a framework)": _training_run(results)}  # fmt: skip
        print("| run | show (table) | show --plot | report (PNGs) |")
        print("| --- | --- | --- | --- |")
        for label, run in runs.items():
            table = _time("show", str(run))
            plot = _time("show", str(run), "--plot")
            report = _time("report", str(run), "--out", str(Path(tmp) / f"report-{run.name}"))
            print(f"| {label} | {table:.1f} s | {plot:.1f} s | {report:.1f} s |")
        print(f"\npublish (both runs): {_time('publish', str(results), '--out', str(Path(tmp) / 'site')):.1f} s")


if __name__ == "__main__":
    main()
