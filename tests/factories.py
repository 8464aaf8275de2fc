"""Valid result documents built in memory, for tests of validation, gate and table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from suites.contract.result import new_result
from suites.contract.stats import summarize


def metric(name: str, samples: list[float], first: float | None = 1.0, flops: float | None = None) -> dict[str, Any]:
    return {
        "name": name,
        "kind": "time",
        "unit": "s",
        "better": "lower",
        "description": "",
        "first_call": first,
        "warmup": 1,
        "samples": samples,
        "stats": summarize(samples),
        "flops": flops,
    }


def result(framework: str, metrics: list[dict[str, Any]], checks: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    doc = new_result(
        run_id="r1",
        suite="xla",
        framework=framework,
        stack={"flax": "jax"}.get(framework, framework),
        backend="local",
        device="cpu",
        params={"matrix_size": 8},
        settings={"repeat": 3, "warmup": 1, "threads": None},
    )
    doc["metrics"] = metrics
    # The xla suite requires its two declared checks of every ok job (the gate fails a job that
    # leaves one out), so a document without explicit checks carries passing ones.
    doc["checks"] = checks if checks is not None else XLA_CHECKS()
    doc["finished_at"] = doc["started_at"]
    doc["duration_s"] = 1.0
    return doc


def XLA_CHECKS() -> list[dict[str, Any]]:  # noqa: N802  (reads as the constant it stands for)
    return [check("residual", 1e-10, limit=1e-6), check("product_sum", 3.3e7, rtol=1e-9)]


def check(name: str, value: Any, *, limit: float | None = None, rtol: float | None = None) -> dict[str, Any]:
    return {"name": name, "value": value, "help": "", "limit": limit, "rtol": rtol, "atol": 0.0}


def write_run(path: Path, docs: list[dict[str, Any]], baseline: str | None = None) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    jobs = []
    for doc in docs:
        name = f"{doc['framework']}.json"
        (path / name).write_text(json.dumps(doc))
        jobs.append({"framework": doc["framework"], "status": doc["status"], "reason": doc["reason"], "file": name})
    summary = {
        "run_id": "r1",
        "suite": docs[0]["suite"],
        "baseline": baseline or docs[0]["framework"],
        "backend": "local",
        "jobs": jobs,
    }
    (path / "summary.json").write_text(json.dumps(summary))
    return path
