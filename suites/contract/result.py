"""Result schema v2: the one document a job hands back (see docs/result-schema.md).

Built here for both sides: the job fills in metrics; the host uses the same builder
for jobs that never produced a file (skipped before start, crashed, timed out).
"""

from __future__ import annotations

import datetime as _dt
from typing import Any

# 2: `dataset` and `training` are always written, null where they do not apply (harness/core/schema.py
# reads version 1 files, which left them out).
SCHEMA_VERSION = 2
STATUSES = ("ok", "failed", "timeout", "oom", "invalid-output", "skipped", "interrupted", "cancelled")
# Statuses that mean the job produced its numbers (or legitimately could not).
GOOD_STATUSES = ("ok", "skipped")
RESULT_KEYS = (
    "schema_version",
    "run_id",
    "suite",
    "framework",
    "stack",
    "backend",
    "device",
    "params",
    "settings",
    "status",
    "reason",
    "stderr_tail",
    "started_at",
    "finished_at",
    "duration_s",
    "environment",
    "image",
    "metrics",
    "checks",
    "notes",
    # Training suites fill these in: `dataset` (which data, its revision and fingerprint) and
    # `training` (time-to-target outcome, learning curves, data pipeline, framework flags).
    "dataset",
    "training",
    # `--profile` only, absent otherwise: each time metric's profile (suites/runtime/profiling.py).
    "profiles",
)


def utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds")


def new_result(
    *,
    run_id: str,
    suite: str,
    framework: str,
    stack: str,
    backend: str,
    device: str,
    params: dict[str, Any],
    settings: dict[str, Any],
    status: str = "ok",
    reason: str | None = None,
) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "run_id": run_id,
        "suite": suite,
        "framework": framework,
        "stack": stack,
        "backend": backend,
        "device": device,
        "params": dict(params),
        "settings": dict(settings),
        "status": status,
        "reason": reason,
        "stderr_tail": None,
        "started_at": utc_now(),
        "finished_at": None,
        "duration_s": None,
        "environment": {},
        "image": None,
        "metrics": [],
        "checks": [],
        "notes": [],
        "dataset": None,
        "training": None,
    }
