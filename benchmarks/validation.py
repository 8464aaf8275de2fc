"""How long the host takes to validate one result file at the schema's caps.

Every command that reads a run validates every result in it (harness/core/schema.py), so this is a
floor under `show`, `compare`, `report` and `publish` on a large run. The document: 5 time metrics
of 10,000 samples each with marks, round sizes and first calls, and 50 learning curves of 1,000
epochs. Prints the best of 7 validations; nothing is asserted.

    python benchmarks/validation.py            # this checkout
    python benchmarks/validation.py OTHER_TREE # another checkout (e.g. a git worktree of an older commit)
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

TREE = Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent
sys.path.insert(0, str(TREE))

from harness.core.schema import validate  # noqa: E402
from tests.factories import metric, result  # noqa: E402

SAMPLES, METRICS, CURVES, EPOCHS = 10_000, 5, 50, 1_000


def at_caps() -> dict[str, Any]:
    metrics = []
    for k in range(METRICS):
        m: dict[str, Any] = metric(f"m{k}", [1.0 + (i % 97) * 1e-3 for i in range(SAMPLES)], flops=1e9)
        m.update(
            first_calls=[1.0] * 100,
            marks={"escaped": list(range(0, SAMPLES, 7))},
            round_sizes=[SAMPLES // 100] * 100,
            sync={"state": "ok", "n": 10, "pending_share": 0.0},
        )
        metrics.append(m)
    doc: dict[str, Any] = result("numpy", metrics)
    curve = {
        "epoch_seconds": [1.0] * EPOCHS,
        "train_loss": [0.5] * EPOCHS,
        "train_accuracy": [50.0] * EPOCHS,
        "test_accuracy": [60.0] * EPOCHS,
        "evaluation_seconds": [0.1] * EPOCHS,
        "seed": 1,
    }
    doc["training"] = {"data": "device", "curves": [dict(curve) for _ in range(CURVES)]}
    return json.loads(json.dumps(doc))  # as read from disk: plain JSON types


def main() -> None:
    doc = at_caps()
    times = []
    for _ in range(7):
        started = time.perf_counter()
        validate(doc, "at-caps.json")
        times.append(time.perf_counter() - started)
    print(f"{TREE.name}: validate a result at the caps: best {min(times) * 1e3:.1f} ms of 7")


if __name__ == "__main__":
    main()
