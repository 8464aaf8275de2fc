"""bisect.json: what a bisect ran (suite, metric, stack, package, versions, locks) and what it found."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from harness.core.errors import HarnessError
from harness.execute.bisect.verdict import Pair, VersionRun, first_change
from harness.text.escape import plain

FORMAT = "harness-bisect"
VERSION = 1
FILE = "bisect.json"
_KEYS = (
    "suite",
    "framework",
    "metric",
    "stack",
    "package",
    "versions",
    "rounds",
    "locks",
    "results",
    "pairs",
    "answer",
)


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def pair_record(pair: Pair) -> dict[str, Any]:
    change = pair.change
    return {
        "before": pair.before,
        "after": pair.after,
        "ratio": _finite(change.ratio) if change else None,
        "ci_low": _finite(change.ci_low) if change else None,
        "ci_high": _finite(change.ci_high) if change else None,
        "ci_coverage": change.ci_coverage if change else None,
        "p_value": _finite(change.p_value) if change else None,
        "p_adjusted": _finite(change.p_adjusted) if change else None,  # Holm across the bisect's pairs
        "basis": change.basis if change else None,
        "significant": pair.significant,
        "verdict": pair.verdict,
    }


def version_record(run: VersionRun, runs: list[str]) -> dict[str, Any]:
    return {
        "median": run.median,
        "round_medians": run.round_medians,
        "n_samples": len(run.samples),
        "rounds_left_out": run.left_out,  # rounds the machine disturbed, not in round_medians
        "problem": run.problem,
        "runs": runs,
    }


def make_record(
    header: dict[str, Any],
    locks: dict[str, dict[str, Any]],
    results: dict[str, dict[str, Any]],
    pairs: list[Pair],
    answer_text: str,
) -> dict[str, Any]:
    found = first_change(pairs)
    return {
        "format": FORMAT,
        "version": VERSION,
        **header,
        "locks": locks,
        "results": results,
        "pairs": [pair_record(p) for p in pairs],
        "answer": {"version": found.after if found else None, "text": answer_text},
    }


def validate(doc: Any) -> None:
    """Raises HarnessError naming the first thing a bisect.json lacks."""
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or doc.get("version") != VERSION:
        raise HarnessError(f"not a {FORMAT} version {VERSION} document")
    missing = [key for key in _KEYS if key not in doc]
    if missing:
        raise HarnessError(f"bisect record lacks {', '.join(missing)}")
    versions = doc["versions"]
    if not isinstance(versions, list) or len(versions) < 2 or not all(isinstance(v, str) for v in versions):
        raise HarnessError("versions: expected a list of at least two strings")
    for key in ("locks", "results"):
        if not isinstance(doc[key], dict) or set(doc[key]) != set(versions):
            raise HarnessError(f"{key}: expected one entry per version")
    for version, lock in doc["locks"].items():
        if not isinstance(lock, dict) or not isinstance(lock.get("lock_hash"), str) or len(lock["lock_hash"]) != 64:
            raise HarnessError(f"locks[{plain(version)!r}]: expected a lock_hash")
    pairs = doc["pairs"]
    if not isinstance(pairs, list) or len(pairs) != len(versions) - 1:
        raise HarnessError("pairs: expected one per consecutive pair of versions")
    for i, pair in enumerate(pairs):
        if not isinstance(pair, dict) or (pair.get("before"), pair.get("after")) != (versions[i], versions[i + 1]):
            raise HarnessError(f"pairs[{i}]: expected {versions[i]} -> {versions[i + 1]}")
        if not isinstance(pair.get("verdict"), str) or not isinstance(pair.get("significant"), bool):
            raise HarnessError(f"pairs[{i}]: expected a verdict and a significant flag")
    answer = doc["answer"]
    if not isinstance(answer, dict) or not isinstance(answer.get("text"), str):
        raise HarnessError("answer: expected an object with text")
    if answer.get("version") is not None and answer["version"] not in versions:
        raise HarnessError("answer: names a version the bisect did not run")


def load(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise HarnessError(f"{path}: not readable as JSON ({plain(error)})") from None
    try:
        validate(doc)
    except HarnessError as error:
        raise HarnessError(f"{path}: {error}") from None
    return dict(doc)
